#!/usr/bin/env bash
# v42 call 5, one H200: causal profiling of v42 (46612cc; EP_CUDA_DELAY=site:1000 at each of sites 1-5, common.cuh),
# which chain sets the pace now that the counts' chain and the layout are shorter.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
delays 2 "1 1 bf16" "1 1 fp8" "2 1 bf16" "1 128 fp8" -- 1 2 3 4 5
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
