#!/usr/bin/env bash
# v28: the trace records printed when a rank's communicator drops (every command, not only ep bench), on one H100:
# ep run --backend cuda (the demo; the first form of this script ran it on the simulator, which has no trace) with EP_CUDA_TRACE=1, and ep bench with EP_CUDA_TRACE=all on rank 0, summarised by trace_grid.py.
cd "$(dirname "$0")"
EP_CUDA_TRACE=1 timeout 60 ./ep-gpu run --backend cuda > /tmp/run.txt 2>&1; echo "run rc=$? trace lines $(grep -c '^trace' /tmp/run.txt); kernels: $(grep '^trace' /tmp/run.txt | awk '{print $2}' | sort | uniq -c | tr '\n' ' ')"
tail -3 /tmp/run.txt
EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 90 ./ep-gpu bench --backend cuda --tokens 4096 --format bf16 --passes 1 --rounds 2 > /tmp/t.txt 2>&1; echo "bench rc=$? trace lines $(grep -c '^trace' /tmp/t.txt)"
grep -E "^t[0-9]|dropped" /tmp/t.txt
python3 trace_grid.py /tmp/t.txt | head -30
