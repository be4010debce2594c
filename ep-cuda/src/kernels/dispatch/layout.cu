// The receiver's layout (part of the dispatch program: wire.cu): wait for every sender's counts,
// then lay out the groups (ep_poll_layout), shared by ep_dispatch_wait and the single-launch
// dispatch.

#include "common/types.cuh"
#include "common/numerics.cuh"
#include "common/formats.cuh"
#include "common/ordering.cuh"
#include "common/protocol.cuh"
#include "params.cuh"
#include "dispatch/assign.cu"

// Inclusive prefix sum of `v` over the block's threads in thread order, from registers: each
// warp's by shuffles, then the warps' totals (through `warp_sums`, shared, one barrier) scanned by
// shuffles in every warp; `total` gets the block's sum. Every thread calls it (blockDim.x a
// multiple of 32); what the threads stored to shared memory before it is visible after it. The
// caller passes another barrier before `warp_sums` is written again.
__device__ __forceinline__ u32 ep_block_scan_incl(u32 v, u32* warp_sums, u32& total) {
    const unsigned all = 0xffffffffu;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = ep_warp_scan(v);
    if (lane == 31) warp_sums[warp] = v;
    __syncthreads();
    u32 w = ep_warp_scan(lane < warps ? warp_sums[lane] : 0u);
    total = __shfl_sync(all, w, 31);
    return (warp > 0 ? __shfl_sync(all, w, warp - 1) : 0u) + v;
}

// In-place inclusive prefix sum of a[0 .. n) in shared memory, by the whole block (blockDim.x a
// multiple of 32), blockDim.x entries at a time (ep_block_scan_incl): two barriers a round, where
// summing the warps' totals one by one from shared memory, with the carry there, took four and up
// to 15 dependent loads. Written as rounds of ep_scan_counts (u64 sums, a serial walk over the
// totals), or as the four-barrier form above, the 1-token FP8 dispatch read slower (measured at
// b7f575d). Returns with a barrier passed.
__device__ void ep_block_scan(u32* a, int n) {
    __shared__ u32 warp_sums[32];
    u32 carry = 0;
    if (n <= 0) __syncthreads();
    for (int base = 0; base < n; base += blockDim.x) {
        int i = base + threadIdx.x;
        u32 total;
        u32 incl = ep_block_scan_incl(i < n ? a[i] : 0u, warp_sums, total);
        if (i < n) a[i] = carry + incl;
        carry += total;
        __syncthreads(); // a[] for the caller, warp_sums for the next round
    }
}

// The groups' layout from the counts `cnt` [n_local * n_ranks] (shared memory, each at most
// max_tokens: EpCountFits): `start`
// [n_groups + 1] (shared memory) gets each group's first row and the total, `src_offsets`
// [n_groups, n_ranks + 1] where each source's rows begin in its group, with the shared expert
// (when fused) as group 0. A thread per group and a block scan over the groups. Every thread
// calls it; returns with a barrier passed.
__device__ void ep_layout_groups(const u64* cnt, int n_local, int n_ranks, int rank, int shared_groups,
                                 int shared_len, int row_multiple, u32* start, u32* src_offsets) {
    int n_groups = n_local + shared_groups;
    // Group sizes rounded up to the row multiple; since every start is a multiple of it, the
    // starts are the exclusive prefix sum of the rounded sizes.
    for (int g = threadIdx.x; g < n_groups; g += blockDim.x) {
        u32 size = 0;
        for (int s = 0; s < n_ranks; s++)
            size += g < shared_groups ? (s == rank ? shared_len : 0) : (u32)cnt[(g - shared_groups) * n_ranks + s];
        start[g + 1] = (size + row_multiple - 1) / row_multiple * row_multiple;
    }
    if (threadIdx.x == 0) start[0] = 0;
    __syncthreads();
    ep_block_scan(start + 1, n_groups);
    for (int g = threadIdx.x; g < n_groups; g += blockDim.x) {
        u32 cursor = start[g];
        for (int s = 0; s < n_ranks; s++) {
            src_offsets[g * (n_ranks + 1) + s] = cursor;
            cursor += g < shared_groups ? (s == rank ? shared_len : 0) : (u32)cnt[(g - shared_groups) * n_ranks + s];
        }
        src_offsets[g * (n_ranks + 1) + n_ranks] = cursor;
    }
    __syncthreads();
}

// A dispatch count is a number of rows from one rank for one expert: more than max_tokens is a
// protocol violation (and would overrun the output).
struct EpCountFits {
    u64 max_tokens;
    __device__ u64 expect(int) const { return 0; }
    __device__ u32 operator()(int, u64 v, u64 = 0) const { return v > max_tokens ? EP_COUNT_OVERFLOW : EP_OK; }
};

