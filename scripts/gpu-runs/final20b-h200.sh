#!/usr/bin/env bash
# v20 step 3 (host only: BF16 overlapped from 1024 tokens, FP8's copy-out grid half the SMs): the suite, the sweep.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance.txt 2>&1; echo "conf run1 rc=$? $(tail -n 1 $OUT/conformance.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt
timeout 200 ./ep-gpu bench --backend cuda --sweep --breakdown --out $OUT/sweep.json > $OUT/sweep.txt 2>&1; echo "sweep rc=$?" >> $OUT/rc.txt
cat $OUT/rc.txt
