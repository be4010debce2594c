//! Transcendental functions with one exact definition. IEEE 754 fixes `+ - * /` but not `exp`,
//! and every libm (and CUDA's `expf`) rounds differently in the last bit. For SwiGLU to be
//! bit-identical on every backend, `exp` is defined here as a fixed sequence of f32 operations,
//! each rounded to nearest even, with no fused multiply-add. GPU kernels replay the same sequence
//! (`__fmul_rn` / `__fadd_rn`). Accuracy: within 2 ulp of the true value (tested).

/// log2(e), rounded to f32.
const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln(2) split so that `n * LN2_HI` is exact for |n| < 2^9 (Cody-Waite).
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
/// Taylor coefficients 1/k! for k = 2..=7.
const C: [f32; 6] = [
    0.5,
    0.166_666_67,
    0.041_666_668,
    0.008_333_334,
    0.001_388_888_9,
    0.000_198_412_7,
];

/// `e^x` in f32, exactly as defined by this function's body.
pub fn exp(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    if x > 88.8 {
        return f32::INFINITY;
    }
    if x < -104.0 {
        return 0.0;
    }
    // x = n ln2 + r, |r| <= ln2 / 2.
    let n = (x * LOG2E).round_ties_even();
    let r = (x - n * LN2_HI) - n * LN2_LO;
    // e^r = 1 + r + r^2 (1/2 + r (1/6 + ...)), Horner from the highest term.
    let mut p = C[5];
    for &c in C[..5].iter().rev() {
        p = p * r + c;
    }
    let er = (p * r) * r + r + 1.0;
    // Scale by 2^n in two exact steps so neither factor leaves the normal range.
    let n = n as i32;
    let (a, b) = (n / 2, n - n / 2);
    er * pow2(a) * pow2(b)
}

fn pow2(e: i32) -> f32 {
    f32::from_bits(((e + 127) as u32) << 23)
}

/// Rounds an arithmetic result to bf16 (nearest even). A NaN result becomes the canonical quiet
/// NaN `0x7FC0`: IEEE 754 does not say which NaN an operation returns (x86 keeps an operand's
/// payload, NVIDIA GPUs return `0x7FFFFFFF`), so the contract fixes one.
pub fn round_bf16(x: f32) -> half::bf16 {
    if x.is_nan() {
        half::bf16::from_bits(0x7FC0)
    } else {
        half::bf16::from_f32(x)
    }
}

/// An arithmetic result with any NaN made the canonical f32 quiet NaN `0x7FC00000`.
pub fn canonical_nan(x: f32) -> f32 {
    if x.is_nan() {
        f32::from_bits(0x7FC0_0000)
    } else {
        x
    }
}

/// `1 / (1 + e^-z)`.
pub fn sigmoid(z: f32) -> f32 {
    1.0 / (1.0 + exp(-z))
}

/// `g / (1 + e^-g)`.
pub fn silu(g: f32) -> f32 {
    g / (1.0 + exp(-g))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f32, b: f64) -> f64 {
        let b32 = b as f32;
        let ulp = (f32::from_bits(b32.to_bits() + 1) - b32).abs() as f64;
        (a as f64 - b).abs() / ulp
    }

    #[test]
    fn exp_is_within_two_ulp_across_its_range() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x < 88.5 {
            let want = (x as f64).exp();
            let u = ulps(exp(x), want);
            worst = worst.max(u);
            assert!(u <= 2.0, "exp({x}) = {} vs {want} ({u} ulp)", exp(x));
            x += 0.0137;
        }
        assert!(worst > 0.0);
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
        assert!(exp(-100.0) > 0.0 && exp(-100.0) < 1e-43); // subnormal result
        assert_eq!(exp(89.0), f32::INFINITY);
    }

    #[test]
    fn silu_and_sigmoid_behave_at_the_edges() {
        assert_eq!(silu(0.0), 0.0);
        assert_eq!(sigmoid(0.0), 0.5);
        assert_eq!(silu(-200.0), -0.0);
        assert_eq!(silu(200.0), 200.0);
        assert!((silu(1.0) - 0.731_058_6).abs() < 1e-6);
    }
}
