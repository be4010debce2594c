#!/usr/bin/env bash
# v43 call 5, one H200: . = v43 as submitted (02d8bab: the hold's reload, the walk in 32 bits and rolled, the LL
# address early) against base/ = ce836e0 (v42 as reviewed). The suite in the four path modes (the overlapped and
# layout-first copy-outs take the warps' claimed walk), 3- and 6-rank soaks (n_ranks not a power of two), a 4-rank
# memcheck soak; two reps interleaved from 1 to 4096 tokens.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_modes v43
for r in 3 6; do soak fp8 $r 100 fp8; done
memcheck v43-4r 4 6
ab 2 "1 1 bf16" "1 1 fp8" "1 128 fp8" "1 256 fp8" "1 512 fp8" "1 1024 bf16" "1 1024 fp8" "1 4096 bf16" "1 4096 fp8" "2 1 bf16" "2 1024 bf16" "2 4096 fp8" -- a-v42:base b-v43:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
