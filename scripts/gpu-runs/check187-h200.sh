#!/usr/bin/env bash
# v45 call 8, one H200: the checks on 8e78e79 (v45 as submitted: v44's dispatch, ff2aa29's combine).
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_all check
sanitize_with "$S" "check single-launch" bf16 memcheck racecheck synccheck
memcheck "check defaults 4r" 4 6
soak "fp8 single-launch" 3 100 fp8 $S
soak "bf16 single-launch marked" 2 200 bf16 $S $M
ab 2 "1 128 fp8" "2 128 fp8" "1 1 bf16" -- a-v44:base b-v45:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
