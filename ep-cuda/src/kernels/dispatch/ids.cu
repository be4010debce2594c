// A round's expert ids from the caller's device memory (comm/mod.rs, `dispatch_async`), checked
// while copied into the rank's own ids buffer, which the round's kernels read from then on (the
// combine's too). An id outside [-1, n_experts) refuses the whole batch: every id is copied as
// -1 (masked), so the rank sends none of its tokens this round and no kernel indexes a rank or
// an expert past the world, and the first bad id is recorded in `refused` (1, token, slot, id)
// for the host to report at its next wait for the stream. One block; a phase's first kernel,
// launched chained (comm/mod.rs, `Chain::First`), before the dispatch's own first kernel.

#include "common/types.cuh"
#include "common/numerics.cuh"
#include "common/formats.cuh"
#include "common/ordering.cuh"
#include "params.cuh"

extern "C" __global__ void __launch_bounds__(1024) ep_take_ids(const __grid_constant__ EpTakeIdsParams p) {
    ep_await_prior_grid();
    __shared__ unsigned long long first_bad;
    if (threadIdx.x == 0) first_bad = ~0ull;
    __syncthreads();
    const u64 n = (u64)p.n_tokens * p.top_k;
    for (u64 i = threadIdx.x; i < n; i += blockDim.x) {
        int id = p.src[i];
        if (id < -1 || id >= p.n_experts) atomicMin(&first_bad, (unsigned long long)i);
    }
    __syncthreads();
    const u64 bad = first_bad;
    for (u64 i = threadIdx.x; i < n; i += blockDim.x) p.dst[i] = bad == ~0ull ? p.src[i] : -1;
    if (threadIdx.x == 0 && bad != ~0ull) {
        p.refused[1] = (u32)(bad / p.top_k);
        p.refused[2] = (u32)(bad % p.top_k);
        p.refused[3] = (u32)p.src[bad];
        p.refused[0] = 1;
    }
}
