// EP_CUDA_LATE_INPUTS (comm/late_inputs.rs), a test hook: the kernel a caller's model could run
// right before a phase, one that lets its dependents launch at once and writes the phase's inputs
// last. Each of the n words is saved, changed (`ids`: a non-negative expert id to its neighbour, a
// masked one kept; else the low bit of each half flipped) and, `hold_ns` later, put back. A
// phase's first kernel that read them before its ep_await_prior_grid would see the changed ones.

#include "common/types.cuh"
#include "common/ordering.cuh"

extern "C" __global__ void ep_late_inputs(u32* words, u32* saved, u64 n, int ids, u64 hold_ns) {
    ep_release_dependents();
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        u32 w = words[i];
        saved[i] = w;
        words[i] = ids ? ((int)w >= 0 ? w ^ 1u : w) : w ^ 0x00010001u;
    }
    __threadfence();
    u64 start = ep_globaltimer();
    while (ep_globaltimer() - start < hold_ns) __nanosleep(500);
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) words[i] = saved[i];
}
