#!/usr/bin/env bash
# v49 call 9 (one H200), on an experiment build of 6e666d0 (x/; EP_X_COMBINE_GRID, that build's knob only): the
# single-launch combine's grid. A caller's combine gives it a block per row produced (at least one per token, at most
# the rank's single-launch share); until 50cd097 the bench gave it the world's most rows (max_recv_rows: `cap`), which
# at 1 token FP8 (rows padded to 4 in every expert's group) was every block of the share. Rows (HEAD) against cap and
# against every block of the share (`all`), decode sizes, one rank alone and two sharing the GPU.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
D=x conf x-all EP_X_COMBINE_GRID=all
ab 3 "1 1 bf16" "1 1 fp8" "1 4 fp8" "1 8 bf16" "1 8 fp8" "1 16 fp8" "2 1 bf16" "2 1 fp8" "2 8 fp8" "1 1 bf16 --max-tokens 4096" "1 1 fp8 --max-tokens 4096" -- a-rows:x b-cap:x,EP_X_COMBINE_GRID=cap c-all:x,EP_X_COMBINE_GRID=all
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
