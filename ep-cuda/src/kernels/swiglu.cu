// Fused SwiGLU on the dispatch output (ep_core::swiglu): one block per capacity row. Rows that
// the dispatch did not deliver (padding, past the last group) are written as zeros; the host
// zeroed the scale array. Which rows are live is read from row_offsets/src_offsets on the device.

#include "common/types.cuh"
#include "common/numerics.cuh"
#include "common/formats.cuh"
#include "params.cuh"

extern "C" __global__ void ep_swiglu(const __grid_constant__ EpSwigluParams p) {
    extern __shared__ float smem_h[];
    float* h = smem_h;
    u8* row_scales = (u8*)(h + p.width);
    u64 row = blockIdx.x;
    bool live = false;
    for (int g = 0; g < p.n_groups; g++) {
        const u32* so = p.src_offsets + g * (p.n_ranks + 1);
        live = live || (row >= so[0] && row < so[p.n_ranks]);
    }
    u8* out = p.payload + row * p.payload_bytes;
    if (!live) {
        for (int i = threadIdx.x; i < p.payload_bytes; i += blockDim.x) out[i] = 0;
        return;
    }
    const u16* xr = p.x + row * 2 * (u64)p.width;
    for (int c = threadIdx.x; c < p.width; c += blockDim.x) {
        float g = bf16_to_f32(p.interleaved ? xr[2 * c] : xr[c]);
        float u = bf16_to_f32(p.interleaved ? xr[2 * c + 1] : xr[p.width + c]);
        if (!p.clamp) {
            h[c] = canonical_nan(__fmul_rn(ep_silu(g), u));
        } else {
            g = fminf(g, p.limit);
            u = fmaxf(fminf(u, p.limit), -p.limit);
            h[c] = canonical_nan(__fmul_rn(__fmul_rn(__fadd_rn(u, 1.0f), g), ep_sigmoid(__fmul_rn(p.alpha, g))));
        }
    }
    __syncthreads();
    ep_encode_row(p.fmt, h, p.width, p.input_scale, out, row_scales);
    __syncthreads();
    ep_place_scales<false>(p.fmt, p.width, p.rows, row, row_scales, p.scales);
}
