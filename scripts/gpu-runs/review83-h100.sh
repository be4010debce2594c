#!/usr/bin/env bash
# v33 review, one H100, on the review commit (ep_wait_completed in four combine kernels; layout_seq takes the path):
# suites over every world with the defaults and with every phase multi-kernel (the combine's chained kernels), an
# 8-rank multi-kernel soak.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
M="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0"
timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-defaults.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-defaults.txt)" >> $OUT/rc.txt
env $M timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-multi.txt 2>&1; echo "conf every phase multi-kernel rc=$? $(tail -n 1 $OUT/conformance-multi.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
env $M timeout 100 ./ep-gpu soak --backend cuda --ranks 8 --rounds 300 --format fp8 > /tmp/soak8.txt 2>&1; echo "soak8 fp8 multi-kernel rc=$? $(tail -n 1 /tmp/soak8.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt
