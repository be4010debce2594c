#!/usr/bin/env bash
# v49 call 4 (one H200), env only on c516694: (1) the overlapped FP8 send in 192-thread blocks (eight an SM where 256
# fit six; the copy blocks follow, EP_CUDA_SEND_THREADS) at 2048-4096 tokens, which call 1 read 1-2% faster one rank
# alone at 4096; (2) the rounds just past the overlap thresholds (BF16 1024, FP8 2048) not overlapped
# (EP_CUDA_OVERLAP_MIN_TOKENS=4096), where the send now takes 128-thread blocks in fewer waves (chain_send_threads).
# One GPU has no NVLink transfer for an overlap to hide, so (2) is for the record; thresholds209-h200x2.sh has it too.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
ab 3 "1 2048 fp8" "1 3072 fp8" "1 4096 fp8" "2 2048 fp8" "2 4096 fp8" -- a-def:. b-192:.,EP_CUDA_SEND_THREADS=192
ab 2 "1 1024 bf16" "2 1024 bf16" "1 2048 fp8" "2 2048 fp8" -- c-def:. d-chain:.,EP_CUDA_OVERLAP_MIN_TOKENS=4096
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
