#!/usr/bin/env bash
# v46 call 8, one H200: the single-launch dispatch's padding rows taken by the warps a message's copy leaves without
# payload pieces (hidden 7168 FP8: warps 14 and 15), where warps 0-5 took them before their message (call 3's trace: the
# block's first mark seen ~1 us later with padding than without), against a/ = 16923bd (HEAD's kernels).
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_all pad
sanitize_with "$S" pad-single fp8 memcheck racecheck
ab 3 "1 128 fp8" "1 64 fp8" "1 32 fp8" "1 8 fp8" "1 1 fp8" "1 128 bf16" -- a-head:a b-pad:.
ab 2 "2 128 fp8" "2 32 fp8" "2 1 fp8" -- a-head-single:a,EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 b-pad-single:.,EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000
traces pad:. -- "1 128 fp8"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
