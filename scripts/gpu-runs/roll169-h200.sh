#!/usr/bin/env bash
# v43 call 4, one H200: . = the copy-out's walk in 32 bits, its loop rolled (dispatch) and the LL rows' address loaded while the counts
# are polled (combine), against base/ = f5eb482 (the hold's reload, trace stamps). The suite (default, single-launch,
# every single-launch combine marked), memcheck and racecheck soaks, a 3-rank single-launch soak; reps interleaved at decode sizes; traces of ..
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_marked roll
sanitize roll bf16 memcheck racecheck
soak "fp8 single-launch" 3 100 fp8 $S
ab 3 "1 1 bf16" "1 1 fp8" "2 1 bf16" "2 1 fp8" "1 8 fp8" "1 32 fp8" "2 32 fp8" "2 8 bf16" "1 128 fp8" -- a-base:base b-roll:.
traces roll:. base:base -- "1 1 bf16" "2 1 bf16"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
