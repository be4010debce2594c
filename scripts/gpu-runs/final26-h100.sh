#!/usr/bin/env bash
# v26 (12476b5) on one H100: every world of 2, 4 and 8 ranks on the one GPU (ranks sharing it, so each rank's
# overlapped copy-out gets 5/3 blocks per SM of its share), defaults and every dispatch overlapped; 8-rank FP8
# overlapped soak, 4-rank soak with the defaults.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
O="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0"
timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-cuda-h100.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-cuda-h100.txt)" >> $OUT/rc.txt
env $O timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-cuda-h100-all-overlapped.txt 2>&1; echo "conf all-overlapped rc=$? $(tail -n 1 $OUT/conformance-cuda-h100-all-overlapped.txt)" >> $OUT/rc.txt
grep -h -A3 FAILED $OUT/conformance-*.txt | head
env $O timeout 60 ./ep-gpu soak --backend cuda --ranks 8 --rounds 300 --format fp8 > $OUT/soak8.txt 2>&1; echo "soak8 fp8 overlapped rc=$? $(tail -n 1 $OUT/soak8.txt)" >> $OUT/rc.txt
timeout 60 ./ep-gpu soak --backend cuda --ranks 4 --rounds 300 > $OUT/soak4.txt 2>&1; echo "soak4 rc=$? $(tail -n 1 $OUT/soak4.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt
