#!/usr/bin/env bash
# v47 call 2 (one H200): the send's own rows found from the route while the row loads (ep_find_own_rows) and no
# fence for a block whose only mark is placed. Bundles: a/ = HEAD (cfd4f38), . = the working tree. The suite in the
# four path modes and with every own message placed (overlapped, every format, the send waiting for the layout);
# memcheck and racecheck on layout-first and placed soaks; A/B one rank alone (layout-first from 512, overlapped FP8
# from 2048, lean BF16 from 2560) and two ranks sharing (layout-first forced; overlapped at 4096 FP8); a grid trace.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
check_own_rows new # (the lines of lib.sh's check_own_rows were written out here when it ran)
ab 3 "1 512 fp8" "1 1024 fp8" "1 512 bf16" "1 256 fp8" -- a-head:a b-new:.
ab 2 "1 4096 fp8" "1 4096 bf16" "2 4096 fp8" -- a-head:a b-new:.
ab 2 "2 512 fp8" "2 1024 fp8" -- a-lf:a,EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 b-lf:.,EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1
mkdir -p /tmp/tr
EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ./ep-gpu bench --backend cuda --ranks 1 --tokens 512 --format fp8 --passes 1 --rounds 10 2>&1 | grep -E '^trace|^t[0-9]|rror' > /tmp/tr/grid-1r-512-fp8-new.txt
tar czf $OUT/traces.tgz -C /tmp/tr .
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
