#!/usr/bin/env bash
# v31, one H100: chained launches with the overlapped send unchained (HEAD). One rank alone on the GPU (no other
# rank's kernels beside the chain, as on 2x H200 with a rank per GPU) and 2 ranks sharing it, at 256-1024 tokens:
# base/ (d3de099), HEAD unchained (EP_CUDA_CHAINED_LAUNCH=0), chained, and chained without the early releases
# (EP_CUDA_CHAINED_RELEASE=0: each kernel launches as the one before ends). Then the suite multi-kernel over every
# world and racecheck on rounds_many_tokens multi-kernel.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
M="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0"
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 40 $1/ep-gpu bench --backend cuda --ranks $2 --tokens $3 --format $4 --passes 1 2>&1 | grep -E '^t[0-9]|rror' >> $OUT/ab.txt; }
four() {
  b "$1r $2 $3 base"; run base $1 $2 $3
  b "$1r $2 $3 unchained"; (export EP_CUDA_CHAINED_LAUNCH=0; run . $1 $2 $3)
  b "$1r $2 $3 chained"; run . $1 $2 $3
  b "$1r $2 $3 norelease"; (export EP_CUDA_CHAINED_RELEASE=0; run . $1 $2 $3)
}
for t in 256 512 1024; do for f in fp8 bf16; do four 1 $t $f; done; done
four 2 1024 bf16; four 2 1024 fp8; four 2 512 bf16
awk '/^==/{l=$0; next} /^t[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt
env $M timeout 170 ./ep-gpu conformance --backend cuda > /tmp/c2.txt 2>&1; echo "conf multi-kernel rc=$? $(tail -n 1 /tmp/c2.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' /tmp/c2.txt | head -40 >> $OUT/rc.txt
env $M EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 150 ./ep-gpu conformance --backend cuda --filter rounds_many_tokens > /tmp/r1.txt 2>&1; echo "racecheck rounds_many_tokens multi-kernel rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|passed' /tmp/r1.txt | tr '\n' ' ')" >> $OUT/rc.txt
cat $OUT/rc.txt
