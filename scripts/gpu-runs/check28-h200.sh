#!/usr/bin/env bash
# The commit with FP8's copy-out on 2 blocks per SM (the build whose sweep is h200-x2-2026-11-23, call 8's g264/): suites
# with the defaults and every dispatch overlapped, an FP8 overlapped soak.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
O="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0"
timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance-defaults.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-defaults.txt)" >> $OUT/rc.txt
env $O timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance-all-overlapped.txt 2>&1; echo "conf all-overlapped rc=$? $(tail -n 1 $OUT/conformance-all-overlapped.txt)" >> $OUT/rc.txt
env $O timeout 60 ./ep-gpu soak --backend cuda --rounds 1000 --ranks 2 --format fp8 > $OUT/soak.txt 2>&1; echo "soak fp8 overlapped rc=$? $(tail -n 1 $OUT/soak.txt)" >> $OUT/rc.txt
grep -h -B2 -A12 FAILED $OUT/conformance-*.txt | head -40 > $OUT/fail.txt
cat $OUT/rc.txt
