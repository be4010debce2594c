// Fused SwiGLU on the dispatch output (ep_core::swiglu): one block per capacity row. Rows that
// the dispatch did not deliver (padding, past the last group) are written as zeros; the host
// zeroed the scale array. Which rows are live is read from row_offsets/src_offsets on the device.

extern "C" __global__ void ep_swiglu(const u16* x, u64 rows, int width, const u32* src_offsets, int n_groups,
                                     int n_ranks, int interleaved, int clamp, float alpha, float limit, int fmt,
                                     float input_scale, int payload_bytes, u8* payload, u8* scales) {
    extern __shared__ float smem_h[];
    float* h = smem_h;
    u8* row_scales = (u8*)(h + width);
    u64 row = blockIdx.x;
    bool live = false;
    for (int g = 0; g < n_groups; g++) {
        const u32* so = src_offsets + g * (n_ranks + 1);
        live = live || (row >= so[0] && row < so[n_ranks]);
    }
    u8* out = payload + row * payload_bytes;
    if (!live) {
        for (int i = threadIdx.x; i < payload_bytes; i += blockDim.x) out[i] = 0;
        return;
    }
    const u16* xr = x + row * 2 * (u64)width;
    for (int c = threadIdx.x; c < width; c += blockDim.x) {
        float g = bf16_to_f32(interleaved ? xr[2 * c] : xr[c]);
        float u = bf16_to_f32(interleaved ? xr[2 * c + 1] : xr[width + c]);
        if (!clamp) {
            h[c] = canonical_nan(__fmul_rn(ep_silu(g), u));
        } else {
            g = fminf(g, limit);
            u = fmaxf(fminf(u, limit), -limit);
            h[c] = canonical_nan(__fmul_rn(__fmul_rn(__fadd_rn(u, 1.0f), g), ep_sigmoid(__fmul_rn(alpha, g))));
        }
    }
    __syncthreads();
    ep_encode_row(fmt, h, width, input_scale, out, row_scales);
    __syncthreads();
    ep_place_scales<false>(fmt, width, rows, row, row_scales, scales);
}
