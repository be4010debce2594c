#!/usr/bin/env bash
# A/B of two (or more) builds on a GPU host: the same `ep bench` scenarios under each build, the
# builds interleaved within every repetition (so drift over the run falls on all of them alike),
# then one summary line per run sorted by scenario. Each build is a bundle directory
# (scripts/bundle-gpu.sh DIR, once per commit, both copied to the host), optionally with
# variables set for it: that also compares two settings of one build.
# Usage: ./gpu-ab.sh REPS "R T F [BENCH ARG ...]" ... -- LABEL:DIR[,VAR=value ...] ...
#   R ranks, T tokens per rank, F format (bf16 fp8 mxfp4 nvfp4); more bench arguments after F
#   (e.g. --skewed) go to each run of that scenario.
#   e.g. ./gpu-ab.sh 3 "2 1 bf16" "2 128 fp8" "2 4096 bf16" -- base:../base head:.
#        ./gpu-ab.sh 2 "2 512 fp8" -- def:. ovl:.,EP_CUDA_OVERLAP_MIN_TOKENS=1
#   Variables: OUT (default /tmp/gpu-ab), PASSES (ep bench --passes, default 1).
# Writes $OUT/ab.txt (every run, "== R T F [ARGS] LABEL" then its result line) and
# $OUT/summary.txt ("== R T F LABEL | dispatch p50 p95 combine p50 p95", microseconds: device
# events, slowest rank), and prints the summary. Commit the summary with a header naming the
# device, date and both commits (bench/results/ab-<kind>-<date>.txt).
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/gpu-ab}
mkdir -p "$OUT"
T0=$(date +%s)
if [ "$#" -lt 3 ]; then sed -n '2,18p' "$0"; exit 2; fi
reps=$1; shift
scen=()
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do scen+=("$1"); shift; done
[ "$#" -gt 0 ] && shift
builds=("$@")
if [ "${#scen[@]}" -eq 0 ] || [ "${#builds[@]}" -eq 0 ]; then echo "gpu-ab.sh: scenarios, then --, then builds" >&2; exit 2; fi
for lb in "${builds[@]}"; do
  d=${lb#*:}; d=${d%%,*}
  [ -x "$d/ep-gpu" ] || { echo "gpu-ab.sh: no bundle at $d (from $lb)" >&2; exit 2; }
  echo "build ${lb%%:*}: $d, commit $(cat "$d/COMMIT" 2>/dev/null || echo unknown)" | tee -a "$OUT/ab.txt"
done

# run DIR R T F [BENCH ARG ...] [-- VAR=value ...]: one `ep bench` of the build in DIR into ab.txt.
run() {
  local dir=$1 r=$2 t=$3 f=$4; shift 4
  local bench=() envs=()
  while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do bench+=("$1"); shift; done
  [ "$#" -gt 0 ] && shift
  envs=("$@")
  env "${envs[@]}" timeout 120 "$dir/ep-gpu" bench --backend cuda --ranks "$r" --tokens "$t" --format "$f" \
    "${bench[@]}" --passes "${PASSES:-1}" 2>&1 | grep -E '^t[0-9]|rror|slices' >> "$OUT/ab.txt"
}

for rep in $(seq "$reps"); do
  for sc in "${scen[@]}"; do
    # shellcheck disable=SC2086
    set -- $sc
    for lb in "${builds[@]}"; do
      spec=${lb#*:}
      envs=()
      case $spec in *,*) IFS=, read -r -a envs <<< "${spec#*,}" ;; esac
      echo "== ${1}r $2 $3${4:+ ${*:4}} ${lb%%:*}" >> "$OUT/ab.txt"
      run "${spec%%,*}" "$@" -- "${envs[@]}"
    done
  done
  echo "rep $rep done in $(( $(date +%s) - T0 ))s" >&2
done

# The summary: "label | dispatch p50 p95 combine p50 p95", sorted by scenario, builds together.
awk '/^build /{next} /^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' \
  "$OUT/ab.txt" | sort -s -k2,4 | tee "$OUT/summary.txt"
