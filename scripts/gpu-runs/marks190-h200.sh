#!/usr/bin/env bash
# v45 call 10, one H200: a/ = 62b523e (the counts' check loaded before the poll) against . = the marks' address loaded
# while the counts are polled (it was loaded after them, a round trip before the marks' first poll).
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf marks-single $S
conf marks-marked $S $M
ab 3 "1 16 bf16" "1 32 fp8" "1 64 fp8" "1 128 bf16" "2 32 fp8" "2 128 fp8" "1 1 bf16" -- a-head:a b-marks:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
