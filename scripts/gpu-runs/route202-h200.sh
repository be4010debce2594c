#!/usr/bin/env bash
# v46 call 11, one H200: the multi-kernel send's blocks load their slots' peer receive buffers with the route
# (ep_load_route, as ep_own_route does since 484eacf), where ep_send_token loaded them after it, against a/ = 484eacf.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_all route
ab 3 "1 256 fp8" "1 512 fp8" "1 512 bf16" "1 1024 fp8" "2 512 fp8" "2 256 bf16" -- a-head:a b-route:.
ab 2 "1 4096 fp8" "1 4096 bf16" -- a-head:a b-route:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
