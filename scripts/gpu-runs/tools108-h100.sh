#!/usr/bin/env bash
# v36 call 8, one H100: after the review (4d179ca: the probe's and the self-check's GPU check and program load are one
# function; host only). The FP8 division check and the new case through `ep conformance` (filter every_bf16), the
# signal probes (`ep bench --probe-signals`), and the suite with the defaults once more.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
timeout 100 ./ep-gpu conformance --backend cuda --filter every_bf16 > $OUT/conformance-filter.txt 2>&1; echo "conf --filter every_bf16 rc=$?" >> $OUT/rc.txt
cat $OUT/conformance-filter.txt >> $OUT/rc.txt
timeout 200 ./ep-gpu bench --backend cuda --probe-signals > $OUT/probe.txt 2>&1; echo "probe-signals rc=$? $(wc -l < $OUT/probe.txt) lines" >> $OUT/rc.txt
head -5 $OUT/probe.txt >> $OUT/rc.txt
t0=$(date +%s); timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-defaults.txt 2>&1; echo "conf defaults rc=$? $(( $(date +%s) - t0 ))s $(tail -n 1 $OUT/conformance-defaults.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt
