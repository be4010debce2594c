//! The scalar conversions the quantized formats are built from. Every function is total, exact
//! and deterministic: round-to-nearest-even, saturation to the largest finite value, and the NaN
//! rules written next to each. The GPU kernels implement the same functions (the PTX `cvt.rn.
//! satfinite` instructions agree with them on every finite input) and are tested against these.

/// e4m3fn (1 sign, 4 exponent bits with bias 7, 3 mantissa bits; no infinities; 0x7F/0xFF NaN).
pub const E4M3_MAX: f32 = 448.0;
/// The canonical e4m3fn NaN.
pub const E4M3_NAN: u8 = 0x7F;
/// e2m1 (1 sign, 2 exponent bits with bias 1, 1 mantissa bit): 0, 0.5, 1, 1.5, 2, 3, 4, 6.
pub const E2M1_MAX: f32 = 6.0;
/// The e8m0 NaN (the MX scale byte 0xFF).
pub const E8M0_NAN: u8 = 0xFF;

/// `2^e` as an exact f32 for `-149 <= e <= 127`.
pub fn pow2(e: i32) -> f32 {
    debug_assert!((-149..=127).contains(&e));
    if e >= -126 {
        f32::from_bits(((e + 127) as u32) << 23)
    } else {
        f32::from_bits(1u32 << (e + 149))
    }
}

/// `floor(log2(a))` of a finite, positive f32, exactly (subnormals included).
pub fn floor_log2(a: f32) -> i32 {
    debug_assert!(a > 0.0 && a.is_finite());
    let bits = a.to_bits();
    let exp = ((bits >> 23) & 0xFF) as i32;
    if exp > 0 {
        exp - 127
    } else {
        // Subnormal: value = mantissa * 2^-149.
        let m = bits & 0x7F_FFFF;
        (31 - m.leading_zeros() as i32) - 149
    }
}

/// f32 -> e4m3fn, round to nearest even, saturating: finite values and infinities beyond 448
/// become +-448; NaN becomes 0x7F.
pub fn e4m3fn_from_f32(x: f32) -> u8 {
    if x.is_nan() {
        return E4M3_NAN;
    }
    let sign = if x.is_sign_negative() { 0x80 } else { 0 };
    let a = x.abs();
    if a >= E4M3_MAX {
        return sign | 0x7E;
    }
    // Below the smallest normal (2^-6) the quantum is 2^-9: a * 2^9 is exact, and a result of 8
    // is the smallest normal's code 0x08, so the two ranges join without a special case.
    if a < pow2(-6) {
        return sign | (a * pow2(9)).round_ties_even() as u8;
    }
    let e = floor_log2(a);
    // (a / 2^e - 1) * 8 is exact: the 3-bit mantissa before rounding.
    let m = ((a * pow2(-e) - 1.0) * 8.0).round_ties_even() as i32;
    let (e, m) = if m == 8 { (e + 1, 0) } else { (e, m) };
    if e > 8 || (e == 8 && m > 6) {
        return sign | 0x7E; // rounded past 448
    }
    sign | (((e + 7) as u8) << 3) | m as u8
}

/// e4m3fn -> f32 (exact).
pub fn e4m3fn_to_f32(b: u8) -> f32 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = ((b >> 3) & 0xF) as i32;
    let m = (b & 7) as f32;
    if exp == 15 && b & 7 == 7 {
        return f32::NAN;
    }
    let v = if exp == 0 {
        m * pow2(-9)
    } else {
        (1.0 + m / 8.0) * pow2(exp - 7)
    };
    sign * v
}

