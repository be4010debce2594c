#!/usr/bin/env bash
# v44 call 4, one H200: . = the single-launch LL combine loading a one-item block's first round of LL pieces into its
# stage before the counts' poll (summed after them; nothing written before) against base/ = 50b3247 (the copy-outs
# by warps). The suite in the four path modes, sanitizers on single-launch soaks with LL rows at every size, a 3-rank
# LL soak, reps interleaved at the LL sizes (1-8 tokens), traces.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_modes prestage
conf prestage-ll EP_CUDA_LL_MAX_TOKENS=1000000 $S
sanitize_with "$S EP_CUDA_LL_MAX_TOKENS=1000000" "prestage single-launch LL" bf16 memcheck racecheck synccheck
soak "fp8 LL single-launch" 3 100 fp8 $S EP_CUDA_LL_MAX_TOKENS=1000000
ab 3 "1 1 bf16" "1 1 fp8" "1 8 fp8" "2 1 bf16" "2 1 fp8" -- a-base:base b-prestage:.
traces base:base prestage:. -- "1 1 bf16" "2 1 bf16"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
