#!/usr/bin/env python3
"""Check an `ep run --dump DIR` directory from the dump alone, with NumPy, independently of the
Rust code, following the packing and the rules manifest.json documents:

- every file loads with the shape the manifest gives;
- each row's source rank is the one src_offsets names (src_rank);
- every received payload decodes, from its raw bytes and scales, to recv_decoded: NVFP4 with the
  input scale of the row's SOURCE token (input_scales of rank src_rank, token src_info[:, 0]);
- BF16 rows are the source token's bits, unchanged (NaN payloads included);
- the combine is recomputed from expert_out, the routing, the router weights and the modes, and
  compared with the dumped combined output bit for bit.

Exits non-zero on any difference, or when the dump lacks what the combine needs (a dump written
before dumps recorded their modes, expert outputs and source ranks).

    python3 scripts/check_dump.py DIR
"""
import json
import sys
from pathlib import Path

import numpy as np

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)
F32 = np.float32


class Failed(Exception):
    pass


def e4m3fn(b):
    b = b.astype(np.int32)
    sign = np.where(b & 0x80, -1.0, 1.0).astype(F32)
    exp, man = (b >> 3) & 0xF, (b & 7).astype(F32)
    sub = man * F32(2.0**-9)
    norm = (1 + man / 8) * np.exp2(exp - 7).astype(F32)
    v = np.where(exp == 0, sub, norm).astype(F32) * sign
    return np.where((b & 0x7F) == 0x7F, np.nan, v).astype(F32)


def e4m3fn_rne(x):
    """f32 -> e4m3fn bytes: round to nearest even, saturating to +-448, NaN 0x7F (format/scalar.rs)."""
    x = x.astype(F32)
    sign = np.where(np.signbit(x), 0x80, 0).astype(np.int32)
    a = np.abs(x)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        sub = np.rint(a * F32(512.0)).astype(np.int64)  # below 2^-6: quantum 2^-9; 8 is 0x08
        _, e = np.frexp(np.where(a > 0, a, F32(1.0)))
        e = (e - 1).astype(np.int32)  # floor(log2(a)), exact
        m = np.rint((a * np.exp2(-e).astype(F32) - F32(1.0)) * F32(8.0)).astype(np.int64)
        e = np.where(m == 8, e + 1, e)
        m = np.where(m == 8, 0, m)
        norm = ((e + 7) << 3) | m
        over = (e > 8) | ((e == 8) & (m > 6))
    out = np.where(a < F32(2.0**-6), sub, np.where(over | (a >= F32(448.0)), 0x7E, norm))
    out = sign | out.astype(np.int32)
    return np.where(np.isnan(x), 0x7F, out).astype(np.uint8)


def bf16(bits):
    return (bits.astype(np.uint32) << 16).view(F32)


def round_bf16(x):
    """f32 -> bf16 bits, nearest even; a NaN is the canonical 0x7FC0 (numerics::round_bf16)."""
    b = np.ascontiguousarray(x, F32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), r)


def unpack_e2m1(payload):
    lo, hi = payload & 0xF, payload >> 4
    return E2M1[np.stack([lo, hi], axis=-1).reshape(payload.shape[0], -1)]


def decode(fmt, load, row_scales):
    q = load("recv_tokens")
    if fmt == "bf16":
        return bf16(q.view(np.uint16))
    if fmt == "fp8":
        scales = load("recv_scales")  # [hidden/128, rows]
        return e4m3fn(q) * np.repeat(scales.T, 128, axis=1)
    if fmt == "mxfp4":
        s = load("recv_scales").astype(np.int32)  # [rows, hidden/32]
        scale = np.where(s == 255, np.nan, np.exp2((s - 127).astype(F32)))
        return unpack_e2m1(q) * np.repeat(scale, 32, axis=1).astype(F32)
    if fmt == "nvfp4":
        # (e2m1 * sf) / input_scale, left to right, in f32; each row with its source token's scale.
        sf = e4m3fn(load("recv_scales_rowmajor"))  # [rows, hidden/16]
        return (unpack_e2m1(q) * np.repeat(sf, 16, axis=1)) / row_scales.astype(F32)[:, None]
    raise Failed(f"unknown format {fmt}")


def source_ranks(src_offsets, row_offsets, rows):
    """Each row's source rank from src_offsets (-1 padding): the contract's own definition."""
    out = np.full(rows, -1, np.int32)
    for g in range(src_offsets.shape[0]):
        for s in range(src_offsets.shape[1] - 1):
            out[src_offsets[g, s]:src_offsets[g, s + 1]] = s
    return out


def first_difference(got, want):
    bad = np.argwhere(got != want)
    return None if bad.size == 0 else tuple(int(i) for i in bad[0])


