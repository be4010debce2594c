#!/usr/bin/env bash
# v50 second review, call 5 (one GPU) on cb6b5d7 (HEAD as submitted: ep bench builds each scenario's config once,
# dispatch_wait and the bench read the layout through one helper; PTX byte-identical to 9b647cd's): the suite in the
# four path modes and marked, memcheck on a default soak, one bench rep of each path the change touches.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
conf_all head
memcheck default 2 6
ab 1 "1 128 fp8" "2 512 fp8 --max-tokens 1024" -- b-head:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
