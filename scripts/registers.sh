#!/usr/bin/env bash
# Registers, spills and shared memory of a program's kernels on sm_90, compiled here as NVRTC compiles them on the
# GPU host (the same flags; the program joined as kernels.rs joins it), with the nvcc and ptxas of the
# nvidia-cuda-nvcc wheel. What a kernel change costs in residency, without a GPU.
#   scripts/registers.sh [PROGRAM [KERNEL_REGEX]]   PROGRAM: dispatch (default), combine, or a file of src/kernels
set -euo pipefail
prog=${1:-dispatch}; kern=${2:-.}
k=$(cd "$(dirname "$0")/../crates/ep-cuda/src/kernels" && pwd)
bin=${CUDA_BIN:-$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "bin"))')}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
{
  echo "#define EP_LL_MAX_TOKENS 8"
  cat "$k/common.cuh"
  if [ -d "$k/$prog" ]; then
    # The files in kernels.rs's order for the program.
    for f in $(grep -A1 "joined!(\"$prog\"" "$k/../kernels.rs" | grep -o '"[a-z_]*\.cu"' | tr -d '"'); do
      echo "#line 1 \"$prog/$f\""; cat "$k/$prog/$f"
    done
  else
    cat "$k/$prog"
  fi
} > "$tmp/p.cu"
PATH="$bin:$PATH" nvcc -arch=sm_90 -cubin -o "$tmp/p.cubin" --fmad=false --prec-div=true --prec-sqrt=true --ftz=false \
  -Xptxas -v "$tmp/p.cu" 2>&1 | awk -v re="$kern" '
  /Compiling entry function/ { match($0, /'"'"'[^'"'"']+'"'"'/); name = substr($0, RSTART + 1, RLENGTH - 2) }
  /spill stores/ { spill = $5 " B spill stores" }
  /Used [0-9]+ registers/ && name ~ re { match($0, /Used [0-9]+ registers/); r = substr($0, RSTART + 5, RLENGTH - 15);
    match($0, /[0-9]+ bytes smem/); s = substr($0, RSTART, RLENGTH); printf "%-40s %3d registers, %s, %s\n", name, r, spill, s }'
