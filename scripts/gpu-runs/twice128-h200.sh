#!/usr/bin/env bash
# v39 call 3, one H200, bundle built from branch exp-twice (4c8fe14: main's kernels, and in trace builds the single-launch
# dispatch's layout and message copy run a second time, hot: stamps 5 -> 8 and 10 -> 6 time the second runs). Traces of
# 1 token one rank alone (BF16 warm, 256 MiB read before each gate, the same with every buffer read back; FP8 warm) and
# two ranks sharing (BF16 warm). Then the cold that a model's step sees: 256 MiB read, then the phases' inputs read back
# (EP_BENCH_REWARM=inputs), against warm and r256, two reps.
cd "$(dirname "$0")"
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
trace() { local r=$1 f=$2; shift 2; env "$@" EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ./ep-gpu bench --backend cuda --ranks $r --tokens 1 --format $f --passes 1 --rounds 40 2>&1 | grep -E '^trace|^t[0-9]'; }
trace 1 bf16 EP_X=1 > $OUT/trace-1r-bf16-warm.txt
trace 1 bf16 EP_BENCH_EVICT_L2=r256 > $OUT/trace-1r-bf16-r256.txt
trace 1 bf16 EP_BENCH_EVICT_L2=r256 EP_BENCH_REWARM=1 > $OUT/trace-1r-bf16-rewarm.txt
trace 1 fp8 EP_X=1 > $OUT/trace-1r-fp8-warm.txt
trace 2 bf16 EP_X=1 > $OUT/trace-2r-bf16-warm.txt
echo "traces done $(( $(date +%s) - T0 ))s" >> $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { env "$@" timeout 60 ./ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 1 bf16" "1 1 fp8" "2 1 bf16" "2 1 fp8" "1 32 fp8" "1 128 fp8" "2 128 fp8"; do set -- $rt; R=$1 T=$2 F=$3
    b "${R}r $T $F a-warm"; run EP_X=1
    b "${R}r $T $F b-r256"; run EP_BENCH_EVICT_L2=r256
    b "${R}r $T $F c-r256-inputs"; run EP_BENCH_EVICT_L2=r256 EP_BENCH_REWARM=inputs
  done
  echo "rep $rep done $(( $(date +%s) - T0 ))s" >> $OUT/rc.txt
done
cat $OUT/rc.txt
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,5
