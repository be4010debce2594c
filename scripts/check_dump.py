#!/usr/bin/env python3
"""Load an `ep run --dump DIR` directory with NumPy and re-decode every received payload from its
raw bytes and scales, independently of the Rust code, using the packing documented in
manifest.json. Exits non-zero on any difference.

    python3 scripts/check_dump.py DIR
"""
import json
import sys
from pathlib import Path

import numpy as np

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def e4m3fn(b):
    b = b.astype(np.int32)
    sign = np.where(b & 0x80, -1.0, 1.0).astype(np.float32)
    exp, man = (b >> 3) & 0xF, (b & 7).astype(np.float32)
    sub = man * np.float32(2.0**-9)
    norm = (1 + man / 8) * np.exp2(exp - 7).astype(np.float32)
    v = np.where(exp == 0, sub, norm).astype(np.float32) * sign
    return np.where((b & 0x7F) == 0x7F, np.nan, v).astype(np.float32)


def bf16(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def unpack_e2m1(payload):
    lo, hi = payload & 0xF, payload >> 4
    return E2M1[np.stack([lo, hi], axis=-1).reshape(payload.shape[0], -1)]


def decode(fmt, files, load, input_scale):
    q = load("recv_tokens")
    rows = q.shape[0]
    if fmt == "bf16":
        return bf16(q.view(np.uint16))
    if fmt == "fp8":
        scales = load("recv_scales")  # [hidden/128, rows]
        return e4m3fn(q) * np.repeat(scales.T, 128, axis=1)
    if fmt == "mxfp4":
        s = load("recv_scales").astype(np.int32)  # [rows, hidden/32]
        scale = np.where(s == 255, np.nan, np.exp2((s - 127).astype(np.float32)))
        return unpack_e2m1(q) * np.repeat(scale, 32, axis=1).astype(np.float32)
    if fmt == "nvfp4":
        sf = e4m3fn(load("recv_scales_rowmajor"))  # [rows, hidden/16]
        return unpack_e2m1(q) * np.repeat(sf, 16, axis=1) / np.float32(input_scale)
    raise SystemExit(f"unknown format {fmt}")


def main(path):
    d = Path(path)
    m = json.loads((d / "manifest.json").read_text())
    fmt = m["format"]
    for r in m["ranks"]:
        files = r["files"]

        def load(name):
            meta = files[name]
            a = np.load(d / meta["file"])
            assert list(a.shape) == meta["shape"], (name, a.shape, meta["shape"])
            return a

        for name in files:
            load(name)
        scales = load("input_scales")
        got = decode(fmt, files, load, scales[0] if scales.size else 1.0)
        want = load("recv_decoded")
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        if not same.all():
            bad = np.argwhere(~same)[0]
            raise SystemExit(f"rank {r['rank']}: {fmt} decode differs at {bad}: {got[tuple(bad)]} vs {want[tuple(bad)]}")
        info, offsets = load("src_info"), load("row_offsets")
        assert offsets[-1] == info.shape[0] and (info[:, 0] >= -1).all()
    print(f"{d}: {len(m['ranks'])} ranks, format {fmt}: every file loads, payloads decode identically in NumPy")


if __name__ == "__main__":
    main(sys.argv[1])
