#!/usr/bin/env bash
# v49 call 1 (one H200), env only on HEAD (ca24ede): the FP8 send's block size. ep_dispatch_send_fp8 takes 40
# registers and ~25 kB of shared memory a block (the message and the bf16 row), so 256 threads fit six blocks (six
# tokens) an SM, bound by registers; 192 fit eight (1536 threads, bound by both), 224 seven, 160 and 128 eight (bound
# by shared memory). The suite with 192- and 160-thread blocks first (overlapped and layout-first), then the A/B.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
conf t192-overlap EP_CUDA_SEND_THREADS=192 EP_CUDA_OVERLAP_MIN_TOKENS=1
conf t192-layout EP_CUDA_SEND_THREADS=192 $LF
conf t160-own EP_CUDA_SEND_THREADS=160 $OWN
ab 2 "1 512 fp8" "1 1024 fp8" "1 2048 fp8" "1 4096 fp8" "2 1024 fp8" "2 4096 fp8" -- a-256:. b-224:.,EP_CUDA_SEND_THREADS=224 c-192:.,EP_CUDA_SEND_THREADS=192 d-160:.,EP_CUDA_SEND_THREADS=160 e-128:.,EP_CUDA_SEND_THREADS=128
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
