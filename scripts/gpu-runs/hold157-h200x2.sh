#!/usr/bin/env bash
# v41 call 11, 2x H200 (the session's last ~290 s of device time): . = 136783f (at the smallest sizes a sending block
# holds its row until the counting block has published, at most 2 us) against base/ = its parent; the suite on .;
# the decode sizes where Spread applies (1-8 tokens) and 32 tokens (not Spread) as a control.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf hold EP_CUDA_LOG_WAITS=1
ab 2 "2 1 bf16" "2 1 fp8" "2 8 bf16" "2 32 fp8" -- a-base:base b-hold:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
