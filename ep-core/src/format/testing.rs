//! Test rows for the formats' round-trip bounds: random rows and the adversarial ones (all equal,
//! one outlier, all zero, tiny values, mixed magnitudes).

use half::bf16;

use super::TokenFormat;

/// Rows of `hidden` elements.
pub fn adversarial_rows(hidden: usize, seed: u64) -> Vec<Vec<bf16>> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32
    };
    let f = |v: f32| bf16::from_f32(v);
    let mut rows = vec![
        vec![f(1.0); hidden],
        vec![f(-0.3); hidden],
        vec![bf16::ZERO; hidden],
        vec![f(1e-30); hidden],
        vec![f(3e38); hidden],
    ];
    let mut outlier = vec![f(0.01); hidden];
    outlier[hidden / 3] = f(1000.0);
    rows.push(outlier);
    let mut tiny = vec![bf16::ZERO; hidden];
    for (i, x) in tiny.iter_mut().enumerate() {
        *x = f((i as f32 - hidden as f32 / 2.0) * 1e-8);
    }
    rows.push(tiny);
    for _ in 0..40 {
        rows.push((0..hidden).map(|_| f((next() - 0.5) * 8.0)).collect());
    }
    for _ in 0..20 {
        // Magnitudes spanning many binades inside one block.
        rows.push(
            (0..hidden)
                .map(|_| f((next() - 0.5) * 2f32.powi((next() * 40.0) as i32 - 20)))
                .collect(),
        );
    }
    rows
}

/// Encodes and decodes one row; returns the decoded values and the row's scale bytes.
pub fn round_trip(fmt: &dyn TokenFormat, row: &[bf16], input_scale: f32) -> (Vec<f32>, Vec<u8>) {
    let mut payload = vec![0u8; fmt.payload_bytes(row.len())];
    let mut scales = vec![0u8; fmt.scale_bytes(row.len())];
    let wide: Vec<f32> = row.iter().map(|x| x.to_f32()).collect();
    fmt.encode(&wide, input_scale, &mut payload, &mut scales);
    let mut out = vec![0f32; row.len()];
    fmt.decode(&payload, &scales, input_scale, &mut out);
    (out, scales)
}
