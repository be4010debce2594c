#!/usr/bin/env bash
# v46 call 5, one H200: the staged FP8 scales written ahead of the payload's stores (call 4 staged them after each row's
# payload: +2 us at 128 tokens, the tiles waiting behind the queue), from 64 tokens (STAGE_SCALES_MIN_TOKENS), against
# a/ = 16923bd; all = staged at every size (EP_CUDA_STAGE_SCALES_MIN_TOKENS=1).
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
A="EP_CUDA_STAGE_SCALES_MIN_TOKENS=1"
conf first EP_CUDA_LOG_WAITS=1
conf first-single-all $S $A
conf first-all $A
sanitize_with "$S $A" first-single-all fp8 memcheck racecheck
soak "first single-launch all" 2 300 fp8 $S $A
ab 3 "1 128 fp8" "1 64 fp8" "1 32 fp8" "1 8 fp8" -- a-head:a b-first:. c-all:.,$A
ab 2 "2 128 fp8" "2 64 fp8" -- a-head-single:a,EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 b-first-single:.,EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000
traces first:. -- "1 128 fp8"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
