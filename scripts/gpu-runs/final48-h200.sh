#!/usr/bin/env bash
# v28's sweep on 2x H200 (v28/ = 86a6753, the code of 12f6fcb), then its suite with the defaults if time is left.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
timeout 470 v28/ep-gpu bench --backend cuda --sweep --breakdown --out $OUT/sweep.json > $OUT/sweep.txt 2>&1; echo "sweep rc=$?" >> $OUT/rc.txt
timeout 100 v28/ep-gpu conformance --backend cuda > $OUT/conformance.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt; tail -n 5 $OUT/sweep.txt
