#!/usr/bin/env bash
# v35 call 2, one H100: where the LL dispatch messages' time goes. Traces (every block, one rank alone) of 1 token
# BF16 and 8 tokens FP8, LL off (EP_CUDA_LL_DISPATCH_MAX_TOKENS=0) and on; then base/ = c4a2916 against off and LL
# (the LL unpack's shared memory now only when some rank may send LL: off at 16 tokens against LL's bound of 8 at 16
# tokens, where no round is LL, says what the larger shared memory costs), two reps interleaved.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
S="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000"
for v in "off EP_CUDA_LL_DISPATCH_MAX_TOKENS=0" "ll EP_X=1"; do set -- $v
  for tf in "1 bf16" "8 fp8"; do set -- $v $tf
    echo "# 1r $3-$4 $1" >> $OUT/traces.txt
    env $2 EP_CUDA_TRACE=all timeout 60 ./ep-gpu bench --backend cuda --ranks 1 --tokens $3 --format $4 --passes 1 --rounds 40 2>&1 | grep -E '^trace|^t[0-9]' >> $OUT/traces.txt
  done
done
echo "traces rc=$?" >> $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { local dir=$1; shift; env "$@" timeout 60 $dir/ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 1 bf16" "1 2 bf16" "1 4 bf16" "1 4 fp8" "1 16 bf16" "1 16 fp8"; do set -- $rt; R=$1 T=$2 F=$3
    b "${R}r $T $F a-base"; run base EP_X=1
    b "${R}r $T $F b-off"; run . EP_CUDA_LL_DISPATCH_MAX_TOKENS=0
    b "${R}r $T $F c-ll"; run . EP_X=1
  done
  for rt in "2 8 fp8" "2 8 bf16"; do set -- $rt; R=$1 T=$2 F=$3
    b "${R}r $T $F a-base"; run base $S
    b "${R}r $T $F b-off"; run . $S EP_CUDA_LL_DISPATCH_MAX_TOKENS=0
    b "${R}r $T $F c-ll"; run . $S
  done
done
cat $OUT/rc.txt
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
