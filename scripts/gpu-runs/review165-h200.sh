#!/usr/bin/env bash
# v42 review, call 8, one H200: . = the review's kernels (one count poll, one warp and block scan, ep_poll_layout taking
# its own fallback, ep_dispatch_wait without its shared copy of the counts) against base/ = 5880713; the suite on . in
# every path mode; soaks of 3 and 6 ranks (n_ranks not a power of two: ep_poll_layout's fallback), plain and under
# memcheck; reps interleaved at decode sizes and 256-512 tokens.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_modes review
for r in 3 6; do
  soak fp8 $r 200 fp8
  soak "bf16 single-launch" $r 200 bf16 $S
done
memcheck review-3r 3 6
sanitize review bf16 memcheck racecheck
ab 2 "1 1 bf16" "1 1 fp8" "1 32 fp8" "1 128 fp8" "1 256 fp8" "1 512 fp8" "2 1 bf16" "2 1 fp8" -- a-base:base b-review:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
