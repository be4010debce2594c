#!/usr/bin/env bash
# v51, call 1 (one H100; 2x H200 not lent): what a phase kernel's launch costs by the kernel's shape (launch244.cu,
# compiled here with the host's nvcc), beside the single-launch kernels' own "gate end -> first block" (traces of
# HEAD at 1 token BF16 and 128 tokens FP8, one rank alone and two ranks sharing) and the bench's floor line.
cd "$(dirname "$0")"
. ./lib.sh
NVCC=$(ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; echo "nvcc: $NVCC"; } > $OUT/rc.txt
$NVCC -O2 -arch=sm_90 -o /tmp/launch244 launch244.cu >> $OUT/rc.txt 2>&1 && /tmp/launch244 300 30000 > $OUT/launch.txt 2>&1
echo "launch rc=$? $(elapsed)" >> $OUT/rc.txt
traces h:. -- "1 1 bf16" "1 128 fp8" "2 1 bf16"
for f in /tmp/tr/trace-*.txt; do echo "== $f"; python3 trace_summary.py "$f" 2>&1 | head -40; done > $OUT/trace-summary.txt
timeout 100 ./ep-gpu bench --backend cuda --ranks 1 --tokens 1 --format bf16 --passes 1 2>&1 | grep -E 'floor|^t1' >> $OUT/rc.txt
cat $OUT/rc.txt $OUT/launch.txt
