#!/usr/bin/env bash
# v31 review, one H100: one launch_fn with a chained flag (host only). Suites over every world of 2, 4 and 8 ranks with
# the defaults and with every phase multi-kernel; one rank alone at 512 tokens against base/ (d3de099), two reps.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
M="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0"
timeout 170 ./ep-gpu conformance --backend cuda > $OUT/conformance-cuda-h100.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-cuda-h100.txt)" >> $OUT/rc.txt
env $M timeout 170 ./ep-gpu conformance --backend cuda > /tmp/c2.txt 2>&1; echo "conf multi-kernel rc=$? $(tail -n 1 /tmp/c2.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt /tmp/c2.txt | head -40 >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 40 $1/ep-gpu bench --backend cuda --ranks 1 --tokens 512 --format $2 --passes 1 2>&1 | grep -E '^t[0-9]|rror' >> $OUT/ab.txt; }
for rep in 1 2; do for f in fp8 bf16; do b "1r 512 $f base"; run base $f; b "1r 512 $f HEAD"; run . $f; done; done
awk '/^==/{l=$0; next} /^t[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
