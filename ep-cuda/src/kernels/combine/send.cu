// Combine: expert outputs back to their tokens, reduced with the router weights.
//
// The combine program (kernels/combine.cu) includes this folder's files in this order, each
// including what it uses of the ones before it: send.cu (the launch order, the rows' way back, the
// send kernels and the wait), reduce.cu (the weighted sum), marked.cu (reduced as the rows land,
// prefill sizes), unreduced.cu (without weights; LL rows unpacked) and single.cu (the whole phase
// in one launch at decode sizes).
//
// Launch order: ep_combine_send (which also signals, from its last block, inside one node) or,
// between nodes, ep_combine_send -> ep_combine_put -> ep_combine_signal; then
// ep_combine_wait -> (ep_combine_ll_unpack, for a rank that takes its rows in LL form) ->
// ep_combine_reduce or ep_combine_unreduced, again while the wait's slice runs out before the
// counts (or the LL rows) are all there. At decode sizes inside one node, ep_combine_single or
// ep_combine_single_ll instead (below).

#include "common/types.cuh"
#include "common/numerics.cuh"
#include "common/formats.cuh"
#include "common/ordering.cuh"
#include "common/protocol.cuh"
#include "params.cuh"

#define EP_EPI_NONE 0
#define EP_EPI_RESIDUAL 1
#define EP_EPI_SCALE 2
#define EP_EPI_FP8 3
#define EP_EPI_DEVICE 4

// The epilogues that take a token's whole row in f32 (dynamic shared memory) from one block.
__device__ __forceinline__ bool ep_whole_row(int epilogue) {
    return epilogue == EP_EPI_FP8 || epilogue == EP_EPI_DEVICE;
}

// Each lane's rank's dispatch message count word (`nmsg`, lanes below n_ranks), loaded by the
// send kernels with the row's source: which rank takes its rows in LL form is then known without
// a round trip of its own before the row's loads or the counts' stores.
__device__ __forceinline__ u32 ep_lane_nmsg(const u32* nmsg, int n_ranks) {
    int lane = threadIdx.x & 31;
    return lane < n_ranks ? nmsg[lane] : 0u;
}

// Rank p's message count word from the lanes' (ep_lane_nmsg): a shuffle for the first 32 ranks,
// a load beyond. Every lane of the warp calls it.
__device__ __forceinline__ u32 ep_nmsg_of(int p, u32 lane_nmsg, const u32* nmsg) {
    u32 v = __shfl_sync(0xffffffffu, lane_nmsg, p & 31);
    return p < 32 ? v : nmsg[p];
}

// For each (local expert g, destination rank): the rows the dispatch brought from that rank,
// which are exactly the rows going back. Published at index g * n_ranks + rank of the
// destination's combine counts, like the dispatch counts (ep_publish): only the destinations
// whose counts go out early (`early`: LL rows or marked rows, ep_counts_early, from `nmsg`, this
// rank's dispatch message count words, common/protocol.cuh, and `lane_nmsg` from ep_lane_nmsg), or only
// the others. An early destination's counts do not vouch for the rows, so they go out with plain
// stores, no fence. Between nodes no destination is early (both forms need one node).
__device__ void ep_publish_rows(const u64* dispatch_counts, int n_local, int n_ranks, int rank, int skip_a2a,
                                const u64* count_ptrs, const u32* nmsg, u32 lane_nmsg, bool early) {
    for (int i0 = 0; i0 < n_local * n_ranks; i0 += blockDim.x) {
        int i = i0 + threadIdx.x;
        int g = i / n_ranks, dst = i % n_ranks;
        bool here = ep_counts_early(ep_nmsg_of(dst, lane_nmsg, nmsg)) == early;
        u64* at = nullptr;
        u64 v = 0;
        if (i < n_local * n_ranks && !(skip_a2a && dst != rank) && here) {
            at = (u64*)count_ptrs[dst] + (u64)g * n_ranks + rank;
            v = dispatch_counts[i];
        }
        if (!early) ep_publish(at, v);
        else if (at) ep_store_relaxed_sys(at, v);
    }
}

// Received row `row`'s (token, first slot) at its source rank, as an index into [max_tokens, top_k]:
// its row in the combine receive buffer, its mark.
__device__ __forceinline__ u64 ep_return_index(u64 row, const int* src_info, int top_k) {
    return (u64)src_info[2 * row] * top_k + src_info[2 * row + 1];
}

