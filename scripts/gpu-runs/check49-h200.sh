#!/usr/bin/env bash
# v28's build (v28/ = 86a6753, the code of 12f6fcb) on 2x H200: the suite with every dispatch overlapped, placed and
# marked, and with every dispatch overlapped on a 1-block copy-out; 400-round overlapped soaks; memcheck on an
# overlapped soak.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
O="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0"
W="EP_CUDA_OWN_ROWS_WAIT_NS=2000000 EP_CUDA_MARKED_MIN_TOKENS=1"
env $O $W timeout 100 v28/ep-gpu conformance --backend cuda > $OUT/conf-overlapped-placed-marked.txt 2>&1; echo "conf all-overlapped placed marked rc=$? $(tail -n 1 $OUT/conf-overlapped-placed-marked.txt)" >> $OUT/rc.txt
env $O EP_CUDA_OVERLAP_COPY_BLOCKS=1 timeout 100 v28/ep-gpu conformance --backend cuda > /tmp/c3.txt 2>&1; echo "conf all-overlapped 1-block copy rc=$? $(tail -n 1 /tmp/c3.txt)" >> $OUT/rc.txt
for f in fp8 bf16; do env $O timeout 60 v28/ep-gpu soak --backend cuda --rounds 400 --format $f > /tmp/s.txt 2>&1; echo "soak $f overlapped rc=$? $(tail -n 1 /tmp/s.txt)" >> $OUT/rc.txt; done
env $O EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 120 v28/ep-gpu soak --backend cuda --rounds 10 --format bf16 > /tmp/m.txt 2>&1; echo "memcheck soak bf16 overlapped rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' /tmp/m.txt | tr '\n' ' ')" >> $OUT/rc.txt
cat $OUT/rc.txt
