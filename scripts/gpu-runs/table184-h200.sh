#!/usr/bin/env bash
# v45 call 5, one H200: a/ = fff0c65 with the combine's batched send stamped (v45 so far) against . = that plus the
# single-launch combine's row table (ep_rows_where: where the block's rows go and their marks, worked out once).
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_all table
sanitize_with "$S" "table single-launch" bf16 memcheck racecheck synccheck
sanitize_with "$S $M" "table single-launch marked" fp8 memcheck
memcheck "table defaults 4r" 4 6
soak "fp8 single-launch" 2 200 fp8 $S
soak "bf16 single-launch marked" 3 100 bf16 $S $M
ab 3 "1 128 bf16" "1 64 fp8" "1 32 fp8" "1 16 bf16" "2 128 fp8" "2 64 bf16" "2 32 fp8" -- a-v45:a b-table:.
traces table:. -- "1 128 bf16"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
