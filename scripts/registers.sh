#!/usr/bin/env bash
# Registers, spills and static shared memory of a program's kernels on sm_90, without a GPU: the PTX NVRTC makes of it
# here (`EP_PTX_DUMP`, the kernels_compile test; NVRTC from the nvidia-cuda-nvrtc wheel, as CI has it), through the ptxas
# of the nvidia-cuda-nvcc wheel (`CUDA_BIN`: another directory with ptxas). What a kernel change costs in residency before a device call.
#   scripts/registers.sh [PROGRAM [KERNEL_REGEX]]   PROGRAM: dispatch (default), combine, bench, swiglu, ...
set -euo pipefail
cd "$(dirname "$0")/.."
prog=${1:-dispatch}; kern=${2:-.}
cu13=$(python3 -c 'import nvidia.cu13, os; print(list(nvidia.cu13.__path__)[0])')
bin=${CUDA_BIN:-$cu13/bin}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# NVRTC from the wheel, as .ci/run finds it; EP_REQUIRE_NVRTC: fail rather than skip without it.
LD_LIBRARY_PATH="$cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" EP_REQUIRE_NVRTC=1 EP_PTX_DUMP="$tmp" cargo test -q -p ep-cuda --test kernels_compile > "$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
"$bin/ptxas" -arch=sm_90 -v "$tmp/$prog.ptx" -o "$tmp/out.cubin" 2>&1 | awk -v re="$kern" '
  /Compiling entry function/ { match($0, /'"'"'[^'"'"']+'"'"'/); name = substr($0, RSTART + 1, RLENGTH - 2) }
  /spill stores/ { spill = $5 " B spill stores" }
  /Used [0-9]+ registers/ && name ~ re { match($0, /Used [0-9]+ registers/); r = substr($0, RSTART + 5, RLENGTH - 15);
    match($0, /[0-9]+ bytes smem/); s = substr($0, RSTART, RLENGTH); printf "%-40s %3d registers, %s, %s\n", name, r, spill, s }'
