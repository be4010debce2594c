#!/usr/bin/env bash
# v24 try: the ordered combine send fences once per message, then marks its rows (was a fence and a mark per row, so a
# block's rows went out one after another), and the marked threshold 512 (the sweep is the same for any threshold in
# 129..512: below, the single-launch phases). ./ = the try (09b0793 + the kernel), base/ = 0dbe4f5. Suites, memcheck
# on a marked soak, A/B interleaved twice (label: build, EP_CUDA_MARKED_MIN_TOKENS), the try's sweep.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
mkdir -p /tmp/logs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
suite() { local name=$1; shift; env "$@" timeout 100 ./ep-gpu conformance --backend cuda > /tmp/logs/conformance-cuda-2xh200-$name.txt 2>&1; echo "conf $name rc=$? $(tail -n 1 /tmp/logs/conformance-cuda-2xh200-$name.txt)" >> $OUT/rc.txt; }
suite run1 X=1
suite all-marked-sequential EP_CUDA_MARKED_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_OVERLAP_MIN_TOKENS=0
suite all-marked-overlapped EP_CUDA_MARKED_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_OVERLAP_MIN_TOKENS=1
grep -h -B2 -A12 FAILED /tmp/logs/conformance-*.txt | head -80 > $OUT/fail.txt
cat $OUT/rc.txt
{ echo "### memcheck (marked)"; EP_CUDA_MARKED_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 60 ./ep-gpu soak --backend cuda --rounds 10 --ranks 2; echo "memcheck rc=$?"; } > /tmp/logs/sanitizer-2xh200.txt 2>&1
grep -E "rc=|SUMMARY|rounds matched" /tmp/logs/sanitizer-2xh200.txt | tee -a $OUT/rc.txt
ab() { local tok=$1 fmt=$2; shift 2; local vs=("$@"); for rep in 1 2; do for v in "${vs[@]}"; do local bn=${v%:*} th=${v#*:}; b=./ep-gpu; [ $bn = base ] && b=base/ep-gpu
    EP_CUDA_MARKED_MIN_TOKENS=$th timeout 60 $b bench --backend cuda --tokens $tok --format $fmt --passes 2 --breakdown > /tmp/b.txt 2>&1
    echo "$bn $th $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3, $4, $5}') | $(grep -E '^t[0-9]' /tmp/b.txt | sed -n 2p | cut -c24-220)" | tee -a $OUT/ab.txt
  done; done; }
ab 256 bf16 new:0 new:1
ab 512 bf16 new:0 new:1 base:1
ab 512 fp8 new:0 new:1
ab 1024 fp8 base:1024 new:1024
ab 4096 bf16 base:1024 new:1024
timeout 200 ./ep-gpu bench --backend cuda --sweep --breakdown --out $OUT/sweep.json > $OUT/sweep.txt 2>&1; echo "sweep rc=$?" >> $OUT/rc.txt
tar czf $OUT/logs.tar.gz -C /tmp logs
cat $OUT/rc.txt
