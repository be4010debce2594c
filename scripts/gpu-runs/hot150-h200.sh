#!/usr/bin/env bash
# v41 call 4, one H200: branch exp-hot (the single-launch dispatch's layout and each message's copy run twice, the
# trace stamping after the first, cold, run: 25 and 31): how much of the receivers' steps is code run for the
# first time in the launch (Nsight Compute, call 3: instruction-fetch stalls in the copy path's functions).
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
mkdir -p /tmp/tr
for rtf in "1 1 bf16" "2 1 bf16" "1 1 fp8" "1 128 fp8" "1 32 fp8"; do set -- $rtf
  EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ./ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --passes 1 --rounds 40 2>&1 | grep -E '^trace (dispatch|gate)|^t[0-9]|rror' > /tmp/tr/trace-$1r-$2-$3-hot.txt
done
tar czf $OUT/traces.tgz -C /tmp/tr .
echo "traces done $(elapsed)" >> $OUT/rc.txt
cat $OUT/rc.txt
