#!/usr/bin/env bash
# Runs the bundled `ep` on a GPU host. libcuda is on the loader path there, libnvrtc is not:
# find it under $CUDA_HOME, /usr/local/cuda*, or a pip-installed nvidia-cuda-nvrtc, and put it on
# LD_LIBRARY_PATH. NVLink multicast stays off (it can take a shared host's GPUs down).
# EP_WRAP runs the binary under a tool, e.g. EP_WRAP="compute-sanitizer --tool memcheck"; EP_BIN
# names another binary of the bundle to run the same way (the GPU conformance test binary).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

find_nvrtc() {
  local d sub
  for d in ${CUDA_HOME:-} /usr/local/cuda /usr/local/cuda-*; do
    for sub in targets/x86_64-linux/lib lib64 lib; do
      if compgen -G "$d/$sub/libnvrtc.so*" > /dev/null; then echo "$d/$sub"; return 0; fi
    done
  done
  python3 - 2>/dev/null <<'PY' || true
import os, nvidia.cu13
print(os.path.join(list(nvidia.cu13.__path__)[0], "lib"))
PY
}

# EP_MODE names a path mode: the CudaOptions variables (docs/tuning.md) that make every round take
# one way through the phases, the same set the GPU test runner's policies use. One table, read by
# gpu-conformance.sh and gpu-sanitize.sh through EP_MODE; `ep-gpu --modes` lists the names.
modes="default single overlap layout marked multi beside"
if [ "${1:-}" = "--modes" ]; then echo "$modes"; exit 0; fi
case "${EP_MODE:-default}" in
  default) ;;
  single) export EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000 ;;
  overlap) export EP_CUDA_OVERLAP_MIN_TOKENS=1 ;;
  layout) export EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 ;;
  marked) export EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000 \
                 EP_CUDA_SINGLE_MARKED_MIN_TOKENS=1 EP_CUDA_LL_MAX_TOKENS=0 ;;
  multi) export EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0 ;;
  beside) export EP_CUDA_MARKED_MIN_TOKENS=1 EP_CUDA_LEAN_MIN_TOKENS=0 ;;
  *) echo "ep-gpu: unknown EP_MODE ${EP_MODE}; modes: $modes" >&2; exit 2 ;;
esac

lib=$(find_nvrtc | head -n 1)
if [ -z "$lib" ]; then
  echo "ep-gpu: libnvrtc not found; set CUDA_HOME to the CUDA toolkit" >&2
  exit 2
fi
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0
# Spin-waiting kernels must never queue behind each other (see ep-cuda's driver.rs).
export CUDA_MODULE_LOADING=${CUDA_MODULE_LOADING:-EAGER}
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
# shellcheck disable=SC2086
exec ${EP_WRAP:-} "$here/${EP_BIN:-ep}" "$@"
