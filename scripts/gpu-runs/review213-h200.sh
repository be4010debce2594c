#!/usr/bin/env bash
# v47 review, second call (one H200): 1024 tokens FP8 again (call 212 read the review's form 0.4-0.6 us slower there in
# two of three reps), five reps, against a/ = 062a2eb's kernels; 512 and 2048 beside it.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
ab 5 "1 1024 fp8" "1 512 bf16" "1 2048 fp8" -- a-v47:a b-review:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
