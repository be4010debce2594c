// Numerics and token formats shared by every ep-cuda kernel.
//
// Each function mirrors its Rust twin in ep-core (format/scalar.rs, format/*.rs, numerics.rs,
// half's bf16 rounding) operation for operation, so every backend produces the same bits. All
// kernels are compiled with --fmad=false; arithmetic on the exactness-critical paths also spells
// its rounding out (__fmul_rn, __fadd_rn, __fdiv_rn) so no compiler may fuse or reorder it.
// NVRTC compiles this without any header: bf16 travels as its uint16 bits.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define EP_FMT_BF16 0
#define EP_FMT_FP8 1
#define EP_FMT_MXFP4 2
#define EP_FMT_NVFP4 3

#define EP_SENTINEL 0xFFFFFFFFFFFFFFFFull

// ep_core::config::MAX_TOP_K (kernels.rs checks that they agree).
#define EP_MAX_TOP_K 64

// A dispatch message as it travels (ep-cuda's kernels::MsgLayout on the host): ep_core's
// MessageLayout (payload, scales, source token, top-k ids), then the sender's row slot of each
// top-k slot (i32, -1 for none), so the receiver knows each row of a message without an index.
// `bytes` is the whole wire message.
struct MsgLayout {
    int payload_bytes, scales_off, scale_bytes, src_off, ids_off, slots_off, bytes, top_k;
};

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

// ---- formats ---------------------------------------------------------------------------------

__device__ __forceinline__ int ep_block(int fmt) {
    return fmt == EP_FMT_FP8 ? 128 : fmt == EP_FMT_MXFP4 ? 32 : fmt == EP_FMT_NVFP4 ? 16 : 8;
}

__device__ __forceinline__ void ep_store_f32_le(u8* p, float v) {
    u32 b = __float_as_uint(v);
    p[0] = (u8)b; p[1] = (u8)(b >> 8); p[2] = (u8)(b >> 16); p[3] = (u8)(b >> 24);
}

// Eight bf16 values from one 16-byte load, as f32, and eight bf16 back into one 16-byte store.
__device__ __forceinline__ void ep_unpack_bf16x8(uint4 v, float* f) {
    u32 w[4] = {v.x, v.y, v.z, v.w};
    for (int q = 0; q < 4; q++) {
        f[2 * q] = bf16_to_f32((u16)(w[q] & 0xffffu));
        f[2 * q + 1] = bf16_to_f32((u16)(w[q] >> 16));
    }
}

__device__ __forceinline__ uint4 ep_pack_bf16x8(const u16* h) {
    uint4 v;
    v.x = h[0] | ((u32)h[1] << 16); v.y = h[2] | ((u32)h[3] << 16);
    v.z = h[4] | ((u32)h[5] << 16); v.w = h[6] | ((u32)h[7] << 16);
    return v;
}

// Largest |x| of a block, or -1 when the block holds a NaN or an infinity.
__device__ float ep_finite_amax(const float* x, int n) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        if (!ep_is_finite(x[i])) return -1.0f;
        amax = fmaxf(amax, ep_abs(x[i]));
    }
    return amax;
}

// Encodes one quantization block `b` of row `x` (f32) into `payload` and the row's message
// scales `scales` (TokenFormat::encode, one block at a time). BF16, MXFP4 and NVFP4; FP8's
// 128-element blocks are shared by a warp (ep_encode_fp8_warps).
__device__ void ep_encode_block(int fmt, const float* x, int b, float input_scale, u8* payload, u8* scales) {
    if (fmt == EP_FMT_BF16) {
        for (int i = b * 8; i < b * 8 + 8; i++) {
            u16 v = f32_to_bf16(x[i]);
            payload[2 * i] = (u8)v; payload[2 * i + 1] = (u8)(v >> 8);
        }
    } else if (fmt == EP_FMT_MXFP4) {
        const float* xs = x + b * 32;
        u8* q = payload + b * 16;
        float amax = ep_finite_amax(xs, 32);
        u8 byte = 0;
        float mul = 0.0f;
        if (amax < 0.0f) {
            byte = 0xFF;
        } else if (amax != 0.0f) {
            int e = ep_floor_log2(amax) - 2;
            e = e < -127 ? -127 : (e > 127 ? 127 : e);
            byte = (u8)(e + 127);
            mul = ep_pow2(127 - (int)byte);
        }
        scales[b] = byte;
        for (int i = 0; i < 16; i++) {
            q[i] = mul == 0.0f ? 0 : (u8)(e2m1_from_f32(__fmul_rn(xs[2 * i], mul)) | (e2m1_from_f32(__fmul_rn(xs[2 * i + 1], mul)) << 4));
        }
    } else {
        const float* xs = x + b * 16;
        u8* q = payload + b * 8;
        float amax = ep_finite_amax(xs, 16);
        u8 sf = amax < 0.0f ? 0x7F : e4m3_from_f32(__fdiv_rn(__fmul_rn(input_scale, amax), 6.0f));
        scales[b] = sf;
        if (sf == 0x7F || sf == 0) {
            for (int i = 0; i < 8; i++) q[i] = 0;
            return;
        }
        float d = __fdiv_rn(e4m3_to_f32(sf), input_scale);
        for (int i = 0; i < 8; i++) {
            q[i] = (u8)(e2m1_from_f32(__fdiv_rn(xs[2 * i], d)) | (e2m1_from_f32(__fdiv_rn(xs[2 * i + 1], d)) << 4));
        }
    }
}

