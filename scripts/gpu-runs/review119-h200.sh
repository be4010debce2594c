#!/usr/bin/env bash
# v37 review, call 11, one H200: call 10's bundle embedded no fixtures (its suites 24/268: the conformance build script
# had read another checkout's directory), so the suites again on the same kernels with the build script fixed: every
# world with the defaults, with every single-launch combine marked (no LL rows), and every phase single-launch and marked.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
S="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000"
M="EP_CUDA_SINGLE_MARKED_MIN_TOKENS=1 EP_CUDA_LL_MAX_TOKENS=0"
conf() { local name=$1; shift; local t0=$(date +%s); env "$@" timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-$name.txt 2>&1; echo "conf $name rc=$? $(( $(date +%s) - t0 ))s $(tail -n 1 $OUT/conformance-$name.txt) ($(grep -c slices $OUT/conformance-$name.txt) waits of 2+ slices)" >> $OUT/rc.txt; }
conf defaults EP_X=1
conf marked $M
conf single-marked $S $M
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
cat $OUT/rc.txt
