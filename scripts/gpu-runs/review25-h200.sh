#!/usr/bin/env bash
# The review of the change since 0b329d1 (f91a51a: the LL flag from the host, ep_combine_signal with the message counts,
# the combine form derived on the host; 1ddc18c's helpers, PTX identical). ./ = f91a51a, base/ = 15117e4. Suites three
# ways (defaults; every phase multi-kernel; every combine marked), then an interleaved A/B at 1, 128 and 4096 tokens.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
mkdir -p /tmp/logs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
suite() { local name=$1; shift; env "$@" timeout 100 ./ep-gpu conformance --backend cuda > /tmp/logs/conformance-$name.txt 2>&1; echo "conf $name rc=$? $(tail -n 1 /tmp/logs/conformance-$name.txt)" >> $OUT/rc.txt; }
suite run1 X=1
suite all-multikernel EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0
suite all-marked EP_CUDA_MARKED_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0
grep -h -B2 -A12 FAILED /tmp/logs/conformance-*.txt | head -60 > $OUT/fail.txt
cat $OUT/rc.txt
for tf in "1 bf16" "1 fp8" "128 fp8" "4096 bf16"; do set -- $tf
  for v in base new base new; do b=./ep-gpu; [ $v = base ] && b=base/ep-gpu
    timeout 60 $b bench --backend cuda --tokens $1 --format $2 --passes 1 > /tmp/b.txt 2>&1
    echo "$v $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3, $4, $5}')" | tee -a $OUT/ab.txt
  done; done
cat $OUT/rc.txt
