#!/usr/bin/env bash
# Prepared in v45 for the next session that is lent 2x H200 (not yet run; thresholds209-h200x2.sh after it). Bundles: . = HEAD (scripts/bundle-gpu.sh),
# v41/ = 78b7156 (the committed sweep's kernels), place/ = fff0c65 (v45's own rows placed by the sending block and the
# ids before the row, reverted on one GPU: to be judged where a block copies its own message and a peer's), each built
# in a git worktree of that commit (scripts/bundle-gpu.sh DIR there). HEAD checked, then its sweep (to replace h200-x2-2026-11-24.*, with
# .ci/run's --print file name), v41 against HEAD at decode sizes, place against HEAD at 64-128 tokens, traces of rank 0 at 1
# and 128 tokens; memcheck first. (v48 added 1024 and 4096 tokens FP8 to v41 against HEAD. v52 added the sweep again with
# --timing step, each phase right behind the kernel before it as in a model's step, to commit beside the event-timed one
# as h200-x2-DATE-step.*.)
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; nvidia-smi topo -m | head -4; } > $OUT/rc.txt
conf defaults EP_CUDA_LOG_WAITS=1
conf single $S
memcheck 2r-defaults 2 10
timeout 240 ./ep-gpu bench --backend cuda --sweep --breakdown --out $OUT/sweep.json > $OUT/sweep.txt 2>&1; echo "sweep rc=$? $(elapsed)" >> $OUT/rc.txt
timeout 150 ./ep-gpu bench --backend cuda --sweep --timing step --out $OUT/sweep-step.json > $OUT/sweep-step.txt 2>&1; echo "sweep step rc=$? $(elapsed)" >> $OUT/rc.txt
ab 2 "2 1 bf16" "2 1 fp8" "2 32 fp8" "2 128 fp8" "2 128 bf16" "2 512 fp8" "2 1024 fp8" "2 4096 fp8" -- a-v41:v41 b-head:.
ab 2 "2 64 fp8" "2 128 fp8" "2 128 bf16" -- c-head:. d-place:place
traces head:. -- "2 1 bf16" "2 128 fp8"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
