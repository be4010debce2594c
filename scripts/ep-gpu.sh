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

# EP_MODE names a path policy (ep_cuda::PathPolicy, the one list): `ep` reads it as
# EP_CUDA_PATH_POLICY. `ep-gpu --modes` lists the names.
if [ -n "${EP_MODE:-}" ]; then export EP_CUDA_PATH_POLICY=$EP_MODE; fi

lib=$(find_nvrtc | head -n 1)
if [ -z "$lib" ]; then
  echo "ep-gpu: libnvrtc not found; set CUDA_HOME to the CUDA toolkit" >&2
  exit 2
fi
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0
# Spin-waiting kernels must never queue behind each other (ep-cuda's driver.rs,
# DRIVER_ENVIRONMENT). Module loading is left to the driver's default: ep-cuda loads its kernels
# at start whatever the mode.
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
if [ "${1:-}" = "--modes" ]; then exec "$here/ep" conformance --list-policies; fi
# shellcheck disable=SC2086
exec ${EP_WRAP:-} "$here/${EP_BIN:-ep}" "$@"
