#!/usr/bin/env bash
# The benchmark sweep, run from a bundle on a GPU host (scripts/bundle-gpu.sh copies this script
# beside `ep`): `ep bench --backend cuda --sweep` on every visible GPU, its JSON and its printed
# table written into $OUT as NAME.json and NAME.txt, the .txt headed by the device, the date and the
# commit the bundle was built from (COMMIT, written by bundle-gpu.sh). The .txt's lines from
# "ep bench on" down are the run's own stdout, so `ep bench --print NAME.json` reprints them (CI
# diffs the committed sweeps that way).
# Usage: ./gpu-sweep.sh [NAME] [-- BENCH ARG ...]
#   NAME: default <kind>-<date>, e.g. h200-x2-2026-11-24 (kind from the GPU name and count).
#   BENCH ARG: more `ep bench` arguments, e.g. -- --breakdown, -- --ranks 8, -- --timing step.
#   Variables: OUT (default /tmp/gpu-sweep); path thresholds and switches as in docs/tuning.md;
#   PROCS=N: one process per GPU on N GPUs (`ep launch --nproc-per-node N`, NAME gets -procs);
#   NODES=M: the world's ranks split into M nodes (`--nodes M`; with PROCS, NCCL between them, and
#   NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 keep it on its network transport).
# Commit NAME.json, NAME.txt (and `python3 scripts/plot_bench.py NAME.json`'s figure) under
# bench/results/, replacing the previous sweep of that machine kind.
set -euo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/gpu-sweep}
mkdir -p "$OUT"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
n_gpus=$(nvidia-smi -L | wc -l)
# nvidia-smi lists every GPU; the run sees CUDA_VISIBLE_DEVICES's.
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then n_gpus=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .); fi
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)
model=$(echo "$gpu" | grep -oiE 'H100|H200|B200|A100|GB200' | head -n 1 | tr 'A-Z' 'a-z')
PROCS=${PROCS:-}
NODES=${NODES:-1}
if [ -n "$PROCS" ]; then n_gpus=$PROCS; fi
kind=${model:-gpu}-x$n_gpus${PROCS:+-procs}
if [ "$NODES" != 1 ]; then kind=$kind-${NODES}nodes; fi
name=$kind-$(date -u +%F)
if [ "$#" -gt 0 ] && [ "$1" != "--" ]; then name=$1; shift; fi
[ "${1:-}" = "--" ] && shift
commit=$(cat COMMIT 2>/dev/null || echo unknown)
link=$(nvidia-smi topo -m 2>/dev/null | awk '/^GPU0/{for (i = 2; i <= NF; i++) if ($i ~ /^NV[0-9]+$/) {print $i; exit}}')
{
  echo "# device: $kind (${n_gpus}x $gpu, driver $driver${link:+, $link}), date: $(date -u +%F), commit: $commit"
  echo "# command: ./ep-gpu ${PROCS:+launch --nproc-per-node $PROCS -- }bench --backend cuda --sweep --nodes $NODES --out $name.json $*   (scripts/gpu-sweep.sh${PROCS:+, PROCS=$PROCS}; NCCL_P2P_DISABLE=${NCCL_P2P_DISABLE:-unset} NCCL_SHM_DISABLE=${NCCL_SHM_DISABLE:-unset})"
  echo "# timing: see docs/perf.md (\"How phases are timed\")"
} > "$OUT/$name.txt"
# stdout only into the .txt (what `ep bench --print` reprints); stderr (progress, warnings) beside it.
# The closing "wrote FILE" line names this host's path and is no part of the table: left out.
if [ -n "$PROCS" ]; then
  # Rank 0 prints the world's table; the launcher's own lines and the other ranks' are left out.
  ./ep-gpu launch --nproc-per-node "$PROCS" -- bench --backend cuda --sweep --nodes "$NODES" --out "$OUT/$name.json" "$@" 2> >(tee "$OUT/$name.stderr.txt" >&2) | sed -n 's/^\[rank 0\] //p' | grep -v '^wrote ' | tee -a "$OUT/$name.txt"
else
  ./ep-gpu bench --backend cuda --sweep --nodes "$NODES" --out "$OUT/$name.json" "$@" 2> >(tee "$OUT/$name.stderr.txt" >&2) | grep -v '^wrote ' | tee -a "$OUT/$name.txt"
fi
rc=${PIPESTATUS[0]}
# No trailing blank line either: the .txt ends where `ep bench --print` ends.
table=$(cat "$OUT/$name.txt") && printf '%s\n' "$table" > "$OUT/$name.txt"
echo "sweep $name: rc=$rc, $OUT/$name.json, $OUT/$name.txt"
exit "$rc"
