#!/usr/bin/env bash
# v26 (BlockShape: 256-thread sends for sequential BF16/FP8 rounds; FP8 overlapped with 256-thread
# sends and copy blocks, 4/3 copy blocks per SM). Suites three ways, an FP8 overlapped soak, then the
# FP8 overlapped copy grid at 2048 and 4096 tokens against v22's shape (512-thread blocks, 66 copy
# blocks), interleaved, two reps.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
mkdir -p /tmp/logs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
suite() { local name=$1; shift; env "$@" timeout 100 ./ep-gpu conformance --backend cuda > /tmp/logs/conformance-$name.txt 2>&1; echo "conf $name rc=$? $(tail -n 1 /tmp/logs/conformance-$name.txt)" >> $OUT/rc.txt; }
suite defaults X=1
suite all-multikernel EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0
suite all-overlapped-marked EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_MARKED_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0
EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 timeout 120 ./ep-gpu soak --backend cuda --rounds 1000 --ranks 2 --format fp8 > /tmp/logs/soak.txt 2>&1
echo "soak fp8 overlapped 1000 rc=$? $(tail -n 1 /tmp/logs/soak.txt)" >> $OUT/rc.txt
cp /tmp/logs/conformance-defaults.txt $OUT/
grep -h -B2 -A12 FAILED /tmp/logs/*.txt | head -60 > $OUT/fail.txt
cat $OUT/rc.txt
one() { # label tokens format env...
  local label=$1 tok=$2 fmt=$3; shift 3
  env "$@" timeout 60 ./ep-gpu bench --backend cuda --tokens $tok --format $fmt --passes 1 --breakdown > /tmp/b.txt 2>&1
  echo "$label $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3, $4, $5}') | $(grep -E '^t[0-9].*\|' /tmp/b.txt | head -1 | cut -c24-)" | tee -a $OUT/ab.txt
}
for rep in 1 2; do
  for tok in 2048 4096; do
    one v22shape $tok fp8 EP_CUDA_SEND_THREADS=512 EP_CUDA_OVERLAP_COPY_THREADS=512 EP_CUDA_OVERLAP_COPY_BLOCKS=66
    one g176 $tok fp8 X=1
    one g220 $tok fp8 EP_CUDA_OVERLAP_COPY_BLOCKS=220
    one g264 $tok fp8 EP_CUDA_OVERLAP_COPY_BLOCKS=264
  done
done
cat $OUT/rc.txt
