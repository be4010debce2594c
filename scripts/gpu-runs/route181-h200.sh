#!/usr/bin/env bash
# v45 call 2, one H200: base/ = 85c2639 (v44) against a/ = the route's count of earlier tokens a thread per token,
# and . = that plus the token's ids loaded before its row's fetch.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_modes route
sanitize_with "$S" "route single-launch" fp8 memcheck racecheck
soak "fp8 single-launch" 3 100 fp8 $S
soak "bf16 single-launch" 5 60 bf16 $S
ab 3 "1 128 fp8" "1 128 bf16" "1 64 fp8" "2 128 fp8" "2 64 fp8" "1 32 fp8" "1 1 bf16" -- a-base:base b-route:a c-ids:.
traces base:base ids:. -- "1 128 fp8"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
