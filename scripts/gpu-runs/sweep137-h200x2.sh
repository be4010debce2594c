#!/usr/bin/env bash
# v40 call 1, 2x H200 over NVLink (first lent since v29): HEAD (v39 as reviewed, kernels 43074f4) checked, then
# the sweep that replaces v29's committed one; v29/ (2d6de28, the committed sweep's build) against HEAD at decode
# sizes, two reps interleaved; the LL dispatch messages (ll/ = exp-ll 3dd9722 against llbase/ = 2b6f4e1, its revert)
# on real NVLink; the model's-step cold mode; a trace of the 1-token and 128-token FP8 phases on rank 0; memcheck.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; nvidia-smi topo -m | head -4; } > $OUT/rc.txt
conf defaults EP_CUDA_LOG_WAITS=1
cp /tmp/conformance-defaults.txt $OUT/conformance.txt
timeout 200 ./ep-gpu bench --backend cuda --sweep --breakdown --out $OUT/sweep.json > $OUT/sweep.txt 2>&1; echo "sweep rc=$? $(elapsed)" >> $OUT/rc.txt
R=2
for rep in 1 2; do
  for tf in "1 bf16" "1 fp8" "32 fp8" "128 fp8" "128 bf16"; do set -- $tf; T=$1 F=$2
    b "2r $T $F a-v29"; run v29
    b "2r $T $F b-head"; run .
  done
done
echo "v29 a/b done $(elapsed)" >> $OUT/rc.txt
for rep in 1 2; do
  for tf in "1 bf16" "1 fp8" "8 fp8"; do set -- $tf; T=$1 F=$2
    b "2r $T $F c-llbase"; run llbase
    b "2r $T $F d-ll"; run ll
  done
done
echo "ll a/b done $(elapsed)" >> $OUT/rc.txt
for rep in 1 2; do
  for tf in "1 bf16" "128 fp8"; do set -- $tf; T=$1 F=$2
    b "2r $T $F e-head-warm"; run . EP_X=1
    b "2r $T $F f-head-r256-inputs"; run . EP_BENCH_EVICT_L2=r256 EP_BENCH_REWARM=inputs
  done
done
echo "cold done $(elapsed)" >> $OUT/rc.txt
for tf in "1 bf16" "128 fp8"; do set -- $tf
  EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ./ep-gpu bench --backend cuda --ranks 2 --tokens $1 --format $2 --passes 1 --rounds 40 2>&1 | grep -E '^trace|^t[0-9]|rror' > $OUT/trace-$1-$2.txt
done
echo "traces done $(elapsed)" >> $OUT/rc.txt
memcheck 2r-defaults 2 10
echo "all done $(elapsed)" >> $OUT/rc.txt
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
