#!/usr/bin/env bash
# v42 call 6, one H200: . = the send's carrying slots and the marks' slots read as a mask before the stores and the
# fence (ep_send_token, ep_mark_landed) against base/ = 46612cc; the suite on . with the defaults and every phase
# single-launch; memcheck; reps interleaved; traces at 1 token.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf mask EP_CUDA_LOG_WAITS=1
conf mask-overlap EP_CUDA_OVERLAP_MIN_TOKENS=1
(export EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000; sanitize mask-single fp8 memcheck)
ab 3 "1 1 bf16" "1 1 fp8" "2 1 bf16" "2 1 fp8" "1 8 bf16" "1 128 fp8" "1 512 fp8" -- a-base:base b-mask:.
traces mask:. base:base -- "1 1 bf16"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
