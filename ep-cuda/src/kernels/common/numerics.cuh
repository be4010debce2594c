// Exact numerics shared by the kernels: float checks, bf16 and FP8/FP4 element conversions,
// reciprocals, exp, sigmoid and SiLU.
//
// Each function mirrors its Rust twin in ep-core (format/scalar.rs, format/*.rs, numerics.rs,
// half's bf16 rounding) operation for operation, so every backend produces the same bits. All
// kernels are compiled with --fmad=false; arithmetic on the exactness-critical paths also spells
// its rounding out (__fmul_rn, __fadd_rn, __fdiv_rn) so no compiler may fuse or reorder it.

#include "common/types.cuh"

// ---- scalar helpers --------------------------------------------------------------------------

__device__ __forceinline__ bool ep_is_nan(float x) { return (__float_as_uint(x) & 0x7fffffffu) > 0x7f800000u; }
__device__ __forceinline__ bool ep_is_finite(float x) { return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u; }
__device__ __forceinline__ float ep_abs(float x) { return __uint_as_float(__float_as_uint(x) & 0x7fffffffu); }
__device__ __forceinline__ float ep_nan() { return __uint_as_float(0x7fc00000u); }

__device__ __forceinline__ float bf16_to_f32(u16 b) { return __uint_as_float(((u32)b) << 16); }

// half::bf16::from_f32: NaN keeps its high bits and gains the quiet bit; otherwise round to
// nearest even.
__device__ __forceinline__ u16 f32_to_bf16(float f) {
    u32 x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (u16)((x >> 16) | 0x0040u);
    const u32 round_bit = 0x8000u;
    if ((x & round_bit) != 0u && (x & (3u * round_bit - 1u)) != 0u) return (u16)((x >> 16) + 1u);
    return (u16)(x >> 16);
}

// An arithmetic result rounded to bf16, NaN as the canonical 0x7FC0 (numerics::round_bf16):
// GPUs return 0x7FFFFFFF for NaN results, x86 keeps an operand's payload; the contract fixes one.
__device__ __forceinline__ u16 arith_to_bf16(float f) { return ep_is_nan(f) ? (u16)0x7FC0 : f32_to_bf16(f); }
__device__ __forceinline__ float canonical_nan(float f) { return ep_is_nan(f) ? __uint_as_float(0x7fc00000u) : f; }

// 2^e as an exact f32 for -149 <= e <= 127.
__device__ __forceinline__ float ep_pow2(int e) {
    return e >= -126 ? __uint_as_float(((u32)(e + 127)) << 23) : __uint_as_float(1u << (e + 149));
}

// floor(log2(a)) of a finite positive f32, subnormals included.
__device__ __forceinline__ int ep_floor_log2(float a) {
    u32 b = __float_as_uint(a);
    int ex = (int)((b >> 23) & 0xffu);
    if (ex > 0) return ex - 127;
    return (31 - __clz((int)(b & 0x7fffffu))) - 149;
}

// f32 -> e4m3fn, round to nearest even, saturating to +-448; NaN -> 0x7F.
__device__ u8 e4m3_from_f32(float x) {
    if (ep_is_nan(x)) return 0x7F;
    u8 sign = (__float_as_uint(x) >> 31) ? 0x80 : 0;
    float a = ep_abs(x);
    if (a >= 448.0f) return sign | 0x7E;
    if (a < ep_pow2(-6)) return sign | (u8)rintf(__fmul_rn(a, ep_pow2(9)));
    int e = ep_floor_log2(a);
    int m = (int)rintf(__fmul_rn(__fsub_rn(__fmul_rn(a, ep_pow2(-e)), 1.0f), 8.0f));
    if (m == 8) { e += 1; m = 0; }
    if (e > 8 || (e == 8 && m > 6)) return sign | 0x7E;
    return sign | (u8)((e + 7) << 3) | (u8)m;
}

// Two finite f32 -> e4m3fn in one instruction (sm_89+): round to nearest even, saturating to
// +-448, `lo` in the low byte. For finite inputs the same bits as e4m3_from_f32 (signed zeros and
// subnormals included); NaN is left to e4m3_from_f32, which fixes its sign.
__device__ __forceinline__ u16 ep_e4m3x2(float hi, float lo) {
    u16 r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    return r;
}

