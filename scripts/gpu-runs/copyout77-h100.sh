#!/usr/bin/env bash
# v33 call 2, one H100, on e69e7c8: the single-launch dispatch with the message counts loaded beside the layout and the
# copy-out walk rotated past the blocks still sending, against base/ (33b1014), and with the counts-read ticket
# relaxed (EP_CUDA_EXPERIMENT_RELAXED_TICKET, an experiment); suites with the defaults and every phase single-launch;
# traces at 1 token BF16 (two ranks sharing) and 128 tokens FP8 (one rank alone).
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
S="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000"
timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-defaults.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-defaults.txt)" >> $OUT/rc.txt
env $S timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-single.txt 2>&1; echo "conf every phase single-launch rc=$? $(tail -n 1 $OUT/conformance-single.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 $1/ep-gpu bench --backend cuda --ranks $2 --tokens $3 --format $4 --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 1 bf16" "1 1 fp8" "1 32 fp8" "1 128 fp8" "2 1 bf16" "2 1 fp8"; do set -- $rt
    b "${1}r $2 $3 base"; run base $1 $2 $3
    b "${1}r $2 $3 new"; run . $1 $2 $3
    b "${1}r $2 $3 new+relaxed"; (export EP_CUDA_EXPERIMENT_RELAXED_TICKET=1; run . $1 $2 $3)
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4 > $OUT/summary.txt
cat $OUT/summary.txt
for rtf in "2 1 bf16" "1 128 fp8"; do set -- $rtf
  EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 90 ./ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --passes 1 --rounds 40 > $OUT/trace-${1}r-$2-$3.txt 2>&1
  echo "trace $* rc=$? $(wc -l < $OUT/trace-${1}r-$2-$3.txt) lines" >> $OUT/rc.txt
done
tail -n 2 $OUT/rc.txt