// Where received row `row` goes back to: (token, first slot) in the combine receive buffer
// [max_tokens, top_k, hidden] of its source rank `s`.
__device__ __forceinline__ u8* ep_return_slot(u64 row, int s, const int* src_info, const u64* recv_ptrs, int top_k,
                                              u64 row_bytes) {
    return (u8*)recv_ptrs[s] + ep_return_index(row, src_info, top_k) * row_bytes;
}

// Where received row `row`'s mark goes at its source rank `s` (a rank that takes its rows marked).
__device__ __forceinline__ u32* ep_return_mark(u64 row, int s, const int* src_info, const u64* mark_ptrs, int top_k) {
    return (u32*)mark_ptrs[s] + ep_return_index(row, src_info, top_k);
}

// Slot k of token t's row in a rank's LL rows `base` (rows of 2 * n16 lines: common/protocol.cuh).
__device__ __forceinline__ ulonglong2* ep_ll_row(u64 base, int t, int k, int top_k, u64 n16) {
    return (ulonglong2*)base + ((u64)t * top_k + k) * 2 * n16;
}

// A row to a rank that takes its rows in LL form (common/protocol.cuh), by the block: `n16` pieces of 16
// bytes, up to 4 loads per thread before their stores: with 8, as ep_copy_to, ep_combine_send
// took 64 registers instead of 56, fewer blocks an SM, and its prefill combine read slower
// (9341b99).
// With `First`, the thread's first pieces (threadIdx.x, + blockDim.x, ...) are loaded already,
// into `first`, and stored as they are.
template <int First = 0>
__device__ void ep_ll_send_row(ulonglong2* dst, const uint4* src, u64 n16, u32 seq, const uint4* first = nullptr) {
    const int batch = 4;
#pragma unroll
    for (int u = 0; u < First; u++) {
        u64 i = threadIdx.x + (u64)u * blockDim.x;
        if (i < n16) ep_ll_store(dst, i, n16, first[u], seq);
    }
    for (u64 i0 = threadIdx.x + (u64)First * blockDim.x; i0 < n16; i0 += batch * blockDim.x) {
        uint4 v[batch];
#pragma unroll
        for (int u = 0; u < batch; u++)
            if (i0 + u * blockDim.x < n16) v[u] = src[i0 + u * blockDim.x];
#pragma unroll
        for (int u = 0; u < batch; u++)
            if (i0 + u * blockDim.x < n16) ep_ll_store(dst, i0 + u * blockDim.x, n16, v[u], seq);
    }
}

// Received row `row` back to its source rank, by the block: inside the node into its combine
// receive buffer, or its LL rows (this combine's number `seq`) when its dispatch message count here
// says so (`nmsg`, and `lane_nmsg` from ep_lane_nmsg); to another node staged for ep_combine_put.
// A rank that takes its rows marked (ep_rows_marked) gets, after the block's fence, the number
// `seq` at (token, slot) of its marks (`mark_ptrs`: every rank's, mapped here), unless the caller
// marks its rows itself (`mark` false: ep_mark_rows_sent, one fence for a block's rows). Every
// thread calls it with the same row.
__device__ void ep_send_row(u64 row, const u16* expert_out, const int* src_info, const int* row_src, int hidden,
                            int top_k, const u64* recv_ptrs, int rank, int gpus_per_node, u8* staging, const u32* nmsg,
                            u32 lane_nmsg, const u64* ll_ptrs, u32 seq, const u64* mark_ptrs, bool mark = true) {
    int s = row_src[row];
    if (s < 0) return;
    u64 row_bytes = (u64)hidden * 2;
    const u8* src = (const u8*)(expert_out + row * hidden);
    if (s / gpus_per_node != rank / gpus_per_node) {
        ep_block_copy(staging + row * row_bytes, src, row_bytes);
        return;
    }
    u32 nm = ep_nmsg_of(s, lane_nmsg, nmsg);
    if (!(nm & EP_NMSG_LL)) {
        ep_block_copy(ep_return_slot(row, s, src_info, recv_ptrs, top_k, row_bytes), src, row_bytes);
        if (mark && ep_rows_marked(nm)) {
            __syncthreads();
            if (threadIdx.x == 0) {
                u32* at = ep_return_mark(row, s, src_info, mark_ptrs, top_k);
                ep_fence_acq_rel(); // the block's row stores, before the mark
                ep_store_relaxed_sys(at, seq);
            }
        }
        return;
    }
    // The bit says the rank has at most EP_LL_MAX_TOKENS tokens; a row past its LL rows is not
    // written (its token then times out there) rather than written out of bounds.
    int t = src_info[2 * row], k = src_info[2 * row + 1];
    u64 n16 = hidden / 8; // hidden is a multiple of 8 for every format
    if (t < EP_LL_MAX_TOKENS)
        ep_ll_send_row(ep_ll_row(ll_ptrs[s], t, k, top_k, n16), (const uint4*)src, n16, seq);
}

