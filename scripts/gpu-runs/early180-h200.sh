#!/usr/bin/env bash
# v45 call 1, one H200: base/ = 85c2639 (v44) against a/ = the single-launch dispatch's last token laid out before
# its fence, and . = that plus the single-launch combine's counts polled before its marks' fence.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_all early
sanitize_with "$S" "early single-launch" fp8 memcheck racecheck synccheck
soak "fp8 single-launch" 3 100 fp8 $S
ab 3 "1 128 fp8" "1 128 bf16" "1 64 fp8" "2 128 fp8" "2 64 bf16" "1 1 bf16" -- a-base:base b-dispatch:a c-both:.
traces base:base both:. -- "1 128 fp8"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
