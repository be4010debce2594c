#!/usr/bin/env bash
# v42 call 4, one H200: . = 46612cc (v42's three kernel changes: the packed counts, ep_poll_layout, the first
# token's route and the early hold word) against base/ = 43f9e1b (v41) from 1 to 4096 tokens, one rank alone and two
# ranks sharing the GPU; the suite on . with the defaults; memcheck on a 4-rank soak (groups of 4 lanes).
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf v42 EP_CUDA_LOG_WAITS=1
memcheck v42-4r 4 6
ab 2 "1 1 bf16" "1 1 fp8" "1 32 fp8" "1 128 fp8" "1 256 fp8" "1 512 fp8" "1 1024 bf16" "1 1024 fp8" "1 4096 bf16" "1 4096 fp8" "2 1 bf16" "2 128 fp8" "2 1024 bf16" "2 4096 fp8" -- a-v41:base b-v42:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