/// f32 -> e2m1 (4 bits), round to nearest even, saturating to +-6. e2m1 has no NaN: a NaN
/// becomes +0 (the formats never pass one: a block holding a NaN is encoded as a NaN scale).
pub fn e2m1_from_f32(x: f32) -> u8 {
    if x.is_nan() {
        return 0;
    }
    let sign = if x.is_sign_negative() { 0x8 } else { 0 };
    let a = x.abs();
    // Codes 0..=7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6; their midpoints, with the tie rule (even codes
    // win ties) folded into < or <=.
    let code = if a <= 0.25 {
        0
    } else if a < 0.75 {
        1
    } else if a <= 1.25 {
        2
    } else if a < 1.75 {
        3
    } else if a <= 2.5 {
        4
    } else if a < 3.5 {
        5
    } else if a <= 5.0 {
        6
    } else {
        7
    };
    sign | code
}

/// Packs `x` as e2m1 pairs, each value mapped by `scale` first: element `2i` in the low nibble
/// of `q[i]`, element `2i + 1` in the high nibble.
pub fn pack_e2m1(x: &[f32], q: &mut [u8], scale: impl Fn(f32) -> f32) {
    for (q, pair) in q.iter_mut().zip(x.chunks_exact(2)) {
        *q = e2m1_from_f32(scale(pair[0])) | (e2m1_from_f32(scale(pair[1])) << 4);
    }
}

/// e2m1 (low 4 bits of `b`) -> f32 (exact).
pub fn e2m1_to_f32(b: u8) -> f32 {
    const V: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    let v = V[(b & 7) as usize];
    if b & 0x8 != 0 {
        -v
    } else {
        v
    }
}

/// e8m0 -> f32: `2^(b - 127)`, 0xFF is NaN.
pub fn e8m0_to_f32(b: u8) -> f32 {
    if b == E8M0_NAN {
        f32::NAN
    } else {
        pow2(b as i32 - 127)
    }
}

