#!/usr/bin/env bash
# v31 second review, one H100: the release points fixed in code (no mask) and one device wait per send block (40e7708).
# Suites over every world of 2, 4 and 8 ranks with the defaults and with every phase multi-kernel; memcheck and
# racecheck on rounds_many_tokens multi-kernel; then one rank alone at 256 and 512 tokens against v31a/ (fe9a850's
# build, its default mask), reps interleaved.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
M="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0"
timeout 120 ./ep-gpu conformance --backend cuda > $OUT/conformance-cuda-h100.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-cuda-h100.txt)" >> $OUT/rc.txt
env $M timeout 120 ./ep-gpu conformance --backend cuda > /tmp/c2.txt 2>&1; echo "conf multi-kernel rc=$? $(tail -n 1 /tmp/c2.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt /tmp/c2.txt | head -40 >> $OUT/rc.txt
env $M EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 60 ./ep-gpu conformance --backend cuda --filter rounds_many_tokens > /tmp/m1.txt 2>&1; echo "memcheck rounds_many_tokens multi-kernel rc=$? $(grep -E 'ERROR SUMMARY|passed' /tmp/m1.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $M EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 90 ./ep-gpu conformance --backend cuda --filter rounds_many_tokens > /tmp/r1.txt 2>&1; echo "racecheck rounds_many_tokens multi-kernel rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|passed' /tmp/r1.txt | tr '\n' ' ')" >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 30 $1/ep-gpu bench --backend cuda --ranks 1 --tokens $2 --format $3 --passes 1 2>&1 | grep -E '^t[0-9]|rror' >> $OUT/ab.txt; }
for rep in 1 2; do for t in 256 512; do b "1r $t fp8 v31a"; run v31a $t fp8; b "1r $t fp8 HEAD"; run . $t fp8; done; done
awk '/^==/{l=$0; next} /^t[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
