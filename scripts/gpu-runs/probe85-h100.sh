#!/usr/bin/env bash
# v34 call 2, one H100: the signal probes (ep bench --probe-signals) twice, for the spread (with the load-after-stores probe).
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/probe.txt
for i in 1 2; do timeout 120 ./ep-gpu bench --backend cuda --probe-signals >> $OUT/probe.txt 2>&1; echo "rc=$?" >> $OUT/probe.txt; done
# and a trace of HEAD's 1-token BF16 dispatch, two ranks sharing (rank 0, every block), to set beside the probes
EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 120 ./ep-gpu bench --backend cuda --ranks 2 --tokens 1 --format bf16 --passes 1 --rounds 40 > $OUT/trace-1tok-bf16.txt 2>&1; echo "trace rc=$?" >> $OUT/probe.txt
cat $OUT/probe.txt
