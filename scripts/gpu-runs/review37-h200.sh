#!/usr/bin/env bash
# v27 review, call 10: the host's fork / join / launch_beside (one helper for the copy stream, both phases; host only):
# suites with the defaults and with every dispatch overlapped, the rows path forced and every combine marked (both phases
# beside their sends); then 4096-token rounds, BF16 and FP8, against 124be06 (base/), one rep interleaved.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
O="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_OWN_ROWS_WAIT_NS=2000000 EP_CUDA_MARKED_MIN_TOKENS=1"
timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance-defaults.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-defaults.txt)" >> $OUT/rc.txt
env $O timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance-all-overlapped-placed-marked.txt 2>&1; echo "conf all-overlapped placed marked rc=$? $(tail -n 1 $OUT/conformance-all-overlapped-placed-marked.txt)" >> $OUT/rc.txt
grep -h -B2 -A12 FAILED $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
cat $OUT/rc.txt
for f in bf16 fp8; do for v in base new; do b=./ep-gpu; [ $v = base ] && b=base/ep-gpu
  timeout 60 $b bench --backend cuda --tokens 4096 --format $f --passes 1 --breakdown > /tmp/b.txt 2>&1
  echo "$v $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3, $4, $5}')" | tee -a $OUT/ab.txt
done; done