class Rank:
    def __init__(self, d, meta):
        self.d, self.meta, self.files = d, meta, meta["files"]
        self.rank = meta["rank"]

    def has(self, name):
        return name in self.files

    def load(self, name):
        meta = self.files[name]
        a = np.load(self.d / meta["file"])
        if list(a.shape) != meta["shape"]:
            raise Failed(f"rank {self.rank}: {name} has shape {a.shape}, manifest says {meta['shape']}")
        return a


def check_decode(fmt, ranks, problems):
    for r in ranks:
        for name in r.files:
            r.load(name)
        info, offsets, src_off = r.load("src_info"), r.load("row_offsets"), r.load("src_offsets")
        rows = info.shape[0]
        if offsets[-1] != rows or not (info[:, 0] >= -1).all():
            problems.append(f"rank {r.rank}: row_offsets/src_info inconsistent")
        src = source_ranks(src_off, offsets, rows)
        r.src = src
        if r.has("src_rank") and not np.array_equal(r.load("src_rank"), src):
            problems.append(f"rank {r.rank}: src_rank differs from src_offsets' source ranks")
        # The input scale of each row's source token, from the SENDER's input_scales.
        row_scales = np.ones(rows, F32)
        for row in np.nonzero((src >= 0) & (info[:, 0] >= 0))[0]:
            row_scales[row] = ranks[src[row]].load_cached("input_scales")[info[row, 0]]
        if r.has("recv_input_scales") and not np.array_equal(r.load("recv_input_scales"), row_scales):
            problems.append(f"rank {r.rank}: recv_input_scales are not the source tokens' input scales")
        got = decode(fmt, r.load, row_scales)
        want = r.load("recv_decoded")
        same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
        if not same.all():
            bad = tuple(int(i) for i in np.argwhere(~same)[0])
            row = bad[0]
            problems.append(
                f"rank {r.rank}: {fmt} recv_decoded differs at {bad} (row from rank {src[row]} token "
                f"{info[row, 0]}, its input scale {row_scales[row]}): dumped {want[bad]}, decoded {got[bad]}")
        if fmt == "bf16":
            sent = np.zeros_like(r.load("recv_tokens").view(np.uint16))
            real = np.nonzero((src >= 0) & (info[:, 0] >= 0))[0]
            for row in real:
                sent[row] = ranks[src[row]].load_cached("tokens")[info[row, 0]]
            got_bits = r.load("recv_tokens").view(np.uint16)
            bad = first_difference(got_bits[real], sent[real])
            if bad is not None:
                row = real[bad[0]]
                problems.append(f"rank {r.rank}: bf16 row {row} column {bad[1]}: received {got_bits[row, bad[1]]:#06x}, "
                                f"sent {sent[row, bad[1]]:#06x}")


