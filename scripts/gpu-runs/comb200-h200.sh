#!/usr/bin/env bash
# v46 call 9, one H200: the single-launch combine up to 256 tokens on a rank with a GPU of its own (128 where ranks share
# a GPU), against a/ = 16923bd (128 everywhere); the suite with the defaults and every phase single-launch.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf comb EP_CUDA_LOG_WAITS=1
conf comb-single $S
ab 3 "1 256 bf16" "1 256 fp8" "1 192 fp8" "1 128 fp8" "2 256 fp8" -- a-head:a b-comb:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