// Elements i .. i + E - 1 of a row as f32, from f32 (E any) or from bf16 (the dispatch's fetched
// row: E = 8, one 16-byte load, `i` a multiple of 8).
template <int E> __device__ __forceinline__ void ep_load_elems(const float* x, int i, float* v) {
    for (int j = 0; j < E; j++) v[j] = x[i + j];
}
template <int E> __device__ __forceinline__ void ep_load_elems(const u16* x, int i, float* v) {
    static_assert(E == 8, "bf16 rows are read 8 at a time");
    ep_unpack_bf16x8(*(const uint4*)(x + i), v);
}

// The E bytes at q (4 or 8, q aligned to E): w[0 .. E / 4), or zeros where w is null; one store.
template <int E> __device__ __forceinline__ void ep_store_bytes(u8* q, const u32* w) {
    static_assert(E == 4 || E == 8, "4 or 8 bytes");
    u32 v[2] = {0, 0};
    if (w)
        for (int i = 0; i < E / 4; i++) v[i] = w[i];
    if (E == 4) *(u32*)q = v[0];
    else *(uint2*)q = make_uint2(v[0], v[1]);
}

// FP8 blocks of 128 elements, `Lanes` lanes each (8 or 32: 16 or 4 elements a lane, 32 / Lanes
// blocks a warp at once). A lane's elements are pieces of 8 (4) consecutive ones, Lanes * 8 apart,
// so that each load and store is of consecutive lanes' consecutive pieces (no bank conflicts).
// The block's amax, and whether it holds a NaN or an infinity, is one integer max over the
// elements' magnitude bits (a non-finite one's are the largest), reduced by shuffles among its
// lanes. A NaN or infinity makes the block zero with a NaN scale; otherwise scale = max(amax,
// 1e-4) / 448 and each element is e4m3(x / scale) (format/fp8.rs), the divisions through the
// scale's reciprocal (ep_div_normal, exact here). The row is f32, or bf16 (the dispatch's fetched
// row, read as is: a pass that widened it to f32 in shared memory first, and its barrier, sat on
// a decode send's path; 21465e8). blockDim.x is a multiple of 32. With __fdiv_rn a lane's four
// divisions were four branches around slow-path calls, a chain the compiler could not overlap,
// and four blocks a warp at once did not help (measured at a26c967).
template <int Lanes, typename T>
__device__ void ep_encode_fp8_warps(const T* x, int n, u8* payload, u8* scales) {
    constexpr int E = 128 / Lanes, C = E < 8 ? E : 8, per_warp = 32 / Lanes;
    static_assert(Lanes == 8 || Lanes == 32, "8 or 32 lanes a block");
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5, sub = lane & (Lanes - 1);
    int blocks = n / 128;
    // Warp-uniform trips, so that every lane takes the shuffles; a lane past the row idles.
    for (int b0 = warp * per_warp; b0 < blocks; b0 += warps * per_warp) {
        int b = b0 + lane / Lanes;
        bool here = b < blocks;
        float xs[E];
        u32 amax_bits = 0;
        for (int k = 0; k < E / C; k++) {
            for (int j = 0; j < C; j++) xs[k * C + j] = 0.0f;
            if (here) ep_load_elems<C>(x, b * 128 + k * Lanes * C + sub * C, xs + k * C);
        }
        for (int j = 0; j < E; j++) amax_bits = max(amax_bits, __float_as_uint(xs[j]) & 0x7fffffffu);
        for (int off = Lanes / 2; off > 0; off >>= 1) amax_bits = max(amax_bits, __shfl_xor_sync(0xffffffffu, amax_bits, off));
        if (!here) continue;
        u8* q = payload + b * 128 + sub * C;
        if (amax_bits >= 0x7f800000u) {
            for (int k = 0; k < E / C; k++) ep_store_bytes<C>(q + k * Lanes * C, nullptr);
            if (sub == 0) ep_store_f32_le(scales + 4 * b, ep_nan());
            continue;
        }
        float scale = ep_div_normal(fmaxf(__uint_as_float(amax_bits), __uint_as_float(0x38D1B717u)), ep_recip(448.0f));
        EpRecip d = ep_recip(scale);
        u32 w[E / 4];
        // The quotients are finite here, where the hardware conversion is e4m3_from_f32 exactly.
        for (int i = 0; i < E; i += 4) {
            float y[4];
            for (int j = 0; j < 4; j++) y[j] = ep_div_normal(xs[i + j], d);
            w[i / 4] = (u32)ep_e4m3x2(y[1], y[0]) | ((u32)ep_e4m3x2(y[3], y[2]) << 16);
        }
        for (int k = 0; k < E / C; k++) ep_store_bytes<C>(q + k * Lanes * C, w + k * C / 4);
        if (sub == 0) ep_store_f32_le(scales + 4 * b, scale);
    }
}

