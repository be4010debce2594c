#!/usr/bin/env bash
# v31, one H100: chained launches (76438a7) and the bench without an event between a phase's kernels (7954f26).
# Suites over every world of 2, 4 and 8 ranks with the defaults and with every phase multi-kernel (every chained
# launch taken); memcheck and racecheck on a multi-kernel subset; then 2 ranks on the one GPU at 256-1024 tokens:
# base/ (d3de099, v30's kernels and timing), this build unchained (EP_CUDA_CHAINED_LAUNCH=0: the timing change
# alone) and chained, reps interleaved.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
M="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0"
timeout 170 ./ep-gpu conformance --backend cuda > $OUT/conformance-cuda-h100.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-cuda-h100.txt)" >> $OUT/rc.txt
env $M timeout 170 ./ep-gpu conformance --backend cuda > /tmp/c2.txt 2>&1; echo "conf multi-kernel rc=$? $(tail -n 1 /tmp/c2.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt /tmp/c2.txt | head -40 >> $OUT/rc.txt
env $M EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 100 ./ep-gpu conformance --backend cuda --filter skewed > /tmp/m1.txt 2>&1; echo "memcheck skewed multi-kernel rc=$? $(grep -E 'ERROR SUMMARY|passed' /tmp/m1.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $M EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 100 ./ep-gpu conformance --backend cuda --filter skewed > /tmp/r1.txt 2>&1; echo "racecheck skewed multi-kernel rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|passed' /tmp/r1.txt | tr '\n' ' ')" >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 40 $1/ep-gpu bench --backend cuda --ranks 2 --tokens $2 --format $3 --passes 1 2>&1 | grep -E '^t[0-9]' >> $OUT/ab.txt; }
for t in 512 1024 256; do for f in fp8 bf16; do
  b "$t $f base"; run base $t $f
  b "$t $f unchained"; (export EP_CUDA_CHAINED_LAUNCH=0; run . $t $f)
  b "$t $f chained"; run . $t $f
done; done
awk '/^==/{l=$0; next} /^t[0-9]/{ print l, "|", $2, $3, $4, $5}' $OUT/ab.txt
