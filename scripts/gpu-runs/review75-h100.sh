#!/usr/bin/env bash
# v32 review, one H100, on 2bc5909 (one DispatchPath chosen in one place; host only): suites over every world with the
# defaults, with every dispatch multi-kernel and layout-first, and with every dispatch overlapped; the kernels each
# path launches, from --breakdown (one rank alone at 128, 512 and 2048 tokens FP8; two ranks sharing at 512); then one
# rank alone at 512 and 1024 tokens FP8 against base/ (a550ce9), two reps interleaved.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
M="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0"
timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-defaults.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-defaults.txt)" >> $OUT/rc.txt
env $M EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 EP_CUDA_OVERLAP_MIN_TOKENS=0 timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-lf.txt 2>&1; echo "conf multi-kernel layout-first rc=$? $(tail -n 1 $OUT/conformance-lf.txt)" >> $OUT/rc.txt
env EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-overlap.txt 2>&1; echo "conf every dispatch overlapped rc=$? $(tail -n 1 $OUT/conformance-overlap.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
for rt in "1 128" "1 512" "1 2048" "2 512"; do set -- $rt
  echo "paths ${1}r $2 fp8: $(timeout 60 ./ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format fp8 --passes 1 --breakdown 2>&1 | grep -E '^t[0-9].*ep_' | cut -c24-)" >> $OUT/rc.txt
done
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 $1/ep-gpu bench --backend cuda --ranks 1 --tokens $2 --format fp8 --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do for t in 512 1024; do b "1r $t fp8 base"; run base $t; b "1r $t fp8 HEAD"; run . $t; done; done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
