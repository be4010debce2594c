#!/usr/bin/env bash
# v32 call 5, one H100: the layout-first copy-out as a block per possible message (All, the default) or as the
# overlapped round's helpers (EP_CUDA_LAYOUT_FIRST_HELPERS=1: a persistent grid on the rank's share of the SMs, a warp
# per message, then the tail), which cannot hold more than the rank's share of the SMs while it waits for a peer.
# Suite over every world with every dispatch multi-kernel, layout-first on helpers; then off / all / helpers, two ranks
# sharing the GPU (layout-first forced from 256) and one rank alone; two reps interleaved.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
M="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0"
LF="EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 EP_CUDA_OVERLAP_MIN_TOKENS=0"
env $M $LF EP_CUDA_LAYOUT_FIRST_HELPERS=1 timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-helpers.txt 2>&1; echo "conf multi-kernel layout-first helpers rc=$? $(tail -n 1 $OUT/conformance-helpers.txt); multi-slice dispatch waits $(grep -c 'Dispatch wait took' $OUT/conformance-helpers.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 ./ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "2 256 fp8" "2 512 fp8" "2 1024 fp8" "2 512 bf16" "1 512 fp8" "1 1024 fp8"; do set -- $rt
    b "${1}r $2 $3 off"; (export EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=0; run $1 $2 $3)
    b "${1}r $2 $3 all"; (export EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=256; run $1 $2 $3)
    b "${1}r $2 $3 helpers"; (export EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=256 EP_CUDA_LAYOUT_FIRST_HELPERS=1; run $1 $2 $3)
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4 > $OUT/summary.txt
cat $OUT/summary.txt
