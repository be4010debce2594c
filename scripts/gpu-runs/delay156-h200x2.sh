#!/usr/bin/env bash
# v41 call 10, 2x H200: causal profiling of main's single-launch dispatch (EP_CUDA_DELAY=site:1000; call 8 did it on
# one H200, where every site of a 1-token dispatch was on the path): which chains set the pace across NVLink.
# Sites: 1 a sending block after its route, 2 after its marks, 3 the counting block before it publishes, 4 a
# receiving block once it has the counts, 5 after the layout.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
for rep in 1 2; do
  for rtf in "2 1 bf16" "2 1 fp8" "2 128 fp8"; do set -- $rtf; R=$1 T=$2 F=$3
    b "${R}r $T $F d0-none"; run .
    for site in 1 2 3 4 5; do b "${R}r $T $F d$site-1us"; run . EP_CUDA_DELAY=$site:1000; done
  done
done
echo "delays done $(elapsed)" >> $OUT/rc.txt
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
