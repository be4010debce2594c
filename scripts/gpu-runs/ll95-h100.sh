#!/usr/bin/env bash
# v35 call 1, one H100, on the LL dispatch messages (a single-launch sender with at most
# EP_CUDA_LL_DISPATCH_MAX_TOKENS tokens): checks (every world with the defaults; every phase single-launch with every
# dispatch LL; LL senders of at most 4 tokens to the chain's and to the overlapped copy-outs; memcheck and racecheck on
# all-LL soaks), then LL against not (the same build, EP_CUDA_LL_DISPATCH_MAX_TOKENS=0) and base/ = c4a2916, two reps
# interleaved, and a trace of a 1-token BF16 dispatch with LL.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
S="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000"
LLALL="EP_CUDA_LL_DISPATCH_MAX_TOKENS=1000000"
conf() { local name=$1; shift; local t0=$(date +%s); env "$@" timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-$name.txt 2>&1; echo "conf $name rc=$? $(( $(date +%s) - t0 ))s $(tail -n 1 $OUT/conformance-$name.txt)" >> $OUT/rc.txt; }
conf defaults EP_X=1
conf single-ll-all $S $LLALL
conf ll4-to-chain EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=4
conf ll4-to-overlapped EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=4 EP_CUDA_OVERLAP_MIN_TOKENS=5
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
env $S $LLALL EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 100 ./ep-gpu soak --backend cuda --ranks 2 --rounds 10 --format fp8 > $OUT/memcheck-ll.txt 2>&1; echo "memcheck soak2 fp8 single ll rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' $OUT/memcheck-ll.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $S $LLALL EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 100 ./ep-gpu soak --backend cuda --ranks 2 --rounds 5 --format bf16 > $OUT/racecheck-ll.txt 2>&1; echo "racecheck soak2 bf16 single ll rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|rounds matched' $OUT/racecheck-ll.txt | tr '\n' ' ')" >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { local dir=$1; shift; env "$@" timeout 60 $dir/ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 1 bf16" "1 1 fp8" "1 8 bf16" "1 8 fp8" "2 1 bf16" "2 1 fp8"; do set -- $rt; R=$1 T=$2 F=$3
    b "${R}r $T $F a-base"; run base EP_X=1
    b "${R}r $T $F b-off"; run . EP_CUDA_LL_DISPATCH_MAX_TOKENS=0
    b "${R}r $T $F c-ll"; run . EP_X=1
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
EP_CUDA_TRACE=all timeout 60 ./ep-gpu bench --backend cuda --ranks 1 --tokens 1 --format bf16 --passes 1 --rounds 40 > $OUT/trace-1r-1-bf16.txt 2>&1; echo "trace rc=$?"
