#!/usr/bin/env bash
# v46 call 2, one H200: (1) the GPU's write rate at decode sizes (writes193.py, torch), against the single-launch
# dispatch's copy-out (~10 MB in ~5.5 us at 128 tokens FP8, one rank alone, v45 trace); (2) the single-launch combine
# at 256 and 512 tokens (v30's lead: 3.5-4% faster at 256 on 2x H200), after the default dispatch, and the suite so.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
timeout 180 python3 writes193.py > $OUT/writes.txt 2>&1; echo "writes rc=$? $(elapsed)" >> $OUT/rc.txt
conf v46-single-combine EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000
ab 2 "1 256 fp8" "1 512 fp8" "1 256 bf16" "2 256 fp8" "2 512 bf16" "2 256 bf16" -- d-default:. c-single:.,EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000
cat $OUT/rc.txt
cat $OUT/writes.txt
summary | tee $OUT/summary.txt