// The whole row, cooperatively: thread i encodes blocks i, i + blockDim.x, ... (FP8: a warp a
// block, ep_encode_fp8_warps: the f32 rows of the combine's epilogue and SwiGLU, off the
// dispatch's path, where 8 lanes a block took those kernels' registers up, and the FP8 branch
// counts towards a kernel's registers wherever `fmt` is known only at run time).
__device__ void ep_encode_row(int fmt, const float* x, int n, float input_scale, u8* payload, u8* scales) {
    if (fmt == EP_FMT_FP8) {
        ep_encode_fp8_warps<32>(x, n, payload, scales);
        return;
    }
    int blocks = n / ep_block(fmt);
    for (int b = threadIdx.x; b < blocks; b += blockDim.x) ep_encode_block(fmt, x, b, input_scale, payload, scales);
}

// Byte offset of NVFP4 scale (row, col) in the 128x4 swizzled tile layout.
__device__ __forceinline__ u64 ep_swizzled(u64 row, u64 col, u64 cols) {
    u64 tile = (row / 128) * ((cols + 3) / 4) + col / 4;
    return tile * 512 + (row % 32) * 16 + ((row / 32) % 4) * 4 + col % 4;
}

// The threads that share a piece of work: the whole block, or with `Warp` the calling warp (the
// overlapped copy-out gives each warp a message of its own). Compile-time, so the block's code is
// what it was before warps shared it (a runtime team cost the send kernel register spills).
template <bool Warp> __device__ __forceinline__ unsigned ep_team_id() { return Warp ? (threadIdx.x & 31u) : threadIdx.x; }
template <bool Warp> __device__ __forceinline__ unsigned ep_team_size() { return Warp ? 32u : blockDim.x; }
template <bool Warp> __device__ __forceinline__ void ep_team_sync() {
    if (Warp) __syncwarp();
    else __syncthreads();
}

// Writes row `row`'s message scales (null: a padding row, zero scales) into the output scale
// array of `rows` rows (TokenFormat::place_scales), by the team. NVFP4's scale columns padded to
// a multiple of 4 are zero in every row.
// `first_word` (FP8 only; null: none) is the thread's first word of msg_scales, loaded already.
template <bool Warp>
__device__ void ep_place_scales(int fmt, int width, u64 rows, u64 row, const u8* msg_scales, u8* out,
                                const u32* first_word = nullptr) {
    const int id = ep_team_id<Warp>(), size = ep_team_size<Warp>();
    if (fmt == EP_FMT_FP8) {
        // One f32 word per block, moved whole (both sides are 4-byte aligned).
        for (int b = id; b < width / 128; b += size)
            ((u32*)out)[(u64)b * rows + row] = !msg_scales     ? 0
                                               : b == id && first_word ? *first_word
                                                                       : ((const u32*)msg_scales)[b];
    } else if (fmt == EP_FMT_MXFP4) {
        int n = width / 32;
        for (int c = id; c < n; c += size) out[row * n + c] = msg_scales ? msg_scales[c] : 0;
    } else if (fmt == EP_FMT_NVFP4) {
        int n = width / 16;
        for (int c = id; c < (n + 3) / 4 * 4; c += size)
            out[ep_swizzled(row, c, n)] = msg_scales && c < n ? msg_scales[c] : 0;
    }
}

// ---- memory ordering -------------------------------------------------------------------------

