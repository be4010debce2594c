#!/usr/bin/env bash
# (EP_X_PERSIST was a knob of the experiment build this call ran, never committed.)
# v48 call 12 (one H200): the FP8 send as a persistent grid (each block loops over tokens t, t + grid, ...; K blocks an SM
# of the rank's share, EP_X_PERSIST=K; 40 registers by its launch bounds) against ep_dispatch_send_fp8 (head/: 8628a00's
# build), after call 5's windows: at 2048 tokens one rank alone the send grid's first wave (792 blocks) ends within
# ~10 us and the next reaches ~300 alive only, a relaunch gap a persistent grid would not have.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
conf p6-overlap EP_X_PERSIST=6 EP_CUDA_OVERLAP_MIN_TOKENS=1
conf p6-layout EP_X_PERSIST=6 $LF
mkdir -p /tmp/tr
EP_X_PERSIST=6 EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 90 ./ep-gpu bench --backend cuda --ranks 1 --tokens 2048 --format fp8 --passes 1 --rounds 12 2>&1 | grep -E '^trace|^t[0-9]|rror|dropped' > /tmp/tr/trace-1r-2048-fp8-p6.txt
tar czf $OUT/traces.tgz -C /tmp/tr .
ab 2 "1 512 fp8" "1 1024 fp8" "1 2048 fp8" "1 4096 fp8" "2 1024 fp8" "2 4096 fp8" -- a-head:head b-p6:.,EP_X_PERSIST=6 c-p5:.,EP_X_PERSIST=5 d-p4:.,EP_X_PERSIST=4
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
