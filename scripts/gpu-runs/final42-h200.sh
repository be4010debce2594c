#!/usr/bin/env bash
# v28 final (2x H200): suites with the defaults, with every dispatch overlapped while the send blocks wait for the
# layout and every combine marked, and with every dispatch overlapped on a 1-block copy-out (the helpers take nearly
# every message); overlapped soaks; memcheck and racecheck on overlapped soaks; the sweep; then an experiment A/B:
# lb3/ = this build with __launch_bounds__(512, 3) on ep_dispatch_send (40 registers, not committed), with the copy
# blocks at 256 threads (EP_CUDA_COPY_THREADS) so that two send blocks and a copy block share an SM's registers.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
O="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0"
W="EP_CUDA_OWN_ROWS_WAIT_NS=2000000 EP_CUDA_MARKED_MIN_TOKENS=1"
timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance-defaults.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-defaults.txt)" >> $OUT/rc.txt
env $O $W timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance-all-overlapped-placed-marked.txt 2>&1; echo "conf all-overlapped placed marked rc=$? $(tail -n 1 $OUT/conformance-all-overlapped-placed-marked.txt)" >> $OUT/rc.txt
env $O EP_CUDA_OVERLAP_COPY_BLOCKS=1 timeout 100 ./ep-gpu conformance --backend cuda > /tmp/c3.txt 2>&1; echo "conf all-overlapped 1-block copy rc=$? $(tail -n 1 /tmp/c3.txt)" >> $OUT/rc.txt
grep -h -B2 -A12 FAILED $OUT/conformance-*.txt /tmp/c3.txt | head -40 >> $OUT/rc.txt
for f in bf16 fp8; do env $O timeout 60 ./ep-gpu soak --backend cuda --rounds 600 --format $f > /tmp/s.txt 2>&1; echo "soak $f overlapped rc=$? $(tail -n 1 /tmp/s.txt)" >> $OUT/rc.txt; done
env $O EP_CUDA_OVERLAP_COPY_BLOCKS=8 EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 120 ./ep-gpu soak --backend cuda --rounds 10 --format bf16 > /tmp/m.txt 2>&1; echo "memcheck soak bf16 overlapped 8-block copy rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' /tmp/m.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $O EP_CUDA_OVERLAP_COPY_BLOCKS=8 EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 120 ./ep-gpu soak --backend cuda --rounds 10 --format fp8 > /tmp/r.txt 2>&1; echo "racecheck soak fp8 overlapped 8-block copy rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|rounds matched' /tmp/r.txt | tr '\n' ' ')" >> $OUT/rc.txt
cat $OUT/rc.txt
timeout 240 ./ep-gpu bench --backend cuda --sweep --breakdown --out $OUT/sweep.json > $OUT/sweep.txt 2>&1; echo "sweep rc=$?" >> $OUT/rc.txt
run() { # label, build, env, tokens, format, [--skewed]
  local b=./ep-gpu; [ $2 != new ] && b=$2/ep-gpu
  env $3 timeout 60 $b bench --backend cuda --tokens $4 --format $5 $6 --passes 1 --breakdown > /tmp/b.txt 2>&1
  echo "$1 $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3}') | $(grep -E '^t[0-9]' /tmp/b.txt | tail -1 | cut -c24-)" | tee -a $OUT/ab.txt
}
T="EP_CUDA_COPY_THREADS=256 EP_CUDA_OVERLAP_COPY_BLOCKS"
for rep in 1 2; do
  run "bf16 new              " new X=1 4096 bf16
  run "bf16 new c256x132     " new "$T=132" 4096 bf16
  run "bf16 lb3              " lb3 X=1 4096 bf16
  run "bf16 lb3 c256x132     " lb3 "$T=132" 4096 bf16
  run "bf16 lb3 c256x176     " lb3 "$T=176" 4096 bf16
  run "bf16 lb3 c256x132 skew" lb3 "$T=132" 4096 bf16 --skewed
  run "bf16 new skew         " new X=1 4096 bf16 --skewed
  run "fp8 new               " new X=1 4096 fp8
  run "fp8 lb3               " lb3 X=1 4096 fp8
  run "1024 fp8 new          " new X=1 1024 fp8
  run "1024 fp8 lb3          " lb3 X=1 1024 fp8
  run "1024 bf16 new         " new X=1 1024 bf16
  run "1024 bf16 lb3         " lb3 X=1 1024 bf16
done
cat $OUT/rc.txt
