//! NVFP4: e2m1 elements, one e4m3fn scale per 16 elements, and a global f32 `input_scale`.
//!
//! `sf = e4m3fn_rne_satfinite(input_scale * amax / 6)` (left to right, f32);
//! `q = e2m1_rne_satfinite(x / (f32(sf) / input_scale))`; decode `e2m1(q) * f32(sf) / input_scale`.
//! A block whose `sf` is zero (all zero, or so small its scale rounds to zero) has all elements
//! zero. A block holding a NaN or an infinity gets the NaN scale 0x7F and zero elements (it decodes
//! to NaN); other blocks and other tokens are unaffected. Elements are packed two per byte,
//! element `2i` in the low nibble.
//!
//! The `input_scale` is the per-token entry of `DispatchInput::input_scales` (1.0 when absent).
//! Serving stacks use one global value per layer (the block-scaled GEMM takes it as alpha), so
//! pass the same value for every token. A received row decodes with its own source token's
//! scale (`DispatchOutput::decode_rows_from`): the row's source rank from `src_offsets`, its
//! token from `src_info`.
//!
//! **Round-trip bound**: with `d = f32(sf) / input_scale`,
//! `|x - decode(q)| <= |x| / 4 + d / 4 + max(0, |x| - 6 d)`: half an e2m1 step, plus the
//! saturation when rounding the scale to e4m3 made it smaller than `amax / 6`.
//!
//! Output scales are e4m3fn bytes in the 128x4 swizzled tile layout of cuBLAS/CUTLASS
//! block-scaled GEMMs (see [`swizzled_offset`]), each group padded to 128 rows.

use super::scalar::{e2m1_to_f32, e4m3fn_from_f32, e4m3fn_to_f32, pack_e2m1, E2M1_MAX, E4M3_NAN};
use super::{finite_amax, TokenFormat};

const BLOCK: usize = 16;

/// The NVFP4 format (e2m1, one e4m3fn scale byte per 16 elements, divided by the token's input
/// scale).
#[derive(Clone, Copy, Debug, Default)]
pub struct Nvfp4;

/// Byte offset of scale `(row, col)` in a swizzled matrix with `cols` scale columns: tiles of
/// 128 rows x 4 columns (512 bytes), row-tile-major; inside a tile, `(row % 32) * 16 +
/// ((row / 32) % 4) * 4 + col % 4`.
pub fn swizzled_offset(row: usize, col: usize, cols: usize) -> usize {
    let tile = (row / 128) * cols.div_ceil(4) + col / 4;
    tile * 512 + (row % 32) * 16 + ((row / 32) % 4) * 4 + col % 4
}

/// Bytes of a swizzled scale matrix of `rows x cols` (rows padded to 128, columns to 4).
pub fn swizzled_len(rows: usize, cols: usize) -> usize {
    rows.div_ceil(128) * cols.div_ceil(4) * 512
}

/// A swizzled scale matrix back in plain row-major `[rows, cols]` order, for inspection.
pub fn unswizzle(swizzled: &[u8], rows: usize, cols: usize) -> Vec<u8> {
    let mut out = vec![0u8; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            out[r * cols + c] = swizzled[swizzled_offset(r, c, cols)];
        }
    }
    out
}

