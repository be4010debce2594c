#!/usr/bin/env bash
# v46 call 13, one H200: the route's sending slots as a bit mask every thread works out (ep_own_route), where warp 0
# compacted them into a list behind a barrier of its own (call 3's trace: ~0.3 us at 128 tokens), against a/ = a5a41f2.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_all mask
sanitize_with "$S" mask-single fp8 racecheck
ab 3 "1 128 fp8" "1 128 bf16" "1 64 bf16" "1 32 fp8" "1 8 bf16" -- a-head:a b-mask:.
traces mask:. -- "1 128 fp8"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
