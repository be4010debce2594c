#!/usr/bin/env bash
# v34 call 9, one H100, on the single-launch combine without an epilogue compiled for none (ep_combine_single[_ll]_plain):
# checks (every world with the defaults and with every phase single-launch), then base/ = fb86af3 (before it) against it,
# two reps interleaved (the combine column is the one that moves).
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
S="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000"
timeout 170 ./ep-gpu conformance --backend cuda > $OUT/conformance-defaults.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-defaults.txt)" >> $OUT/rc.txt
env $S timeout 170 ./ep-gpu conformance --backend cuda > $OUT/conformance-single.txt 2>&1; echo "conf every phase single-launch rc=$? $(tail -n 1 $OUT/conformance-single.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 $1/ep-gpu bench --backend cuda --ranks $2 --tokens $3 --format $4 --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 1 bf16" "1 8 bf16" "1 32 bf16" "1 128 bf16" "2 1 bf16"; do set -- $rt
    b "${1}r $2 $3 a-base"; run base $1 $2 $3
    b "${1}r $2 $3 b-new"; run . $1 $2 $3
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
