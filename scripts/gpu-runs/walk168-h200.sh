#!/usr/bin/env bash
# v43 call 3, one H200: . = the copy-out's walk in 32 bits (dispatch) and the LL rows' address loaded while the counts
# are polled (combine), against base/ = f5eb482 (the hold's reload, trace stamps). The suite (default, single-launch,
# every single-launch combine marked), memcheck and racecheck soaks; reps interleaved at decode sizes; traces of ..
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_marked walk
sanitize walk bf16 memcheck racecheck
ab 3 "1 1 bf16" "1 1 fp8" "2 1 bf16" "2 1 fp8" "1 8 fp8" "1 32 fp8" "2 32 fp8" "1 128 fp8" -- a-base:base b-walk:.
traces walk:. -- "1 1 bf16" "2 1 bf16"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
