// Kernels for `ep bench` (bench.rs; compiled when a benchmark first needs them, not at every
// start): the copy that measures the ceiling, the local permute/unpermute and reduction an
// NCCL-based all-to-all dispatcher needs around its send/recv, the start gate and the floors.

#include "common/types.cuh"
#include "common/numerics.cuh"
#include "common/formats.cuh"
#include "common/ordering.cuh"
#include "common/protocol.cuh"

// Grid-stride 16-byte copy (peer-to-peer when dst lives on another GPU).
extern "C" __global__ void ep_copy(const uint4* src, uint4* dst, u64 n16) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += (u64)gridDim.x * blockDim.x) dst[i] = src[i];
}

// Every GPU at once pushing a slice to each of its peers, as a dispatch does: blocks are dealt to
// peers in turn (grid a multiple of n_peers), so all links carry traffic together. Slice j of src
// (slice16 16-byte words) goes to dst_ptrs[j], which points at this GPU's slot in that peer.
extern "C" __global__ void ep_copy_to_peers(const uint4* src, const u64* dst_ptrs, int n_peers, u64 slice16) {
    int peer = blockIdx.x % n_peers;
    u64 stride = (u64)(gridDim.x / n_peers) * blockDim.x;
    uint4* dst = (uint4*)dst_ptrs[peer];
    const uint4* s = src + (u64)peer * slice16;
    for (u64 i = (u64)(blockIdx.x / n_peers) * blockDim.x + threadIdx.x; i < slice16; i += stride) dst[i] = s[i];
}

// dst row i = src row index[i] (index -1: left alone). One block per row. (The baseline's kernels
// wait for the kernel before them first: under step timing they are launched chained, as ours.)
extern "C" __global__ void ep_gather_rows(const u8* src, u8* dst, const int* index, u64 row_bytes) {
    ep_await_prior_grid();
    int j = index[blockIdx.x];
    if (j < 0) return;
    ep_block_copy(dst + (u64)blockIdx.x * row_bytes, src + (u64)j * row_bytes, row_bytes);
}

// out[t] = bf16(sum_k w[t][k] * rows[index[t][k]]), index -1 skipped. One block per token.
extern "C" __global__ void ep_weighted_rows(const u16* rows, const int* index, const float* w, int top_k, int hidden,
                                            u16* out) {
    ep_await_prior_grid();
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

// Reads [src, src + n16), for `ep bench`'s cold modes: every word grid-stride, and in every
// block a word of each 2 MiB page (the driver's large pages). As the evict (EP_BENCH_EVICT_L2=rN)
// it leaves the L2 full of clean lines, as a model's GEMMs streaming their weights do; as a
// read-back (EP_BENCH_REWARM) it puts a buffer's lines in L2 and its pages' address translations
// in every SM's caches. The sink is written only when the words' OR is 0x5eed5eed, which neither
// the evict buffer (zeros) nor a round is known to leave: the reads cannot be dropped.
extern "C" __global__ void ep_bench_read(const uint4* src, u64 n16, u32* sink) {
    u32 acc = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += (u64)gridDim.x * blockDim.x) {
        uint4 v = src[i];
        acc |= v.x | v.y | v.z | v.w;
    }
    const u64 page16 = (2ull << 20) / 16;
    for (u64 i = threadIdx.x * page16; i < n16; i += (u64)blockDim.x * page16) acc |= src[i].x;
    if (acc == 0x5eed5eedu) *sink = acc;
}

// Thread 0 of a rank's kernel: raises flag `epoch` at every rank (flags[p][rank]; one fence
// first, so what the block wrote before its barrier is visible before the flags), then waits
// until every rank's flag here has reached `epoch` (napping between polls with `nap`). A flag
// that does not come within `timeout_ns` sets flags[rank][n_ranks] and returns false.
__device__ bool ep_bench_meet(const u64* flag_ptrs, int rank, int n_ranks, u64 epoch, u64 timeout_ns, bool nap) {
    ep_fence_acq_rel();
    for (int p = 0; p < n_ranks; p++) ep_store_relaxed_sys((u64*)flag_ptrs[p] + rank, epoch);
    u64* mine = (u64*)flag_ptrs[rank];
    u64 start = ep_globaltimer();
    for (int p = 0; p < n_ranks; p++) {
        while (ep_load_acquire(mine + p) < epoch) {
            if (ep_globaltimer() - start > timeout_ns) {
                mine[n_ranks] = 1;
                return false;
            }
            if (nap) __nanosleep(64);
        }
    }
    return true;
}

// The start of a timed phase on each rank's stream: the ranks meet (ep_bench_meet), then the
// stream is held `hold_ns` longer. The phase's launches queue up behind it meanwhile, so the
// ranks start within a flag's latency of each other and what the events around the phase time is
// device work, not host launch cadence or host threads waking at different times.
extern "C" __global__ void ep_bench_gate(const u64* flag_ptrs, int rank, int n_ranks, u64 epoch, u64 hold_ns,
                                         u64 timeout_ns) {
    if (threadIdx.x != 0 || !ep_bench_meet(flag_ptrs, rank, n_ranks, epoch, timeout_ns, true)) return;
    u64 released = ep_globaltimer(), now = released;
    while (now - released < hold_ns) {
        __nanosleep(256);
        now = ep_globaltimer();
    }
    // When the phase behind the gate may start (flags[rank][n_ranks + 1 + epoch % 2]): where step
    // timing starts the phase (bench.rs, `Timing::Step`), and what traces print (StartGate::check).
    ((u64*)flag_ptrs[rank])[n_ranks + 1 + (epoch & 1)] = now;
}

// The end of a phase under step timing: launched chained after the phase's last kernel, it
// writes the time at which that kernel's work is complete and visible to the next kernel.
extern "C" __global__ void ep_bench_stamp(u64* at) {
    ep_await_prior_grid();
    *at = ep_globaltimer();
}

// The latency floors of a phase, timed like one (behind a start gate): a kernel that does
// nothing, and the least a phase that moves data between ranks does: every rank copies `n16`
// 16-byte words to each peer (dst_ptrs[j]: its slot there, as ep_copy_to_peers), then the ranks
// meet without napping. With n16 = 0 it is the flag exchange alone. One block.
extern "C" __global__ void ep_bench_nothing() { ep_await_prior_grid(); }

extern "C" __global__ void ep_bench_exchange(const uint4* src, const u64* dst_ptrs, u64 n16, const u64* flag_ptrs,
                                             int rank, int n_ranks, u64 epoch, u64 timeout_ns) {
    ep_await_prior_grid();
    for (int j = 0; j < n_ranks - 1; j++) {
        uint4* dst = (uint4*)dst_ptrs[j];
        for (u64 i = threadIdx.x; i < n16; i += blockDim.x) dst[i] = src[(u64)j * n16 + i];
    }
    __syncthreads();
    if (threadIdx.x == 0) ep_bench_meet(flag_ptrs, rank, n_ranks, epoch, timeout_ns, false);
}
