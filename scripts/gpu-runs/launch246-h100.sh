#!/usr/bin/env bash
# v52, call 1 (one H100; 2x H200 not lent): a phase kernel's launch behind the kernel before it, queued in the ways
# launch246.cu lists (event as ep bench, no event, PDL with and without a release, CUDA graphs), compiled here with the
# host's nvcc; a block per SM of 512 threads (as the single-launch kernels) and one block.
cd "$(dirname "$0")"
. ./lib.sh
NVCC=$(ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; echo "nvcc: $NVCC"; } > $OUT/rc.txt
$NVCC -O2 -arch=sm_90 -o /tmp/launch246 launch246.cu >> $OUT/rc.txt 2>&1 && /tmp/launch246 300 30000 > $OUT/launch.txt 2>&1
echo "launch rc=$? $(elapsed)" >> $OUT/rc.txt
cat $OUT/rc.txt $OUT/launch.txt
