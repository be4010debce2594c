#!/usr/bin/env bash
# v29, 2x H200: with the send at 90% of the ceiling (7dd1cc0: 40-register send, 48-register copy-out; . here) the
# overlapped round is bound by the copy-out's HBM traffic. Env-only experiments on that build and on send40/ (6074325):
# BF16 with the send blocks writing the rank's own rows (EP_CUDA_OWN_ROWS=1: -117 MB of HBM traffic at 4096 tokens),
# and larger copy grids; v28/ (86a6753) as the reference, reps interleaved, 4096 tokens, one pass each.
# (Call 7 ran this script with `env $e run ...` on the lean configurations, which cannot call a shell function, so they did not
# run; the lines are fixed here, and own51-h200.sh ran them in call 8.)
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/ab.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 "$@" 2>&1 | grep -E '^t[0-9]' >> $OUT/ab.txt; }
for rep in 1 2; do
  for f in bf16 fp8; do
    b "rep $rep $f v28"; run v28/ep-gpu bench --backend cuda --tokens 4096 --format $f --passes 1 --breakdown
    for g in default 132 198 264; do
      e="EP_CUDA_OWN_ROWS=1"; [ $g != default ] && e="$e EP_CUDA_OVERLAP_COPY_BLOCKS=$g"
      b "rep $rep $f copy48 own rows grid $g"; (export $e; run ./ep-gpu bench --backend cuda --tokens 4096 --format $f --passes 1 --breakdown)
    done
    b "rep $rep $f send40 own rows"; EP_CUDA_OWN_ROWS=1 run send40/ep-gpu bench --backend cuda --tokens 4096 --format $f --passes 1 --breakdown
  done
  for g in 198 264; do b "rep $rep bf16 copy48 grid $g"; EP_CUDA_OVERLAP_COPY_BLOCKS=$g run ./ep-gpu bench --backend cuda --tokens 4096 --format bf16 --passes 1 --breakdown; done
  b "rep $rep bf16 skewed v28"; run v28/ep-gpu bench --backend cuda --tokens 4096 --format bf16 --skewed --passes 1
  b "rep $rep bf16 skewed copy48 own rows"; EP_CUDA_OWN_ROWS=1 run ./ep-gpu bench --backend cuda --tokens 4096 --format bf16 --skewed --passes 1
done
grep -v '^t4096.*ep_assign' $OUT/ab.txt | tail -n 60
