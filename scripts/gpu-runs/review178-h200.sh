#!/usr/bin/env bash
# v44 review, call 8, one H200: . = fadf62b (the block copy through ep_message_ready and
# ep_copy_to, the shared expert's row barrier-free, ep_copy_rows without first pieces) against base/ = 936e1ba.
# The suite in the four path modes, sanitizers on single-launch and default soaks, soaks of 3 and 6 ranks, reps.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_modes review
sanitize_with "$S" "review single-launch" bf16 memcheck racecheck synccheck
sanitize_with "$S" "review single-launch" fp8 memcheck
memcheck "review defaults 4r" 4 6
soak "fp8 single-launch" 3 100 fp8 $S
soak "bf16 defaults" 6 100 bf16
ab 2 "1 1 bf16" "1 1 fp8" "1 32 fp8" "1 128 fp8" "2 1 fp8" "2 256 fp8" "1 512 fp8" -- a-936e1ba:base b-review:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
