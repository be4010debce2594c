#!/usr/bin/env bash
# v30 review, one H100: ep_assign_starts with its columns in a loop (e511cbc). Suites over every world of 2, 4 and 8 ranks
# with the defaults and with every phase multi-kernel and every dispatch chunked; memcheck and racecheck on
# rounds_many_tokens chunked; then 2 ranks on the one GPU against v30a/ (84fc325, the form before), 4096 tokens, reps
# interleaved, and a grid trace of the chunked assign at 4096.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
M="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0"
C1="EP_CUDA_CHUNKED_ASSIGN_MIN_TOKENS=1"
timeout 170 ./ep-gpu conformance --backend cuda > $OUT/conformance-cuda-h100.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-cuda-h100.txt)" >> $OUT/rc.txt
env $M $C1 timeout 170 ./ep-gpu conformance --backend cuda > /tmp/c2.txt 2>&1; echo "conf multi-kernel chunked rc=$? $(tail -n 1 /tmp/c2.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt /tmp/c2.txt | head -40 >> $OUT/rc.txt
env $M $C1 EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 150 ./ep-gpu conformance --backend cuda --filter rounds_many_tokens > /tmp/m1.txt 2>&1; echo "memcheck rounds_many_tokens chunked rc=$? $(grep -E 'ERROR SUMMARY|passed' /tmp/m1.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $M $C1 EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 150 ./ep-gpu conformance --backend cuda --filter rounds_many_tokens > /tmp/r1.txt 2>&1; echo "racecheck rounds_many_tokens chunked rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|passed' /tmp/r1.txt | tr '\n' ' ')" >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 $1/ep-gpu bench --backend cuda --ranks 2 --tokens 4096 --format $2 --passes 1 --breakdown 2>&1 | grep -E '^t[0-9]' >> $OUT/ab.txt; }
for rep in 1 2; do for f in bf16 fp8; do for build in v30a .; do b "rep $rep 4096 $f $build"; run $build $f; done; done; done
awk '/^==/{l=$0; next} /^t[0-9].*uniform +[0-9]/{ if (NF>8) print l, "|", $2, $3} /ep_assign/{print l, "|", $2, $3}' $OUT/ab.txt
EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 90 ./ep-gpu bench --backend cuda --ranks 2 --tokens 4096 --format bf16 --passes 1 --rounds 20 > /tmp/t.txt 2>&1
python3 trace_summary.py /tmp/t.txt > $OUT/summary-chunked-4096.txt 2>&1
grep -A12 -E '^chunks' $OUT/summary-chunked-4096.txt | head -14
