#!/usr/bin/env bash
# v47 call 3 (one H200): the own rows' group starts loaded while the row loads and read after the mark (ep_own_starts,
# EpOwnRowsFound), against call 2's form (v1/: the rows found whole by the last warp before the row's barrier) and
# HEAD (a/ = cfd4f38). The suite in the four path modes and with every own message placed; memcheck and racecheck on
# layout-first and placed soaks; A/B (three builds interleaved); a grid trace.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
check_own_rows new # (the lines of lib.sh's check_own_rows were written out here when it ran)
ab 3 "1 512 fp8" "1 1024 fp8" "1 512 bf16" -- a-head:a b-v1:v1 c-new:.
ab 2 "1 4096 fp8" "1 4096 bf16" -- a-head:a b-v1:v1 c-new:.
ab 2 "2 512 fp8" "2 1024 fp8" -- a-lf:a,EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 b-lf-v1:v1,EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 c-lf-new:.,EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1
mkdir -p /tmp/tr
EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ./ep-gpu bench --backend cuda --ranks 1 --tokens 512 --format fp8 --passes 1 --rounds 10 2>&1 | grep -E '^trace|^t[0-9]|rror' > /tmp/tr/grid-1r-512-fp8-new2.txt
tar czf $OUT/traces.tgz -C /tmp/tr .
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
