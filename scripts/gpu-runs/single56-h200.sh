#!/usr/bin/env bash
# v30, 2x H200: the single-launch thresholds again (measured at v15 against the four-kernel path; the
# single kernels have changed since, v16-v18). 993a406's build, env only, reps interleaved:
# def = the defaults; dc = single-launch dispatch and combine at every size (=4096); off = neither (=0).
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/ab.txt
run() { timeout 60 ./v29/ep-gpu bench --backend cuda --tokens $1 --format $2 --passes 1 2>&1 | grep -E '^t[0-9]' >> $OUT/ab.txt; }
for rep in 1 2; do for f in fp8 bf16; do
  for t in 128 256 512 1024; do
    for c in def dc off; do
      [ $t = 128 ] && [ $c = dc ] && continue
      [ $t != 128 ] && [ $c = off ] && continue
      echo "== rep $rep $t $f $c" >> $OUT/ab.txt
      case $c in
        def) run $t $f ;;
        dc) (export EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=4096 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=4096; run $t $f) ;;
        off) (export EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0; run $t $f) ;;
      esac
    done
  done
done; done
cat $OUT/ab.txt
