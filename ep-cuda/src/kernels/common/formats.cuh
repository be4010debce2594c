// Token formats: encoding rows into payload and scales (ep_core::format), the swizzled scale
// layout, and the warp or block teams that do it.

#include "common/types.cuh"
#include "common/numerics.cuh"

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
