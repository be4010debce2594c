#!/usr/bin/env bash
# v27, call 7 (03c4393) on one H100: every world of 2, 4 and 8 ranks on the one GPU, with the defaults, and with every
# dispatch overlapped and the send blocks waiting for the layout (every format placing its rows); an 8-rank FP8
# overlapped soak with the rows placed.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
O="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0"
W="EP_CUDA_OWN_ROWS_WAIT_NS=2000000"
timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-cuda-h100.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-cuda-h100.txt)" >> $OUT/rc.txt
env $O $W EP_CUDA_OWN_ROWS=1 timeout 200 ./ep-gpu conformance --backend cuda > $OUT/conformance-cuda-h100-all-overlapped-placed.txt 2>&1; echo "conf all-overlapped placed every format rc=$? $(tail -n 1 $OUT/conformance-cuda-h100-all-overlapped-placed.txt)" >> $OUT/rc.txt
grep -h -A3 FAILED $OUT/conformance-*.txt | head >> $OUT/rc.txt
env $O $W timeout 80 ./ep-gpu soak --backend cuda --ranks 8 --rounds 300 --format fp8 > /tmp/soak8.txt 2>&1; echo "soak8 fp8 overlapped placed rc=$? $(tail -n 1 /tmp/soak8.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt
