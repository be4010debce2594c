#!/usr/bin/env bash
# v49 review call 13 (one H200) on b070949 (World's single-launch blocks derived from its share of the SMs: the same
# values, host only): the suite in the four path modes and with every single-launch combine marked, memcheck, one A/B
# rep against 2a734c5's code (base/) at sizes whose grids follow the share (single-launch, two and four ranks sharing).
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
conf_all head
memcheck default 2 6
ab 1 "1 1 bf16" "2 1 bf16" "2 128 fp8" "4 512 fp8" "1 1024 fp8" "1 4096 fp8" -- a-base:base b-head:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
