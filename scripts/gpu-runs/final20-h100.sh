#!/usr/bin/env bash
# v20 on one H100: every world of 2, 4 and 8 ranks on the one GPU (the assign's rank blocks for p >= 2), defaults and every
# dispatch overlapped; 8- and 4-rank soaks.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-cuda-h100.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-cuda-h100.txt)" >> $OUT/rc.txt
env EP_CUDA_OVERLAP_MIN_TOKENS=1 timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-cuda-h100-all-overlapped.txt 2>&1; echo "conf all-overlapped rc=$? $(tail -n 1 $OUT/conformance-cuda-h100-all-overlapped.txt)" >> $OUT/rc.txt
grep -h -A3 FAILED $OUT/conformance-*.txt | head
timeout 60 ./ep-gpu soak --backend cuda --ranks 8 --rounds 300 > $OUT/soak8.txt 2>&1; echo "soak8 rc=$? $(tail -n 1 $OUT/soak8.txt)" >> $OUT/rc.txt
timeout 60 ./ep-gpu soak --backend cuda --ranks 4 --rounds 300 > $OUT/soak4.txt 2>&1; echo "soak4 rc=$? $(tail -n 1 $OUT/soak4.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt
