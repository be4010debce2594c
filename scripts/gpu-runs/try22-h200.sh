#!/usr/bin/env bash
# v22 call 1: 0dbe4f5 (the marked combine whatever the dispatch, from EP_CUDA_MARKED_MIN_TOKENS)
# in ./, abd830f (v21: marked only after an overlapped dispatch) in base/. Suites every way a
# marked round is reached (now also after the multi-kernel dispatch that does not overlap),
# soak and memcheck of that path; then the marked threshold: each size marked (=1) and not (=0),
# twice, interleaved, and base.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
mkdir -p /tmp/logs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
suite() { local name=$1; shift; env "$@" timeout 100 ./ep-gpu conformance --backend cuda > /tmp/logs/conformance-cuda-2xh200-$name.txt 2>&1; echo "conf $name rc=$? $(tail -n 1 /tmp/logs/conformance-cuda-2xh200-$name.txt)" >> $OUT/rc.txt; }
suite run1 X=1
suite all-marked-sequential EP_CUDA_MARKED_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_OVERLAP_MIN_TOKENS=0
suite all-marked-overlapped EP_CUDA_MARKED_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_OVERLAP_MIN_TOKENS=1
suite all-marked-no-ll EP_CUDA_MARKED_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_LL_MAX_TOKENS=0
suite all-multikernel EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0
suite overlapped-unmarked EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_MARKED_MIN_TOKENS=0
grep -h -B2 -A12 FAILED /tmp/logs/conformance-*.txt | head -80 > $OUT/fail.txt
cat $OUT/rc.txt
M="EP_CUDA_MARKED_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_OVERLAP_MIN_TOKENS=0"
env $M timeout 40 ./ep-gpu soak --backend cuda --rounds 1000 --ranks 2 > /tmp/logs/soak-marked.txt 2>&1; echo "soak marked-sequential rc=$? $(tail -n 1 /tmp/logs/soak-marked.txt)" >> $OUT/rc.txt
{ echo "### memcheck (marked, sequential dispatch)"; env $M EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 60 ./ep-gpu soak --backend cuda --rounds 10 --ranks 2; echo "memcheck rc=$?"; } > /tmp/logs/sanitizer-2xh200.txt 2>&1
grep -E "rc=|SUMMARY|rounds matched" /tmp/logs/sanitizer-2xh200.txt | tee -a $OUT/rc.txt
for tf in "256 bf16" "256 fp8" "512 bf16" "512 fp8" "1024 fp8" "1024 bf16"; do set -- $tf
  for v in base 0 1 0 1; do b=./ep-gpu; [ $v = base ] && b=base/ep-gpu
    EP_CUDA_MARKED_MIN_TOKENS=$v timeout 60 $b bench --backend cuda --tokens $1 --format $2 --passes 2 --breakdown > /tmp/b.txt 2>&1
    grep -E '^t[0-9]' /tmp/b.txt | grep -v ep_ | awk -v v=$v '{print v, $1, $2, $3, $4, $5}' | tee -a $OUT/ab.txt
    echo "$v $(grep -E '^t[0-9]' /tmp/b.txt | sed -n 2p | cut -c1-220)" >> $OUT/ab-breakdown.txt
  done; done
tar czf $OUT/logs.tar.gz -C /tmp logs
cat $OUT/rc.txt
