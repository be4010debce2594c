#!/usr/bin/env bash
# v28, call 3: copy-out grids with the shared count and helpers (dcc018a), env only: 4096 tokens BF16 55 / 66 / 77
# blocks, FP8 33 / 44 / 66, uniform and skewed; 2048 at the picks; whether an overlapped round now pays at 1024 and 512
# tokens (FP8 sequential by default there, BF16 overlapped from 1024); base/ = 57ae35d (v27's kernels) for reference.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
run() { # label, build, env, tokens, format, [--skewed]
  local b=./ep-gpu; [ $2 = base ] && b=base/ep-gpu
  env $3 timeout 60 $b bench --backend cuda --tokens $4 --format $5 $6 --passes 1 --breakdown > /tmp/b.txt 2>&1
  echo "$1 $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3}') | $(grep -E '^t[0-9]' /tmp/b.txt | tail -1 | cut -c24-)" | tee -a $OUT/ab.txt
}
O=EP_CUDA_OVERLAP_MIN_TOKENS=1
C=EP_CUDA_OVERLAP_COPY_BLOCKS
for rep in 1 2; do
  run "bf16 base       " base X=1 4096 bf16
  for g in 55 66 77; do run "bf16 new $g     " new $C=$g 4096 bf16; done
  for g in 55 66 88; do run "bf16 new $g skew" new $C=$g 4096 bf16 --skewed; done
  run "fp8 base        " base X=1 4096 fp8
  for g in 33 44 66; do run "fp8 new $g      " new $C=$g 4096 fp8; done
  for g in 44 66 132; do run "fp8 new $g skew " new $C=$g 4096 fp8 --skewed; done
done
for f in bf16 fp8; do for s in "" --skewed; do
  run "2048 $f base $s" base X=1 2048 $f $s
  run "2048 $f new 66 $s" new $C=66 2048 $f $s
  run "2048 $f new 44 $s" new $C=44 2048 $f $s
done; done
for rep in 1 2; do
  run "1024 fp8 base seq    " base X=1 1024 fp8
  for g in 33 66 132; do run "1024 fp8 new ovl $g  " new "$O $C=$g" 1024 fp8; done
  run "1024 bf16 base       " base X=1 1024 bf16
  for g in 44 66 88; do run "1024 bf16 new $g     " new $C=$g 1024 bf16; done
  run "512 fp8 base seq     " base X=1 512 fp8
  for g in 33 66; do run "512 fp8 new ovl $g    " new "$O $C=$g" 512 fp8; done
  run "512 bf16 base seq    " base X=1 512 bf16
  for g in 33 66; do run "512 bf16 new ovl $g   " new "$O $C=$g" 512 bf16; done
done
