#!/usr/bin/env bash
# v35 call 3, one H100: the LL receive and send not inlined, the receive's tries polling both pieces at once. Checks
# (every phase single-launch with every dispatch LL; LL senders of at most 4 tokens to the overlapped copy-out), then
# base/ = c4a2916 against off (EP_CUDA_LL_DISPATCH_MAX_TOKENS=0) and LL, two reps interleaved, then traces of LL.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
S="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000"
conf() { local name=$1; shift; local t0=$(date +%s); env "$@" timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-$name.txt 2>&1; echo "conf $name rc=$? $(( $(date +%s) - t0 ))s $(tail -n 1 $OUT/conformance-$name.txt)" >> $OUT/rc.txt; }
conf single-ll-all $S EP_CUDA_LL_DISPATCH_MAX_TOKENS=1000000
conf ll4-to-overlapped EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=4 EP_CUDA_OVERLAP_MIN_TOKENS=5
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { local dir=$1; shift; env "$@" timeout 60 $dir/ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 1 bf16" "1 1 fp8" "1 4 bf16" "1 8 bf16" "1 8 fp8" "1 16 fp8" "2 1 bf16" "2 1 fp8"; do set -- $rt; R=$1 T=$2 F=$3
    b "${R}r $T $F a-base"; run base EP_X=1
    b "${R}r $T $F b-off"; run . EP_CUDA_LL_DISPATCH_MAX_TOKENS=0
    b "${R}r $T $F c-ll"; run . EP_X=1
  done
  for rt in "2 8 fp8"; do set -- $rt; R=$1 T=$2 F=$3
    b "${R}r $T $F a-base"; run base $S
    b "${R}r $T $F b-off"; run . $S EP_CUDA_LL_DISPATCH_MAX_TOKENS=0
    b "${R}r $T $F c-ll"; run . $S
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
for tf in "1 bf16" "8 fp8"; do set -- $tf
  echo "# 1r $1-$2 ll" >> $OUT/traces.txt
  EP_CUDA_TRACE=all timeout 60 ./ep-gpu bench --backend cuda --ranks 1 --tokens $1 --format $2 --passes 1 --rounds 40 2>&1 | grep -E '^trace|^t[0-9]' >> $OUT/traces.txt
done
echo "traces rc=$?"
