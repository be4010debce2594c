//! MXFP4 (OCP Microscaling Formats v1.0): e2m1 elements, one e8m0 scale per 32 elements.
//!
//! `e = floor(log2(amax)) - 2`, clamped to the e8m0 range `[-127, 127]`; the scale byte is
//! `e + 127`; `q = e2m1_rne_satfinite(x * 2^-e)`; decode `e2m1(q) * 2^e`. An all-zero block gets
//! scale byte 0 and zero elements. A block holding a NaN or an infinity gets the NaN scale byte
//! 0xFF and zero elements (it decodes to NaN), as the MX spec marks NaN blocks; other blocks and
//! other tokens are unaffected. Elements are packed two per byte, element `2i` in the low nibble.
//!
//! **Round-trip bound**: `|x - decode(q)| <= |x| / 4 + 2^(e - 2)` for each element: half an e2m1
//! step (0.25 below 2, 0.5 up to 4, 1 up to 6, times `2^e`), or the saturation of `[6, 8)` to 6.
//! Since `2^e <= amax / 4`, that is at most `|x| / 4 + amax / 16`.
//!
//! Output scales are e8m0 bytes, row-major `[rows, hidden / 32]`.

use super::scalar::{
    e2m1_to_f32, e8m0_from_exponent, e8m0_to_f32, floor_log2, pack_e2m1, pow2, E8M0_NAN,
};
use super::{finite_amax, TokenFormat};

const BLOCK: usize = 32;

/// The OCP MXFP4 format (e2m1, one e8m0 scale byte per 32 elements).
#[derive(Clone, Copy, Debug, Default)]
pub struct Mxfp4;

/// The MX scale byte of a block, and the multiplier `2^-e` its elements are scaled by.
pub fn mx_scale(amax: f32) -> (u8, f32) {
    if amax == 0.0 {
        return (0, 0.0);
    }
    let byte = e8m0_from_exponent(floor_log2(amax) - 2);
    (byte, pow2(127 - byte as i32))
}

impl TokenFormat for Mxfp4 {
    fn name(&self) -> &'static str {
        "mxfp4"
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
        1
    }
    fn encode(&self, row: &[f32], _input_scale: f32, payload: &mut [u8], scales: &mut [u8]) {
        for (b, (x, q)) in row
            .chunks_exact(BLOCK)
            .zip(payload.chunks_exact_mut(BLOCK / 2))
            .enumerate()
        {
            let (byte, mul) = match finite_amax(x) {
                None => (E8M0_NAN, 0.0),
                Some(amax) => mx_scale(amax),
            };
            scales[b] = byte;
            if mul == 0.0 {
                q.fill(0);
                continue;
            }
            pack_e2m1(x, q, |v| v * mul);
        }
    }
    fn decode(&self, payload: &[u8], scales: &[u8], _input_scale: f32, out: &mut [f32]) {
        for (b, (q, o)) in payload
            .chunks_exact(BLOCK / 2)
            .zip(out.chunks_exact_mut(BLOCK))
            .enumerate()
        {
            let scale = e8m0_to_f32(scales[b]);
            for (q, o) in q.iter().zip(o.chunks_exact_mut(2)) {
                o[0] = e2m1_to_f32(q & 0xF) * scale;
                o[1] = e2m1_to_f32(q >> 4) * scale;
            }
        }
    }
    fn output_scales_bytes(&self, hidden: usize, rows: usize) -> usize {
        rows * hidden / BLOCK
    }
    fn place_scales(&self, hidden: usize, _rows: usize, row: usize, msg: &[u8], out: &mut [u8]) {
        let n = hidden / BLOCK;
        out[row * n..(row + 1) * n].copy_from_slice(&msg[..n]);
    }
    fn gather_scales(&self, hidden: usize, _rows: usize, row: usize, out: &[u8], msg: &mut [u8]) {
        let n = hidden / BLOCK;
        msg[..n].copy_from_slice(&out[row * n..(row + 1) * n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::testing::{adversarial_rows, round_trip};
    use half::bf16;

    #[test]
    fn round_trips_stay_within_the_bound() {
        for row in adversarial_rows(128, 2) {
            let (got, scales) = round_trip(&Mxfp4, &row, 1.0);
            for (b, (xs, ys)) in row.chunks(BLOCK).zip(got.chunks(BLOCK)).enumerate() {
                let scale = e8m0_to_f32(scales[b]);
                for (x, y) in xs.iter().zip(ys) {
                    let x = x.to_f32();
                    let bound = x.abs() / 4.0 + scale / 4.0;
                    assert!((x - y).abs() <= bound, "x {x} decoded {y} scale {scale}");
                }
            }
        }
    }

    #[test]
    fn scale_follows_the_spec() {
        // amax 6 -> floor(log2 6) = 2 -> e = 0 -> byte 127, and 6 is exact.
        let mut row = vec![bf16::ZERO; 32];
        row[0] = bf16::from_f32(6.0);
        row[1] = bf16::from_f32(-1.5);
        let (got, scales) = round_trip(&Mxfp4, &row, 1.0);
        assert_eq!(scales[0], 127);
        assert_eq!((got[0], got[1]), (6.0, -1.5));
        // All zero: scale byte 0, zero elements.
        let (got, scales) = round_trip(&Mxfp4, &[bf16::ZERO; 32], 1.0);
        assert_eq!(scales[0], 0);
        assert!(got.iter().all(|&v| v == 0.0));
        // The clamp at the bottom of the e8m0 range.
        assert_eq!(mx_scale(f32::from_bits(1)).0, 0);
    }

    #[test]
    fn non_finite_values_poison_only_their_block() {
        let mut row: Vec<bf16> = (0..64).map(|i| bf16::from_f32(i as f32)).collect();
        row[40] = bf16::NEG_INFINITY;
        let (got, scales) = round_trip(&Mxfp4, &row, 1.0);
        assert_eq!(scales[1], E8M0_NAN);
        assert!(got[32..].iter().all(|v| v.is_nan()));
        assert!(got[..32].iter().all(|v| v.is_finite()));
    }
}
