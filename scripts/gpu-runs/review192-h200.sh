#!/usr/bin/env bash
# v46 call 1, one H200: a/ = 255e9ac (v45 as submitted), r/ = the v45 review landed on it (ep_mark_rows_sent on the row
# table: ep_rows_where + ep_mark_rows_where; the table's source index loaded once), . = that and the single-launch
# dispatch kernels bounded __launch_bounds__(512, 1) (ptxas gave ep_dispatch_single_bf16 64 registers and 16 bytes of
# spills under (512); 80 and none with the minimum of one block stated).
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_all v46
memcheck "v46 single-launch marked 2r" 2 6 $S $M
sanitize_with "$S $M" v46-single-marked bf16 racecheck
soak "v46 defaults" 4 200 fp8
soak "v46 single-launch" 2 200 bf16 $S
ab 2 "1 1 bf16" "1 8 fp8" "1 32 fp8" "1 128 bf16" "1 128 fp8" "2 1 fp8" "2 128 fp8" "2 32 fp8" -- a-v45:a b-review:r c-bounds:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
