#!/usr/bin/env bash
# v49 review call (one H200) on 1f15362 (HEAD as submitted; kernels v48's): the suite in the four path modes and with
# every own message placed, memcheck on a default 2-rank soak and a 128-thread layout-first FP8 one, and one A/B rep of
# the sizes v49 changed, against the default 256-thread sends.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
conf_modes head
conf head-own $OWN
memcheck default 2 6
sanitize_with "$LF" lf fp8 memcheck
ab 1 "1 1024 fp8" "2 1024 fp8" "1 768 bf16" "2 512 bf16" "2 512 fp8" -- a-head:. b-256:.,EP_CUDA_SEND_THREADS=256
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
