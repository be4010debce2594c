#!/usr/bin/env bash
# v48 call 9 (one H200), on fa9ee8c, env only: the overlapped BF16 round below the lean threshold (1024-2048 tokens), now
# that its layout comes from beside the assign: the defaults (ep_dispatch_send, the own message for the copy-out)
# against the own rows written by the send blocks (EP_CUDA_OWN_ROWS=1) and the lean kernels (EP_CUDA_LEAN_MIN_TOKENS=1024,
# which place them too). Both were slower at 1024-2048 on 2x H200 in v27-v29, with the wait after the assign.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
ab 2 "1 1024 bf16" "1 2048 bf16" "2 1024 bf16" "2 2048 bf16" -- a-def:. b-own:.,EP_CUDA_OWN_ROWS=1 c-lean:.,EP_CUDA_LEAN_MIN_TOKENS=1024
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
