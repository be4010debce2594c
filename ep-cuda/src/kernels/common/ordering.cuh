// Memory ordering and copies: acquire loads and relaxed stores across the system, the chained
// launch's waits, 16-byte and async copies, fences, the last block's ticket and a count's publish.

#include "common/types.cuh"

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
