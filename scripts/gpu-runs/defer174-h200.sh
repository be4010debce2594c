#!/usr/bin/env bash
# v44 call 3, one H200: . = the single-launch dispatch (without Spread: 32-128 tokens) marking a block's last token
# after its first look at the layout, which then runs while the token's stores drain, against base/ = the multi-kernel
# copy-out by warps (the commit before). The suite in the four path modes, sanitizers on single-launch soaks
# (ranks sharing the GPU take the deferral only single-launch), a 3-rank single-launch soak, reps interleaved at the
# sizes that take it, and traces.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_modes defer
sanitize_with "$S" "defer single-launch" bf16 memcheck racecheck synccheck
sanitize_with "$S" "defer single-launch" fp8 memcheck
soak "fp8 single-launch" 3 100 fp8 $S
ab 3 "1 32 fp8" "1 64 bf16" "1 128 fp8" "1 128 bf16" "1 1 bf16" -- a-base:base b-defer:.
traces base:base defer:. -- "1 128 fp8" "1 32 fp8"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
