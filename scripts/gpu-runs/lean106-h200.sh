#!/usr/bin/env bash
# v36 call 6, one H200: new = af211b4 (the lean send BF16 only: 32 registers, no spills) against mid = 0bc0391 (call 5's
# code: the lean send with every format's encoders, 40 registers and 8 bytes of spills) and base = 824ba0b (v35), at
# the lean sizes (BF16 from 2560 tokens, overlapped). Checks first on new: every world with the defaults and with every
# BF16 overlapped round lean (EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_LEAN_MIN_TOKENS=1); memcheck on a lean BF16 soak.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf() { local name=$1; shift; local t0=$(date +%s); env "$@" timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-$name.txt 2>&1; echo "conf $name rc=$? $(( $(date +%s) - t0 ))s $(tail -n 1 $OUT/conformance-$name.txt)" >> $OUT/rc.txt; }
conf defaults EP_X=1
conf lean EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_LEAN_MIN_TOKENS=1
grep -h "FP8 division" $OUT/conformance-defaults.txt >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
env EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_LEAN_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 100 ./ep-gpu soak --backend cuda --ranks 2 --rounds 10 --format bf16 > $OUT/sanitizers.txt 2>&1; echo "memcheck soak2 bf16 lean rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' $OUT/sanitizers.txt | tr '\n' ' ')" >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { local dir=$1; shift; env "$@" timeout 60 $dir/ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2 3; do
  for rt in "1 4096 bf16" "1 3072 bf16" "1 2560 bf16" "1 4096 fp8" "1 1 bf16" "1 1 fp8"; do set -- $rt; R=$1 T=$2 F=$3
    if [ $rep = 3 ] && [ $T != 4096 ]; then continue; fi
    b "${R}r $T $F a-base"; run base EP_X=1
    b "${R}r $T $F b-mid"; run mid EP_X=1
    b "${R}r $T $F c-new"; run . EP_X=1
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