// Division by a positive `d` through its reciprocal, worked out once for many quotients:
// __fdiv_rn's own fast path (the approximate reciprocal and one Newton step, then the quotient and
// one correction), without the check and slow-path call it makes for every quotient. For the FP8
// encode's divisors (448, and scales from 1e-4 / 448 up to FLT_MAX / 448) no step under- or
// overflows where the quotient is at least 2^-10, and there it is __fdiv_rn's quotient bit for
// bit; below, its last bits may differ, which no e4m3 can tell (both round to zero). Zeros keep
// x's sign. ep_check_fp8_division_* (selfcheck.cu) check it on the device against __fdiv_rn:
// every pair of bf16 element and block amax, and random f32 pairs.
struct EpRecip {
    float d, y;
};
__device__ __forceinline__ EpRecip ep_recip(float d) {
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(d));
    return {d, __fmaf_rn(y, __fmaf_rn(y, -d, 1.0f), y)};
}
__device__ __forceinline__ float ep_div_normal(float x, EpRecip r) {
    float q = __fmul_rn(x, r.y);
    q = __fmaf_rn(r.y, __fmaf_rn(q, -r.d, x), q);
    return __uint_as_float(__float_as_uint(q) | (__float_as_uint(x) & 0x80000000u));
}

__device__ float e4m3_to_f32(u8 b) {
    int ex = (b >> 3) & 0xF;
    if (ex == 15 && (b & 7) == 7) return ep_nan();
    float m = (float)(b & 7);
    float v = ex == 0 ? __fmul_rn(m, ep_pow2(-9)) : __fmul_rn(__fadd_rn(1.0f, __fdiv_rn(m, 8.0f)), ep_pow2(ex - 7));
    return (b & 0x80) ? -v : v;
}

// f32 -> e2m1 (4 bits), round to nearest even, saturating to +-6; NaN -> +0.
__device__ __forceinline__ u8 e2m1_from_f32(float x) {
    u32 b = __float_as_uint(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) return 0;
    u8 sign = (b >> 31) ? 8 : 0;
    float a = __uint_as_float(b & 0x7fffffffu);
    u8 c = a <= 0.25f ? 0 : a < 0.75f ? 1 : a <= 1.25f ? 2 : a < 1.75f ? 3 : a <= 2.5f ? 4 : a < 3.5f ? 5 : a <= 5.0f ? 6 : 7;
    return sign | c;
}

// ---- exp (ep_core::numerics) -----------------------------------------------------------------

#define EP_LOG2E __uint_as_float(0x3FB8AA3Bu)
#define EP_LN2_HI __uint_as_float(0x3F317200u)
#define EP_LN2_LO __uint_as_float(0x35BFBE8Eu)
#define EP_C0 __uint_as_float(0x3F000000u)
#define EP_C1 __uint_as_float(0x3E2AAAABu)
#define EP_C2 __uint_as_float(0x3D2AAAABu)
#define EP_C3 __uint_as_float(0x3C088889u)
#define EP_C4 __uint_as_float(0x3AB60B61u)
#define EP_C5 __uint_as_float(0x39500D01u)

__device__ float ep_exp(float x) {
    if (ep_is_nan(x)) return x;
    if (x > 88.8f) return __uint_as_float(0x7f800000u);
    if (x < -104.0f) return 0.0f;
    float n = rintf(__fmul_rn(x, EP_LOG2E));
    float r = __fsub_rn(__fsub_rn(x, __fmul_rn(n, EP_LN2_HI)), __fmul_rn(n, EP_LN2_LO));
    float p = EP_C5;
    p = __fadd_rn(__fmul_rn(p, r), EP_C4);
    p = __fadd_rn(__fmul_rn(p, r), EP_C3);
    p = __fadd_rn(__fmul_rn(p, r), EP_C2);
    p = __fadd_rn(__fmul_rn(p, r), EP_C1);
    p = __fadd_rn(__fmul_rn(p, r), EP_C0);
    float er = __fadd_rn(__fadd_rn(__fmul_rn(__fmul_rn(p, r), r), r), 1.0f);
    int ni = (int)n;
    int a = ni / 2, b = ni - ni / 2;
    return __fmul_rn(__fmul_rn(er, __uint_as_float(((u32)(a + 127)) << 23)), __uint_as_float(((u32)(b + 127)) << 23));
}

__device__ __forceinline__ float ep_sigmoid(float z) { return __fdiv_rn(1.0f, __fadd_rn(1.0f, ep_exp(-z))); }
__device__ __forceinline__ float ep_silu(float g) { return __fdiv_rn(g, __fadd_rn(1.0f, ep_exp(-g))); }
