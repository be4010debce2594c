#!/usr/bin/env bash
# v52 review, call 4 (one H200; 2x H200 not lent): the review's host changes (Chain in comm/mod.rs, Timing::chained and
# one epoch rule in bench.rs) launch as before. The suite with the defaults, every phase single-launch, and the late
# inputs hook; memcheck on a 2-rank soak; step timing with the first kernels chained and plain, and event timing, one rep.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/rc.txt
conf review
conf review-single $S
conf review-late EP_CUDA_LATE_INPUTS=20000
memcheck review-2r 2 6
ab 1 "1 1 bf16 --timing step" "1 128 fp8 --timing step" "2 1 bf16 --timing step" -- c-step:. d-step-plainfirst:.,EP_CUDA_CHAINED_FIRST=0
ab 1 "1 1 bf16" "1 128 fp8" -- e-events:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
