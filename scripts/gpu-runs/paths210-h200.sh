#!/usr/bin/env bash
# v47 call 5 (one H200), on 56110ce: the multi-kernel dispatch's paths at 512-2048 tokens FP8, env only. The default
# (layout-first from 512: assign -> wait -> send, own rows by the send) against the overlapped path with the send
# blocks waiting for the layout before their own rows (EP_CUDA_OWN_ROWS_WAIT_NS: the wait runs beside the route and the
# encode instead of before them) and the overlapped path as it is (a look), one rank alone and two ranks sharing.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
ab 2 "1 512 fp8" "1 1024 fp8" "1 2048 fp8" "2 512 fp8" "2 1024 fp8" -- a-def:. b-ovl-wait:.,EP_CUDA_OVERLAP_MIN_TOKENS=1,EP_CUDA_OWN_ROWS_WAIT_NS=200000 c-ovl:.,EP_CUDA_OVERLAP_MIN_TOKENS=1 d-lf:.,EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
