#!/usr/bin/env bash
# v34 call 5, one H100: unroll/ = branch exp-unroll (ep_copy_to's destination loops not unrolled: the single-launch
# BF16 dispatch 115 -> 102 KB of SASS) against main (the per-format single-launch dispatch), decode and prefill sizes,
# two reps interleaved; conformance (defaults) on unroll/.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
timeout 170 unroll/ep-gpu conformance --backend cuda > $OUT/conformance-unroll.txt 2>&1; echo "conf unroll defaults rc=$? $(tail -n 1 $OUT/conformance-unroll.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 90 $1/ep-gpu bench --backend cuda --ranks $2 --tokens $3 --format $4 --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 1 bf16" "1 1 fp8" "1 32 bf16" "1 128 bf16" "1 128 fp8" "2 1 bf16" "1 4096 bf16" "1 4096 fp8" "2 1024 bf16"; do set -- $rt
    b "${1}r $2 $3 a-main"; run . $1 $2 $3
    b "${1}r $2 $3 b-unroll"; run unroll $1 $2 $3
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
