#!/usr/bin/env bash
# v43 review, call 6, one H200: . = the review (Spread's hold word loaded once, when the row is in, where v43 loaded it
# at the send's start and again there; the copy-out's walk wholly in 32 bits; combine stamp 10 gone) against base/ =
# a09ae2e (v43 as submitted). The suite in the four path modes, memcheck and racecheck soaks, a 3-rank single-launch
# soak; reps interleaved at decode sizes and at 1024 tokens (the overlapped copy-out's claimed walk); traces.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_modes review
sanitize review bf16 memcheck racecheck
soak "fp8 single-launch" 3 100 fp8 $S
ab 3 "1 1 bf16" "1 1 fp8" "2 1 bf16" "2 1 fp8" "1 8 fp8" "1 32 fp8" "1 1024 bf16" -- a-v43:base b-review:.
traces v43:base review:. -- "1 1 bf16"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
