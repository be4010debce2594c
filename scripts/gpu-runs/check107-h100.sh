#!/usr/bin/env bash
# v36 call 7, one H100: the code as submitted (af211b4's kernels) checked: every world with the defaults (with the
# device's FP8 division self-check), with every phase single-launch, and with every BF16 overlapped round lean;
# memcheck on single-launch FP8 and lean BF16 soaks; 300-round 8-rank soaks (single-launch FP8, defaults BF16). Then
# base = 824ba0b against it at the lean sizes and 1 token, reps interleaved.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
S="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000"
L="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_LEAN_MIN_TOKENS=1"
conf() { local name=$1; shift; local t0=$(date +%s); env "$@" timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-$name.txt 2>&1; echo "conf $name rc=$? $(( $(date +%s) - t0 ))s $(tail -n 1 $OUT/conformance-$name.txt)" >> $OUT/rc.txt; }
conf defaults EP_X=1
conf single $S
conf lean $L
grep -h "FP8 division" $OUT/conformance-defaults.txt >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
env $S EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 100 ./ep-gpu soak --backend cuda --ranks 2 --rounds 10 --format fp8 > $OUT/sanitizers.txt 2>&1; echo "memcheck soak2 fp8 single rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' $OUT/sanitizers.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $L EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 100 ./ep-gpu soak --backend cuda --ranks 2 --rounds 10 --format bf16 >> $OUT/sanitizers.txt 2>&1; echo "memcheck soak2 bf16 lean rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' $OUT/sanitizers.txt | tail -n 2 | tr '\n' ' ')" >> $OUT/rc.txt
env $S timeout 100 ./ep-gpu soak --backend cuda --ranks 8 --rounds 300 --format fp8 > /tmp/soak8.txt 2>&1; echo "soak8 fp8 single rc=$? $(tail -n 1 /tmp/soak8.txt)" >> $OUT/rc.txt
timeout 100 ./ep-gpu soak --backend cuda --ranks 8 --rounds 300 --format bf16 > /tmp/soak8b.txt 2>&1; echo "soak8 bf16 defaults rc=$? $(tail -n 1 /tmp/soak8b.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { local dir=$1; shift; env "$@" timeout 60 $dir/ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 4096 bf16" "1 3072 bf16" "1 4096 fp8" "1 1 fp8" "1 128 fp8" "2 4096 bf16"; do set -- $rt; R=$1 T=$2 F=$3
    b "${R}r $T $F a-base"; run base EP_X=1
    b "${R}r $T $F b-new"; run . EP_X=1
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
