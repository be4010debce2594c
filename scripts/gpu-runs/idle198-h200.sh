#!/usr/bin/env bash
# v46 call 7, one H200: a block's FP8 scale stores moved to the threads its payload leaves idle (ep_scale_id: at hidden
# 7168 threads 448-503, where threads 0-55 stored them beside their payload pieces), in the single-launch dispatch and the
# multi-kernel copy-out alike, against a/ = 16923bd (the same kernels as 0ba15a2).
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_all idle
ab 3 "1 128 fp8" "1 64 fp8" "1 32 fp8" "1 1 fp8" "1 512 fp8" "2 512 fp8" "2 128 fp8" "1 1024 fp8" -- a-head:a b-idle:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
