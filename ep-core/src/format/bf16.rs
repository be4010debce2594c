//! BF16: the row travels as it is, little-endian, with no scales. A token row is copied bit for
//! bit ([`TokenFormat::encode_bf16`]): every NaN keeps its payload and its signalling bit. Only an
//! f32 row (fused SwiGLU's output) is rounded, by `bf16::from_f32` (nearest even; a NaN keeps its
//! high bits and gains the quiet bit).

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
    fn encode_bf16(&self, row: &[bf16], _input_scale: f32, payload: &mut [u8], _scales: &mut [u8]) {
        for (x, out) in row.iter().zip(payload.chunks_exact_mut(2)) {
            out.copy_from_slice(&x.to_bits().to_le_bytes());
        }
    }
    fn decode(&self, payload: &[u8], _scales: &[u8], _input_scale: f32, out: &mut [f32]) {
        // Widening is exact: the bits move up 16 places (a NaN keeps its payload and signalling
        // bit; `half`'s `to_f32` would quiet it).
        for (b, o) in payload.chunks_exact(2).zip(out.iter_mut()) {
            *o = f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16);
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
    fn token_rows_travel_bit_for_bit_for_every_bit_pattern() {
        let row: Vec<bf16> = (0..=u16::MAX).map(bf16::from_bits).collect();
        let mut payload = vec![0u8; Bf16.payload_bytes(row.len())];
        Bf16.encode_bf16(&row, 1.0, &mut payload, &mut []);
        for (x, b) in row.iter().zip(payload.chunks_exact(2)) {
            // Signalling NaNs (0x7F81, 0xFF81) included: no quiet bit is added.
            assert_eq!(u16::from_le_bytes([b[0], b[1]]), x.to_bits());
        }
        // Through the Format enum too, which the oracle and the simulator call.
        let mut via_enum = vec![0u8; payload.len()];
        super::super::Format::Bf16.encode_bf16(&row, 1.0, &mut via_enum, &mut []);
        assert_eq!(via_enum, payload);
        let mut back = vec![0f32; row.len()];
        Bf16.decode(&payload, &[], 1.0, &mut back);
        for (x, y) in row.iter().zip(&back) {
            // Decoding widens to f32 (the expert GEMM's view): exact, a NaN's payload included.
            assert_eq!(y.to_bits(), u32::from(x.to_bits()) << 16);
        }
    }

    #[test]
    fn f32_rows_round_to_nearest_even_and_quiet_nans() {
        let row = [
            1.0f32 + 2f32.powi(-8), // a tie: to even, 1.0
            1.0 + 3.0 * 2f32.powi(-8),
            f32::from_bits(0x7F81_0000), // signalling NaN: gains the quiet bit
            f32::from_bits(0xFFA0_0001),
            f32::INFINITY,
            -0.0,
            f32::from_bits(0x0001_0000), // a bf16 subnormal, exact
            1e-45,                       // below bf16's smallest subnormal: to zero
        ];
        let want: [u16; 8] = [
            0x3F80, 0x3F82, 0x7FC1, 0xFFE0, 0x7F80, 0x8000, 0x0001, 0x0000,
        ];
        let mut payload = vec![0u8; Bf16.payload_bytes(row.len())];
        Bf16.encode(&row, 1.0, &mut payload, &mut []);
        let got: Vec<u16> = payload
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        assert_eq!(got, want);
    }
}