// ep_send_row for the single-launch combine at the sizes where its rows go one by one (a block
// sends one or none): the row's source rank, token, slot and its first payload pieces
// (EP_LL_FIRST a thread: a 7168-wide row in a 512-thread block) are loaded in one round, so an LL
// row's first stores wait for one round trip. In ep_send_row they wait for three: the source, then
// the token and slot behind its branch, then the payload behind theirs. Another form takes
// ep_send_row, which loads them again. Every thread calls it with the same row.
#define EP_LL_FIRST 2
__device__ void ep_send_row_loaded(u64 row, const u16* expert_out, const int* src_info, const int* row_src,
                                   int hidden, int top_k, const u64* recv_ptrs, int rank, int gpus_per_node,
                                   const u32* nmsg, u32 lane_nmsg, const u64* ll_ptrs, u32 seq, const u64* mark_ptrs) {
    const u64 n16 = hidden / 8; // hidden is a multiple of 8 for every format
    const uint4* src = (const uint4*)(expert_out + row * hidden);
    // Issued before the first branch: the payload's loads volatile (else sunk to their use past
    // it), the token's and slot's through the branch's condition (a padding row has -1 for all
    // three; ptxas sank their loads past the source's branch otherwise).
    int s = row_src[row], t = src_info[2 * row], k = src_info[2 * row + 1], lane = threadIdx.x & 31;
    // The first 32 ranks' LL rows a lane each, so that the source's is a shuffle, not a load after it.
    u64 lane_ll = lane < gpus_per_node ? ll_ptrs[lane] : 0;
    uint4 v[EP_LL_FIRST];
#pragma unroll
    for (int u = 0; u < EP_LL_FIRST; u++) {
        u64 i = threadIdx.x + (u64)u * blockDim.x;
        if (i < n16)
            asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                         : "l"(src + i));
    }
    if (s < 0 || (t | k) < 0) return;
    u32 nm = ep_nmsg_of(s, lane_nmsg, nmsg);
    if (s / gpus_per_node != rank / gpus_per_node || !(nm & EP_NMSG_LL)) {
        ep_send_row(row, expert_out, src_info, row_src, hidden, top_k, recv_ptrs, rank, gpus_per_node, nullptr, nmsg,
                    lane_nmsg, ll_ptrs, seq, mark_ptrs, false);
        return;
    }
    if (t >= EP_LL_MAX_TOKENS) return; // as ep_send_row: past the LL rows, not written
    u64 ll_s = __shfl_sync(0xffffffffu, lane_ll, s & 31);
    ep_ll_send_row<EP_LL_FIRST>(ep_ll_row(s < 32 ? ll_s : ll_ptrs[s], t, k, top_k, n16), src, n16, seq, v);
}

// The forms the destination ranks take this combine in, from their dispatch message count words
// (common/protocol.cuh). A destination is every rank, or with skip_a2a this rank alone (its rows go to no
// other). Up to 32 ranks from the lanes' words (ep_lane_nmsg), which every warp holds alike: no
// barrier, no load; beyond, a loop over `nmsg` and block-wide votes. Every thread calls it.
struct EpDestForms {
    bool any_early;  // one takes its counts early, with plain stores (ep_counts_early)
    bool regular;    // one takes them behind the fence, after every block's stores
    bool any_marked; // one takes its rows marked (ep_rows_marked)
    bool all_ll;     // every one takes its rows in LL form
};
__device__ EpDestForms ep_dest_forms(u32 lane_nmsg, const u32* nmsg, int n_ranks, int rank, int skip_a2a) {
    bool early = false, fenced = false, marked = false, plain = false;
    if (n_ranks <= 32) {
        int p = threadIdx.x & 31;
        if (p < n_ranks && (!skip_a2a || p == rank)) {
            early = ep_counts_early(lane_nmsg);
            fenced = !early;
            marked = ep_rows_marked(lane_nmsg);
            plain = !(lane_nmsg & EP_NMSG_LL);
        }
        return EpDestForms{__any_sync(0xffffffffu, early), __any_sync(0xffffffffu, fenced),
                           __any_sync(0xffffffffu, marked), !__any_sync(0xffffffffu, plain)};
    }
    for (int p = threadIdx.x; p < n_ranks; p += blockDim.x) {
        if (skip_a2a && p != rank) continue;
        u32 nm = nmsg[p];
        early = early || ep_counts_early(nm);
        fenced = fenced || !ep_counts_early(nm);
        marked = marked || ep_rows_marked(nm);
        plain = plain || !(nm & EP_NMSG_LL);
    }
    return EpDestForms{(bool)__syncthreads_or(early), (bool)__syncthreads_or(fenced), (bool)__syncthreads_or(marked),
                       !__syncthreads_or(plain)};
}

