//! Format behaviour beyond the fixtures: non-finite inputs.

use ep_core::{bf16, EpBackend, EpConfig, Format, TokenFormat};

use super::*;
use crate::round::{run_and_check, Calls, RoundOptions};
use crate::scenario::WeightKind;

/// NaN and infinities in token rows: identical on backend and oracle in every format, confined
/// to the blocks (quantized formats) or elements (BF16) that hold them, never touching other
/// tokens; the combine of an affected token carries them, the others stay finite.
pub fn nonfinite_inputs<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    for &format in Format::ALL {
        let cfg = EpConfig::new(256, 3, 8, 6, 2).with_format(format);
        let mut inputs = good_inputs(&cfg, 12);
        // Token 1 of rank 0: a NaN at column 5, an infinity at column 200.
        inputs.tokens[0][[1, 5]] = bf16::NAN;
        inputs.tokens[0][[1, 200]] = bf16::NEG_INFINITY;
        let got = fused_round(b, &cfg, &inputs).map_err(|e| format!("{format}: {e}"))?;
        let block = format.block();
        for round in &got {
            let (r, d) = (round.rank, &round.dispatch);
            let scales: Vec<_> = inputs.input_scales.iter().map(|s| s.view()).collect();
            let x = d.decode_rows_from(&scales);
            for row in 0..d.rows() {
                let poisoned = d.source_rank(row) == Some(0) && d.src_info[[row, 0]] == 1;
                for (c, v) in x.row(row).iter().enumerate() {
                    let hit = poisoned
                        && if format == Format::Bf16 {
                            c == 5 || c == 200
                        } else {
                            c / block == 5 / block || c / block == 200 / block
                        };
                    if hit == v.is_finite() {
                        return Err(format!(
                            "{format}: rank {r} row {row} column {c} decoded to {v} (poisoned token: {poisoned})"
                        ));
                    }
                }
            }
            let out = round.combine.reduced().ok_or("reduced output expected")?;
            for t in 0..out.nrows() {
                let affected =
                    r == 0 && t == 1 && inputs.topk_ids[0].row(1).iter().any(|&e| e >= 0);
                let finite = out.row(t).iter().all(|v| v.is_finite());
                if finite == affected {
                    return Err(format!(
                        "{format}: rank {r} token {t} combined finite = {finite}"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Token rows made of bf16 values of every magnitude, each 128-column block (an FP8 block: a
/// multiple of every format's) under an amax from the smallest subnormal to the largest finite
/// value: blocks below FP8's 1e-4 scale floor, subnormals, signed zeros, quotients on e4m3's
/// rounding ties. Bit-exact against the oracle in every format. The CUDA backend's FP8 encode
/// divides through a reciprocal where the contract divides; this is its end-to-end check (the
/// arithmetic itself is checked exhaustively on the device, ep-cuda's selfcheck).
pub fn every_bf16_magnitude<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    const HIDDEN: usize = 1024;
    const TOKENS: usize = 64;
    for &format in Format::ALL {
        let cfg = EpConfig::new(HIDDEN, 2, 8, TOKENS, 2).with_format(format);
        let mut inputs = good_inputs(&cfg, 31);
        for (r, tokens) in inputs.tokens.iter_mut().enumerate() {
            for ((t, c), v) in tokens.indexed_iter_mut() {
                *v = magnitude_sweep((r * TOKENS + t) * HIDDEN / 128 + c / 128, c % 128);
            }
        }
        let mut comms = b.init_uniform(&cfg).map_err(err)?;
        run_and_check(
            &mut comms,
            &inputs,
            &RoundOptions::new(Calls::Fused, WeightKind::F32),
        )
        .map_err(|e| format!("{format}: {e}"))?;
    }
    Ok(())
}

/// Element `i` of block `j` in `every_bf16_magnitude`: the block's amax is the j-th of 1,024
/// magnitudes spread evenly over the finite bf16 ones (bits 0 to 0x7F7F), its other elements lie
/// below it by a stride of 1, 4, 16, 64 or 256 magnitudes (down to zeros), a third negative.
fn magnitude_sweep(j: usize, i: usize) -> bf16 {
    const MAX_BITS: usize = 0x7F7F;
    let amax = j * MAX_BITS / 1023;
    let stride = 1 << (2 * (j % 5));
    let bits = amax.saturating_sub(stride * i) as u16;
    let negative = (7 * i + j).is_multiple_of(3);
    bf16::from_bits(bits | if negative { 0x8000 } else { 0 })
}

/// The bf16 bit patterns `bf16_bits_exact` sends: every NaN class (quiet and signalling, both
/// signs, low, high and all payload bits), both infinities, both zeros, subnormals, and the
/// finite extremes.
const SPECIAL_BF16: [u16; 26] = [
    0x7FC0, 0xFFC0, 0x7FC1, 0xFFC1, 0x7FE0, 0x7FFF, 0xFFFF, // quiet NaNs
    0x7F81, 0xFF81, 0x7FA0, 0xFFA0, 0x7FBF, 0xFFBF, 0x7F95, // signalling NaNs
    0x7F80, 0xFF80, // infinities
    0x0000, 0x8000, // zeros
    0x0001, 0x8001, 0x007F, 0x807F, 0x0040, // subnormals
    0x0080, 0x7F7F, 0xFF7F, // smallest normal, largest finite
];

/// BF16 dispatch carries the raw row: every received row's bits equal the bits its source token
/// sent, NaN payloads and signalling bits included (a path through f32 and back would quiet
/// 0x7F81 into 0x7FC1), on one node, across nodes (staged sends), with the shared expert (rows
/// kept on their rank), at few tokens and at many (the GPU backend's single-launch, regular and
/// lean sends). The backend matches the oracle too, so the oracle carries them as well; the
/// combine of these rows is compared with the oracle's (its NaNs are the canonical 0x7FC0).
pub fn bf16_bits_exact<B: EpBackend>(b: &B, cx: &Ctx) -> CaseResult {
    let configs = [
        ("one node", EpConfig::new(64, 3, 8, 8, 2)),
        ("two nodes", EpConfig::new(64, 3, 8, 8, 2).with_nodes(2)),
        (
            "shared expert",
            EpConfig::new(64, 3, 8, 8, 2).with_shared_expert(),
        ),
        ("many tokens", EpConfig::new(64, 2, 4, 2600, 2)),
    ];
    for (what, cfg) in configs {
        let mut inputs = good_inputs(&cfg, 53);
        for (r, tokens) in inputs.tokens.iter_mut().enumerate() {
            for ((t, c), v) in tokens.indexed_iter_mut() {
                // Every pattern in every column position over the tokens, shifted per rank.
                let i = (c + 7 * t + 3 * r) % SPECIAL_BF16.len();
                *v = bf16::from_bits(SPECIAL_BF16[i]);
            }
        }
        let got = fused_round(b, &cfg, &inputs).map_err(|e| format!("{what}: {e}"))?;
        let mut checked = 0;
        for round in &got {
            let (r, d) = (round.rank, &round.dispatch);
            let rows = d.tokens_bf16().ok_or("BF16 rows expected")?;
            for row in 0..d.rows() {
                let (Some(s), t) = (d.source_rank(row), d.src_info[[row, 0]]) else {
                    continue;
                };
                let sent = inputs.tokens[s].row(t as usize);
                for (c, (got, want)) in rows.row(row).iter().zip(sent).enumerate() {
                    if got.to_bits() != want.to_bits() {
                        return Err(format!(
                            "{what}: rank {r} row {row} (rank {s} token {t}) column {c}: received {:#06x}, sent {:#06x}",
                            got.to_bits(),
                            want.to_bits()
                        ));
                    }
                }
                checked += 1;
            }
        }
        if cx.total(&format!("{what}: rows checked"), checked)? == 0 {
            return Err(format!("{what}: no row received"));
        }
    }
    Ok(())
}

/// NVFP4 rows decode with the input scale of the token they carry (source rank from
/// `src_offsets`, token from `src_info`), and that gives what the oracle's sender encoded: the
/// oracle's own encode and decode of each source token, with its scale. The suite's input scales
/// differ by token and by rank, so the case also requires that decoding with the receiving
/// rank's first scale (a decoder's easy mistake) would have given other values.
pub fn nvfp4_source_scales<B: EpBackend>(b: &B, cx: &Ctx) -> CaseResult {
    let cfg = EpConfig::new(256, 3, 8, 12, 4).with_format(Format::Nvfp4);
    let inputs = good_inputs(&cfg, 61);
    let got = fused_round(b, &cfg, &inputs)?;
    let scales: Vec<_> = inputs.input_scales.iter().map(|s| s.view()).collect();
    let (payload_bytes, scale_bytes) = (
        Format::Nvfp4.payload_bytes(cfg.hidden),
        Format::Nvfp4.scale_bytes(cfg.hidden),
    );
    let mut wrong_scale_differs = false;
    for round in &got {
        let (r, d) = (round.rank, &round.dispatch);
        let decoded = d.decode_rows_from(&scales);
        let first = inputs.input_scales[r].first().copied().unwrap_or(1.0);
        let with_first = d.decode_rows_with(first);
        for row in 0..d.rows() {
            let (Some(s), t) = (d.source_rank(row), d.src_info[[row, 0]]) else {
                continue;
            };
            let t = t as usize;
            let scale = inputs.input_scales[s][t];
            let mut payload = vec![0u8; payload_bytes];
            let mut msg_scales = vec![0u8; scale_bytes];
            let token = inputs.tokens[s].row(t).to_vec();
            Format::Nvfp4.encode_bf16(&token, scale, &mut payload, &mut msg_scales);
            let mut want = vec![0f32; cfg.hidden];
            Format::Nvfp4.decode(&payload, &msg_scales, scale, &mut want);
            for (c, (x, y)) in decoded.row(row).iter().zip(&want).enumerate() {
                if x.to_bits() != y.to_bits() {
                    return Err(format!(
                        "rank {r} row {row} (rank {s} token {t}, scale {scale}) column {c}: decoded {x}, the sender's value {y}"
                    ));
                }
            }
            wrong_scale_differs |= with_first.row(row) != decoded.row(row);
        }
    }
    if cx.total(
        "rows whose decode needs their scale",
        usize::from(wrong_scale_differs),
    )? == 0
    {
        return Err("no row's decode depends on its token's scale: the case tests nothing".into());
    }
    Ok(())
}
