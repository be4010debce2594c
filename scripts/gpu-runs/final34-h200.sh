#!/usr/bin/env bash
# v27, call 5 (6764582: FP8's send blocks write the rank's own rows, copy grid 3/2 per SM; ep_send_token and ep_mark_landed
# read the placed rank once, after call 4's sweep read the 32-token dispatch 3% slower): suites with the defaults, every
# dispatch overlapped, and every dispatch overlapped with the send blocks waiting for the layout and every combine
# marked; an A/B of the decode dispatch against 6cac42d (base/), two reps interleaved; the sweep; an FP8 overlapped soak.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
O="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0"
W="EP_CUDA_OWN_ROWS_WAIT_NS=2000000 EP_CUDA_MARKED_MIN_TOKENS=1"
timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance-defaults.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-defaults.txt)" >> $OUT/rc.txt
env $O timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance-all-overlapped.txt 2>&1; echo "conf all-overlapped rc=$? $(tail -n 1 $OUT/conformance-all-overlapped.txt)" >> $OUT/rc.txt
env $O $W timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance-all-overlapped-placed-marked.txt 2>&1; echo "conf all-overlapped placed marked rc=$? $(tail -n 1 $OUT/conformance-all-overlapped-placed-marked.txt)" >> $OUT/rc.txt
grep -h -B2 -A12 FAILED $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
cat $OUT/rc.txt
for rep in 1 2; do for tf in "1 fp8" "32 bf16" "32 fp8" "128 fp8"; do read -r tok fmt <<< "$tf"
  for v in base new; do b=./ep-gpu; [ $v = base ] && b=base/ep-gpu
    timeout 60 $b bench --backend cuda --tokens $tok --format $fmt --passes 1 > /tmp/b.txt 2>&1
    echo "$v $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3, $4, $5}')" | tee -a $OUT/ab.txt
  done; done; done
timeout 200 ./ep-gpu bench --backend cuda --sweep --breakdown --out $OUT/sweep.json > $OUT/sweep.txt 2>&1; echo "sweep rc=$?" >> $OUT/rc.txt
env $O timeout 60 ./ep-gpu soak --backend cuda --rounds 1000 --ranks 2 --format fp8 > /tmp/soak.txt 2>&1; echo "soak fp8 overlapped rc=$? $(tail -n 1 /tmp/soak.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt
