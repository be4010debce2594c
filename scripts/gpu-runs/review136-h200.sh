#!/usr/bin/env bash
# v39 review call 11, one H200: HEAD after the review (ep bench's one read kernel ep_bench_read, the NCCL baseline read
# back under EP_BENCH_REWARM as ep's phases; the kernels of the phases are 43074f4's, unchanged). Each cold mode once,
# one rank (so that the NCCL baseline runs too, one rank per GPU) and two ranks sharing the GPU; a bad setting's error.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
for rt in "1 1 bf16" "1 128 fp8" "2 1 bf16"; do set -- $rt; R=$1 T=$2 F=$3
  for rep in 1 2; do
    b "${R}r $T $F a-warm"; run . EP_X=1
    b "${R}r $T $F b-write256"; run . EP_BENCH_EVICT_L2=1
    b "${R}r $T $F c-r256"; run . EP_BENCH_EVICT_L2=r256
    b "${R}r $T $F d-r256-inputs"; run . EP_BENCH_EVICT_L2=r256 EP_BENCH_REWARM=inputs
    b "${R}r $T $F e-r256-all"; run . EP_BENCH_EVICT_L2=r256 EP_BENCH_REWARM=1
  done
done
echo "benches done $(elapsed)" >> $OUT/rc.txt
EP_BENCH_REWARM=1 timeout 30 ./ep-gpu bench --backend cuda --ranks 1 --tokens 1 --passes 1 >> $OUT/rc.txt 2>&1; echo "rewarm without evict rc=$?" >> $OUT/rc.txt
cat $OUT/rc.txt
summary
# Full lines (NCCL columns) for one rank, 1 token.
awk '/^== 1r 1 bf16/{l=$0; next} /^== /{l=""} l && /^t1/{print l; print}' $OUT/ab.txt
