#!/usr/bin/env bash
# compute-sanitizer on soaks, run from a bundle on a GPU host: each TOOL (memcheck, racecheck,
# synccheck, initcheck) over an `ep soak --backend cuda` that checks every round bit for bit
# against the oracle, in each path mode asked for. ep-gpu runs the binary under $EP_WRAP.
# Usage: ./gpu-sanitize.sh [-r RANKS] [-n ROUNDS] [-f FORMAT] [MODE ...] [-- TOOL ...]
#   RANKS default 2, ROUNDS default 6 (a sanitized round is slow), FORMAT default bf16.
#   MODE: a path policy (`./ep-gpu --modes` lists them; default: default single). TOOL default: memcheck racecheck.
#   e.g. ./gpu-sanitize.sh -f fp8 default single overlap -- memcheck racecheck synccheck
#   Variables: OUT (default /tmp/gpu-sanitize).
# Writes $OUT/sanitize.txt (every line of every run) and $OUT/summary.txt (a line a run: the
# exit status, the sanitizer's summary, the soak's rounds matched).
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/gpu-sanitize}
mkdir -p "$OUT"
log=$OUT/sanitize.txt
summary=$OUT/summary.txt
T0=$(date +%s)
ranks=2 rounds=6 format=bf16
modes=() tools=()
while [ "$#" -gt 0 ]; do
  case $1 in
    -r) ranks=$2; shift 2 ;;
    -n) rounds=$2; shift 2 ;;
    -f) format=$2; shift 2 ;;
    --) shift; tools=("$@"); break ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) modes+=("$1"); shift ;;
  esac
done
[ "${#modes[@]}" -eq 0 ] && modes=(default single)
[ "${#tools[@]}" -eq 0 ] && tools=(memcheck racecheck)
command -v compute-sanitizer > /dev/null || { echo "gpu-sanitize.sh: compute-sanitizer not on PATH" >&2; exit 2; }

# Path modes: ep-gpu passes EP_MODE on as EP_CUDA_PATH_POLICY (ep_cuda::PathPolicy).
read -r -a MODES <<< "$(./ep-gpu --modes)"
is_mode() { local m; for m in "${MODES[@]}"; do [ "$m" = "$1" ] && return 0; done; return 1; }
for m in "${modes[@]}"; do
  is_mode "$m" || { echo "gpu-sanitize.sh: unknown mode $m; modes: ${MODES[*]}" >&2; exit 2; }
done

for m in "${modes[@]}"; do
  for tool in "${tools[@]}"; do
    echo "=== $tool $m ${ranks}r $rounds rounds $format (EP_MODE=$m)" >> "$log"
    env EP_MODE="$m" EP_WRAP="compute-sanitizer --tool $tool --print-limit 10" timeout 600 \
      ./ep-gpu soak --backend cuda --ranks "$ranks" --rounds "$rounds" --format "$format" > /tmp/sanitize.txt 2>&1
    rc=$?
    cat /tmp/sanitize.txt >> "$log"
    echo "$tool $m ${ranks}r $format: rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rounds matched' /tmp/sanitize.txt | tr '\n' ' ')$(( $(date +%s) - T0 ))s" | tee -a "$summary"
  done
done
