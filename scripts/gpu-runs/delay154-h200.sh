#!/usr/bin/env bash
# v41 call 8, one H200: branch exp-delay (v40's kernels + EP_CUDA_DELAY=site:ns, a 1 us spin of every thread of a
# block at one site of the single-launch dispatch): how much each site's delay adds to the phase says how much slack
# it has. Sites: 1 a sending block after its route, 2 after its marks, 3 the counting block before it publishes,
# 4 a receiving block once it has the counts, 5 after the layout. The bench does not check results (a delay changes
# no output); the suite is not run.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
for rep in 1 2; do
  for rtf in "1 1 bf16" "2 1 bf16" "1 1 fp8" "1 8 fp8" "1 32 fp8" "1 128 fp8"; do set -- $rtf; R=$1 T=$2 F=$3
    b "${R}r $T $F d0-none"; run .
    for site in 1 2 3 4 5; do b "${R}r $T $F d$site-1us"; run . EP_CUDA_DELAY=$site:1000; done
  done
done
echo "delays done $(elapsed)" >> $OUT/rc.txt
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
