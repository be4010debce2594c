#!/usr/bin/env bash
# Builds a self-contained bundle for a GPU host that has no Rust toolchain: the `ep` binary
# (CUDA backend included; kernels are compiled there by NVRTC at run time) and the `ep-gpu`
# launcher that finds NVRTC. Usage: scripts/bundle-gpu.sh [DIR]   (default .gpu-bundle)
# Then on the host: DIR/ep-gpu conformance --backend cuda
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.gpu-bundle}
cargo build --release -p ep --features cuda
mkdir -p "$out"
cp target/release/ep "$out/ep"
# Symbols are most of the binary (27 MB -> 3 MB); device calls carry the bundle.
strip "$out/ep" 2>/dev/null || true
cp scripts/ep-gpu.sh "$out/ep-gpu"
# The device scripts' helpers (scripts/gpu-runs/lib.sh), beside the scripts copied in; the
# conformance matrix and the dump checker it runs.
cp scripts/gpu-runs/lib.sh "$out/lib.sh"
cp scripts/gpu-conformance.sh scripts/check_dump.py fixtures/uniform.json "$out/"
chmod +x "$out/ep" "$out/ep-gpu" "$out/gpu-conformance.sh"
echo "bundle in $out: $(du -sh "$out" | cut -f1)"
