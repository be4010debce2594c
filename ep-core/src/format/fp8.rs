//! Blockwise FP8: e4m3fn elements, one f32 scale per 128 elements.
//!
//! `scale = max(amax, 1e-4) / 448`, `q = e4m3fn_rne_satfinite(x / scale)`; decode `q * scale`.
//! A block holding a NaN or an infinity gets a NaN scale and zero elements (it decodes to NaN);
//! other blocks and other tokens are unaffected.
//!
//! **Round-trip bound**: for each element, `|x - decode(q)| <= |x| / 16 + scale / 1024` (half an
//! e4m3 ulp in the normal range, half the subnormal quantum `2^-9 * scale` below it), up to f32
//! rounding of the scale and the division (a relative 2^-22).
//!
//! Output scales are f32 transposed, `[hidden / 128, rows]`, each group padded to 4 rows.

use super::scalar::{e4m3fn_from_f32, e4m3fn_to_f32, E4M3_MAX};
use super::{finite_amax, TokenFormat};

const BLOCK: usize = 128;
/// The floor under amax, so an all-zero (or tiny) block still has a finite, non-zero scale.
pub const FP8_AMAX_FLOOR: f32 = 1e-4;

/// The blockwise FP8 format (e4m3fn, one f32 scale per 128 elements).
#[derive(Clone, Copy, Debug, Default)]
pub struct Fp8Block;

impl TokenFormat for Fp8Block {
    fn name(&self) -> &'static str {
        "fp8"
    }
    fn block(&self) -> usize {
        BLOCK
    }
    fn payload_bytes(&self, hidden: usize) -> usize {
        hidden
    }
    fn scale_bytes(&self, hidden: usize) -> usize {
        hidden / BLOCK * 4
    }
    fn group_row_multiple(&self) -> usize {
        4
    }
    fn encode(&self, row: &[f32], _input_scale: f32, payload: &mut [u8], scales: &mut [u8]) {
        for (b, (x, q)) in row
            .chunks_exact(BLOCK)
            .zip(payload.chunks_exact_mut(BLOCK))
            .enumerate()
        {
            let scale = match finite_amax(x) {
                None => {
                    q.fill(0);
                    f32::NAN
                }
                Some(amax) => {
                    let scale = amax.max(FP8_AMAX_FLOOR) / E4M3_MAX;
                    for (q, v) in q.iter_mut().zip(x) {
                        *q = e4m3fn_from_f32(v / scale);
                    }
                    scale
                }
            };
            scales[4 * b..4 * b + 4].copy_from_slice(&scale.to_le_bytes());
        }
    }
    fn decode(&self, payload: &[u8], scales: &[u8], _input_scale: f32, out: &mut [f32]) {
        for (b, (q, o)) in payload
            .chunks_exact(BLOCK)
            .zip(out.chunks_exact_mut(BLOCK))
            .enumerate()
        {
            let scale = f32::from_le_bytes(scales[4 * b..4 * b + 4].try_into().unwrap());
            for (o, q) in o.iter_mut().zip(q) {
                *o = e4m3fn_to_f32(*q) * scale;
            }
        }
    }
    fn output_scales_bytes(&self, hidden: usize, rows: usize) -> usize {
        hidden / BLOCK * rows * 4
    }
    fn place_scales(&self, hidden: usize, rows: usize, row: usize, msg: &[u8], out: &mut [u8]) {
        for b in 0..hidden / BLOCK {
            let at = (b * rows + row) * 4;
            out[at..at + 4].copy_from_slice(&msg[4 * b..4 * b + 4]);
        }
    }
    fn gather_scales(&self, hidden: usize, rows: usize, row: usize, out: &[u8], msg: &mut [u8]) {
        for b in 0..hidden / BLOCK {
            let at = (b * rows + row) * 4;
            msg[4 * b..4 * b + 4].copy_from_slice(&out[at..at + 4]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::testing::{adversarial_rows, round_trip};
    use half::bf16;

    #[test]
    fn round_trips_stay_within_the_bound() {
        for row in adversarial_rows(256, 1) {
            let (got, scales) = round_trip(&Fp8Block, &row, 1.0);
            for (b, (xs, ys)) in row.chunks(BLOCK).zip(got.chunks(BLOCK)).enumerate() {
                let scale = f32::from_le_bytes(scales[4 * b..4 * b + 4].try_into().unwrap());
                for (x, y) in xs.iter().zip(ys) {
                    let x = x.to_f32();
                    let bound = (x.abs() / 16.0 + scale / 1024.0) * (1.0 + 2f32.powi(-20));
                    assert!((x - y).abs() <= bound, "x {x} decoded {y} scale {scale}");
                }
            }
        }
    }

    #[test]
    fn the_block_maximum_is_exact_and_zero_blocks_are_zero() {
        let mut row = vec![bf16::ZERO; 256];
        row[3] = bf16::from_f32(-3.5);
        let (got, scales) = round_trip(&Fp8Block, &row, 1.0);
        assert_eq!(got[3], -3.5); // scale 3.5 / 448 = 2^-7 is exact, so amax comes back exactly
        assert!(got[128..].iter().all(|&v| v == 0.0));
        let scale1 = f32::from_le_bytes(scales[4..8].try_into().unwrap());
        assert_eq!(scale1, FP8_AMAX_FLOOR / 448.0);
    }

    #[test]
    fn non_finite_values_poison_only_their_block() {
        let mut row: Vec<bf16> = (0..256).map(|i| bf16::from_f32(i as f32 / 64.0)).collect();
        row[5] = bf16::NAN;
        let (got, _) = round_trip(&Fp8Block, &row, 1.0);
        assert!(got[..128].iter().all(|v| v.is_nan()));
        assert!(got[128..].iter().all(|v| v.is_finite()));
        row[5] = bf16::INFINITY;
        let (got, _) = round_trip(&Fp8Block, &row, 1.0);
        assert!(got[..128].iter().all(|v| v.is_nan()));
    }
}