def recompute_combine(m, ranks, problems):
    modes = m.get("modes")
    missing = [n for r in ranks for n in ("expert_out", "src_rank") if not r.has(n)]
    if modes is None or missing:
        problems.append("the dump does not record what the combine needs (manifest 'modes'; expert_out and src_rank "
                        "per rank): written by an ep that predates self-sufficient dumps; combine not recomputed")
        return None
    cfg = m["config"]
    top_k, hidden, n_experts = cfg["top_k"], cfg["hidden"], cfg["n_experts"]
    n_local = n_experts // len(ranks)
    shared, w_skip, unreduced = modes["shared_expert"], modes["skip_a2a"], modes["unreduced"]
    # returned[src][(t, k)] = (dest, row): the row on rank dest holding token t's slot-k output.
    returned = [dict() for _ in ranks]
    shared_rows = [dict() for _ in ranks]
    for dest in ranks:
        info, src = dest.load("src_info"), dest.src
        offsets = dest.load("row_offsets")
        for row in range(info.shape[0]):
            t, k = int(info[row, 0]), int(info[row, 1])
            if t < 0 or src[row] < 0:
                continue
            if k < 0:
                if not (shared and row < offsets[1] and src[row] == dest.rank):
                    problems.append(f"rank {dest.rank} row {row}: slot -1 outside the shared expert's group")
                shared_rows[dest.rank][t] = row
            elif (t, k) in returned[src[row]]:
                problems.append(f"rank {src[row]} token {t} slot {k}: received twice")
            else:
                returned[src[row]][(t, k)] = (dest.rank, row)
    y = [r.load("expert_out") for r in ranks]
    kinds = set()
    for r in ranks:
        ids, T = r.load("topk_ids"), r.meta["tokens"]
        w = r.load("router_weights").astype(F32)
        if shared:
            if w_skip is None:
                lo, hi = 0, T
            else:
                i = r.rank % w_skip
                lo = i * (T // w_skip) + min(i, T % w_skip)
                hi = lo + (T + w_skip - i - 1) // w_skip
        epi = r.meta.get("epilogue") or None
        kinds.add(epi["kind"] if epi else "none")
        if unreduced:
            want = np.zeros((T, top_k, hidden), np.uint16)
        else:
            acc = np.zeros((T, hidden), F32)  # +0.0: a -0 contribution sums to +0
        used = set()
        for t in range(T):
            for k in range(top_k):
                e = int(ids[t, k])
                if e < 0 or (w_skip is not None and e // n_local != r.rank):
                    continue
                k0 = next(j for j in range(top_k) if ids[t, j] == e)
                if (t, k0) not in returned[r.rank]:
                    problems.append(f"rank {r.rank} token {t} slot {k0} (expert {e}): no row holds its output")
                    continue
                dest, row = returned[r.rank][(t, k0)]
                used.add((t, k0))
                if unreduced:
                    want[t, k] = y[dest][row]
                else:
                    acc[t] = acc[t] + w[t, k] * bf16(y[dest][row])  # product, then sum, each f32
            if shared and lo <= t < hi and not unreduced:
                if t not in shared_rows[r.rank]:
                    problems.append(f"rank {r.rank} token {t}: no shared-expert row")
                    continue
                acc[t] = acc[t] + bf16(y[r.rank][shared_rows[r.rank][t]])
        if set(returned[r.rank]) - used:
            problems.append(f"rank {r.rank}: rows received for slots no combine reads: "
                            f"{sorted(set(returned[r.rank]) - used)[:4]}")
        if unreduced:
            check_bits(r, "combined", want, problems)
            continue
        out = round_bf16(acc)
        kind = epi["kind"] if epi else None
        if kind == "add_residual":
            out = round_bf16(bf16(out) + bf16(r.load(epi["file"])))
        elif kind == "scale":
            out = round_bf16(bf16(out) * F32(epi["factor"]))
        elif kind == "quantize_fp8":
            x = bf16(out).reshape(T, hidden // 128, 128)
            finite = np.isfinite(x).all(axis=2)
            amax = np.where(finite, np.abs(np.where(np.isfinite(x), x, 0)).max(axis=2, initial=F32(0)), 0).astype(F32)
            scale = (np.maximum(amax, F32(1e-4)) / F32(448.0)).astype(F32)
            with np.errstate(invalid="ignore"):
                q = e4m3fn_rne(x / scale[:, :, None])
            q = np.where(finite[:, :, None], q, 0).reshape(T, hidden).astype(np.uint8)
            scale = np.where(finite, scale, F32(np.nan)).astype(F32)
            check_bits(r, "combined", q, problems)
            s_got = r.load("combined_scales")
            if not ((s_got.view(np.uint32) == scale.view(np.uint32)) | (np.isnan(s_got) & np.isnan(scale))).all():
                problems.append(f"rank {r.rank}: combined_scales differ from the recomputed FP8 scales")
            continue
        elif kind is not None:
            problems.append(f"rank {r.rank}: a {kind} epilogue cannot be recomputed from a dump")
            continue
        check_bits(r, "combined", out, problems)
    return "unreduced" if unreduced else "weighted" + ("" if kinds == {"none"} else f", epilogue {'/'.join(sorted(kinds))}")


def check_bits(r, name, want, problems):
    if not r.has(name):
        problems.append(f"rank {r.rank}: no {name} in the dump")
        return
    got = r.load(name)
    if got.shape != want.shape:
        problems.append(f"rank {r.rank}: {name} has shape {got.shape}, recomputed {want.shape}")
        return
    bad = first_difference(got, want)
    if bad is not None:
        problems.append(f"rank {r.rank}: {name} differs at {bad}: dumped {got[bad]:#06x}, recomputed {want[bad]:#06x}")


def main(path):
    d = Path(path)
    m = json.loads((d / "manifest.json").read_text())
    fmt = m["format"]
    ranks = [Rank(d, r) for r in m["ranks"]]
    cache = {}
    for r in ranks:
        r.load_cached = (lambda r: lambda name: cache.setdefault((r.rank, name), r.load(name)))(r)
    problems = []
    try:
        check_decode(fmt, ranks, problems)
        combine = recompute_combine(m, ranks, problems)
    except Failed as e:
        problems.append(str(e))
        combine = None
    for p in problems[:20]:
        print(p, file=sys.stderr)
    if problems:
        more = f" ({len(problems) - 20} more)" if len(problems) > 20 else ""
        raise SystemExit(f"{d}: FAILED, {len(problems)} problem(s){more}")
    modes = m["modes"]
    on = [k for k in ("shared_expert", "unreduced") if modes[k]]
    if modes["skip_a2a"] is not None:
        on.append(f"skip_a2a {modes['skip_a2a']}")
    if modes.get("swiglu"):
        on.append(f"swiglu {modes['swiglu']}")
    print(f"{d}: {len(ranks)} ranks, format {fmt}{', ' + ', '.join(on) if on else ''}: every file loads, payloads "
          f"decode identically in NumPy (each row with its source token's input scale), combine ({combine}) "
          f"recomputed from the dump bit for bit")


if __name__ == "__main__":
    main(sys.argv[1])
