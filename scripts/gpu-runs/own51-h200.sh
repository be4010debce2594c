#!/usr/bin/env bash
# v29, 2x H200: own50-h200.sh's configurations that did not run (its `env $e run` could not call the shell function):
# the 48-register copy-out build (. = 7dd1cc0) with the send blocks writing the rank's own rows (EP_CUDA_OWN_ROWS=1) on
# several copy grids, against v28/ (86a6753); 4096 tokens, reps interleaved, one pass each.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/ab.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 "$@" 2>&1 | grep -E '^t[0-9]' >> $OUT/ab.txt; }
for rep in 1 2; do
  for f in bf16 fp8; do
    b "rep $rep $f v28"; run v28/ep-gpu bench --backend cuda --tokens 4096 --format $f --passes 1 --breakdown
    for g in default 66 132 198 264; do
      b "rep $rep $f copy48 own rows grid $g"
      (export EP_CUDA_OWN_ROWS=1; [ $g != default ] && export EP_CUDA_OVERLAP_COPY_BLOCKS=$g; run ./ep-gpu bench --backend cuda --tokens 4096 --format $f --passes 1 --breakdown)
    done
  done
  for f in bf16 fp8; do
    b "rep $rep $f skewed v28"; run v28/ep-gpu bench --backend cuda --tokens 4096 --format $f --skewed --passes 1
    b "rep $rep $f skewed copy48 own rows grid 132"; (export EP_CUDA_OWN_ROWS=1 EP_CUDA_OVERLAP_COPY_BLOCKS=132; run ./ep-gpu bench --backend cuda --tokens 4096 --format $f --skewed --passes 1)
  done
  for t in 2048 1024; do for f in bf16 fp8; do
    b "rep $rep $t $f v28"; run v28/ep-gpu bench --backend cuda --tokens $t --format $f --passes 1
    b "rep $rep $t $f copy48 own rows"; (export EP_CUDA_OWN_ROWS=1; run ./ep-gpu bench --backend cuda --tokens $t --format $f --passes 1)
  done; done
done
grep -v 'ep_assign' $OUT/ab.txt | tail -n 70
