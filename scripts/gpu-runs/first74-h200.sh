#!/usr/bin/env bash
# v32 call 6, one H200 (the sweep's GPU model, without its NVLink peer), on a2ea689: layout-first (the default from 512
# for a rank alone; forced where two ranks share the GPU) against off, two reps interleaved.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 ./ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 512 fp8" "1 1024 fp8" "1 512 bf16" "2 512 fp8" "2 1024 fp8" "2 512 bf16"; do set -- $rt
    b "${1}r $2 $3 layout-first"; (export EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=512; run $1 $2 $3)
    b "${1}r $2 $3 off"; (export EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=0; run $1 $2 $3)
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4 > $OUT/summary.txt
cat $OUT/summary.txt
