#!/usr/bin/env bash
# v39 call 10, one H200: new = HEAD (ep_copy_to's pieces past the first as one body, ep_copy_batches, inline or out of
# line; the multi-kernel copy-outs and sends compile a few instructions differently, ep_dispatch_copy_messages without
# its 40 bytes of spills) against base = a096f2f (call 8's). Checks on new: every world with the defaults and with every
# phase single-launch and marked; memcheck on a single-launch marked soak and on a 4-rank soak with the defaults. A/B, two
# reps interleaved.
cd "$(dirname "$0")"
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
S="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000"
M="EP_CUDA_SINGLE_MARKED_MIN_TOKENS=1 EP_CUDA_LL_MAX_TOKENS=0"
conf() { local name=$1; shift; local t0=$(date +%s); env "$@" timeout 150 ./ep-gpu conformance --backend cuda > /tmp/conformance-$name.txt 2>&1; echo "conf $name rc=$? $(( $(date +%s) - t0 ))s $(tail -n 1 /tmp/conformance-$name.txt) ($(grep -c slices /tmp/conformance-$name.txt) waits of 2+ slices)" >> $OUT/rc.txt; grep -h -B2 -A6 -E 'FAILED|FAIL ' /tmp/conformance-$name.txt | head -20 >> $OUT/rc.txt; }
conf defaults EP_X=1
conf single-marked $S $M
env $S $M EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 100 ./ep-gpu soak --backend cuda --ranks 2 --rounds 10 > /tmp/san1.txt 2>&1; echo "memcheck soak2 single marked rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' /tmp/san1.txt | tr '\n' ' ')" >> $OUT/rc.txt
EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 150 ./ep-gpu soak --backend cuda --ranks 4 --rounds 6 > /tmp/san2.txt 2>&1; echo "memcheck soak4 defaults rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' /tmp/san2.txt | tr '\n' ' ')" >> $OUT/rc.txt
echo "checks done $(( $(date +%s) - T0 ))s" >> $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { local dir=$1; shift; env "$@" timeout 60 $dir/ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 1 bf16" "1 128 fp8" "2 1 bf16" "1 1024 fp8" "1 4096 bf16" "1 4096 fp8" "2 1024 bf16"; do set -- $rt; R=$1 T=$2 F=$3
    b "${R}r $T $F a-base"; run base EP_X=1
    b "${R}r $T $F b-new"; run . EP_X=1
  done
  echo "rep $rep done $(( $(date +%s) - T0 ))s" >> $OUT/rc.txt
done
cat $OUT/rc.txt
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
