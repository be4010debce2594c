// The unreduced combine and the LL rows unpacked for it (part of the combine program: send.cu).

#include "common/types.cuh"
#include "common/numerics.cuh"
#include "common/formats.cuh"
#include "common/ordering.cuh"
#include "common/protocol.cuh"
#include "params.cuh"
#include "combine/send.cu"
#include "combine/reduce.cu"

// Without weights: each slot's returned row, masked and off-device slots zero. One block per token.
extern "C" __global__ void ep_combine_unreduced(const __grid_constant__ EpCombineUnreducedParams p) {
    if (!ep_wait_completed(p.status)) return;
    int t = blockIdx.x;
    const int* tid = p.ids + (u64)t * p.top_k;
    for (int k = 0; k < p.top_k; k++) {
        int k0 = ep_routed_slot(tid, k, p.rank, p.n_local, p.skip_a2a);
        u16* o = p.out + ((u64)t * p.top_k + k) * p.hidden;
        const u16* y = p.recv + ((u64)t * p.top_k + (k0 < 0 ? 0 : k0)) * p.hidden;
        for (int c = threadIdx.x; c < p.hidden; c += blockDim.x) o[c] = k0 < 0 ? 0 : y[c];
    }
}

// A rank that takes its rows in LL form (common/protocol.cuh), for the kernels above, which read the
// combine receive buffer: each row of its tokens, polled for up to `slice_ns`, into that buffer
// (the unreduced combine, and a reduction launched again after the single-launch kernel's slice
// ran out before every row came, EP_MESSAGES_PENDING). One block per token; nothing unless the
// wait completed.
extern "C" __global__ void ep_combine_ll_unpack(const __grid_constant__ EpCombineLlUnpackParams p) {
    if (!ep_wait_completed(p.status)) return;
    int t = blockIdx.x, w8 = p.hidden / 8;
    const int* tid = p.ids + (u64)t * p.top_k;
    EpLlWait ll{(const ulonglong2*)p.ll_ptrs[p.rank], *p.seq, ep_globaltimer() + ep_slice(p.slice_ns, p.status), p.status, p.n_local,
    p.n_ranks};
    for (int k = 0; k < p.top_k; k++) {
        if (ep_routed_slot(tid, k, p.rank, p.n_local, p.skip_a2a) != k) continue; // masked, elsewhere, or a repeat
        const ulonglong2* src = ep_ll_row((u64)ll.rows, t, k, p.top_k, w8);
        uint4* dst = (uint4*)(p.recv + ((u64)t * p.top_k + k) * p.hidden);
        for (int c8 = threadIdx.x; c8 < w8; c8 += blockDim.x) {
            uint4 v;
            ep_ll_wait(src, c8, w8, tid[k], ll, v);
            dst[c8] = v;
        }
    }
}

