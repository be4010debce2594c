#!/usr/bin/env bash
# The bulk copy-out (422d601, EP_CUDA_COPY_BULK=1) on one H100: suites over every world of 2, 4 and 8 ranks with every
# dispatch overlapped (defaults; a 1-block copy-out, so that the helpers take nearly every message; the send blocks
# waiting for the layout and every combine marked), 8-rank overlapped soaks, memcheck and racecheck on overlapped soaks;
# then 2 ranks on the one GPU, 4096 tokens, the copy-out through registers against the bulk one, reps interleaved.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
O="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0"
W="EP_CUDA_OWN_ROWS_WAIT_NS=2000000 EP_CUDA_MARKED_MIN_TOKENS=1"
B="EP_CUDA_COPY_BULK=1"
env $B $O timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conf-bulk.txt 2>&1; echo "conf bulk all-overlapped rc=$? $(tail -n 1 $OUT/conf-bulk.txt)" >> $OUT/rc.txt
env $B $O EP_CUDA_OVERLAP_COPY_BLOCKS=1 timeout 150 ./ep-gpu conformance --backend cuda > /tmp/c2.txt 2>&1; echo "conf bulk all-overlapped 1-block copy rc=$? $(tail -n 1 /tmp/c2.txt)" >> $OUT/rc.txt
env $B $O $W timeout 150 ./ep-gpu conformance --backend cuda > /tmp/c3.txt 2>&1; echo "conf bulk all-overlapped placed marked rc=$? $(tail -n 1 /tmp/c3.txt)" >> $OUT/rc.txt
grep -h -A3 FAILED $OUT/conf-bulk.txt /tmp/c2.txt /tmp/c3.txt | head -20 >> $OUT/rc.txt
for f in fp8 bf16; do env $B $O timeout 60 ./ep-gpu soak --backend cuda --ranks 8 --rounds 300 --format $f > /tmp/s.txt 2>&1; echo "soak8 $f bulk overlapped rc=$? $(tail -n 1 /tmp/s.txt)" >> $OUT/rc.txt; done
env $B $O EP_CUDA_OVERLAP_COPY_BLOCKS=8 EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 120 ./ep-gpu soak --backend cuda --ranks 4 --rounds 10 --format bf16 > $OUT/memcheck.txt 2>&1; echo "memcheck soak4 bf16 bulk 8-block copy rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' $OUT/memcheck.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $B $O EP_CUDA_OVERLAP_COPY_BLOCKS=8 EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 120 ./ep-gpu soak --backend cuda --ranks 2 --rounds 10 --format fp8 > $OUT/racecheck.txt 2>&1; echo "racecheck soak2 fp8 bulk 8-block copy rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|rounds matched' $OUT/racecheck.txt | tr '\n' ' ')" >> $OUT/rc.txt
cat $OUT/rc.txt
# Timing: 2 ranks on the one GPU (each rank's share: a quarter of the SMs), 4096 tokens.
for rep in 1 2; do for f in bf16 fp8; do for blocks in default 1; do for bulk in 0 1; do
  g=""; [ $blocks = 1 ] && g="EP_CUDA_OVERLAP_COPY_BLOCKS=1"
  echo "== rep $rep $f copy blocks $blocks bulk $bulk" >> $OUT/ab.txt
  env EP_CUDA_COPY_BULK=$bulk $g timeout 60 ./ep-gpu bench --backend cuda --ranks 2 --tokens 4096 --format $f --passes 1 --breakdown 2>&1 | grep -E '^t[0-9]' >> $OUT/ab.txt
done; done; done; done
echo "== sequential (no overlap)" >> $OUT/ab.txt
for f in bf16 fp8; do EP_CUDA_OVERLAP_MIN_TOKENS=0 timeout 60 ./ep-gpu bench --backend cuda --ranks 2 --tokens 4096 --format $f --passes 1 --breakdown 2>&1 | grep -E '^t[0-9]' >> $OUT/ab.txt; done
tail -n 40 $OUT/ab.txt
