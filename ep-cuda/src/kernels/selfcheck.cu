// Device self-checks (selfcheck.rs): arithmetic the kernels take to be exact, checked on the
// device that runs them, against the plain code the contract's definitions translate to.

#include "common/types.cuh"
#include "common/numerics.cuh"
#include "common/formats.cuh"
#include "common/protocol.cuh"

// Tallies of one check (selfcheck.rs's DivisionCounts, in order): pairs tried, scales whose f32
// bits differ, e4m3 bytes that differ, quotients of at least 2^-10 whose f32 bits differ; then
// one differing pair (amax bits << 32 | x bits; ~0 while none): EP_CHECK_WORDS words
// (kernels/constants.rs).

// ep_encode_fp8_warps' arithmetic for one element x of a block whose amax is a, against
// __fdiv_rn's: the scale max(a, 1e-4) / 448, and x / scale as f32 and as e4m3.
__device__ __forceinline__ void ep_check_fp8_pair(float x, float a, u32* bad) {
    float m = fmaxf(a, __uint_as_float(0x38D1B717u));
    float scale_ref = __fdiv_rn(m, 448.0f);
    float scale = ep_div_normal(m, ep_recip(448.0f));
    float q_ref = __fdiv_rn(x, scale_ref);
    float q = ep_div_normal(x, ep_recip(scale_ref));
    u16 e = ep_e4m3x2(q_ref, q);
    bad[0] += __float_as_uint(scale) != __float_as_uint(scale_ref);
    bad[1] += (e & 0xff) != (e >> 8);
    bad[2] += fabsf(q_ref) >= __uint_as_float(0x3A800000u) && __float_as_uint(q) != __float_as_uint(q_ref);
}

// Adds a thread's tallies to out (one atomic per block and tally) and records one differing
// pair.
__device__ void ep_check_report(u64 pairs, const u32* bad, float x, float a, u64* out) {
    __shared__ unsigned long long block[4];
    if (threadIdx.x < 4) block[threadIdx.x] = 0;
    __syncthreads();
    atomicAdd(&block[0], (unsigned long long)pairs);
    for (int i = 0; i < 3; i++)
        if (bad[i]) atomicAdd(&block[1 + i], (unsigned long long)bad[i]);
    if (bad[0] + bad[1] + bad[2] > 0)
        atomicCAS((unsigned long long*)&out[4], ~0ull,
                  ((unsigned long long)__float_as_uint(a) << 32) | __float_as_uint(x));
    __syncthreads();
    if (threadIdx.x < 4) atomicAdd((unsigned long long*)&out[threadIdx.x], block[threadIdx.x]);
}

// Every pair a bf16 row can give the dispatch's encode: a block per amax (blockIdx.x, the bits of
// a finite non-negative bf16), its threads over every finite bf16 x with |x| <= amax. The pair
// recorded is the last differing one a thread saw.
extern "C" __global__ void ep_check_fp8_division_bf16(u64* out) {
    u32 ab = blockIdx.x;
    float a = __uint_as_float(ab << 16);
    u32 bad[3] = {0, 0, 0};
    u64 pairs = 0;
    float bad_x = 0.0f;
    for (u32 xb = threadIdx.x; xb < 0x10000u; xb += blockDim.x) {
        if ((xb & 0x7f80u) == 0x7f80u || (xb & 0x7fffu) > ab) continue;
        float x = __uint_as_float(xb << 16);
        u32 before = bad[0] + bad[1] + bad[2];
        ep_check_fp8_pair(x, a, bad);
        if (bad[0] + bad[1] + bad[2] != before) bad_x = x;
        pairs++;
    }
    ep_check_report(pairs, bad, bad_x, a, out);
}

// splitmix64: the random pairs' generator.
__device__ __forceinline__ u64 ep_mix64(u64 z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// `n` random f32 pairs (the combine's FP8 epilogue and the SwiGLU encode f32 rows): amax bits
// uniform over the finite non-negative f32, x bits uniform at or below them, either sign.
extern "C" __global__ void ep_check_fp8_division_f32(u64 seed, u64 n, u64* out) {
    u32 bad[3] = {0, 0, 0};
    u64 pairs = 0;
    float bad_x = 0.0f, bad_a = 0.0f;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        u64 h = ep_mix64(seed ^ (i * 0xD1B54A32D192ED03ull));
        u32 ab = (u32)(h % 0x7f800000ull);
        u64 g = ep_mix64(h);
        u32 xb = (u32)(g % ((u64)ab + 1)) | ((u32)(g >> 63) << 31);
        float x = __uint_as_float(xb), a = __uint_as_float(ab);
        u32 before = bad[0] + bad[1] + bad[2];
        ep_check_fp8_pair(x, a, bad);
        if (bad[0] + bad[1] + bad[2] != before) {
            bad_x = x;
            bad_a = a;
        }
        pairs++;
    }
    ep_check_report(pairs, bad, bad_x, bad_a, out);
}