// How many of `rows` the block sends: row blockIdx.x, then every gridDim.x-th.
__device__ __forceinline__ u64 ep_block_rows(u64 rows) {
    return rows > blockIdx.x ? (rows - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
}

// Where the block's rows go (row blockIdx.x + i * gridDim.x, i from `i0`, EP_SEND_TABLE of them):
// row i - i0's receive-buffer row at its source rank (null: it goes in LL form, or there is no
// such row), its mark there (null: its rank does not take them marked) and whether it goes in LL
// form (bit i - i0 of `ll`); with no `recv_ptrs`, the marks alone. Worked out by warps 0 and 1,
// a row a lane, once for up to 64 rows: worked out again for every batch of rows to send and
// again for their marks, it was two dependent round trips each time (the source rank, then the
// token and slot) on every batch's path and the marks' (ff2aa29).
#define EP_SEND_TABLE 64
struct EpRowsWhere {
    u8* dst[EP_SEND_TABLE];
    u32* mark[EP_SEND_TABLE];
    u64 ll;
};
__device__ void ep_rows_where(EpRowsWhere& w, u64 i0, u64 mine, const int* src_info, const int* row_src, int top_k,
                              const u64* recv_ptrs, const u32* nmsg, u32 lane_nmsg, const u64* mark_ptrs,
                              u64 row_bytes) {
    if (threadIdx.x >= EP_SEND_TABLE) return; // whole warps 0 and 1: ep_nmsg_of shuffles
    u64 i = i0 + threadIdx.x, row = blockIdx.x + i * gridDim.x;
    int s = i < mine ? row_src[row] : -1;
    u32 nm = ep_nmsg_of(max(s, 0), lane_nmsg, nmsg);
    bool ll = s >= 0 && (nm & EP_NMSG_LL);
    u64 at = s >= 0 ? ep_return_index(row, src_info, top_k) : 0;
    u8* dst = s >= 0 && !ll && recv_ptrs ? (u8*)recv_ptrs[s] + at * row_bytes : nullptr;
    u32* mark = s >= 0 && ep_rows_marked(nm) ? (u32*)mark_ptrs[s] + at : nullptr;
    w.dst[threadIdx.x] = dst;
    w.mark[threadIdx.x] = mark;
    u32 ballot = __ballot_sync(0xffffffffu, ll);
    if ((threadIdx.x & 31) == 0) ((u32*)&w.ll)[threadIdx.x >> 5] = ballot;
}

// The first `n` rows of `w` that go to a rank taking them marked, marked after one fence for the
// block's row stores (thread 0). Every thread calls it, after its stores.
__device__ void ep_mark_rows_where(const EpRowsWhere& w, u32 n, u32 seq) {
    bool any = threadIdx.x < n && w.mark[threadIdx.x] != nullptr; // (the thread's own entry: ep_rows_where)
    if (__syncthreads_or(any) && threadIdx.x == 0) {
        ep_fence_acq_rel(); // the block's row stores, before the marks
        for (u32 j = 0; j < n; j++)
            if (w.mark[j]) ep_store_relaxed_sys(w.mark[j], seq);
    }
}

// The block's rows (row blockIdx.x, then every gridDim.x-th, of `rows`) that went to a rank that
// takes its rows marked, marked after one fence for each EP_SEND_TABLE of them (ep_rows_where,
// ep_mark_rows_where), where the sends did not mark them (ep_send_rows_batched): a block of the
// single-launch combine sends several rows, and a fence after each (ep_send_row's) held the next
// row's loads behind it. Inside one node. Every thread calls it, after the block's sends.
__device__ void ep_mark_rows_sent(u64 rows, const int* src_info, const int* row_src, int top_k, const u32* nmsg,
                                  u32 lane_nmsg, u32 seq, const u64* mark_ptrs) {
    __shared__ EpRowsWhere where;
    const u64 mine = ep_block_rows(rows);
    for (u64 i0 = 0; i0 < mine; i0 += EP_SEND_TABLE) {
        ep_rows_where(where, i0, mine, src_info, row_src, top_k, nullptr, nmsg, lane_nmsg, mark_ptrs, 0);
        ep_mark_rows_where(where, (u32)min((u64)EP_SEND_TABLE, mine - i0), seq);
        __syncthreads(); // `where` is the next table's
    }
}

// The rows coming back for (local expert g, rank s), count g * n_ranks + s, must be the rows
// this rank sent to rank s's expert g in the dispatch.
struct EpRowsMatch {
    const u64* sent;
    int n_local, n_ranks;
    __device__ u64 expect(int i) const { return sent[(i % n_ranks) * n_local + i / n_ranks]; }
    __device__ u32 operator()(int, u64 v, u64 expected) const { return v != expected ? EP_COUNT_MISMATCH : EP_OK; }
};

// Waits for every expert's rows (EpRowsMatch). Launched chained after the send (common/ordering.cuh); the
// kernels after it may launch once the counts are in.
extern "C" __global__ void ep_combine_wait(const __grid_constant__ EpCombineWaitParams p) {
    ep_await_prior_grid();
    if (ep_wait_counts(p.counts, p.n_local * p.n_ranks, p.rank, p.n_ranks, p.skip_a2a, ep_slice(p.slice_ns, p.status), p.status, p.snapshot,
                       EpRowsMatch{p.sent, p.n_local, p.n_ranks}))
        ep_release_dependents();
}

// One block per received row (the grid may cover the capacity, at least one block; the row count
// is on the device): the row goes back to (source rank, token, first slot), in LL form or marked
// to a rank that takes it so (ep_send_row). With `signal` (one node) block 0 publishes the counts
// of the destinations whose counts go out early (ep_counts_early) and the last block to finish
// the others', behind the fence; between nodes ep_combine_signal publishes them all.
extern "C" __global__ void ep_combine_send(const __grid_constant__ EpCombineSendParams p) {
    ep_await_prior_grid(); // a phase's first kernel, launched chained (comm/mod.rs, `Chain::First`)
    ep_release_dependents(); // the wait (one block) may wait beside the send
    ep_advance_dispatch_round(p.next_round);
    u32 lane_nmsg = ep_lane_nmsg(p.nmsg, p.n_ranks);
    if (p.signal && blockIdx.x == 0)
        ep_publish_rows(p.dispatch_counts, p.n_local, p.n_ranks, p.targets.rank, p.skip_a2a, p.count_ptrs, p.nmsg,
                        lane_nmsg, true);
    // A block a row where the host knew the rows (the grid is the rows); a grid of what the GPU
    // holds at once, each block every gridDim.x-th row, where it did not (comm/combine.rs).
    const u64 rows = *p.targets.rows_end;
    for (u64 row = blockIdx.x; row < rows; row += gridDim.x)
        ep_send_row(row, p.expert_out, p.targets.src_info, p.targets.row_src, p.targets.hidden, p.targets.top_k,
                    p.targets.recv_ptrs, p.targets.rank, p.targets.gpus_per_node, p.targets.staging, p.nmsg,
                    lane_nmsg, p.ll_ptrs, *p.seq, p.mark_ptrs);
    if (p.signal && ep_last_block(p.ticket))
        ep_publish_rows(p.dispatch_counts, p.n_local, p.n_ranks, p.targets.rank, p.skip_a2a, p.count_ptrs, p.nmsg,
                        lane_nmsg, false);
}

// The messages this rank received, in the dispatch (message j of rank s: s's j-th token that
// reached here), each one's rows back, in message order across the ranks (item w: rank w %
// n_ranks, its message w / n_ranks) over a grid of any size: a token's rows all leave together
// and tokens leave in order, so a receiver that reduces its tokens as their rows land
// (marked rows) is never held by a token whose rows go last. Rows sent in the order they are
// laid out (ep_combine_send) complete a token at ~0.8 of the send on average (worked out at
// 28d822d). `msg_rows` ([n_ranks, max_tokens, top_k], row or -1) is written by the dispatch's
// copy-out; only inside one node. Counts as ep_combine_send's.
extern "C" __global__ void ep_combine_send_ordered(const __grid_constant__ EpCombineSendOrderedParams p) {
    ep_await_prior_grid(); // a phase's first kernel, launched chained (comm/mod.rs, `Chain::First`)
    __shared__ int rows[EP_MAX_TOP_K];
    ep_advance_dispatch_round(p.send.next_round);
    const u32 seq = *p.send.seq;
    u32 lane_nmsg = ep_lane_nmsg(p.send.nmsg, p.send.n_ranks);
    if (p.send.signal && blockIdx.x == 0)
        ep_publish_rows(p.send.dispatch_counts, p.send.n_local, p.send.n_ranks, p.send.targets.rank, p.send.skip_a2a,
                        p.send.count_ptrs, p.send.nmsg, lane_nmsg, true);
    u32 most = 0;
    for (int s = 0; s < p.send.n_ranks; s++)
        most = max(most, ep_messages_from(ep_nmsg_of(s, lane_nmsg, p.send.nmsg), s, p.send.targets.rank,
                                          p.send.skip_a2a, p.max_tokens));
    for (u64 w = blockIdx.x; w < (u64)most * p.send.n_ranks; w += gridDim.x) {
        int s = w % p.send.n_ranks;
        u32 j = w / p.send.n_ranks, nm = ep_nmsg_of(s, lane_nmsg, p.send.nmsg);
        if (j >= ep_messages_from(nm, s, p.send.targets.rank, p.send.skip_a2a, p.max_tokens)) continue;
        for (int k = threadIdx.x; k < p.send.targets.top_k; k += blockDim.x)
            rows[k] = p.msg_rows[((u64)s * p.max_tokens + j) * p.send.targets.top_k + k];
        __syncthreads();
        for (int k = 0; k < p.send.targets.top_k; k++)
            if (rows[k] >= 0)
                ep_send_row(rows[k], p.send.expert_out, p.send.targets.src_info, p.send.targets.row_src,
                            p.send.targets.hidden, p.send.targets.top_k, p.send.targets.recv_ptrs, p.send.targets.rank,
                            p.send.targets.gpus_per_node,
                            p.send.targets.staging, p.send.nmsg, lane_nmsg, p.send.ll_ptrs, seq,
                            p.send.mark_ptrs);
        __syncthreads(); // `rows` is the next message's
    }
    if (p.send.signal && ep_last_block(p.send.ticket))
        ep_publish_rows(p.send.dispatch_counts, p.send.n_local, p.send.n_ranks, p.send.targets.rank, p.send.skip_a2a,
                        p.send.count_ptrs, p.send.nmsg, lane_nmsg, false);
}

extern "C" __global__ void ep_combine_put(const __grid_constant__ EpCombineTargets p) {
    u64 row = blockIdx.x;
    if (row >= *p.rows_end) return;
    int s = p.row_src[row];
    if (s < 0 || s / p.gpus_per_node == p.rank / p.gpus_per_node) return;
    u64 row_bytes = (u64)p.hidden * 2;
    ep_block_copy(ep_return_slot(row, s, p.src_info, p.recv_ptrs, p.top_k, row_bytes), p.staging + row * row_bytes,
                  row_bytes);
}

// The row counts, after the inter-node puts (between nodes the send kernel does not signal).
extern "C" __global__ void ep_combine_signal(const __grid_constant__ EpCombineSignalParams p) {
    ep_publish_rows(p.dispatch_counts, p.n_local, p.n_ranks, p.rank, p.skip_a2a, p.count_ptrs, p.nmsg,
                    ep_lane_nmsg(p.nmsg, p.n_ranks), false);
}

// Between nodes over NCCL (net.rs): the rows of each rank of another node came whole into its
// region of `inbox`, each at its slot (token, k) as that rank's ep_combine_put wrote it. Each slot
// whose expert is on such a rank goes to the receive buffer, where the reduce reads it; the
// others are this node's. One block a token.
extern "C" __global__ void ep_combine_net_rows(const __grid_constant__ EpCombineNetRowsParams p) {
    int t = blockIdx.x;
    int first = p.rank / p.gpus_per_node * p.gpus_per_node;
    u64 row_bytes = (u64)p.hidden * 2;
    for (int k = 0; k < p.top_k; k++) {
        int id = p.ids[(u64)t * p.top_k + k];
        if (id < 0) continue;
        int src = id / p.n_local;
        if (src >= first && src < first + p.gpus_per_node) continue;
        int j = src < first ? src : src - p.gpus_per_node; // its place among the other nodes' ranks
        u64 slot = (u64)t * p.top_k + k;
        ep_block_copy(p.recv + slot * row_bytes, p.inbox + ((u64)j * p.max_tokens * p.top_k + slot) * row_bytes,
                      row_bytes);
    }
}

