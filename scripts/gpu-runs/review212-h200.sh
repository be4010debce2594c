#!/usr/bin/env bash
# v47 review call (one H200): the review's form of the own rows (ep_row_here for the "has a row here" test the copy-out's
# and the send's row readers each wrote out; machine code of the two send kernels changed, registers not) against
# a/ = 062a2eb's kernels (f2daefb): the own rows' checks and an A/B where the send writes its own rows.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
check_own_rows review
ab 3 "1 512 fp8" "1 1024 fp8" "1 4096 fp8" -- a-v47:a b-review:.
ab 3 "2 512 fp8" -- a-v47-lf:a,EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 b-review-lf:.,EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
