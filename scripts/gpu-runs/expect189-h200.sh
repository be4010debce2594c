#!/usr/bin/env bash
# v45 call 9, one H200: a/ = the submitted kernels (v44's dispatch, ff2aa29's combine) against . = the counts' check
# loading what it checks against (the combine's rows sent) before the poll, not after every count is there.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_all expect
memcheck "expect single-launch 2r" 2 6 $S
ab 3 "1 1 bf16" "1 1 fp8" "1 8 fp8" "1 32 fp8" "1 128 bf16" "2 1 fp8" "2 128 fp8" "2 256 fp8" "1 512 fp8" -- a-head:a b-expect:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
