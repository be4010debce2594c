#!/usr/bin/env bash
# v49 call 10 (one H200) on ee0f1a5 (the single-launch combine over every block of the rank's share; HEAD,
# `.`) against 6e666d0 (base/: a block per row produced). The suite in the four path modes and with every single-launch
# combine marked, memcheck and racecheck on single-launch soaks, then the A/B at the single-launch combine's sizes.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
conf_all head
sanitize_with "$S" single bf16 memcheck racecheck
sanitize_with "$S $M" marked fp8 memcheck
ab 2 "1 1 bf16" "1 1 fp8" "1 8 bf16" "1 32 fp8" "1 128 bf16" "1 256 fp8" "2 1 bf16" "2 128 fp8" "1 1 bf16 --max-tokens 4096" -- a-base:base b-head:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
