#!/usr/bin/env bash
# v20 thresholds on 2x H200, same build as the sweep (914e0b7): the overlapped dispatch at 512 and 1024 tokens against the
# sequential one (EP_CUDA_OVERLAP_MIN_TOKENS), and the overlapped copy-out grid at 4096 tokens (EP_CUDA_OVERLAP_COPY_BLOCKS;
# defaults 88 BF16, 44 FP8 on 132 SMs).
cd "$(dirname "$0")"
run() { local label=$1 t=$2 f=$3; shift 3; env "$@" timeout 60 ./ep-gpu bench --backend cuda --tokens $t --format $f --passes 2 > /tmp/b.txt 2>&1
  echo "$label $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3, $4, $5}')" | tee -a $OUT/tune.txt; }
for rep in 1 2; do
  for tf in "512 bf16" "512 fp8" "1024 bf16" "1024 fp8"; do set -- $tf
    run sequential $1 $2 X=1
    run overlapped $1 $2 EP_CUDA_OVERLAP_MIN_TOKENS=1
  done
done
for b in 88 66 110; do run "copy-blocks-$b" 4096 bf16 EP_CUDA_OVERLAP_COPY_BLOCKS=$b; done
for b in 44 33 66; do run "copy-blocks-$b" 4096 fp8 EP_CUDA_OVERLAP_COPY_BLOCKS=$b; done
for b in 88 66 110; do run "copy-blocks-$b" 4096 bf16 EP_CUDA_OVERLAP_COPY_BLOCKS=$b; done
for b in 44 33 66; do run "copy-blocks-$b" 4096 fp8 EP_CUDA_OVERLAP_COPY_BLOCKS=$b; done
