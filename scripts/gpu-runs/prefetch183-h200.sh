#!/usr/bin/env bash
# v45 call 4, one H200: base/ = 85c2639 (v44) against . = fff0c65 (v45: ids before the row, own rows placed) with the
# combine's batched send stamped (11-14), and a/ = that plus the next batch's payload prefetched into L2
# (EP_SEND_PREFETCH). Traces of one rank alone at 128 tokens BF16 (dispatch and combine).
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
D=a conf prefetch-single $S
ab 3 "1 128 bf16" "1 128 fp8" "1 64 fp8" "1 32 fp8" "2 128 fp8" "2 64 bf16" "1 1 bf16" -- a-v44:base b-v45:. c-prefetch:a
traces v45:. pf:a -- "1 128 bf16"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
