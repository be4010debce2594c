// The unreduced combine and the LL rows unpacked for it (part of the combine program: send.cu).

// Without weights: each slot's returned row, masked and off-device slots zero. One block per token.
extern "C" __global__ void ep_combine_unreduced(const u16* recv, const int* ids, int top_k, int hidden, int rank,
                                                int n_local, int skip_a2a, u16* out, const u32* status) {
    if (!ep_wait_completed(status)) return;
    int t = blockIdx.x;
    const int* tid = ids + (u64)t * top_k;
    for (int k = 0; k < top_k; k++) {
        int k0 = ep_routed_slot(tid, k, rank, n_local, skip_a2a);
        u16* o = out + ((u64)t * top_k + k) * hidden;
        const u16* y = recv + ((u64)t * top_k + (k0 < 0 ? 0 : k0)) * hidden;
        for (int c = threadIdx.x; c < hidden; c += blockDim.x) o[c] = k0 < 0 ? 0 : y[c];
    }
}

// A rank that takes its rows in LL form (common.cuh), for the kernels above, which read the
// combine receive buffer: each row of its tokens, polled for up to `slice_ns`, into that buffer
// (the unreduced combine, and a reduction launched again after the single-launch kernel's slice
// ran out before every row came, EP_MESSAGES_PENDING). One block per token; nothing unless the
// wait completed.
extern "C" __global__ void ep_combine_ll_unpack(const u64* ll_ptrs, u32 seq, u64 slice_ns, const int* ids, int top_k,
                                                int hidden, int rank, int n_local, int n_ranks, int skip_a2a,
                                                u16* recv, u32* status) {
    if (!ep_wait_completed(status)) return;
    int t = blockIdx.x, w8 = hidden / 8;
    const int* tid = ids + (u64)t * top_k;
    EpLlWait ll{(const ulonglong2*)ll_ptrs[rank], seq, ep_globaltimer() + slice_ns, status, n_local, n_ranks};
    for (int k = 0; k < top_k; k++) {
        if (ep_routed_slot(tid, k, rank, n_local, skip_a2a) != k) continue; // masked, elsewhere, or a repeat
        const ulonglong2* src = ep_ll_row((u64)ll.rows, t, k, top_k, w8);
        uint4* dst = (uint4*)(recv + ((u64)t * top_k + k) * hidden);
        for (int c8 = threadIdx.x; c8 < w8; c8 += blockDim.x) {
            uint4 v;
            ep_ll_wait(src, c8, w8, tid[k], ll, v);
            dst[c8] = v;
        }
    }
}

