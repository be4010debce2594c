#!/usr/bin/env bash
# v32 call 4, one H100, on the review's build: checks and the record. Suites over every world with the defaults (ranks
# share the GPU, so layout-first is off by default there), and with every dispatch multi-kernel and layout-first;
# memcheck and racecheck on rounds_many_tokens layout-first; 300-round 8-rank layout-first soaks (FP8, BF16), memcheck
# on a 4-rank one. Then one rank alone (layout-first on by default from 512) against EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=0,
# two reps interleaved, at 512 and 1024 tokens FP8 and 512 BF16.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
LF="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0 EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 EP_CUDA_OVERLAP_MIN_TOKENS=0"
timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-defaults.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-defaults.txt)" >> $OUT/rc.txt
env $LF timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-lf.txt 2>&1; echo "conf multi-kernel layout-first rc=$? $(tail -n 1 $OUT/conformance-lf.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
env $LF EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 60 ./ep-gpu conformance --backend cuda --filter rounds_many_tokens > /tmp/m1.txt 2>&1; echo "memcheck rounds_many_tokens layout-first rc=$? $(grep -E 'ERROR SUMMARY|passed' /tmp/m1.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $LF EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 100 ./ep-gpu conformance --backend cuda --filter rounds_many_tokens > /tmp/r1.txt 2>&1; echo "racecheck rounds_many_tokens layout-first rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|passed' /tmp/r1.txt | tr '\n' ' ')" >> $OUT/rc.txt
for f in fp8 bf16; do env $LF timeout 90 ./ep-gpu soak --backend cuda --ranks 8 --rounds 300 --format $f > /tmp/s.txt 2>&1; echo "soak8 $f layout-first rc=$? $(tail -n 1 /tmp/s.txt)" >> $OUT/rc.txt; done
env $LF EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 120 ./ep-gpu soak --backend cuda --ranks 4 --rounds 10 --format fp8 > /tmp/ms.txt 2>&1; echo "memcheck soak4 fp8 layout-first rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' /tmp/ms.txt | tr '\n' ' ')" >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 ./ep-gpu bench --backend cuda --ranks 1 --tokens $1 --format $2 --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do for tf in "512 fp8" "1024 fp8" "512 bf16"; do set -- $tf
  b "1r $1 $2 layout-first (default)"; run $1 $2
  b "1r $1 $2 off"; (export EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=0; run $1 $2)
done; done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,3 > $OUT/summary.txt
cat $OUT/summary.txt