__device__ __forceinline__ u64 ep_load_acquire(const u64* p) {
    u64 v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ u32 ep_load_acquire(const u32* p) {
    u32 v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// A plain system-scope store: after ep_fence_acq_rel, the two are a release (ep_publish).
__device__ __forceinline__ void ep_store_relaxed_sys(u32* p, u32 v) {
    asm volatile("st.relaxed.sys.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void ep_store_relaxed_sys(u64* p, u64 v) {
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ u64 ep_globaltimer() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Chained launches (programmatic dependent launch, sm_90; comm/mod.rs `Chain`): a kernel
// launched chained may start while the kernel before it on the stream still runs, so it calls
// ep_await_prior_grid before it reads what an earlier kernel wrote or writes what one reads
// (the wait returns once the kernel before has completed and its writes are visible; at once
// when the kernel was not launched chained). A phase's first kernel goes chained too (comm/mod.rs
// `Chain::First`), behind whatever the caller ran before it, and waits first thing. A kernel calls
// ep_release_dependents where the one
// chained after it may start launching: its blocks then take the SM room this grid no longer
// needs and wait there, instead of being launched after this grid ends. Only where this grid
// waits for no other rank: a chained grid's waiting blocks hold SMs that a rank sharing the GPU
// may need.
__device__ __forceinline__ void ep_await_prior_grid() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Called by the assign kernels and the combine send at their start, and by the waits once their
// counts are in; not by the dispatch send, whose release let the wait kernel's one block launch
// early, take an SM the send needed and end later (measured at 40e7708).
__device__ __forceinline__ void ep_release_dependents() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether `p` and `bytes` allow 16-byte accesses (ep_copy_to's test of its source).
__device__ __forceinline__ bool ep_aligned16(const void* p, u64 bytes) { return (u64)p % 16 == 0 && bytes % 16 == 0; }

// Copies `bytes` (a multiple of 4) from `src` to each of `dst[0 .. n_dst)` with the team's
// threads, 16 bytes at a time where all are 16-byte aligned: `src` is read once however many
// destinations there are. Each thread issues up to `Batch` (8) loads before their stores, so a row
// of a few KB is one round trip to memory, not one per 16 bytes (the stores cannot be moved past
// the next load by the compiler: a destination may alias `src` as far as it knows); from shared
// memory one at a time does (and takes 32 registers fewer). (A block's copy of a received message
// loads its first pieces with the header and stores them itself: dispatch/copy_out.cu,
// ep_block_store_row.)
template <bool Warp, int Batch = 8>
__device__ __forceinline__ void ep_copy_to(u8* const* dst, int n_dst, const u8* src, u64 bytes) {
    const unsigned id = ep_team_id<Warp>(), size = ep_team_size<Warp>();
    // ep_aligned16(src, bytes), written out: the call cost ep_combine_send 8 registers (56 -> 64).
    bool vector = (u64)src % 16 == 0 && bytes % 16 == 0;
    for (int i = 0; i < n_dst; i++) vector = vector && (u64)dst[i] % 16 == 0;
    if (vector) {
        const uint4* s = (const uint4*)src;
        u64 n = bytes / 16;
        for (u64 i0 = id; i0 < n; i0 += Batch * size) {
            uint4 v[Batch];
#pragma unroll
            for (int u = 0; u < Batch; u++)
                if (i0 + u * size < n) v[u] = s[i0 + u * size];
            for (int i = 0; i < n_dst; i++) {
                uint4* d = (uint4*)dst[i];
#pragma unroll
                for (int u = 0; u < Batch; u++)
                    if (i0 + u * size < n) d[i0 + u * size] = v[u];
            }
        }
    } else {
        const u32* s = (const u32*)src;
        for (u64 j = id; j < bytes / 4; j += size) {
            u32 v = s[j];
            for (int i = 0; i < n_dst; i++) ((u32*)dst[i])[j] = v;
        }
    }
}

template <int Batch = 8>
__device__ __forceinline__ void ep_block_copy(u8* dst, const u8* src, u64 bytes) {
    ep_copy_to<false, Batch>(&dst, 1, src, bytes);
}

// 16 bytes from global to shared memory without passing through registers (cp.async, sm_80 and
// later; a plain copy before), so that a block can go on with other work while they load.
// Complete, for the calling thread's copies, after ep_async_wait; a barrier then makes every
// thread's visible to the block.
__device__ __forceinline__ void ep_async_copy16(void* smem_dst, const void* gmem_src) {
#if __CUDA_ARCH__ >= 800
    u32 d = (u32)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(gmem_src) : "memory");
#else
    *(uint4*)smem_dst = *(const uint4*)gmem_src;
#endif
}

// The same for 4 bytes (cp.async.ca: 4-byte copies go through L1).
__device__ __forceinline__ void ep_async_copy4(void* smem_dst, const void* gmem_src) {
#if __CUDA_ARCH__ >= 800
    u32 d = (u32)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(d), "l"(gmem_src) : "memory");
#else
    *(u32*)smem_dst = *(const u32*)gmem_src;
#endif
}

__device__ __forceinline__ void ep_async_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// A system-scope acquire-release fence: with a later store it is a release, with an earlier
// load or atomic an acquire (the PTX memory model's patterns), which is all the protocol needs.
// __threadfence_system() is the sequentially consistent fence, stronger and slower; the send
// kernels' critical path at decode sizes crossed three of them.
__device__ __forceinline__ void ep_fence_acq_rel() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
__device__ __forceinline__ void ep_fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

// True in the block that finishes last in its grid, once every block's stores are visible at
// system scope: the point where a count may be published without a kernel of its own. Every
// block of the grid must call it (uniformly within the block). `ticket` is 0 before the launch
// and the last block sets it back to 0.
// One fence per block, by the thread that takes the ticket after the block's barrier (fences
// are cumulative: what the barrier ordered before it is covered, as in a cooperative grid sync);
// a fence in every warp cost each send block a system-scope drain per warp.
// `gpu_scope`: only what the grid did on its own GPU must be ordered (loads of local counts before
// their reset), which a GPU-scope fence does at a fraction of a system-scope one's cost.
__device__ bool ep_last_block(u32* ticket, bool gpu_scope = false) {
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0) {
        if (gpu_scope) ep_fence_acq_rel_gpu();
        else ep_fence_acq_rel();
        last = atomicAdd(ticket, 1u) == gridDim.x - 1;
        if (last) {
            atomicExch(ticket, 0u);
            // acquire: every other block's stores before ours
            if (gpu_scope) ep_fence_acq_rel_gpu();
            else ep_fence_acq_rel();
        }
    }
    __syncthreads();
    return last;
}

// Publishes a count: a fence, then a plain system-scope store, which together are a release.
// Called by whole warps with the address (null: nothing to store) and value already loaded,
// so a warp pays one fence and no load waits behind it (a release store per count, or loads
// after the fence, made the publishing block a chain of round trips).
__device__ __forceinline__ void ep_publish(u64* at, u64 v) {
    ep_fence_acq_rel();
    if (at) ep_store_relaxed_sys(at, v);
}

// Status codes a wait kernel leaves for the host.
#define EP_OK 0
#define EP_PENDING 1 // the slice ran out with counts missing
#define EP_COUNT_OVERFLOW 2
#define EP_COUNT_MISMATCH 3
#define EP_MESSAGES_PENDING 4 // the counts were there, a message was not when the slice ran out

// The start of a kernel launched chained after a wait kernel (comm/combine.rs): once that kernel
// has completed, whether its wait did (the status word). The host issues such kernels with the
// wait, before it knows; they return at once when it did not.
__device__ __forceinline__ bool ep_wait_completed(const u32* status) {
    ep_await_prior_grid();
    return status[0] == EP_OK;
}

// ---- combine rows in LL form (decode sizes) ---------------------------------------------------
//
// A rank with at most EP_LL_MAX_TOKENS tokens inside one node (the host decides: comm/path.rs,
// `ll_combine`) takes its combine rows in LL form, after NCCL's low-latency protocol: every 8-byte word holds 4 bytes of the row (low
// half) and the combine's number (high half), so a piece of a row is there once its words carry
// this combine's number. The sender needs no fence behind its stores and its counts need not
// vouch for them: the fence, the ticket and the publish after them are a chain of round trips,
// much of a 1-token combine (9341b99). Twice the bytes on the wire, so only at sizes where latency, not
// bandwidth, is the cost. The rank says so in its dispatch message count (EP_NMSG_LL, from the
// host's `ll` through ep_publish_counts), which every sender reads before it sends a row back. A rank's LL rows:
// [min(max_tokens, EP_LL_MAX_TOKENS), top_k] rows of hidden / 4 lines of 16 bytes, each line
// two words.
#ifndef EP_LL_MAX_TOKENS
#define EP_LL_MAX_TOKENS 0
#endif

// A dispatch message count word (a sender's, at each receiver): the count, and three flags.
// EARLY: the sender published its counts before its payload (dispatch/wire.cu). LL: the sender, as the
// combine's receiver, takes its rows in LL form. MARKED: the sender, as the combine's receiver,
// reduces its rows as they land (prefill sizes, comm/path.rs): each row is
// marked with the combine's number after a fence (ep_send_row), and its counts come first.
#define EP_NMSG_EARLY 0x80000000u
#define EP_NMSG_LL 0x40000000u
#define EP_NMSG_MARKED 0x20000000u
#define EP_NMSG_FLAGS (EP_NMSG_EARLY | EP_NMSG_LL | EP_NMSG_MARKED)

// A receiver's combine rows are marked (LL rows need no marks: they carry the number).
__device__ __forceinline__ bool ep_rows_marked(u32 nm) { return (nm & EP_NMSG_MARKED) && !(nm & EP_NMSG_LL); }

// A receiver's combine counts go out before its rows, with plain stores: its rows vouch for
// themselves (LL) or are marked one by one.
__device__ __forceinline__ bool ep_counts_early(u32 nm) { return (nm & (EP_NMSG_LL | EP_NMSG_MARKED)) != 0; }

// A message (or an LL row) that did not come within a slice: EP_MESSAGES_PENDING, unless a count
// poll already failed (its code stays, EP_PENDING or a count error).
__device__ __forceinline__ void ep_messages_pending(u32* status) {
    atomicCAS(status, (u32)EP_OK, (u32)EP_MESSAGES_PENDING);
}

// A combine row from expert `id` (an LL row, or a marked row's mark) that did not come within a
// slice: flagged at status[1 + g * n_ranks + s] for expert s * n_local + g, as a missing count
// is, so that the deadline names its rank, and EP_MESSAGES_PENDING.
__device__ __forceinline__ void ep_row_missing(u32* status, int id, int n_local, int n_ranks) {
    status[1 + (id % n_local) * n_ranks + id / n_local] = 1;
    ep_messages_pending(status);
}

// How many of rank s's dispatch messages this rank received, from s's message count word `nm`:
// none from another rank with skip_a2a; never more than its buffer holds.
__device__ __forceinline__ u32 ep_messages_from(u32 nm, int s, int rank, int skip_a2a, int max_tokens) {
    return skip_a2a && s != rank ? 0 : min(nm & ~EP_NMSG_FLAGS, (u32)max_tokens);
}

// Each 8-byte word is single-copy atomic (the PTX memory model treats a vector access as its
// elements), so a word that carries `seq` carries this combine's 4 bytes. Piece i of a row of n16
// pieces: its first 8 bytes in line i, its last 8 in line n16 + i, so that a warp's accesses to
// consecutive pieces are contiguous (a piece's two lines side by side made every store
// instruction a half-written sector each 32 bytes, which doubled the traffic). Volatile:
// the words are polled across the GPUs.
__device__ __forceinline__ void ep_ll_store(ulonglong2* row, u64 i, u64 n16, uint4 v, u32 seq) {
    u64 f = (u64)seq << 32;
    asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(row + i), "l"(v.x | f), "l"(v.y | f) : "memory");
    asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(row + n16 + i), "l"(v.z | f), "l"(v.w | f)
                 : "memory");
}

