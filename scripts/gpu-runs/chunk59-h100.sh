#!/usr/bin/env bash
# v30, one H100: the chunked assign from 2048 tokens (HEAD). Suites over every world of 2, 4 and 8 ranks: defaults;
# every phase multi-kernel with every dispatch's slots chunked (C=1) and per column (C=0); every dispatch overlapped,
# placed and marked, chunked; memcheck and racecheck on rounds_many_tokens chunked; 8-rank chunked soaks. Then 2 ranks
# on the one GPU: v29/ (993a406) against this build with the defaults and chunked from 1 token, reps interleaved, and
# grid traces of the chunked assign at 512 and 4096 tokens.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
M="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0"
O="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_OWN_ROWS_WAIT_NS=2000000 EP_CUDA_MARKED_MIN_TOKENS=1"
C1="EP_CUDA_CHUNKED_ASSIGN_MIN_TOKENS=1"
C0="EP_CUDA_CHUNKED_ASSIGN_MIN_TOKENS=0"
timeout 170 ./ep-gpu conformance --backend cuda > $OUT/conformance-cuda-h100.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-cuda-h100.txt)" >> $OUT/rc.txt
env $M $C1 timeout 170 ./ep-gpu conformance --backend cuda > /tmp/c2.txt 2>&1; echo "conf multi-kernel chunked rc=$? $(tail -n 1 /tmp/c2.txt)" >> $OUT/rc.txt
env $M $C0 timeout 170 ./ep-gpu conformance --backend cuda > /tmp/c3.txt 2>&1; echo "conf multi-kernel per-column rc=$? $(tail -n 1 /tmp/c3.txt)" >> $OUT/rc.txt
env $O $C1 timeout 170 ./ep-gpu conformance --backend cuda > /tmp/c4.txt 2>&1; echo "conf overlapped placed marked chunked rc=$? $(tail -n 1 /tmp/c4.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt /tmp/c2.txt /tmp/c3.txt /tmp/c4.txt | head -40 >> $OUT/rc.txt
env $M $C1 EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 150 ./ep-gpu conformance --backend cuda --filter rounds_many_tokens > /tmp/m1.txt 2>&1; echo "memcheck rounds_many_tokens chunked rc=$? $(grep -E 'ERROR SUMMARY|passed' /tmp/m1.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $M $C1 EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 150 ./ep-gpu conformance --backend cuda --filter rounds_many_tokens > /tmp/r1.txt 2>&1; echo "racecheck rounds_many_tokens chunked rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|passed' /tmp/r1.txt | tr '\n' ' ')" >> $OUT/rc.txt
for f in fp8 bf16; do env $M $C1 timeout 60 ./ep-gpu soak --backend cuda --ranks 8 --rounds 300 --format $f > /tmp/s.txt 2>&1; echo "soak8 $f multi-kernel chunked rc=$? $(tail -n 1 /tmp/s.txt)" >> $OUT/rc.txt; done
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 $1/ep-gpu bench --backend cuda --ranks 2 --tokens $2 --format $3 --passes 1 --breakdown 2>&1 | grep -E '^t[0-9]' >> $OUT/ab.txt; }
for rep in 1 2; do for t in 4096 2048 1024; do for f in bf16 fp8; do
  b "rep $rep $t $f v29"; run v29 $t $f
  b "rep $rep $t $f HEAD defaults"; run . $t $f
  b "rep $rep $t $f HEAD chunked"; (export $C1; run . $t $f)
done; done; done
cat $OUT/ab.txt
for t in 512 4096; do
  EP_CUDA_CHUNKED_ASSIGN_MIN_TOKENS=1 EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 90 ./ep-gpu bench --backend cuda --ranks 2 --tokens $t --format bf16 --passes 1 --rounds 20 > /tmp/t.txt 2>&1
  python3 trace_summary.py /tmp/t.txt > $OUT/summary-chunked-$t.txt 2>&1
  echo "== trace $t chunked"; grep -A12 -E '^chunks' $OUT/summary-chunked-$t.txt | head -14
done
