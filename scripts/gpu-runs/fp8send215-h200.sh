#!/usr/bin/env bash
# v48 call 2 (one H200): ep_dispatch_send_fp8 as committed (FP8's multi-kernel rounds by default) checked (the own
# rows' checks, check_own_rows, and a soak in each path), then against ep_dispatch_send (EP_CUDA_SEND_FP8=0: HEAD's
# machine code) with three reps, the 2048-tokens overlapped rounds' p95 looked at again (call 1: 112-116 against 99-100).
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
check_own_rows new
soak "fp8 overlapped" 2 200 fp8 EP_CUDA_OVERLAP_MIN_TOKENS=1
soak "fp8 layout-first" 2 200 fp8 $LF
soak "fp8 defaults" 4 100 fp8
ab 3 "1 1024 fp8" "1 2048 fp8" "1 3072 fp8" "1 4096 fp8" "2 1024 fp8" "2 2048 fp8" "2 4096 fp8" -- a-all:.,EP_CUDA_SEND_FP8=0 b-fp8:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
