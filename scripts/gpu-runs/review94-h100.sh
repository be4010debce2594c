#!/usr/bin/env bash
# v34 review, one H100, on the review commit (one Program loader for every kernel and the probe): every world with the
# defaults, and the probes once (the on-demand program, its printout's order).
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-defaults.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-defaults.txt)" >> $OUT/rc.txt
timeout 60 ./ep-gpu bench --backend cuda --probe-signals > $OUT/probe.txt 2>&1; echo "probe rc=$?" >> $OUT/rc.txt
cat $OUT/rc.txt
grep -E "globaltimer|1 pollers x   1 words  publish Fence    poll Acquire    nap   64 ns  payload     0 B|code fetch, launch 1|warp 0|stores     0 B  (Acquire|FenceSys|FenceGpu) " $OUT/probe.txt
