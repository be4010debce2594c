#!/usr/bin/env bash
# The review of v26 (18171a3: send_threads / overlap_copy_grid instead of BlockShape, host only, shapes and PTX unchanged):
# suites with the defaults and every dispatch overlapped, then an A/B against e304ed4 (base/, the sweep's code) at 512 and
# 1024 FP8 (sequential, 256-thread sends) and 4096 FP8 uniform and skewed (overlapped, 264 copy blocks), one rep each.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
O="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0"
timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance-defaults.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-defaults.txt)" >> $OUT/rc.txt
env $O timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance-all-overlapped.txt 2>&1; echo "conf all-overlapped rc=$? $(tail -n 1 $OUT/conformance-all-overlapped.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt
for tf in "512 fp8" "1024 fp8" "4096 fp8" "4096 fp8 --skewed"; do read -r tok fmt skew <<< "$tf"
  for v in base new; do b=./ep-gpu; [ $v = base ] && b=base/ep-gpu
    timeout 60 $b bench --backend cuda --tokens $tok --format $fmt $skew --passes 1 --breakdown > /tmp/b.txt 2>&1
    echo "$v $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3, $4, $5}') | $(grep -E '^t[0-9].*\|' /tmp/b.txt | head -1 | cut -c24-)" | tee -a $OUT/ab.txt
  done; done
cat $OUT/rc.txt
