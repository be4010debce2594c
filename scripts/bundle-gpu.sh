#!/usr/bin/env bash
# Builds a self-contained bundle for a GPU host that has no Rust toolchain: the `ep` binary
# (CUDA backend included; kernels are compiled there by NVRTC at run time) and the `ep-gpu`
# launcher that finds NVRTC. Usage: scripts/bundle-gpu.sh [DIR]   (default .gpu-bundle)
# Then on the host: DIR/ep-gpu conformance --backend cuda, or one of the four device scripts
# copied in (each says its usage at its top): gpu-conformance.sh (the suite in every path mode,
# dumps, errors), gpu-sweep.sh (`ep bench --sweep` into $OUT with device, date and commit),
# gpu-ab.sh (two bundles' builds interleaved, a summary table), gpu-sanitize.sh
# (compute-sanitizer on soaks).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.gpu-bundle}
cargo build --release -p ep-cli
mkdir -p "$out"
cp target/release/ep "$out/ep"
# Symbols are most of the binary (27 MB -> 3 MB); device calls carry the bundle.
strip "$out/ep" 2>/dev/null || true
cp scripts/ep-gpu.sh "$out/ep-gpu"
# The device scripts, the dump checker and the fixture gpu-conformance.sh runs; COMMIT names the
# build (a trailing + when the tree had changes), for the scripts' headers.
scripts=(gpu-conformance.sh gpu-sweep.sh gpu-ab.sh gpu-sanitize.sh)
for s in "${scripts[@]}"; do cp "scripts/$s" "$out/$s"; chmod +x "$out/$s"; done
cp scripts/check_dump.py fixtures/uniform.json "$out/"
rm -f "$out/lib.sh"
echo "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo +)" > "$out/COMMIT"
chmod +x "$out/ep" "$out/ep-gpu"
echo "bundle in $out: $(du -sh "$out" | cut -f1)"
