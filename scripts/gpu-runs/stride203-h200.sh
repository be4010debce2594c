#!/usr/bin/env bash
# v46 call 12, one H200: the staged ids' rows padded to top_k + 4 ints (ep_stage_stride), so that the route's count of
# earlier tokens loads them without bank conflicts (top-8 rows 32 bytes apart: two-way), against a/ = da3dcd6.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_all stride
sanitize_with "$S" stride-single fp8 memcheck racecheck
ab 3 "1 128 fp8" "1 128 bf16" "1 64 bf16" "1 32 fp8" "1 1 bf16" -- a-head:a b-stride:.
traces stride:. -- "1 128 fp8"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