// Loads piece i; true when all four words carry `seq`.
__device__ __forceinline__ bool ep_ll_load(const ulonglong2* row, u64 i, u64 n16, u32 seq, uint4& v) {
    u64 a, b, c, d;
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(row + i));
    asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(c), "=l"(d) : "l"(row + n16 + i));
    v = make_uint4((u32)a, (u32)b, (u32)c, (u32)d);
    return (u32)(a >> 32) == seq && (u32)(b >> 32) == seq && (u32)(c >> 32) == seq && (u32)(d >> 32) == seq;
}

// What a reader of LL rows needs: the rank's LL rows, this combine's number, the slice's end, and
// where to say that a row did not come (ep_row_missing).
struct EpLlWait {
    const ulonglong2* rows;
    u32 seq;
    u64 deadline;
    u32* status;
    int n_local, n_ranks;
};

// Piece i of a row from expert `id`: polled until it carries the combine's number or the slice
// ends (every later poll of the launch then gives up at once). Returns whether it came.
__device__ __forceinline__ bool ep_ll_wait(const ulonglong2* row, u64 i, u64 n16, int id, const EpLlWait& ll,
                                           uint4& v) {
    while (!ep_ll_load(row, i, n16, ll.seq, v)) {
        if (ep_globaltimer() > ll.deadline) {
            ep_row_missing(ll.status, id, ll.n_local, ll.n_ranks);
            return false;
        }
    }
    return true;
}

