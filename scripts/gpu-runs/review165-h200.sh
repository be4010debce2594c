#!/usr/bin/env bash
# v42 review, call 8, one H200: . = the review's kernels (one count poll, one warp and block scan, ep_poll_layout taking
# its own fallback, ep_dispatch_wait without its shared copy of the counts) against base/ = 5880713; the suite on . in
# every path mode; soaks of 3 and 6 ranks (n_ranks not a power of two: ep_poll_layout's fallback), plain and under
# memcheck; reps interleaved at decode sizes and 256-512 tokens.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf review EP_CUDA_LOG_WAITS=1
conf review-single $S
conf review-overlap EP_CUDA_OVERLAP_MIN_TOKENS=1
conf review-layout EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0
for r in 3 6; do
  timeout 120 ./ep-gpu soak --backend cuda --ranks $r --rounds 200 --format fp8 > /tmp/soak$r.txt 2>&1
  echo "soak ${r}r fp8 rc=$? $(tail -n 1 /tmp/soak$r.txt)" >> $OUT/rc.txt
  env $S timeout 120 ./ep-gpu soak --backend cuda --ranks $r --rounds 200 > /tmp/soaks$r.txt 2>&1
  echo "soak ${r}r bf16 single-launch rc=$? $(tail -n 1 /tmp/soaks$r.txt)" >> $OUT/rc.txt
done
memcheck review-3r 3 6
sanitize review bf16 memcheck racecheck
ab 2 "1 1 bf16" "1 1 fp8" "1 32 fp8" "1 128 fp8" "1 256 fp8" "1 512 fp8" "2 1 bf16" "2 1 fp8" -- a-base:base b-review:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
