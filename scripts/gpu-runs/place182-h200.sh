#!/usr/bin/env bash
# v45 call 3, one H200: base/ = 85c2639 (v44) against a/ = the token's ids loaded before its row's fetch (9c05f3e)
# and . = that plus a sending block placing its own message's rows (a token a block at most).
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_all place
sanitize_with "$S" "place single-launch" fp8 memcheck racecheck synccheck
sanitize_with "$S" "place single-launch" bf16 memcheck
soak "fp8 single-launch" 2 200 fp8 $S
soak "bf16 single-launch" 3 100 bf16 $S
ab 3 "1 128 fp8" "1 128 bf16" "1 64 fp8" "2 128 fp8" "2 48 fp8" "2 32 bf16" "1 1 bf16" -- a-base:base b-ids:a c-place:.
traces ids:a place:. -- "1 128 fp8"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
