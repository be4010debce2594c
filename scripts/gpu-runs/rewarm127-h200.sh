#!/usr/bin/env bash
# v39 call 2, one H200, kernels as v38 (HEAD 05d37ac's + the bench's EP_BENCH_REWARM): warm, 256 MiB read before each gate
# (r256), and r256 with every buffer of the phases read back after it (EP_BENCH_REWARM=1: data and translations warm,
# code cold). Two reps interleaved; then traces of 1 token BF16 one rank alone for r256 and r256 + rewarm.
cd "$(dirname "$0")"
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { env "$@" timeout 60 ./ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 1 bf16" "1 1 fp8" "2 1 bf16" "1 32 fp8" "1 128 fp8"; do set -- $rt; R=$1 T=$2 F=$3
    b "${R}r $T $F a-warm"; run EP_X=1
    b "${R}r $T $F b-r256"; run EP_BENCH_EVICT_L2=r256
    b "${R}r $T $F c-r256-rewarm"; run EP_BENCH_EVICT_L2=r256 EP_BENCH_REWARM=1
  done
  echo "rep $rep done $(( $(date +%s) - T0 ))s" >> $OUT/rc.txt
done
trace() { env "$@" EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ./ep-gpu bench --backend cuda --ranks 1 --tokens 1 --format bf16 --passes 1 --rounds 40 2>&1 | grep -E '^trace|^t[0-9]'; }
trace EP_X=1 > $OUT/trace-warm.txt
trace EP_BENCH_EVICT_L2=r256 > $OUT/trace-r256.txt
trace EP_BENCH_EVICT_L2=r256 EP_BENCH_REWARM=1 > $OUT/trace-rewarm.txt
echo "traces done $(( $(date +%s) - T0 ))s" >> $OUT/rc.txt
cat $OUT/rc.txt
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,5
