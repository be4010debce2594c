#!/usr/bin/env bash
# The GPU conformance matrix, run from a bundle on a GPU host (scripts/bundle-gpu.sh copies this
# script and check_dump.py beside `ep`):
# - the suite (`ep conformance --backend cuda`: the device self-checks, every case, the
#   device-code epilogue) under each path policy asked for, in one process, on every visible GPU,
#   then with every rank on GPU 0;
# - `ep run --dump` in every format on the scenarios issue dumps were checked on, each dump
#   checked by check_dump.py (payload, scales, decode with each row's source scale, combine
#   recomputed from the dump alone);
# - the user-facing error paths, run as a user would: a size that cannot be allocated is a typed
#   error and the process survives.
# Usage: ./gpu-conformance.sh [all | POLICY ...] [every-gpu] [one-gpu] [dumps] [errors]
#   POLICY: `./ep-gpu --modes` (default: default); every-gpu / one-gpu: the suite under those
#   policies in one process with ranks spread over every visible GPU / all on GPU 0. No
#   argument: all of it. Writes $OUT/conformance.txt (every
# line of every run) and $OUT/summary.txt (one line a run).
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/gpu-conformance}
mkdir -p "$OUT"
log=$OUT/conformance.txt
summary=$OUT/summary.txt
T0=$(date +%s)
note() { echo "$*" | tee -a "$summary"; }

# Path policies: ep-gpu lists them (ep conformance --list-policies).
read -r -a MODES <<< "$(./ep-gpu --modes)"
is_mode() { local m; for m in "${MODES[@]}"; do [ "$m" = "$1" ] && return 0; done; return 1; }
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(all every-gpu one-gpu dumps errors)
want() { local a; for a in "${args[@]}"; do [ "$a" = "$1" ] && return 0; done; return 1; }

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c | sed 's/^ */gpus: /' | tee -a "$summary"
n_gpus=$(nvidia-smi -L | wc -l)

# suite LABEL [VAR=value ...] [-- ARG ...]: one conformance run; its closing line into the summary.
suite() {
  local label=$1; shift
  local vars=() flags=()
  while [ "$#" -gt 0 ]; do
    if [ "$1" = "--" ]; then shift; flags=("$@"); break; fi
    vars+=("$1"); shift
  done
  echo "=== conformance $label (${vars[*]} ${flags[*]})" >> "$log"
  env "${vars[@]}" timeout 600 ./ep-gpu conformance --backend cuda "${flags[@]}" > /tmp/suite.txt 2>&1
  local rc=$?
  cat /tmp/suite.txt >> "$log"
  note "conformance $label: rc=$rc, $(grep -E '^[0-9]+ passed, [0-9]+ failed' /tmp/suite.txt | tail -n 1), $(grep -c '^skipped' /tmp/suite.txt) skipped, $(( $(date +%s) - T0 ))s"
  grep -E '^\[.*FAILED|^--- ' /tmp/suite.txt | head -n 10 | tee -a "$summary"
}

policies=()
for m in "${args[@]}"; do
  if [ "$m" = all ]; then policies=("${MODES[@]}"); elif is_mode "$m"; then policies+=("$m"); fi
done
[ "${#policies[@]}" -eq 0 ] && policies=(default)
list=$(IFS=,; echo "${policies[*]}")
if want every-gpu; then
  suite "$list on $n_gpus GPUs" -- --policy "$list"
fi
if want one-gpu && [ "$n_gpus" -gt 1 ]; then
  suite "$list, every rank on GPU 0" CUDA_VISIBLE_DEVICES=0 -- --policy "$list"
fi

# Dumps: every format, two scenarios, and the modes a dump must record; each checked from the
# dump alone.
want dumps && for f in bf16 fp8 mxfp4 nvfp4; do
  for args in "--scenario two_nodes_x4" "--scenario zero_token_ranks" "--scenario two_nodes_x4 --shared-expert" "--scenario uniform --skip-a2a 4" "--scenario two_nodes_x4 --unreduced"; do
    d=$(mktemp -d)
    # shellcheck disable=SC2086
    ./ep-gpu run --backend cuda --format "$f" $args --rounds 1 --dump "$d" >> "$log" 2>&1
    rc=$?
    check=$(python3 check_dump.py "$d" 2>&1 | tail -n 1)
    note "dump $f $args: run rc=$rc, check_dump: $check"
    rm -rf "$d"
  done
done

# Errors a user meets: a world too large for the device is a typed error, not an abort; a bad
# expert id on one rank is named by every other rank at once; a closed pipe ends a run quietly.
if want errors; then
  ./ep-gpu soak --backend cuda --hidden 1000000000 --ranks 2 --rounds 1 > /tmp/huge.txt 2>&1
  note "soak --hidden 1000000000 --ranks 2: rc=$? (134 would be an abort): $(tail -n 1 /tmp/huge.txt)"
  python3 - <<'PY'
import json
d = json.load(open("uniform.json"))
d["topk_ids"][1][0][0] = 999
json.dump(d, open("/tmp/bad-id.json", "w"))
PY
  start=$(date +%s%N)
  ./ep-gpu run --backend cuda --scenario /tmp/bad-id.json --rounds 1 > /tmp/bad.txt 2>&1
  rc=$?
  note "run with expert id 999 on rank 1: rc=$rc in $(( ($(date +%s%N) - start) / 1000000 )) ms (world init included):"
  sed 's/^/  /' /tmp/bad.txt | tee -a "$summary"
  ./ep-gpu run --backend cuda 2>/tmp/pipe-err.txt | head -n 2 > /dev/null
  note "ep run --backend cuda | head -2: rc=${PIPESTATUS[0]} (141: SIGPIPE, quiet), stderr $(wc -c < /tmp/pipe-err.txt) bytes"
  ./ep-gpu soak --backend cuda --ranks 4 --rounds 100 > /tmp/soak.txt 2>&1
  note "soak --backend cuda --ranks 4 --rounds 100: rc=$? $(tail -n 1 /tmp/soak.txt)"
fi
note "done in $(( $(date +%s) - T0 ))s"
