#!/usr/bin/env bash
# v47 call 4 (one H200): the finder warp looks for the layout after the route (as HEAD's thread 0 did) and issues the
# own rows' loads there, read after the mark (. = v3); against call 2's form (v1/: the rows found whole before the
# row's barrier, the layout looked for before the route), call 3's (v2/: the loads early, the layout before the route)
# and HEAD (a/ = cfd4f38). Two ranks sharing the GPU with layout-first forced stand in for 2x H200 (a peer's message,
# so the fence stays). Suite, sanitizers, A/B.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
check_own_rows new # (the lines of lib.sh's check_own_rows were written out here when it ran)
ab 3 "2 512 fp8" "2 1024 fp8" "2 512 bf16" -- a-lf:a,EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 b-lf-v1:v1,EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 c-lf-v2:v2,EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 d-lf-v3:.,EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1
ab 2 "2 4096 fp8" "1 4096 fp8" "1 1024 fp8" "1 512 fp8" -- a-head:a b-v1:v1 c-v2:v2 d-v3:.
mkdir -p /tmp/tr
EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ./ep-gpu bench --backend cuda --ranks 1 --tokens 512 --format fp8 --passes 1 --rounds 10 2>&1 | grep -E '^trace|^t[0-9]|rror' > /tmp/tr/grid-1r-512-fp8-v3.txt
EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 timeout 60 ./ep-gpu bench --backend cuda --ranks 2 --tokens 512 --format fp8 --passes 1 --rounds 10 2>&1 | grep -E '^trace|^t[0-9]|rror' > /tmp/tr/grid-2r-512-fp8-lf-v3.txt
EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 timeout 60 a/ep-gpu bench --backend cuda --ranks 2 --tokens 512 --format fp8 --passes 1 --rounds 10 2>&1 | grep -E '^trace|^t[0-9]|rror' > /tmp/tr/grid-2r-512-fp8-lf-head.txt
tar czf $OUT/traces.tgz -C /tmp/tr .
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
