#!/usr/bin/env bash
# v36 call 5, one H200: the code as submitted (0bc0391) against base = 824ba0b (v35). Checks first: every world with
# the defaults (with the device's FP8 division self-check) and every phase single-launch; memcheck on a single-launch
# FP8 soak, racecheck on a BF16 one, a 300-round 8-rank single-launch FP8 soak. A negative control: broken/ is the same
# code with ep_div_normal's correction step taken out (x times the reciprocal, not exact); its self-check must fail,
# and so should the FP8 rounds of every_bf16_magnitude (and, for comparison, of the uniform fixture). Then the A/B, reps
# interleaved.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
S="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000"
conf() { local name=$1; shift; local t0=$(date +%s); env "$@" timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-$name.txt 2>&1; echo "conf $name rc=$? $(( $(date +%s) - t0 ))s $(tail -n 1 $OUT/conformance-$name.txt)" >> $OUT/rc.txt; }
conf defaults EP_X=1
conf single $S
grep -h "FP8 division" $OUT/conformance-defaults.txt >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
env $S EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 100 ./ep-gpu soak --backend cuda --ranks 2 --rounds 10 --format fp8 > $OUT/sanitizers.txt 2>&1; echo "memcheck soak2 fp8 single rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' $OUT/sanitizers.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $S EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 100 ./ep-gpu soak --backend cuda --ranks 2 --rounds 5 --format bf16 >> $OUT/sanitizers.txt 2>&1; echo "racecheck soak2 bf16 single rc=$? $(grep -E 'RACECHECK SUMMARY|rounds matched' $OUT/sanitizers.txt | tail -n 2 | tr '\n' ' ')" >> $OUT/rc.txt
env $S timeout 100 ./ep-gpu soak --backend cuda --ranks 8 --rounds 300 --format fp8 > /tmp/soak8.txt 2>&1; echo "soak8 fp8 single rc=$? $(tail -n 1 /tmp/soak8.txt)" >> $OUT/rc.txt
for f in every_bf16 uniform; do
  timeout 120 broken/ep-gpu conformance --backend cuda --filter $f > /tmp/broken-$f.txt 2>&1; echo "broken conf --filter $f rc=$?" >> $OUT/rc.txt
  grep -E "FP8 division|FAILED|passed" /tmp/broken-$f.txt | cut -c1-400 | head -8 >> $OUT/rc.txt
done
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { local dir=$1; shift; env "$@" timeout 60 $dir/ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2 3; do
  for rt in "1 1 fp8" "1 8 fp8" "1 128 fp8" "2 1 fp8" "1 1 bf16" "2 1 bf16" "1 4096 bf16" "1 4096 fp8"; do set -- $rt; R=$1 T=$2 F=$3
    if [ $rep = 3 ] && [ $R = 1 ]; then continue; fi
    b "${R}r $T $F a-base"; run base EP_X=1
    b "${R}r $T $F b-new"; run . EP_X=1
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
