#!/usr/bin/env bash
# v31, one H100: the chained launches as committed (HEAD, releases at the assign, the waits and the combine send).
# Suites over every world of 2, 4 and 8 ranks with the defaults and with every phase multi-kernel; memcheck and
# racecheck on rounds_many_tokens multi-kernel; 8-rank multi-kernel soaks. Then base/ (d3de099: v30's kernels and the
# bench's event between the kernels) against HEAD, one rank alone at 256-1024 tokens and two ranks sharing the GPU
# (with HEAD unreleased, EP_CUDA_CHAINED_RELEASE=0, too), two reps interleaved.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
M="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0"
timeout 170 ./ep-gpu conformance --backend cuda > $OUT/conformance-cuda-h100.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-cuda-h100.txt)" >> $OUT/rc.txt
env $M timeout 170 ./ep-gpu conformance --backend cuda > /tmp/c2.txt 2>&1; echo "conf multi-kernel rc=$? $(tail -n 1 /tmp/c2.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt /tmp/c2.txt | head -40 >> $OUT/rc.txt
env $M EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 120 ./ep-gpu conformance --backend cuda --filter rounds_many_tokens > /tmp/m1.txt 2>&1; echo "memcheck rounds_many_tokens multi-kernel rc=$? $(grep -E 'ERROR SUMMARY|passed' /tmp/m1.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $M EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 150 ./ep-gpu conformance --backend cuda --filter rounds_many_tokens > /tmp/r1.txt 2>&1; echo "racecheck rounds_many_tokens multi-kernel rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|passed' /tmp/r1.txt | tr '\n' ' ')" >> $OUT/rc.txt
for f in fp8 bf16; do env $M timeout 60 ./ep-gpu soak --backend cuda --ranks 8 --rounds 300 --format $f > /tmp/s.txt 2>&1; echo "soak8 $f multi-kernel rc=$? $(tail -n 1 /tmp/s.txt)" >> $OUT/rc.txt; done
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 40 $1/ep-gpu bench --backend cuda --ranks $2 --tokens $3 --format $4 --passes 1 2>&1 | grep -E '^t[0-9]|rror' >> $OUT/ab.txt; }
for rep in 1 2; do
  for t in 256 512 1024; do for f in fp8 bf16; do b "1r $t $f base"; run base 1 $t $f; b "1r $t $f HEAD"; run . 1 $t $f; done; done
  for t in 512 1024; do b "2r $t fp8 base"; run base 2 $t fp8; b "2r $t fp8 HEAD"; run . 2 $t fp8; b "2r $t fp8 HEAD release 0"; (export EP_CUDA_CHAINED_RELEASE=0; run . 2 $t fp8); done
done
awk '/^==/{l=$0; next} /^t[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
