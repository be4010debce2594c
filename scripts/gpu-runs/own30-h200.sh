#!/usr/bin/env bash
# v27, call 1: the sender writes its own rank's rows of an overlapped round (ep_place_own_rows). Suites with the defaults,
# every dispatch overlapped, and every dispatch overlapped with the send blocks waiting for the layout
# (EP_CUDA_OWN_ROWS_WAIT_NS, so that every own message takes the rows path), that with every combine marked too (msg_rows
# written by the sender); soaks; a grid trace at 4096 BF16 / FP8 (how many blocks placed); A/B against 6cac42d (base/),
# two reps interleaved; the copy grid with half the copy-out's work left.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
O="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0"
W="EP_CUDA_OWN_ROWS_WAIT_NS=2000000"
timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance-defaults.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-defaults.txt)" >> $OUT/rc.txt
env $O timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance-all-overlapped.txt 2>&1; echo "conf all-overlapped rc=$? $(tail -n 1 $OUT/conformance-all-overlapped.txt)" >> $OUT/rc.txt
env $O $W timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance-all-overlapped-placed.txt 2>&1; echo "conf all-overlapped placed rc=$? $(tail -n 1 $OUT/conformance-all-overlapped-placed.txt)" >> $OUT/rc.txt
env $O $W EP_CUDA_MARKED_MIN_TOKENS=1 timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance-all-overlapped-placed-marked.txt 2>&1; echo "conf all-overlapped placed marked rc=$? $(tail -n 1 $OUT/conformance-all-overlapped-placed-marked.txt)" >> $OUT/rc.txt
env $O $W timeout 60 ./ep-gpu soak --backend cuda --rounds 500 --ranks 2 --format fp8 > $OUT/soak-fp8.txt 2>&1; echo "soak fp8 overlapped placed rc=$? $(tail -n 1 $OUT/soak-fp8.txt)" >> $OUT/rc.txt
env $O timeout 60 ./ep-gpu soak --backend cuda --rounds 500 --ranks 2 > $OUT/soak-bf16.txt 2>&1; echo "soak bf16 overlapped rc=$? $(tail -n 1 $OUT/soak-bf16.txt)" >> $OUT/rc.txt
grep -h -B2 -A12 FAILED $OUT/conformance-*.txt | head -40 > $OUT/fail.txt
cat $OUT/rc.txt
for f in bf16 fp8; do
  EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ./ep-gpu bench --backend cuda --tokens 4096 --format $f --passes 1 --rounds 5 > $OUT/trace-$f.txt 2>&1
  python3 trace_grid.py $OUT/trace-$f.txt > $OUT/grid-$f.txt 2>&1; gzip $OUT/trace-$f.txt
done
for rep in 1 2; do
for tf in "4096 bf16" "4096 bf16 --skewed" "4096 fp8" "4096 fp8 --skewed" "2048 fp8" "1024 bf16"; do read -r tok fmt skew <<< "$tf"
  for v in base new; do b=./ep-gpu; [ $v = base ] && b=base/ep-gpu
    timeout 60 $b bench --backend cuda --tokens $tok --format $fmt $skew --passes 1 --breakdown > /tmp/b.txt 2>&1
    echo "$v $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3, $4, $5}') | $(grep -E '^t[0-9].*\|' /tmp/b.txt | head -1 | cut -c24-)" | tee -a $OUT/ab.txt
  done; done; done
for tf in "4096 bf16 66" "4096 bf16 44" "4096 bf16 --skewed 66" "4096 fp8 198" "4096 fp8 132" "4096 fp8 --skewed 198"; do
  set -- $tf; tok=$1; fmt=$2; shift 2; skew=""; [ "$1" = --skewed ] && { skew=--skewed; shift; }
  EP_CUDA_OVERLAP_COPY_BLOCKS=$1 timeout 60 ./ep-gpu bench --backend cuda --tokens $tok --format $fmt $skew --passes 1 --breakdown > /tmp/b.txt 2>&1
  echo "copy$1 $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3, $4, $5}') | $(grep -E '^t[0-9].*\|' /tmp/b.txt | head -1 | cut -c24-)" | tee -a $OUT/ab.txt
done
cat $OUT/rc.txt
