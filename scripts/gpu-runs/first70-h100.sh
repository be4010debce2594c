#!/usr/bin/env bash
# v32 call 2, one H100: the layout-first dispatch (EP_CUDA_LAYOUT_FIRST_MIN_TOKENS; off by default in this build).
# Suites over every world with every dispatch multi-kernel and layout-first (no overlap), memcheck on rounds_many_tokens
# so; then D (the defaults) against LF (layout-first from 1 token) at 256-1024 tokens, one rank alone and two sharing the
# GPU, two reps interleaved, --breakdown.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
M="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0"
LF="EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 EP_CUDA_OVERLAP_MIN_TOKENS=0"
env $M $LF timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-lf.txt 2>&1; echo "conf multi-kernel layout-first rc=$? $(tail -n 1 $OUT/conformance-lf.txt)" >> $OUT/rc.txt
env $LF timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-lf-defaults.txt 2>&1; echo "conf layout-first, single-launch as default rc=$? $(tail -n 1 $OUT/conformance-lf-defaults.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
env $M $LF EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 60 ./ep-gpu conformance --backend cuda --filter rounds_many_tokens > /tmp/m1.txt 2>&1; echo "memcheck rounds_many_tokens multi-kernel layout-first rc=$? $(grep -E 'ERROR SUMMARY|passed' /tmp/m1.txt | tr '\n' ' ')" >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 ./ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --passes 1 --breakdown 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for r in 1 2; do
    for tf in "256 fp8" "512 fp8" "1024 fp8" "512 bf16" "256 bf16"; do
      set -- $tf
      b "${r}r $1 $2 D"; run $r $1 $2
      b "${r}r $1 $2 LF"; (export $LF; run $r $1 $2)
    done
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4 > $OUT/summary.txt
cat $OUT/summary.txt
