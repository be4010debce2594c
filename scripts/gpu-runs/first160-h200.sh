#!/usr/bin/env bash
# v42 call 3, one H200: . = the first token's route without the earlier tokens' count, and the hold's word loaded
# at the send's start, against base/ = f362b13 (ep_poll_layout); the suite on . with the defaults and every phase
# single-launch; memcheck; reps interleaved at the smallest sizes; a trace of . at 1 token.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf first EP_CUDA_LOG_WAITS=1
conf first-single $S
(export EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000; sanitize first-single bf16 memcheck)
ab 3 "1 1 bf16" "1 1 fp8" "1 8 bf16" "2 1 bf16" "2 1 fp8" "1 128 fp8" -- a-base:base b-first:.
traces first:. base:base -- "1 1 bf16"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
