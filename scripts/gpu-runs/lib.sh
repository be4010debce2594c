# Helpers for the device scripts, sourced by those from v39's review on (`. "$(dirname "$0")/lib.sh"`;
# scripts/bundle-gpu.sh copies this file into the bundle). The earlier scripts each spell them out:
# they are kept as the records of the calls they ran. $OUT is the device tool's output folder.
S="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000" # every phase single-launch
M="EP_CUDA_SINGLE_MARKED_MIN_TOKENS=1 EP_CUDA_LL_MAX_TOKENS=0"                          # every single-launch combine marked
T0=$(date +%s)
elapsed() { echo "$(( $(date +%s) - T0 ))s"; }
# conf NAME [VAR=value ...]: the conformance suite on every world, its last line and any failure into rc.txt
# (the build in $D, default the bundle's own: `D=base conf base`).
conf() {
  local name=$1; shift
  env "$@" timeout 150 ${D:-.}/ep-gpu conformance --backend cuda > /tmp/conformance-$name.txt 2>&1
  echo "conf $name rc=$? $(elapsed) $(tail -n 1 /tmp/conformance-$name.txt) ($(grep -c slices /tmp/conformance-$name.txt) waits of 2+ slices)" >> $OUT/rc.txt
  grep -h -B2 -A6 -E 'FAILED|FAIL ' /tmp/conformance-$name.txt | head -20 >> $OUT/rc.txt
}
# conf_modes NAME: the suite in the four path modes: the defaults (the waits logged), every phase single-launch, every
# dispatch overlapped, every dispatch layout-first.
conf_modes() {
  conf "$1" EP_CUDA_LOG_WAITS=1
  conf "$1-single" $S
  conf "$1-overlap" EP_CUDA_OVERLAP_MIN_TOKENS=1
  conf "$1-layout" EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0
}
# conf_marked NAME: the suite with the defaults (the waits logged), every phase single-launch, and every phase
# single-launch with every single-launch combine marked.
conf_marked() {
  conf "$1" EP_CUDA_LOG_WAITS=1
  conf "$1-single" $S
  conf "$1-marked" $S $M
}
# conf_all NAME: the suite in the four path modes (conf_modes), then with every phase single-launch and every single-launch
# combine marked.
conf_all() {
  conf_modes "$1"
  conf "$1-marked" $S $M
}
# soak LABEL RANKS ROUNDS FORMAT [VAR=value ...]: a soak of the bundle's build (bit-exact against the oracle each round),
# its last line into rc.txt as "soak RANKSr LABEL".
soak() {
  local label=$1 ranks=$2 rounds=$3 format=$4; shift 4
  local log="/tmp/soak-${label// /-}-$ranks.txt"
  env "$@" timeout 120 ./ep-gpu soak --backend cuda --ranks $ranks --rounds $rounds --format $format > "$log" 2>&1
  echo "soak ${ranks}r $label rc=$? $(tail -n 1 "$log")" >> $OUT/rc.txt
}
# memcheck NAME RANKS ROUNDS [VAR=value ...]: a soak under compute-sanitizer's memcheck.
memcheck() {
  local name=$1 ranks=$2 rounds=$3; shift 3
  local log="/tmp/memcheck-${name// /-}.txt" # (a name may have spaces, as soak's labels do)
  env "$@" EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 150 ./ep-gpu soak --backend cuda --ranks $ranks --rounds $rounds > "$log" 2>&1
  echo "memcheck $name rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' "$log" | tr '\n' ' ')" >> $OUT/rc.txt
}
# b LABEL, then run DIR [VAR=value ...] with R, T, F (and X, more bench arguments, e.g. --skewed) set: one `ep bench` of
# the build in DIR into ab.txt under LABEL.
b() { echo "== $*" >> $OUT/ab.txt; }
run() { local dir=$1; shift; env "$@" timeout 60 $dir/ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F ${X:-} --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
# summary: ab.txt as "label | dispatch p50 p95 combine p50 p95", sorted by label.
summary() { awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4; }
# split_at_dashes WORD ... -- WORD ...: the words before `--` into BEFORE, those after it into AFTER.
split_at_dashes() {
  BEFORE=()
  while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do BEFORE+=("$1"); shift; done
  [ "$#" -gt 0 ] && shift
  AFTER=("$@")
}
# ab REPS "R T F [ARG ...]" ... -- LABEL:DIR[,VAR=value ...] ...: every scenario (bench arguments after the format, such
# as --skewed, go to each run) under every build (a directory, and the
# environment after it, if any), REPS times, the builds interleaved in the order given (one `run` each), e.g.
# `ab 2 "2 128 fp8" "1 1 bf16" -- a-base:base b-new:. c-single:.,EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000`.
ab() {
  local reps=$1 rep sc lb spec envs; shift
  split_at_dashes "$@"
  local scen=("${BEFORE[@]}") builds=("${AFTER[@]}")
  for rep in $(seq "$reps"); do for sc in "${scen[@]}"; do
    set -- $sc; R=$1 T=$2 F=$3; shift 3; X="$*"
    for lb in "${builds[@]}"; do
      spec=${lb#*:}
      b "${R}r $T $F ${X:+$X }${lb%%:*}"
      envs=; case $spec in *,*) envs=${spec#*,} ;; esac
      run "${spec%%,*}" ${envs//,/ }
    done
  done; done
  echo "a/b done $(elapsed)" >> $OUT/rc.txt
}
# traces LABEL:DIR ... -- "R T F" ...: EP_CUDA_TRACE=all traces of rank 0 (40 rounds) of each build and scenario into
# /tmp/tr/trace-<R>r-<T>-<F>-<LABEL>.txt, then all of them into $OUT/traces.tgz (v41's scripts spelled this out).
traces() {
  local sc lb
  split_at_dashes "$@"
  local builds=("${BEFORE[@]}") scen=("${AFTER[@]}")
  mkdir -p /tmp/tr
  for lb in "${builds[@]}"; do for sc in "${scen[@]}"; do
    set -- $sc
    EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ${lb#*:}/ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --passes 1 --rounds 40 2>&1 | grep -E '^trace (dispatch|combine|gate)|^t[0-9]|rror' > /tmp/tr/trace-$1r-$2-$3-${lb%%:*}.txt
  done; done
  tar czf $OUT/traces.tgz -C /tmp/tr .
  echo "traces done $(elapsed)" >> $OUT/rc.txt
}
# sanitize NAME FORMAT TOOL ...: a 2-rank, 6-round soak of FORMAT under each compute-sanitizer TOOL (memcheck,
# racecheck, synccheck), its summary line into rc.txt.
sanitize() {
  local name=$1 format=$2 tool; shift 2
  for tool in "$@"; do
    env EP_WRAP="compute-sanitizer --tool $tool --print-limit 10" timeout 120 ${D:-.}/ep-gpu soak --backend cuda --ranks 2 --rounds 6 --format $format > /tmp/$tool.txt 2>&1
    echo "$tool $name 2r $format rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rounds matched' /tmp/$tool.txt | tr '\n' ' ')" >> $OUT/rc.txt
  done
}
# sanitize_with "VAR=value ..." NAME FORMAT TOOL ...: sanitize with those variables set (e.g. "$S": single-launch).
sanitize_with() { local vars=$1; shift; ( export $vars; sanitize "$@" ); }
# delays REPS "R T F" ... -- SITE ...: causal profiling of the build in the bundle (EP_CUDA_DELAY=site:1000, common.cuh):
# each scenario without a delay, then with a 1 us spin at each site, REPS times, into ab.txt (v41 calls 8 and 10).
delays() {
  local reps=$1 site builds=(d0-none:.); shift
  split_at_dashes "$@"
  for site in "${AFTER[@]}"; do builds+=("d$site-1us:.,EP_CUDA_DELAY=$site:1000"); done
  ab "$reps" "${BEFORE[@]}" -- "${builds[@]}"
}
# check_own_rows NAME: the checks of the send's own rows (v47): the suite in the four path modes (conf_modes) and with
# every own message placed by its sender (every dispatch overlapped, every format, the send waiting for the layout), then
# memcheck and racecheck on a layout-first FP8 soak and a placed BF16 one.
LF="EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0"
OWN="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_OWN_ROWS=1 EP_CUDA_OWN_ROWS_WAIT_NS=1000000"
check_own_rows() {
  conf_modes "$1"
  conf "$1-own" $OWN
  sanitize_with "$LF" lf fp8 memcheck racecheck
  sanitize_with "$OWN" own bf16 memcheck racecheck
}
