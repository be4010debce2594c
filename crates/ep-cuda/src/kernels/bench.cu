// Kernels for `ep bench`: the copy that measures the ceiling, and the local permute/unpermute
// and reduction an NCCL-based all-to-all dispatcher needs around its send/recv.

// Grid-stride 16-byte copy (peer-to-peer when dst lives on another GPU).
extern "C" __global__ void ep_copy(const uint4* src, uint4* dst, u64 n16) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += (u64)gridDim.x * blockDim.x) dst[i] = src[i];
}

// dst row i = src row index[i] (index -1: left alone). One block per row.
extern "C" __global__ void ep_gather_rows(const u8* src, u8* dst, const int* index, u64 row_bytes) {
    int j = index[blockIdx.x];
    if (j < 0) return;
    ep_block_copy(dst + (u64)blockIdx.x * row_bytes, src + (u64)j * row_bytes, row_bytes);
}

// out[t] = bf16(sum_k w[t][k] * rows[index[t][k]]), index -1 skipped. One block per token.
extern "C" __global__ void ep_weighted_rows(const u16* rows, const int* index, const float* w, int top_k, int hidden,
                                            u16* out) {
    int t = blockIdx.x;
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
        float acc = 0.0f;
        for (int k = 0; k < top_k; k++) {
            int j = index[t * top_k + k];
            if (j >= 0) acc = __fadd_rn(acc, __fmul_rn(w[t * top_k + k], bf16_to_f32(rows[(u64)j * hidden + c])));
        }
        out[(u64)t * hidden + c] = arith_to_bf16(acc);
    }
}
