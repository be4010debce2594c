#!/usr/bin/env bash
# v50 review call 4 (one GPU) on 529b773 (HEAD as submitted: the programs joined by one macro; PTX byte-identical to
# 9b647cd's): the suite in the four path modes and marked, memcheck on a default soak.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
conf_all head
memcheck default 2 6
cat $OUT/rc.txt