// Whether count i ((local expert, rank) order, n_ranks per expert) is awaited: with skip_a2a
// only this rank's own.
__device__ __forceinline__ bool ep_awaited(int i, int n_ranks, int rank, int skip_a2a) {
    return !skip_a2a || (i % n_ranks) == rank;
}

// Count i, polled (acquire, system scope) until it is not the sentinel, or until `slice_ns` from
// `t0` have passed: then `late` is set and the sentinel returned.
__device__ __forceinline__ u64 ep_poll_count(const u64* counts, int i, u64 t0, u64 slice_ns, bool& late) {
    u64 v = ep_load_acquire(counts + i);
    while (v == EP_SENTINEL) {
        if (ep_globaltimer() - t0 > slice_ns) { late = true; break; }
        __nanosleep(64);
        v = ep_load_acquire(counts + i);
    }
    return v;
}

// A dispatch count word as it came (ep_publish_counts): its high half is the sender's message
// count word, kept in nmsg[s] from each sender s's first local expert's word (i = s); returns the
// count.
__device__ __forceinline__ u64 ep_unpack_count(u64 v, int i, int n_ranks, u32* nmsg) {
    if (i < n_ranks) nmsg[i] = (u32)(v >> 32);
    return v & 0xFFFFFFFFull;
}

// Polls (acquire, system scope) until no awaited count is the sentinel, or `slice_ns` passes:
// count i into got[i] (0 when not awaited), and with `missing`, missing[i] = 1 for a count that
// had not arrived. Each awaited count is judged by `check(i, v, e)` (EP_OK or an error code) as
// it comes, `e` being what `check.expect(i)` loaded before the poll (the combine's rows sent:
// loaded after every count was there, it would add a round trip after the poll's; 62b523e).
// Returns EP_OK, EP_PENDING (the slice ran out) or a check's code,
// the same in every thread; every thread calls it.
// With `nmsg` the counts are a dispatch's (ep_unpack_count).
template <typename Check>
__device__ u32 ep_poll_counts(const u64* counts, int n, int rank, int n_ranks, int skip_a2a, u64 slice_ns, u64* got,
                              u32* missing, Check check, u32* nmsg = nullptr) {
    __shared__ u32 outcome, bad;
    if (threadIdx.x == 0) {
        outcome = EP_OK;
        bad = EP_OK;
    }
    __syncthreads();
    u64 start = ep_globaltimer();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        bool late = false;
        u64 v = 0;
        if (ep_awaited(i, n_ranks, rank, skip_a2a)) {
            u64 e = check.expect(i);
            v = ep_poll_count(counts, i, start, slice_ns, late);
            if (late) {
                outcome = EP_PENDING;
            } else {
                if (nmsg) v = ep_unpack_count(v, i, n_ranks, nmsg);
                u32 code = check(i, v, e);
                if (code != EP_OK) bad = code;
            }
        }
        got[i] = v;
        if (missing) missing[i] = late;
    }
    __syncthreads();
    return outcome != EP_OK ? outcome : bad;
}

// The awaited counts back to the sentinel, for the next round.
__device__ void ep_reset_counts(u64* counts, int n, int rank, int n_ranks, int skip_a2a) {
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        if (ep_awaited(i, n_ranks, rank, skip_a2a)) *((volatile u64*)(counts + i)) = EP_SENTINEL;
}

