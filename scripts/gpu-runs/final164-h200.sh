#!/usr/bin/env bash
# v42 call 7, one H200: v42 as submitted (5880713) against base/ = 43f9e1b (v41) at decode sizes and 256-512 tokens,
# three reps interleaved; racecheck and memcheck on a 2-rank BF16 soak with the defaults.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
sanitize v42 bf16 memcheck racecheck
ab 3 "1 1 bf16" "1 1 fp8" "1 32 fp8" "1 128 fp8" "1 256 fp8" "1 512 fp8" "2 1 bf16" "2 1 fp8" -- a-v41:base b-v42:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
