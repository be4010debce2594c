#!/usr/bin/env bash
# v33 call 6, one H200: which half of the decode change reads +1 us at 128 tokens BF16 with one rank alone?
# base/ = 33b1014 (v32); rot/ = 240a352 without the message counts loaded beside the layout (the walk's rotation only,
# a build for this call); . = 240a352. Three builds interleaved, two reps.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 $1/ep-gpu bench --backend cuda --ranks $2 --tokens $3 --format $4 --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 128 bf16" "1 128 fp8" "1 1 bf16" "1 32 fp8" "2 1 fp8"; do set -- $rt
    b "${1}r $2 $3 a-base"; run base $1 $2 $3
    b "${1}r $2 $3 b-rot"; run rot $1 $2 $3
    b "${1}r $2 $3 c-new"; run . $1 $2 $3
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