// The wait kernels' wait, one block: ep_poll_counts into `snapshot`, with the not-arrived flags
// in status[1 ..] and the outcome in status[0]; once every count is there and passed its check,
// they are reset. A count that failed its check stays: it may be a peer's poison (ep-core's
// `poison`: the peer rejected its input), which the host reads from the counts, and the wait is
// taken up again once the peer publishes its real count over it.
//
// A slice is short (comm/wait.rs: WAIT_SLICE): when it runs out the host launches the wait again until
// the round's deadline. A kernel that spun for the whole deadline could hold up the very rank it
// waits for: ranks sharing a GPU share its driver and hardware queues, and the driver may make a
// rank's launch or copy wait for the kernels already running (seen with 4-8 ranks a GPU: a
// rank's signals released only when a peer's wait timed out; 9a7465d).
template <typename Check>
__device__ bool ep_wait_counts(u64* counts, int n, int rank, int n_ranks, int skip_a2a, u64 slice_ns, u32* status,
                               u64* snapshot, Check check) {
    u32 outcome = ep_poll_counts(counts, n, rank, n_ranks, skip_a2a, slice_ns, snapshot, status + 1, check);
    if (outcome == EP_OK) ep_reset_counts(counts, n, rank, n_ranks, skip_a2a);
    if (threadIdx.x == 0) status[0] = outcome;
    return outcome == EP_OK;
}

