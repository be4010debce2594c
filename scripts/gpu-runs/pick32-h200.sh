#!/usr/bin/env bash
# v27, call 3: FP8's copy grid with the own rows, three builds that differ only in FP8_PLACED_COPY_PER_SM (g132: 1 per SM,
# g165: 5/4, g198: 3/2), against base/ (6cac42d), two reps interleaved at 2048 and 4096 FP8, uniform and skewed. The
# build with the lowest sum of means that is nowhere more than 2% slower than base is taken: suites (defaults; every
# dispatch overlapped with the send blocks waiting for the layout, FP8 only and every format), the sweep, memcheck on a
# placed FP8 soak, a 1,000-round soak.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
for rep in 1 2; do for tf in "4096 fp8" "4096 fp8 --skewed" "2048 fp8" "2048 fp8 --skewed"; do read -r tok fmt skew <<< "$tf"
  for v in base g132 g165 g198; do
    timeout 60 $v/ep-gpu bench --backend cuda --tokens $tok --format $fmt $skew --passes 1 --breakdown > /tmp/b.txt 2>&1
    echo "$v $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3}') | $(grep -E '^t[0-9].*\|' /tmp/b.txt | head -1 | cut -c24- | sed 's/| ep_combine.*//')" | tee -a $OUT/ab.txt
  done; done; done
pick=$(python3 - $OUT/ab.txt <<'PY'
import collections, sys
m = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) > 2:
        try: m[(f[0], f[1])].append(float(f[2]))
        except ValueError: pass
mean = {k: sum(v) / len(v) for k, v in m.items()}
scen = sorted({s for _, s in mean})
ok = [b for b in ("g132", "g165", "g198") if all(mean.get((b, s), 1e9) <= 1.02 * mean[("base", s)] for s in scen)]
pool = ok or ["g132", "g165", "g198"]
best = min(pool, key=lambda b: sum(mean.get((b, s), 1e9) for s in scen))
for b in ("base", "g132", "g165", "g198"):
    print(b, " ".join(f"{s}={mean.get((b, s), 0):.1f}" for s in scen), file=sys.stderr)
print(best)
PY
)
echo "picked $pick" | tee -a $OUT/rc.txt
O="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0"
W="EP_CUDA_OWN_ROWS_WAIT_NS=2000000"
timeout 100 $pick/ep-gpu conformance --backend cuda > $OUT/conformance-defaults.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-defaults.txt)" >> $OUT/rc.txt
env $O $W timeout 100 $pick/ep-gpu conformance --backend cuda > $OUT/conformance-all-overlapped-placed.txt 2>&1; echo "conf all-overlapped placed rc=$? $(tail -n 1 $OUT/conformance-all-overlapped-placed.txt)" >> $OUT/rc.txt
env $O $W EP_CUDA_OWN_ROWS=1 timeout 100 $pick/ep-gpu conformance --backend cuda > $OUT/conformance-all-overlapped-placed-every-format.txt 2>&1; echo "conf all-overlapped placed every format rc=$? $(tail -n 1 $OUT/conformance-all-overlapped-placed-every-format.txt)" >> $OUT/rc.txt
grep -h -B2 -A12 FAILED $OUT/conformance-*.txt | head -40 > $OUT/fail.txt
cat $OUT/rc.txt
timeout 200 $pick/ep-gpu bench --backend cuda --sweep --breakdown --out $OUT/sweep.json > $OUT/sweep.txt 2>&1; echo "sweep rc=$?" >> $OUT/rc.txt
env $O $W EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 80 $pick/ep-gpu soak --backend cuda --rounds 10 --ranks 2 --format fp8 > $OUT/memcheck-fp8-placed.txt 2>&1; echo "memcheck fp8 overlapped placed rc=$? $(grep -h 'ERROR SUMMARY' $OUT/memcheck-fp8-placed.txt | head -1) $(tail -n 1 $OUT/memcheck-fp8-placed.txt)" >> $OUT/rc.txt
env $O timeout 60 $pick/ep-gpu soak --backend cuda --rounds 1000 --ranks 2 --format fp8 > $OUT/soak-fp8.txt 2>&1; echo "soak fp8 overlapped rc=$? $(tail -n 1 $OUT/soak-fp8.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt
