#!/usr/bin/env bash
# v44 review, call 11, one H200: . = 796e181 (ep_copy_to without its First form) against base/ =
# 3c7c93e (ep_block_store_row written out). The suite in the four path modes, memcheck, a 3-rank soak, reps.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_modes copyto
sanitize_with "$S" "copyto single-launch" bf16 memcheck racecheck
memcheck "copyto defaults 4r" 4 6
soak "fp8 single-launch" 3 100 fp8 $S
ab 3 "1 512 fp8" "1 256 fp8" "1 128 fp8" "1 1 bf16" "2 512 bf16" -- a-3c7c93e:base b-copyto:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