__device__ __forceinline__ void ep_red_release_gpu(u32* p, u32 v) {
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void ep_red_relaxed_gpu(u32* p, u32 v) {
    asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void ep_store_release_gpu(u32* p, u32 v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ u32 ep_load_acquire_gpu(const u32* p) {
    u32 v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// The end of a single-launch phase's wait (ep_dispatch_single, ep_combine_single), where every
// block polls the same counts and one block (the resetter) resets them for the next round, off
// the others' path. Each block, right after its poll, stores an outcome that is not EP_OK and
// reports that it has read the counts: a reduction on `ticket` (the phase's second ticket word)
// that the thread does not wait for (a ticket taken here put a round trip before every block's
// copy-out; cb55e0d). A failed poll's EP_PENDING or count error overwrites whatever the status holds
// (EP_PENDING makes the host launch the wait kernels, which read and reset the counts
// themselves); a message that did not land only replaces EP_OK (ep_message_landed). The status
// word is EP_OK when a round starts (every wait leaves it so, or the rank is poisoned).
// Only a failed poll's report is a release (its status store before it, for the resetter, which
// reads the status after the reports): an EP_OK report orders nothing before it. The counts' loads
// it follows have returned their values (the block passed a barrier on them), so no reset can
// reach them; the release's fence (MEMBAR.GPU and an error barrier, waiting for every memory
// operation of the thread) was on every block's path between the counts and the layout.
__device__ void ep_counts_read(u32 outcome, u32* ticket, u32* status) {
    if (threadIdx.x == 0) {
        if (outcome != EP_OK) {
            atomicExch(status, outcome);
            ep_red_release_gpu(ticket, 1);
        } else {
            ep_red_relaxed_gpu(ticket, 1);
        }
    }
}

// The resetter, once its own work is done (every path through the kernel must get here): waits
// for the reports of `blocks` blocks (all resident, each reported right after a poll with a
// deadline, so the wait ends), sets the ticket back to 0 and resets the counts unless a poll
// failed. Returns with a barrier passed.
__device__ void ep_reset_counts_when_read(u32* ticket, u32 blocks, u64* counts, int n, int rank, int n_ranks,
                                          int skip_a2a, u32* status) {
    __shared__ u32 st;
    __syncthreads();
    if (threadIdx.x == 0) {
        while (ep_load_acquire_gpu(ticket) != blocks) {
        }
        *ticket = 0;
        st = *(volatile const u32*)status;
    }
    __syncthreads();
    if (st == EP_OK || st == EP_MESSAGES_PENDING) ep_reset_counts(counts, n, rank, n_ranks, skip_a2a);
    __syncthreads();
}

// Causal profiling (EP_CUDA_DELAY=site:ns, kernels.rs): every thread of a block spins `ns` at one
// named site of a phase's chain; how much the phase's time grows says how much slack the site has
// (none: the full delay; off the path: nothing). Sites: 1 a sending block after its route, 2 a
// sending block after its marks, 3 the counting block before it publishes, 4 a receiving block
// once it has the counts with the layout (ep_poll_layout), 5 a receiving block after the layout
// once block 0 has kept the message counts.
// The SM clock (MHz) a delay's spin and the stamps' clock readings are converted at
// (EP_CUDA_TRACE_CLOCK_MHZ, kernels.rs): an H100's and an H200's while a phase runs (c59307d).
#ifndef EP_CLOCK_MHZ
#define EP_CLOCK_MHZ 1980
#endif
#ifdef EP_DELAY_NS
#define EP_DELAY(site)                                                                    \
    do {                                                                                  \
        if (EP_DELAY_SITE == (site)) {                                                    \
            long long c0_ = clock64();                                                    \
            while (clock64() - c0_ < (long long)EP_DELAY_NS * EP_CLOCK_MHZ / 1000) {      \
            }                                                                             \
        }                                                                                 \
    } while (0)
#else
#define EP_DELAY(site) do {} while (0)
#endif

// Stamps inside the kernels, to find where a phase's time goes: compiled in only when the process
// runs with EP_CUDA_TRACE set (kernels.rs). Then block 0 and the block that published the counts
// record, every launch, the block's start (%globaltimer, ns) and each stamp; with EP_CUDA_TRACE=all
// every block does, so that scripts/trace_summary.py can find the launch's last block and what held
// it, and trace_grid.py how busy the GPU was (EP_CUDA_TRACE_RANK: one rank records). Records go
// to a buffer in device memory, which the host prints as `trace` lines after the stream syncs
// (Kernels::print_trace): printf from every block stretched a launch several times over.
#ifdef EP_TRACE
#ifndef EP_TRACE_RANK
#define EP_TRACE_RANK -1
#endif
#ifdef EP_TRACE_ALL
#define EP_TRACE_PRINTS(rank, published) (EP_TRACE_RANK < 0 || (rank) == EP_TRACE_RANK)
#else
#define EP_TRACE_PRINTS(rank, published) \
    ((EP_TRACE_RANK < 0 || (rank) == EP_TRACE_RANK) && (blockIdx.x == 0 || (published)))
#endif
// 1-15 a kernel's steps, 16-31 sub-steps inside them (the single-launch dispatch's send and copy).
#define EP_N_STAMPS 32
// A record: the name's first 8 bytes, (rank, block), (sm, published), then the stamps, stamp 0 the
// start (absolute %globaltimer, 0: not reached). Its layout is kernels.rs' TRACE_RECORD_WORDS.
// Inside a kernel a stamp reads the SM's clock (clock64), turned into ns at EP_CLOCK_MHZ when the
// record is written; blocks line up by their starts, read from %globaltimer (whose step
// `ep bench --probe-signals` measures; the host prints stamps as integer differences, since an
// f64 of a %globaltimer reading has too coarse a grid: kernels.rs, trace_line).
#define EP_TRACE_WORDS (3 + EP_N_STAMPS)
#define EP_TRACE_RECORDS (1 << 17)
__device__ u64 ep_trace_records[EP_TRACE_RECORDS * EP_TRACE_WORDS];
__device__ unsigned int ep_trace_count; // records asked for, overflow included
__device__ __forceinline__ u64 ep_trace_name(const char* what) {
    u64 w = 0;
    for (int i = 0; i < 8 && what[i]; i++) w |= (u64)(u8)what[i] << (8 * i);
    return w;
}
// `clock0`: the SM clock at stamps[0], when stamps[1 ..] are SM clocks (0: they are %globaltimer).
__device__ __forceinline__ void ep_trace_record(const char* what, int rank, u32 block, int published,
                                                const u64* stamps, long long clock0 = 0) {
    u32 sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    u32 i = atomicAdd(&ep_trace_count, 1u);
    if (i >= EP_TRACE_RECORDS) return;
    u64* rec = ep_trace_records + (u64)i * EP_TRACE_WORDS;
    rec[0] = ep_trace_name(what);
    rec[1] = ((u64)(u32)rank << 32) | block;
    rec[2] = ((u64)sm << 32) | (u32)published;
    for (int k = 0; k < EP_N_STAMPS; k++)
        rec[3 + k] = k == 0 || !clock0 || !stamps[k]
                         ? stamps[k]
                         : stamps[0] + (u64)(((long long)stamps[k] - clock0) * 1000 / EP_CLOCK_MHZ);
}
__shared__ u64 ep_stamp[EP_N_STAMPS]; // at file scope: the device functions a kernel calls stamp too
__shared__ long long ep_stamp_clock;  // the SM clock at the block's start
#define EP_STAMPS                                                          \
    if (threadIdx.x < EP_N_STAMPS) ep_stamp[threadIdx.x] = 0;              \
    __syncthreads();                                                       \
    if (threadIdx.x == 0) {                                                \
        ep_stamp_clock = clock64();                                        \
        ep_stamp[0] = ep_globaltimer();                                    \
    }
#define EP_STAMP(i) do { if (threadIdx.x == 0) ep_stamp[i] = (u64)clock64(); } while (0)
// The first time only (a step inside a loop), by any one thread.
#define EP_STAMP_FIRST(i) do { if (ep_stamp[i] == 0) ep_stamp[i] = (u64)clock64(); } while (0)
#define EP_STAMPS_PRINT(what, rank, published)                                                         \
    do {                                                                                               \
        if (threadIdx.x == 0 && EP_TRACE_PRINTS(rank, published))                                     \
            ep_trace_record(what, rank, blockIdx.x, (int)(published), ep_stamp, ep_stamp_clock);      \
    } while (0)
// One unit of work inside a launch (a message a copy-out warp took), recorded as a block of its
// own named `what` with id `id`: start `t0`, stamps 1 and 2 `t1` and `t2`. Every one is recorded
// under EP_CUDA_TRACE=all, none otherwise.
#ifdef EP_TRACE_ALL
#define EP_TRACE_WORK(what, rank, id, t0, t1, t2)                                                      \
    do {                                                                                               \
        if (EP_TRACE_RANK < 0 || (rank) == EP_TRACE_RANK) {                                            \
            u64 st_[EP_N_STAMPS] = {(t0), (t1), (t2)};                                                 \
            ep_trace_record(what, rank, (u32)(id), 0, st_);                                            \
        }                                                                                              \
    } while (0)
#else
#define EP_TRACE_WORK(what, rank, id, t0, t1, t2) do {} while (0)
#endif
#else
#define EP_STAMPS
#define EP_STAMP(i) do {} while (0)
#define EP_STAMP_FIRST(i) do {} while (0)
#define EP_STAMPS_PRINT(what, rank, published) do {} while (0)
#endif
