#!/usr/bin/env bash
# v45 call 11, one H200: the checks on 650e13a (v45 as submitted: v44's dispatch, the combine's row table, its counts'
# check and marks' address early), and base/ = 85c2639 (v44) against it at the combine's decode sizes, two reps.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf final EP_CUDA_LOG_WAITS=1
conf final-overlap EP_CUDA_OVERLAP_MIN_TOKENS=1
conf final-layout EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0
memcheck "final defaults 4r" 4 6
ab 2 "1 1 bf16" "1 8 fp8" "1 32 fp8" "1 128 fp8" "2 1 fp8" "2 128 fp8" "2 256 fp8" -- a-v44:base b-v45:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