impl TokenFormat for Nvfp4 {
    fn name(&self) -> &'static str {
        "nvfp4"
    }
    fn block(&self) -> usize {
        BLOCK
    }
    fn payload_bytes(&self, hidden: usize) -> usize {
        hidden / 2
    }
    fn scale_bytes(&self, hidden: usize) -> usize {
        hidden / BLOCK
    }
    fn group_row_multiple(&self) -> usize {
        128
    }
    fn encode(&self, row: &[f32], input_scale: f32, payload: &mut [u8], scales: &mut [u8]) {
        for (b, (x, q)) in row
            .chunks_exact(BLOCK)
            .zip(payload.chunks_exact_mut(BLOCK / 2))
            .enumerate()
        {
            let sf = match finite_amax(x) {
                None => E4M3_NAN,
                Some(amax) => e4m3fn_from_f32(input_scale * amax / E2M1_MAX),
            };
            scales[b] = sf;
            if sf == E4M3_NAN || sf == 0 {
                q.fill(0);
                continue;
            }
            let d = e4m3fn_to_f32(sf) / input_scale;
            pack_e2m1(x, q, |v| v / d);
        }
    }
    fn decode(&self, payload: &[u8], scales: &[u8], input_scale: f32, out: &mut [f32]) {
        for (b, (q, o)) in payload
            .chunks_exact(BLOCK / 2)
            .zip(out.chunks_exact_mut(BLOCK))
            .enumerate()
        {
            let sf = e4m3fn_to_f32(scales[b]);
            for (q, o) in q.iter().zip(o.chunks_exact_mut(2)) {
                o[0] = e2m1_to_f32(q & 0xF) * sf / input_scale;
                o[1] = e2m1_to_f32(q >> 4) * sf / input_scale;
            }
        }
    }
    fn output_scales_bytes(&self, hidden: usize, rows: usize) -> usize {
        swizzled_len(rows, hidden / BLOCK)
    }
    fn place_scales(&self, hidden: usize, _rows: usize, row: usize, msg: &[u8], out: &mut [u8]) {
        let cols = hidden / BLOCK;
        for (c, &s) in msg[..cols].iter().enumerate() {
            out[swizzled_offset(row, c, cols)] = s;
        }
    }
    fn gather_scales(&self, hidden: usize, _rows: usize, row: usize, out: &[u8], msg: &mut [u8]) {
        let cols = hidden / BLOCK;
        for (c, s) in msg[..cols].iter_mut().enumerate() {
            *s = out[swizzled_offset(row, c, cols)];
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
        for input_scale in [1.0f32, 448.0 * 6.0 / 2.0, 1e-3, 3e5] {
            for row in adversarial_rows(64, 3) {
                let (got, scales) = round_trip(&Nvfp4, &row, input_scale);
                for (b, (xs, ys)) in row.chunks(BLOCK).zip(got.chunks(BLOCK)).enumerate() {
                    let d = e4m3fn_to_f32(scales[b]) / input_scale;
                    for (x, y) in xs.iter().zip(ys) {
                        let x = x.to_f32();
                        let a = x.abs();
                        let bound = (a / 4.0 + d / 4.0 + (a - 6.0 * d).max(0.0)) * (1.0 + 1e-6);
                        assert!(
                            (x - y).abs() <= bound,
                            "input_scale {input_scale}: x {x} decoded {y} d {d}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn tiny_blocks_whose_scale_rounds_to_zero_are_zero() {
        let row = vec![bf16::from_f32(1e-6); 16];
        let (got, scales) = round_trip(&Nvfp4, &row, 1.0);
        assert_eq!(scales[0], 0);
        assert!(got.iter().all(|&v| v == 0.0));
    }

    #[test]
    fn swizzle_matches_the_tile_layout_and_inverts() {
        // Spot checks from the layout definition.
        assert_eq!(swizzled_offset(0, 0, 8), 0);
        assert_eq!(swizzled_offset(0, 3, 8), 3);
        assert_eq!(swizzled_offset(1, 0, 8), 16);
        assert_eq!(swizzled_offset(32, 0, 8), 4);
        assert_eq!(swizzled_offset(97, 2, 8), 16 + 12 + 2);
        assert_eq!(swizzled_offset(0, 4, 8), 512);
        assert_eq!(swizzled_offset(128, 0, 8), 1024);
        assert_eq!(swizzled_offset(128, 5, 6), 1024 + 512 + 1);
        // A bijection onto its tiles, columns padded to 4.
        let (rows, cols) = (256, 6);
        let mut seen = vec![false; swizzled_len(rows, cols)];
        let mut sw = vec![0u8; swizzled_len(rows, cols)];
        for r in 0..rows {
            for c in 0..cols {
                let o = swizzled_offset(r, c, cols);
                assert!(!seen[o]);
                seen[o] = true;
                sw[o] = (r * 7 + c) as u8;
            }
        }
        let plain = unswizzle(&sw, rows, cols);
        for r in 0..rows {
            for c in 0..cols {
                assert_eq!(plain[r * cols + c], (r * 7 + c) as u8);
            }
        }
    }

    #[test]
    fn non_finite_values_poison_only_their_block() {
        let mut row: Vec<bf16> = (0..32).map(|i| bf16::from_f32(i as f32 / 4.0)).collect();
        row[17] = bf16::NAN;
        let (got, scales) = round_trip(&Nvfp4, &row, 1.0);
        assert_eq!(scales[1], E4M3_NAN);
        assert!(got[16..].iter().all(|v| v.is_nan()));
        assert!(got[..16].iter().all(|v| v.is_finite()));
    }
}
