#!/usr/bin/env bash
# v22 final (0dbe4f5, the same build as try22-h200.sh's, whose suites passed just before): the sweep, then a 3000-round soak.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
timeout 300 ./ep-gpu bench --backend cuda --sweep --breakdown --out $OUT/sweep.json > $OUT/sweep.txt 2>&1; echo "sweep rc=$?" >> $OUT/rc.txt
timeout 100 ./ep-gpu soak --backend cuda --rounds 3000 --ranks 2 > $OUT/soak.txt 2>&1; echo "soak rc=$? $(tail -n 1 $OUT/soak.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt
