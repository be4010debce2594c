#!/usr/bin/env bash
# After the reduce-argument refactor (host only): on one H100, every world, the suite with every phase multi-kernel (the
# reduce) and with every combine marked (the marked reduce, and the reduce after the marks' wait).
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
env EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0 timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conf-multikernel.txt 2>&1; echo "conf all-multikernel rc=$? $(tail -n 1 $OUT/conf-multikernel.txt)" >> $OUT/rc.txt
env EP_CUDA_MARKED_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conf-marked.txt 2>&1; echo "conf all-marked rc=$? $(tail -n 1 $OUT/conf-marked.txt)" >> $OUT/rc.txt
grep -h -A3 FAILED $OUT/conf-*.txt | head
cat $OUT/rc.txt
