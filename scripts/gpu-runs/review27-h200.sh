#!/usr/bin/env bash
# v26's review item in ep_assign_block (one `routed` flag for expert and rank blocks; ep_assign_slots 56 -> 52
# registers, the only kernel whose PTX changed): ./ = that change, base/ = c20a05a (v26), varB/ = the change plus
# 512-thread assign blocks (an experiment, not committed). Suites with the defaults and every phase multi-kernel,
# then an interleaved A/B with the breakdown, two reps.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
mkdir -p /tmp/logs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
suite() { local name=$1; shift; env "$@" timeout 100 ./ep-gpu conformance --backend cuda > /tmp/logs/conformance-$name.txt 2>&1; echo "conf $name rc=$? $(tail -n 1 /tmp/logs/conformance-$name.txt)" >> $OUT/rc.txt; }
suite defaults X=1
suite all-multikernel EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0
grep -h -B2 -A12 FAILED /tmp/logs/conformance-*.txt | head -40 > $OUT/fail.txt
cat $OUT/rc.txt
for rep in 1 2; do
  for tf in "512 bf16" "1024 fp8" "4096 bf16" "4096 fp8"; do
    read -r tok fmt <<< "$tf"
    for v in base new varB; do b=./ep-gpu; [ $v != new ] && b=$v/ep-gpu
      timeout 60 $b bench --backend cuda --tokens $tok --format $fmt --passes 1 --breakdown > /tmp/b.txt 2>&1
      echo "$v $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3, $4, $5}') | $(grep -E '^t[0-9].*\|' /tmp/b.txt | head -1 | cut -c24-)" | tee -a $OUT/ab.txt
    done
  done
done
cat $OUT/rc.txt
