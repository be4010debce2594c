#!/usr/bin/env bash
# v22 (0dbe4f5) on one H100: every world of 2, 4 and 8 ranks on the one GPU (ranks sharing it: the reduce beside the send
# gets two thirds of each rank's share of the SMs), defaults, every round marked (sequential and overlapped dispatch);
# 8-rank soak marked, 4-rank soak with the defaults.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
M="EP_CUDA_MARKED_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0"
timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-cuda-h100.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-cuda-h100.txt)" >> $OUT/rc.txt
env $M timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-cuda-h100-all-marked.txt 2>&1; echo "conf all-marked rc=$? $(tail -n 1 $OUT/conformance-cuda-h100-all-marked.txt)" >> $OUT/rc.txt
env $M EP_CUDA_OVERLAP_MIN_TOKENS=1 timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-cuda-h100-all-marked-overlapped.txt 2>&1; echo "conf all-marked-overlapped rc=$? $(tail -n 1 $OUT/conformance-cuda-h100-all-marked-overlapped.txt)" >> $OUT/rc.txt
grep -h -A3 FAILED $OUT/conformance-*.txt | head
env $M timeout 60 ./ep-gpu soak --backend cuda --ranks 8 --rounds 300 > $OUT/soak8.txt 2>&1; echo "soak8 marked rc=$? $(tail -n 1 $OUT/soak8.txt)" >> $OUT/rc.txt
timeout 60 ./ep-gpu soak --backend cuda --ranks 4 --rounds 300 > $OUT/soak4.txt 2>&1; echo "soak4 rc=$? $(tail -n 1 $OUT/soak4.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt
