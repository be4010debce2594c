#!/usr/bin/env bash
# v48 call 10 (one H200), env only: call 9's comparison (the overlapped BF16 round at 1024-2048 tokens, defaults against
# lean forced) on v47's build (0cd29bf in base/, the layout wait after the assign) and again on HEAD (fa9ee8c): whether
# the lean path's loss there on 2x H200 in v29 came from the late layout (the send blocks that run before it cannot write
# their own rows, the lean path's point).
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
ab 2 "1 1024 bf16" "1 2048 bf16" "2 1024 bf16" "2 2048 bf16" -- a-v47-def:base b-v47-lean:base,EP_CUDA_LEAN_MIN_TOKENS=1024 c-v48-def:. d-v48-lean:.,EP_CUDA_LEAN_MIN_TOKENS=1024
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
