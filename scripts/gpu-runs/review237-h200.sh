#!/usr/bin/env bash
# v49 review call 12 (one H200) on 2a734c5 (HEAD as submitted; kernels 5cdab6a's): the suite with every single-launch
# combine marked and with every own message placed (call 11 ran the four path modes on the same kernels), memcheck on
# a default 2-rank soak, soaks of 4 ranks and of 2 in a layout-first chain.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
conf head-marked $S $M
conf head-own $OWN
memcheck default 2 6
soak default 4 100 fp8
soak layout-first 2 200 bf16 $LF
cat $OUT/rc.txt