// A dispatch's counts polled and its groups laid out: ep_poll_counts (with `nmsg`) and
// ep_layout_groups in one pass where a thread per count fits the block and each group's counts
// (n_ranks of them, neighbours) fit one warp's lanes (n_ranks a power of two up to 32); otherwise
// the two steps. In the one pass thread i polls count i, keeps it in a register, checks it
// (EpCountFits) and adds up its group's counts with its neighbours' (shuffles); the last count of
// a group carries the group's padding (up to the row multiple), so one block-wide scan over the
// counts gives every source's first row in its group, and each group's start and padding: two
// barriers after the counts are there, where the two steps take six with shared memory between
// them (the receivers' chain at 1 token runs through here). Outputs: `got` [n] (shared or global),
// `missing` and `nmsg` as ep_poll_counts', `start` [n_groups + 1] (shared), `src_off` [n_groups,
// n_ranks + 1], the layout only when the outcome is EP_OK. Used by the single-launch dispatch's
// receivers and ep_dispatch_wait. Every thread calls it; returns with a barrier passed.
__device__ u32 ep_poll_layout(const u64* counts, int n_local, int n_ranks, int rank, int skip_a2a, u64 slice_ns,
                              u64 max_tokens, u64* got, u32* missing, u32* nmsg, int shared_groups, int shared_len,
                              int row_multiple, u32* start, u32* src_off) {
    int n = n_local * n_ranks, i = threadIdx.x;
    if (n > (int)blockDim.x || n_ranks > 32 || (n_ranks & (n_ranks - 1)) != 0) {
        u32 outcome =
            ep_poll_counts(counts, n, rank, n_ranks, skip_a2a, slice_ns, got, missing, EpCountFits{max_tokens}, nmsg);
        if (outcome == EP_OK)
            ep_layout_groups(got, n_local, n_ranks, rank, shared_groups, shared_len, row_multiple, start, src_off);
        return outcome;
    }
    __shared__ u32 pending, bad;
    __shared__ u32 warp_sums[32];
    if (i == 0) { pending = 0; bad = EP_OK; }
    __syncthreads();
    u64 t0 = ep_globaltimer();
    u32 c = 0;
    if (i < n) {
        bool late = false;
        u64 v = 0;
        if (ep_awaited(i, n_ranks, rank, skip_a2a)) {
            v = ep_poll_count(counts, i, t0, slice_ns, late);
            if (late) {
                pending = 1;
            } else {
                v = ep_unpack_count(v, i, n_ranks, nmsg);
                c = (u32)v;
                u32 code = EpCountFits{max_tokens}(i, v);
                if (code != EP_OK) bad = code;
            }
        }
        got[i] = v;
        if (missing) missing[i] = late;
    }
    // The group's size in each of its lanes, its padding on its last count.
    u32 size = c;
    for (int off = 1; off < n_ranks; off <<= 1) size += __shfl_xor_sync(0xffffffffu, size, off);
    int s = i & (n_ranks - 1);
    u32 padded = c + (s == n_ranks - 1 ? (size + row_multiple - 1) / row_multiple * row_multiple - size : 0);
    u32 total, incl = ep_block_scan_incl(padded, warp_sums, total); // its barrier: `pending`, `bad`
    u32 outcome = pending ? EP_PENDING : bad;
    if (outcome != EP_OK) {
        __syncthreads(); // every thread has read the outcome
        return outcome;
    }
    // The fused shared expert (group 0): the rank's own tokens, before every routed group.
    u32 base = shared_groups ? (shared_len + row_multiple - 1) / row_multiple * row_multiple : 0;
    u32 end = base + incl, first = end - padded;
    if (i < n) {
        int g = i / n_ranks + shared_groups;
        src_off[g * (n_ranks + 1) + s] = first;
        if (s == n_ranks - 1) {
            src_off[g * (n_ranks + 1) + n_ranks] = first + c;
            start[g + 1] = end;
        }
    }
    if (i == 0) start[0] = 0;
    if (shared_groups && i <= n_ranks) src_off[i] = i > rank ? shared_len : 0;
    if (shared_groups && i == 0) start[1] = base;
    __syncthreads();
    return EP_OK;
}

// Waits for every count, then lays out the groups: row_offsets [n_groups + 1] and src_offsets
// [n_groups, n_ranks + 1] (ep_poll_layout), the counts in `snapshot` and the message counts in
// `nmsg`. One block; the group starts go through shared memory (`smem`: 4 * (n_groups + 1)
// bytes). An overlapped round's first slice (beside the assign and the send) or a layout-first
// round's (before it, comm/path.rs) then zeroes the copy-out's count of messages taken
// (`layout_seq[1]`, ep_copy_messages) and releases round `seq` into `layout_seq[0]` (null:
// neither), for the send blocks still to encode this rank's own messages (ep_place_own_rows) and
// the copy-out's helpers after the send.
extern "C" __global__ void ep_dispatch_wait(const __grid_constant__ EpDispatchWaitParams p) {
    extern __shared__ u32 start[]; // [n_groups + 1]
    int n = p.n_local * p.n_ranks, n_groups = p.n_local + p.shared_groups;
    ep_await_prior_grid(); // launched chained after the send (comm/dispatch.rs)
    if (ep_failed_before(p.status)) return; // its outcome stays (common/protocol.cuh)
    // The counts and the layout, the counts' misses in status[1 ..], the outcome in status[0]; the
    // counts reset once every one was there and fit (a count that does not may be a peer's poison:
    // it stays for the host to read, ep_wait_counts says why).
    u32 outcome = ep_poll_layout(p.counts, p.n_local, p.n_ranks, p.rank, p.skip_a2a, ep_slice(p.slice_ns, p.status), p.max_tokens,
                                 p.snapshot, p.status + 1,
                                 p.nmsg, p.shared_groups, p.shared_len, p.row_multiple, start, p.src_offsets);
    if (outcome == EP_OK) ep_reset_counts(p.counts, n, p.rank, p.n_ranks, p.skip_a2a);
    if (threadIdx.x == 0) p.status[0] = outcome;
    if (outcome != EP_OK) return;
    ep_release_dependents(); // the next kernel's blocks (copy-out, or a layout-first send) may launch
    for (int g = threadIdx.x; g <= n_groups; g += blockDim.x) p.row_offsets[g] = start[g];
    if (!p.layout_seq) return;
    __syncthreads();
    if (threadIdx.x == 0) {
        p.layout_seq[1] = 0;
        ep_store_release_gpu(p.layout_seq, *p.seq);
    }
}

