#!/usr/bin/env bash
# v48 call 11 (one H200): skewed routing (--skewed: half of the routed slots to a sixteenth of the experts, the sweep's
# skewed scenarios) at 1024-4096 tokens FP8 and 4096 BF16, HEAD (7592cc5, v48's kernels) against v47 (0cd29bf in base/).
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
for rep in 1 2; do for sc in "1 1024 fp8" "1 4096 fp8" "2 1024 fp8" "2 4096 fp8" "1 4096 bf16" "2 4096 bf16"; do
  set -- $sc
  for lb in a-v47:base b-v48:.; do
    b "${1}r $2 $3 skewed ${lb%%:*}"
    timeout 60 ${lb#*:}/ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --skewed --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt
  done
done; done
echo "a/b done $(elapsed)" >> $OUT/rc.txt
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
