#!/usr/bin/env bash
# v29 on 2x H200: the 40-register send (send40/ = 6074325) and the 48-register copy-out beside it (. = 7dd1cc0) against
# v28's build (v28/ = 86a6753, the code of 12f6fcb), reps interleaved, one pass each: 4096, 2048 and 1024 tokens, BF16
# and FP8, uniform (4096 also skewed); then copy grids for the 48-register copy-out at 4096.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/ab.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 "$@" 2>&1 | grep -E '^t[0-9]|^ceiling' >> $OUT/ab.txt; }
for rep in 1 2; do
  for s in "4096 bf16" "4096 fp8" "4096 bf16 --skewed" "4096 fp8 --skewed" "2048 bf16" "2048 fp8" "1024 bf16" "1024 fp8"; do
    set -- $s
    for build in v28 send40 . ; do
      b "rep $rep $s build $build"
      bd=""; [ $1 = 4096 ] && bd="--breakdown"
      run $build/ep-gpu bench --backend cuda --tokens $1 --format $2 $3 --passes 1 $bd
    done
  done
done
for g in 132 99 44; do for f in bf16 fp8; do b "grid $g $f 4096 build ."; EP_CUDA_OVERLAP_COPY_BLOCKS=$g run ./ep-gpu bench --backend cuda --tokens 4096 --format $f --passes 1; done; done
cat $OUT/ab.txt | grep -v ceiling | tail -n 40
