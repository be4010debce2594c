#!/usr/bin/env bash
# v34 call 3, one H100: the probes (with instruction fetch), then the single-launch dispatch compiled for BF16 alone
# (fmt/ = branch exp-fmt: `fmt = EP_FMT_BF16` at the top of ep_dispatch_single_body, 156 -> 115 KB of SASS) against
# HEAD on BF16 decode sizes, three reps interleaved; and a trace of both ranks (1 token BF16, two ranks sharing).
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/rc.txt
timeout 120 ./ep-gpu bench --backend cuda --probe-signals > $OUT/probe.txt 2>&1; echo "probe rc=$?" >> $OUT/rc.txt
grep -E "code fetch|globaltimer" $OUT/probe.txt >> $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 $1/ep-gpu bench --backend cuda --ranks $2 --tokens $3 --format $4 --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2 3; do
  for rt in "1 1 bf16" "1 32 bf16" "1 128 bf16" "2 1 bf16" "2 32 bf16"; do set -- $rt
    b "${1}r $2 $3 a-head"; run . $1 $2 $3
    b "${1}r $2 $3 b-fmt"; run fmt $1 $2 $3
  done
done
EP_CUDA_TRACE=all timeout 120 ./ep-gpu bench --backend cuda --ranks 2 --tokens 1 --format bf16 --passes 1 --rounds 40 > $OUT/trace-both-1tok-bf16.txt 2>&1; echo "trace rc=$?" >> $OUT/rc.txt
cat $OUT/rc.txt
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
