#!/usr/bin/env bash
# v34 call 2, one H100: the signal probes (ep bench --probe-signals) twice, for the spread (with the load-after-stores probe).
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/probe.txt
for i in 1 2; do timeout 120 ./ep-gpu bench --backend cuda --probe-signals >> $OUT/probe.txt 2>&1; echo "rc=$?" >> $OUT/probe.txt; done
cat $OUT/probe.txt
