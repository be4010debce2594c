#!/usr/bin/env bash
# (EP_X_SEND32 was a knob of the experiment build this call ran, never committed.)
# v48 call 8 (one H200): the FP8 send held to 32 registers by its launch bounds (256 threads, 8 blocks an SM: the whole
# SM's threads; 24 bytes of spills) with two pieces a thread in flight (EP_X_SEND32=2) or one (=1), against
# ep_dispatch_send_fp8 (40 registers, six blocks an SM).
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
conf x32-overlap EP_X_SEND32=2 EP_CUDA_OVERLAP_MIN_TOKENS=1
conf x32-layout EP_X_SEND32=2 $LF
ab 2 "1 512 fp8" "1 1024 fp8" "1 2048 fp8" "1 4096 fp8" "2 1024 fp8" "2 4096 fp8" -- a-40:. b-32:.,EP_X_SEND32=2 c-32b1:.,EP_X_SEND32=1
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
