#!/usr/bin/env bash
# v46 call 6, one H200: the scale tiles poll one word a row, then load the row's 16 (call 5 polled all 16 a lane: ~500
# requests a poll per tile warp, and the staged dispatch was 1.3-2 us slower at every size), against a/ = 16923bd;
# all = staged at every size.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
A="EP_CUDA_STAGE_SCALES_MIN_TOKENS=1"
conf poll-single-all $S $A
ab 3 "1 128 fp8" "1 64 fp8" "1 8 fp8" -- a-head:a b-poll:. c-all:.,$A
traces poll:. -- "1 128 fp8"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