/// The e8m0 byte of the power of two `2^e`, `e` clamped to the e8m0 range `[-127, 127]`.
pub fn e8m0_from_exponent(e: i32) -> u8 {
    (e.clamp(-127, 127) + 127) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 127 non-negative, non-NaN e4m3fn values in code order, derived by hand from the
    /// definition (subnormals m/8 * 2^-6, normals (1 + m/8) * 2^(e-7)).
    fn e4m3_table() -> Vec<f32> {
        let mut v = Vec::new();
        for code in 0u8..0x7F {
            let (e, m) = ((code >> 3) as i32, (code & 7) as f32);
            v.push(if e == 0 {
                m / 8.0 * 2f32.powi(-6)
            } else {
                (1.0 + m / 8.0) * 2f32.powi(e - 7)
            });
        }
        v
    }

    #[test]
    fn e4m3fn_decodes_all_256_codes() {
        let table = e4m3_table();
        for b in 0u8..=255 {
            let got = e4m3fn_to_f32(b);
            let mag = b & 0x7F;
            if mag == 0x7F {
                assert!(got.is_nan(), "{b:#04x}");
                continue;
            }
            let want = if b & 0x80 != 0 {
                -table[mag as usize]
            } else {
                table[mag as usize]
            };
            assert_eq!(got.to_bits(), want.to_bits(), "code {b:#04x}");
        }
        assert_eq!(e4m3fn_to_f32(0x7E), 448.0);
        assert_eq!(e4m3fn_to_f32(0x01), 2f32.powi(-9));
        assert_eq!(e4m3fn_to_f32(0x08), 2f32.powi(-6));
    }

    #[test]
    fn e4m3fn_encodes_every_value_to_its_code() {
        for b in 0u8..=255 {
            if b & 0x7F == 0x7F {
                continue;
            }
            assert_eq!(e4m3fn_from_f32(e4m3fn_to_f32(b)), b, "code {b:#04x}");
        }
    }

    #[test]
    fn e4m3fn_ties_round_to_even_and_between_values_round_to_nearest() {
        let table = e4m3_table();
        for code in 0..table.len() - 1 {
            let (lo, hi) = (table[code], table[code + 1]);
            let mid = (lo + hi) / 2.0; // exact: both have few mantissa bits
            let even = if code % 2 == 0 { code } else { code + 1 } as u8;
            assert_eq!(e4m3fn_from_f32(mid), even, "tie between {lo} and {hi}");
            assert_eq!(e4m3fn_from_f32(-mid), 0x80 | even);
            let below = f32::from_bits(mid.to_bits() - 1);
            let above = f32::from_bits(mid.to_bits() + 1);
            assert_eq!(e4m3fn_from_f32(below), code as u8, "just below {mid}");
            assert_eq!(e4m3fn_from_f32(above), code as u8 + 1, "just above {mid}");
        }
    }

    #[test]
    fn e4m3fn_saturates_and_maps_nan() {
        for x in [448.0f32, 449.0, 464.0, 480.0, 1e30, f32::INFINITY, f32::MAX] {
            assert_eq!(e4m3fn_from_f32(x), 0x7E, "{x}");
            assert_eq!(e4m3fn_from_f32(-x), 0xFE, "-{x}");
        }
        assert_eq!(e4m3fn_from_f32(f32::NAN), E4M3_NAN);
        assert_eq!(e4m3fn_from_f32(-0.0), 0x80);
        // Smaller than half the smallest subnormal: zero; exactly half: ties to even (zero).
        assert_eq!(e4m3fn_from_f32(2f32.powi(-10)), 0);
        assert_eq!(e4m3fn_from_f32(f32::from_bits(1)), 0);
        assert_eq!(e4m3fn_from_f32(1.5 * 2f32.powi(-9)), 2);
    }

    #[test]
    fn e2m1_decodes_all_16_codes() {
        let want = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
        for b in 0u8..16 {
            let v = want[(b & 7) as usize];
            let v = if b & 8 != 0 { -v } else { v };
            assert_eq!(e2m1_to_f32(b).to_bits(), (v as f32).to_bits(), "code {b}");
            assert_eq!(e2m1_from_f32(e2m1_to_f32(b)), b, "code {b}");
        }
    }

    #[test]
    fn e2m1_ties_round_to_even_and_saturate() {
        let v = [0.0f32, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
        for code in 0..7usize {
            let mid = (v[code] + v[code + 1]) / 2.0;
            let even = if code % 2 == 0 { code } else { code + 1 } as u8;
            assert_eq!(e2m1_from_f32(mid), even, "tie at {mid}");
            assert_eq!(e2m1_from_f32(f32::from_bits(mid.to_bits() - 1)), code as u8);
            assert_eq!(
                e2m1_from_f32(f32::from_bits(mid.to_bits() + 1)),
                code as u8 + 1
            );
        }
        for x in [6.0f32, 6.5, 7.0, 100.0, f32::INFINITY] {
            assert_eq!(e2m1_from_f32(x), 7);
            assert_eq!(e2m1_from_f32(-x), 15);
        }
    }

    #[test]
    fn e8m0_covers_its_whole_range() {
        for b in 0u8..=254 {
            let v = e8m0_to_f32(b);
            assert_eq!(v, 2f64.powi(b as i32 - 127) as f32, "byte {b}");
            assert_eq!(floor_log2(v), b as i32 - 127);
            assert_eq!(e8m0_from_exponent(b as i32 - 127), b);
        }
        assert!(e8m0_to_f32(E8M0_NAN).is_nan());
        assert_eq!(e8m0_from_exponent(-200), 0);
        assert_eq!(e8m0_from_exponent(200), 254);
    }

    #[test]
    fn floor_log2_is_exact_for_subnormals_and_normals() {
        assert_eq!(floor_log2(f32::from_bits(1)), -149);
        assert_eq!(floor_log2(f32::MIN_POSITIVE), -126);
        assert_eq!(
            floor_log2(f32::from_bits(f32::MIN_POSITIVE.to_bits() - 1)),
            -127
        );
        assert_eq!(floor_log2(1.0), 0);
        assert_eq!(floor_log2(1.999), 0);
        assert_eq!(floor_log2(f32::MAX), 127);
        for e in -149..=127 {
            assert_eq!(pow2(e) as f64, 2f64.powi(e), "2^{e}");
        }
    }
}
