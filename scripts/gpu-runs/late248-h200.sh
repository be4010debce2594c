#!/usr/bin/env bash
# v52, call 3 (one H200; 2x H200 not lent): the chained first kernels against inputs written late (EP_CUDA_LATE_INPUTS,
# 07c40cb: before each phase a kernel that lets its dependents launch at once, changes the phase's inputs and puts them
# back 20 us later). The suite in the four path modes and with every single-launch combine marked, with the hook; the
# same with the first kernels launched plain (EP_CUDA_CHAINED_FIRST=0); and the negative control neg/ (07c40cb with the
# first kernels' ep_await_prior_grid taken out), with the hook (expected to fail) and without (expected to pass).
cd "$(dirname "$0")"
. ./lib.sh
L="EP_CUDA_LATE_INPUTS=20000"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/rc.txt
conf late $L
conf late-single $S $L
conf late-overlap EP_CUDA_OVERLAP_MIN_TOKENS=1 $L
conf late-layout $LF $L
conf late-marked $S $M $L
conf late-plainfirst EP_CUDA_CHAINED_FIRST=0 $L
D=neg conf neg-late $L
D=neg conf neg-late-single $S $L
D=neg conf neg-nohook
memcheck late-2r 2 6 $L
cp /tmp/conformance-neg-late.txt /tmp/conformance-neg-late-single.txt $OUT/ 2>/dev/null
cat $OUT/rc.txt
