#!/usr/bin/env bash
# v27, call 2: the overlapped copy grid (and BF16's send size) once the send blocks write the rank's own rows, one rep
# each at 4096 uniform and skewed: BF16 512-thread sends with 33 / 22 / 11 copy blocks, 256-thread sends with 132 / 88 /
# 44; FP8 132 / 99 / 66 copy blocks, also at 2048 tokens; base/ (6cac42d) for reference.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
run() { # label env... -- bench args
  local label=$1; shift; local envs=(); while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  local b=./ep-gpu; [ "$label" = base ] && b=base/ep-gpu
  env "${envs[@]}" timeout 60 $b bench --backend cuda --passes 1 --breakdown "$@" > /tmp/b.txt 2>&1
  echo "$label $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3}') | $(grep -E '^t[0-9].*\|' /tmp/b.txt | head -1 | cut -c24- | sed 's/| ep_combine.*//')" | tee -a $OUT/ab.txt
}
for skew in "" --skewed; do
  run base X=1 -- --tokens 4096 --format bf16 $skew
  for c in 33 22 11; do run bf16-512-copy$c EP_CUDA_OVERLAP_COPY_BLOCKS=$c -- --tokens 4096 --format bf16 $skew; done
  for c in 132 88 44; do run bf16-256-copy$c EP_CUDA_SEND_THREADS=256 EP_CUDA_OVERLAP_COPY_BLOCKS=$c -- --tokens 4096 --format bf16 $skew; done
  run base X=1 -- --tokens 4096 --format fp8 $skew
  for c in 132 99 66; do run fp8-copy$c EP_CUDA_OVERLAP_COPY_BLOCKS=$c -- --tokens 4096 --format fp8 $skew; done
done
run base X=1 -- --tokens 2048 --format fp8
for c in 132 99 66; do run fp8-copy$c EP_CUDA_OVERLAP_COPY_BLOCKS=$c -- --tokens 2048 --format fp8; done
run base X=1 -- --tokens 1024 --format bf16
for c in 22 11; do run bf16-512-copy$c EP_CUDA_OVERLAP_COPY_BLOCKS=$c -- --tokens 1024 --format bf16; done
for c in 88 44; do run bf16-256-copy$c EP_CUDA_SEND_THREADS=256 EP_CUDA_OVERLAP_COPY_BLOCKS=$c -- --tokens 1024 --format bf16; done
# Overlapped below the thresholds (sequential there since v14): FP8 1024, BF16 512.
run base X=1 -- --tokens 1024 --format fp8
for c in 132 66; do run fp8-ov1024-copy$c EP_CUDA_OVERLAP_MIN_TOKENS=1024 EP_CUDA_OVERLAP_COPY_BLOCKS=$c -- --tokens 1024 --format fp8; done
run base X=1 -- --tokens 512 --format bf16
run bf16-ov512-256-copy88 EP_CUDA_OVERLAP_MIN_TOKENS=512 EP_CUDA_SEND_THREADS=256 EP_CUDA_OVERLAP_COPY_BLOCKS=88 -- --tokens 512 --format bf16
