#!/usr/bin/env bash
# v46 call 4, one H200: the single-launch dispatch's FP8 scales staged row by row (EpStage) and written transposed by
# tiles of 32 rows (ep_unstage_scales), against a/ = 16923bd (call 3 found the scattered scale stores ~1.1 us of the
# 128-token FP8 dispatch). The suite in every mode, the sanitizers and soaks on FP8 single-launch, then A/B.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_all stage
sanitize_with "$S" stage-single fp8 memcheck racecheck
soak "stage single-launch" 2 300 fp8 $S
soak "stage defaults" 4 200 fp8
ab 3 "1 128 fp8" "1 64 fp8" "1 32 fp8" "1 8 fp8" "1 1 fp8" "1 128 bf16" -- a-head:a b-stage:.
ab 2 "2 128 fp8" "2 32 fp8" -- a-head-single:a,EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 b-stage-single:.,EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000
traces stage:. -- "1 128 fp8"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
