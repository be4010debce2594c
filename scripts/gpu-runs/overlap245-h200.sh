#!/usr/bin/env bash
# v51, call 2 (one H200; 2x H200 not lent): the overlapped path for FP8 at 512-1024 tokens against the defaults
# (layout-first from 512 on a rank with a GPU of its own, the chain where ranks share one), one rank alone and two ranks
# sharing the GPU, reps interleaved; and launch244.cu's launch latency by kernel shape on this GPU model.
cd "$(dirname "$0")"
. ./lib.sh
NVCC=$(ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/rc.txt
$NVCC -O2 -arch=sm_90 -o /tmp/launch244 launch244.cu >> $OUT/rc.txt 2>&1 && /tmp/launch244 300 30000 > $OUT/launch.txt 2>&1
echo "launch rc=$? $(elapsed)" >> $OUT/rc.txt
ab 3 "1 512 fp8" "1 768 fp8" "1 1024 fp8" "2 512 fp8" "2 1024 fp8" -- a-head:. b-overlap:.,EP_CUDA_OVERLAP_MIN_TOKENS=512
timeout 100 ./ep-gpu bench --backend cuda --ranks 1 --tokens 1 --format bf16 --passes 1 2>&1 | grep -E 'floor|^t1' >> $OUT/rc.txt
cat $OUT/rc.txt $OUT/launch.txt
summary | tee $OUT/summary.txt
