#!/usr/bin/env bash
# v45 call 7, one H200: base/ = 85c2639 (v44) against . = ff2aa29 (v45 as submitted): the decode sizes, dispatch and
# combine, three reps interleaved, and traces of v45 one rank alone at 128 tokens FP8.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf final-single $S
ab 3 "1 1 bf16" "1 1 fp8" "1 32 fp8" "1 64 fp8" "1 128 fp8" "1 128 bf16" "2 1 fp8" "2 32 fp8" "2 64 bf16" "2 128 fp8" "2 128 bf16" "2 256 fp8" "2 512 bf16" -- a-v44:base b-v45:.
traces v45:. -- "1 128 fp8"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
