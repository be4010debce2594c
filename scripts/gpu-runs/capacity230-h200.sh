#!/usr/bin/env bash
# v49 call 5 (one H200) on b091ca2: rounds in a world built for 4096 tokens per rank (ep bench --max-tokens 4096, as a
# server builds one world for its largest batch) against the same rounds in a world built for their own tokens (the
# sweep's convention), decode to 1024 tokens, one rank alone and two ranks sharing the GPU. Then, for the same build,
# memcheck and racecheck on 2-rank soaks in 128-thread send blocks (EP_CUDA_SEND_THREADS=128; layout-first FP8 and the
# BF16 chain), and soaks.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
sc=()
for s in "1 1 fp8" "1 32 fp8" "1 128 fp8" "1 128 bf16" "1 512 fp8" "1 1024 fp8" "2 1 bf16" "2 128 fp8" "2 512 fp8" "2 1024 fp8"; do
  sc+=("$s" "$s --max-tokens 4096")
done
ab 2 "${sc[@]}" -- a:.
sanitize_with "EP_CUDA_SEND_THREADS=128 $LF" t128-lf fp8 memcheck racecheck
sanitize_with "EP_CUDA_SEND_THREADS=128" t128 bf16 memcheck
soak t128-lf 2 200 fp8 EP_CUDA_SEND_THREADS=128 $LF
soak default 4 100 bf16
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
