#!/usr/bin/env bash
# v48 call 7 (one H200): HEAD (0ded2a3: ep_dispatch_send_fp8 and the layout wait beside the assign) against v47
# (0cd29bf, in base/: the `ep` built in a git worktree of it, with scripts/ep-gpu.sh beside it) over the multi-kernel sizes, one rank alone and two sharing the GPU; then memcheck and racecheck
# on 2-rank FP8 soaks with every dispatch overlapped and layout-first.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
sanitize_with "EP_CUDA_OVERLAP_MIN_TOKENS=1" overlapped fp8 memcheck racecheck
sanitize_with "$LF" lf fp8 memcheck
ab 2 "1 256 fp8" "1 512 fp8" "1 1024 fp8" "1 2048 fp8" "1 4096 fp8" "1 1024 bf16" "1 2048 bf16" "1 4096 bf16" "2 512 fp8" "2 1024 fp8" "2 2048 fp8" "2 4096 fp8" "2 4096 bf16" -- a-v47:base b-v48:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
