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
        let mut comms = b.init_uniform(&cfg).map_err(err)?;
        let got = run_and_check(
            &mut comms,
            &inputs,
            &RoundOptions::new(Calls::Fused, WeightKind::F32),
        )
        .map_err(|e| format!("{format}: {e}"))?;
        let block = format.block();
        for (r, round) in got.iter().enumerate() {
            let d = &round.dispatch;
            let x = d.decode_rows_with(crate::scenario::GLOBAL_INPUT_SCALE);
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
