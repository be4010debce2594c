#!/usr/bin/env bash
# v44 call 5, one H200: . = c8525fa (v44: the copy-outs' messages by a block's warps each on their own, the rows
# without divisions) against base/ = c511040 (v43 as submitted). The suite in the four path modes, sanitizers, soaks
# of 3, 4 and 6 ranks, reps interleaved from 1 to 4096 tokens, traces of v44.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_modes v44
sanitize_with "$S" "v44 single-launch" bf16 memcheck racecheck synccheck
memcheck "v44 defaults 4r" 4 6
soak "fp8 single-launch" 3 100 fp8 $S
soak "bf16 defaults" 6 100 bf16
ab 2 "1 1 bf16" "1 1 fp8" "1 32 fp8" "1 128 fp8" "1 128 bf16" "1 512 fp8" "1 1024 fp8" "1 4096 bf16" "1 4096 fp8" "2 1 bf16" "2 1 fp8" "2 256 fp8" "2 1024 bf16" -- a-v43:base b-v44:.
traces v44:. -- "1 1 bf16" "2 1 bf16" "1 128 fp8"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
