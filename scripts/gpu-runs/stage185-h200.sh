#!/usr/bin/env bash
# v45 call 6, one H200: a/ = ff2aa29 (the combine's row table) against . = that plus the block's rows staged through
# shared memory by cp.async, all in flight at once (ep_send_rows_through_smem), and . with the stage off
# (EP_CUDA_COMBINE_STAGE_MAX_BYTES=0: the register batches, now 4 pieces a round).
cd "$(dirname "$0")"
. ./lib.sh
NS="EP_CUDA_COMBINE_STAGE_MAX_BYTES=0"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_all stage
conf stage-off-single $S $NS
sanitize_with "$S" "stage single-launch" bf16 memcheck racecheck synccheck
sanitize_with "$S $M" "stage single-launch marked" fp8 memcheck
sanitize_with "$S $NS" "stage-off single-launch" bf16 memcheck
soak "fp8 single-launch" 2 200 fp8 $S
soak "bf16 single-launch marked" 3 100 bf16 $S $M
ab 3 "1 128 bf16" "1 64 fp8" "1 32 fp8" "1 16 bf16" "2 128 fp8" "2 64 bf16" "2 32 fp8" "1 1 bf16" -- a-table:a b-staged:. c-off:.,$NS
traces staged:. -- "1 128 bf16"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
