#!/usr/bin/env bash
# v46 call 10, one H200: the single-launch dispatch's sending block loads each slot's peer receive buffer with the route
# (ep_own_route, by the thread that uses it in ep_send_token), where it was loaded after the route, a round trip on the
# sender's path (call 3's trace at 128 tokens FP8: route done 3.60 us, address 4.09), against a/ = 16923bd.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_all peer
sanitize_with "$S" peer-single bf16 memcheck racecheck
ab 3 "1 128 fp8" "1 128 bf16" "1 32 fp8" "1 8 bf16" "1 1 bf16" "1 1 fp8" "2 1 bf16" -- a-head:a b-peer:.
traces peer:. -- "1 128 fp8"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
