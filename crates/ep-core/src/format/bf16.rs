//! BF16: the row travels as it is, little-endian, with no scales.

use half::bf16;

use super::TokenFormat;

/// The raw bf16 format.
#[derive(Clone, Copy, Debug, Default)]
pub struct Bf16;

impl TokenFormat for Bf16 {
    fn name(&self) -> &'static str {
        "bf16"
    }
    fn block(&self) -> usize {
        // 8 elements = 16 bytes: rows stay aligned for 16-byte vector copies.
        8
    }
    fn payload_bytes(&self, hidden: usize) -> usize {
        hidden * 2
    }
    fn scale_bytes(&self, _hidden: usize) -> usize {
        0
    }
    fn group_row_multiple(&self) -> usize {
        1
    }
    fn encode(&self, row: &[f32], _input_scale: f32, payload: &mut [u8], _scales: &mut [u8]) {
        for (x, out) in row.iter().zip(payload.chunks_exact_mut(2)) {
            out.copy_from_slice(&bf16::from_f32(*x).to_bits().to_le_bytes());
        }
    }
    fn decode(&self, payload: &[u8], _scales: &[u8], _input_scale: f32, out: &mut [f32]) {
        for (b, o) in payload.chunks_exact(2).zip(out.iter_mut()) {
            *o = bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
        }
    }
    fn output_scales_bytes(&self, _hidden: usize, _rows: usize) -> usize {
        0
    }
    fn place_scales(&self, _: usize, _: usize, _: usize, _: &[u8], _: &mut [u8]) {}
    fn gather_scales(&self, _: usize, _: usize, _: usize, _: &[u8], _: &mut [u8]) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_is_lossless_and_decode_exact_for_every_bit_pattern() {
        let row: Vec<bf16> = (0..=u16::MAX).map(bf16::from_bits).collect();
        let wide: Vec<f32> = row.iter().map(|x| x.to_f32()).collect();
        let mut payload = vec![0u8; Bf16.payload_bytes(row.len())];
        Bf16.encode(&wide, 1.0, &mut payload, &mut []);
        for (x, b) in row.iter().zip(payload.chunks_exact(2)) {
            let got = u16::from_le_bytes([b[0], b[1]]);
            if x.is_nan() {
                assert!(bf16::from_bits(got).is_nan());
            } else {
                assert_eq!(got, x.to_bits());
            }
        }
        let mut back = vec![0f32; row.len()];
        Bf16.decode(&payload, &[], 1.0, &mut back);
        for (x, y) in row.iter().zip(&back) {
            if x.is_nan() {
                // Widening to f32 keeps NaN-ness (a signalling NaN may come back quiet).
                assert!(y.is_nan());
            } else {
                assert_eq!(y.to_bits(), x.to_f32().to_bits());
                assert_eq!(bf16::from_f32(*y).to_bits(), x.to_bits());
            }
        }
    }
}
