#!/usr/bin/env bash
# v53 review, call 4 (one H200): the event-timed floors with two ranks sharing the GPU read 7.2 / 7.6 us (flag / row
# exchange) in call 3, after PhaseClock, against 5.8-5.9 / 6.3-6.4 in call 1. base/ = 651c2d3 (call 1's bench code)
# against the working tree, interleaved, three reps each, events and step; two and four ranks.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/rc.txt
fl() { local label=$1 dir=$2; shift 2; echo "== $label" >> $OUT/floors.txt
  timeout 120 $dir/ep-gpu bench --backend cuda --passes 1 --tokens 1 "$@" 2>&1 | grep -E '^floor|^t[0-9]|rror' >> $OUT/floors.txt; echo "$label rc=$? $(elapsed)" >> $OUT/rc.txt; }
for rep in 1 2 3; do
  for t in events step; do
    fl "2r $t base" base --ranks 2 --timing $t
    fl "2r $t head" . --ranks 2 --timing $t
  done
  fl "4r events base" base --ranks 4
  fl "4r events head" . --ranks 4
done
cat $OUT/rc.txt
cat $OUT/floors.txt
