#!/usr/bin/env bash
# v46 call 3, one H200: what the single-launch dispatch's copy-out pays for its FP8 extras, by builds that leave them
# out (measurement only, their output is wrong; never committed): . = 96e58f4, ns/ = the FP8 scales not stored
# (ep_place_scales: 56 scattered 4-byte stores a row in the transposed [hidden/128, rows] layout), np/ = no padding
# rows (~384 zero rows at 128 tokens, ~2.7 MB). BF16 (neither) is the control. Traces of 128 FP8 for each.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
ab 3 "1 128 fp8" "1 64 fp8" "1 32 fp8" "1 128 bf16" -- a-head:. b-noscales:ns c-nopad:np
traces head:. noscales:ns nopad:np -- "1 128 fp8"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
