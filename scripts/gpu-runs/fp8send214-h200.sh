#!/usr/bin/env bash
# (EP_X_SEND_FP8 was a knob of the experiment build this call ran, never committed; 11b2983 made its "2" ep_dispatch_send_fp8.)
# v48 call 1 (one H200): the multi-kernel send compiled for FP8 alone (EP_X_SEND_FP8: 1 and 2 = a piece or two a
# thread in flight, 40 registers; 8 = FP8 alone with ep_dispatch_send's batch, 64 registers, a control) against
# ep_dispatch_send (every format, 64 registers). Suite on the FP8 kernel first, then the A/B, one rank alone and two
# sharing the GPU, 256-4096 tokens FP8.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
conf x1-overlap EP_X_SEND_FP8=1 EP_CUDA_OVERLAP_MIN_TOKENS=1
conf x1-layout EP_X_SEND_FP8=1 $LF
conf x1-own EP_X_SEND_FP8=1 $OWN
ab 2 "1 256 fp8" "1 512 fp8" "1 1024 fp8" "1 2048 fp8" "1 4096 fp8" "2 512 fp8" "2 1024 fp8" "2 4096 fp8" -- a-def:. b-x1:.,EP_X_SEND_FP8=1 c-x2:.,EP_X_SEND_FP8=2 d-x8:.,EP_X_SEND_FP8=8 e-x1-512:.,EP_X_SEND_FP8=1,EP_CUDA_SEND_THREADS=512
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
