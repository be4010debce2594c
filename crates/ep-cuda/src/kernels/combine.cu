// Combine: expert outputs back to their tokens, reduced with the router weights.
//
// Launch order: ep_combine_send (which also signals, from its last block, inside one node) or,
// between nodes, ep_combine_send -> ep_combine_put -> ep_combine_signal; then
// ep_combine_wait -> (ep_combine_ll_unpack, for a rank that takes its rows in LL form) ->
// ep_combine_reduce or ep_combine_unreduced, again while the wait's slice runs out before the
// counts (or the LL rows) are all there. At decode sizes inside one node, ep_combine_single or
// ep_combine_single_ll instead (below).

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
// rank's dispatch message count words, common.cuh, and `lane_nmsg` from ep_lane_nmsg), or only
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

// Slot k of token t's row in a rank's LL rows `base` (rows of 2 * n16 lines: common.cuh).
__device__ __forceinline__ ulonglong2* ep_ll_row(u64 base, int t, int k, int top_k, u64 n16) {
    return (ulonglong2*)base + ((u64)t * top_k + k) * 2 * n16;
}

// A row to a rank that takes its rows in LL form (common.cuh), by the block: `n16` pieces of 16
// bytes, up to 4 loads per thread before their stores: with 8, as ep_copy_to, ep_combine_send
// took 64 registers instead of 56, which cost its 4096-token combine 0.7%.
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
// the token and slot behind its branch, then the payload behind theirs (v40). Another form takes
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
// (common.cuh). A destination is every rank, or with skip_a2a this rank alone (its rows go to no
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
// token and slot), ~2 us of each batch at 128 tokens, and ~1 of the marks (one H200, v45 trace).
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

// Waits for every expert's rows (EpRowsMatch). Launched chained after the send (common.cuh); the
// kernels after it may launch once the counts are in.
extern "C" __global__ void ep_combine_wait(u64* counts, int n_local, int n_ranks, int rank, int skip_a2a,
                                           u64 slice_ns, const u64* sent, u32* status, u64* snapshot) {
    ep_await_prior_grid();
    if (ep_wait_counts(counts, n_local * n_ranks, rank, n_ranks, skip_a2a, slice_ns, status, snapshot,
                       EpRowsMatch{sent, n_local, n_ranks}))
        ep_release_dependents();
}

// One block per received row (the grid may cover the capacity, at least one block; the row count
// is on the device): the row goes back to (source rank, token, first slot), in LL form or marked
// to a rank that takes it so (ep_send_row). With `signal` (one node) block 0 publishes the counts
// of the destinations whose counts go out early (ep_counts_early) and the last block to finish
// the others', behind the fence; between nodes ep_combine_signal publishes them all.
extern "C" __global__ void ep_combine_send(const u16* expert_out, const int* src_info, const int* row_src,
                                           const u32* rows_end, int hidden, int top_k, const u64* recv_ptrs, int rank,
                                           int gpus_per_node, u8* staging, int signal, u32* ticket,
                                           const u64* dispatch_counts, int n_local, int n_ranks, int skip_a2a,
                                           const u64* count_ptrs, const u32* nmsg, const u64* ll_ptrs, u32 seq,
                                           const u64* mark_ptrs) {
    ep_release_dependents(); // the wait (one block) may wait beside the send
    u64 row = blockIdx.x;
    u32 lane_nmsg = ep_lane_nmsg(nmsg, n_ranks);
    if (signal && row == 0)
        ep_publish_rows(dispatch_counts, n_local, n_ranks, rank, skip_a2a, count_ptrs, nmsg, lane_nmsg, true);
    if (row < *rows_end)
        ep_send_row(row, expert_out, src_info, row_src, hidden, top_k, recv_ptrs, rank, gpus_per_node, staging, nmsg,
                    lane_nmsg, ll_ptrs, seq, mark_ptrs);
    if (signal && ep_last_block(ticket))
        ep_publish_rows(dispatch_counts, n_local, n_ranks, rank, skip_a2a, count_ptrs, nmsg, lane_nmsg, false);
}

// The messages this rank received, in the dispatch (message j of rank s: s's j-th token that
// reached here), each one's rows back, in message order across the ranks (item w: rank w %
// n_ranks, its message w / n_ranks) over a grid of any size: a token's rows all leave together
// and tokens leave in order, so a receiver that reduces its tokens as their rows land
// (marked rows) is never held by a token whose rows go last. Rows sent in the order they are
// laid out (ep_combine_send) complete a token at ~0.8 of the send on average (docs/perf.md,
// lever 5). `msg_rows` ([n_ranks, max_tokens, top_k], row or -1) is written by the dispatch's
// copy-out; only inside one node. Counts as ep_combine_send's.
extern "C" __global__ void ep_combine_send_ordered(const u16* expert_out, const int* src_info, const int* row_src,
                                                   const u32* rows_end, int hidden, int top_k, const u64* recv_ptrs,
                                                   int rank, int gpus_per_node, u8* staging, int signal, u32* ticket,
                                                   const u64* dispatch_counts, int n_local, int n_ranks, int skip_a2a,
                                                   const u64* count_ptrs, const u32* nmsg, const u64* ll_ptrs,
                                                   u32 seq, const u64* mark_ptrs, const int* msg_rows,
                                                   int max_tokens) {
    __shared__ int rows[EP_MAX_TOP_K];
    u32 lane_nmsg = ep_lane_nmsg(nmsg, n_ranks);
    if (signal && blockIdx.x == 0)
        ep_publish_rows(dispatch_counts, n_local, n_ranks, rank, skip_a2a, count_ptrs, nmsg, lane_nmsg, true);
    u32 most = 0;
    for (int s = 0; s < n_ranks; s++)
        most = max(most, ep_messages_from(ep_nmsg_of(s, lane_nmsg, nmsg), s, rank, skip_a2a, max_tokens));
    for (u64 w = blockIdx.x; w < (u64)most * n_ranks; w += gridDim.x) {
        int s = w % n_ranks;
        u32 j = w / n_ranks, nm = ep_nmsg_of(s, lane_nmsg, nmsg);
        if (j >= ep_messages_from(nm, s, rank, skip_a2a, max_tokens)) continue;
        for (int k = threadIdx.x; k < top_k; k += blockDim.x) rows[k] = msg_rows[((u64)s * max_tokens + j) * top_k + k];
        __syncthreads();
        for (int k = 0; k < top_k; k++)
            if (rows[k] >= 0)
                ep_send_row(rows[k], expert_out, src_info, row_src, hidden, top_k, recv_ptrs, rank, gpus_per_node,
                            staging, nmsg, lane_nmsg, ll_ptrs, seq, mark_ptrs);
        __syncthreads(); // `rows` is the next message's
    }
    if (signal && ep_last_block(ticket))
        ep_publish_rows(dispatch_counts, n_local, n_ranks, rank, skip_a2a, count_ptrs, nmsg, lane_nmsg, false);
}

extern "C" __global__ void ep_combine_put(const int* src_info, const int* row_src, const u32* rows_end, int hidden,
                                          int top_k, const u64* recv_ptrs, int rank, int gpus_per_node,
                                          const u8* staging) {
    u64 row = blockIdx.x;
    if (row >= *rows_end) return;
    int s = row_src[row];
    if (s < 0 || s / gpus_per_node == rank / gpus_per_node) return;
    u64 row_bytes = (u64)hidden * 2;
    ep_block_copy(ep_return_slot(row, s, src_info, recv_ptrs, top_k, row_bytes), staging + row * row_bytes, row_bytes);
}

// The row counts, after the inter-node puts (between nodes the send kernel does not signal).
extern "C" __global__ void ep_combine_signal(const u64* dispatch_counts, int n_local, int n_ranks, int rank,
                                             int skip_a2a, const u64* count_ptrs, const u32* nmsg) {
    ep_publish_rows(dispatch_counts, n_local, n_ranks, rank, skip_a2a, count_ptrs, nmsg, ep_lane_nmsg(nmsg, n_ranks),
                    false);
}

// The first slot of the token naming ids[k], or -1 when the slot is masked or (skip_a2a) names
// another device's expert.
__device__ __forceinline__ int ep_routed_slot(const int* ids, int k, int rank, int n_local, int skip_a2a) {
    int id = ids[k];
    if (id < 0 || (skip_a2a && id / n_local != rank)) return -1;
    for (int j = 0; j < k; j++) if (ids[j] == id) return j;
    return k;
}

// The slots that contribute to a token's sum, in ascending k: each one's row in the combine
// receive buffer (its first slot naming the expert) and weight. Shared memory of the block that
// reduces the token.
struct EpSlots {
    int row[EP_MAX_TOP_K];
    float w[EP_MAX_TOP_K];
    int id[EP_MAX_TOP_K]; // staging: the token's ids and weights
    float tw[EP_MAX_TOP_K];
    int n;
};

// The list by warp 0 from its lanes' slots (lane k: slot k's id and weight, for top_k <= 32): each
// lane finds the first slot naming its expert with a shuffle per slot, a ballot places the
// contributing ones. No barrier: the caller passes one before another warp reads the list. (Thread
// 0 alone took ~0.5 us at top-8, a shared-memory load after another, between two barriers.)
__device__ void ep_list_lane_slots(EpSlots& sl, int id, float w, int top_k, int rank, int n_local, int skip_a2a) {
    int k = threadIdx.x & 31, first = k;
    for (int j = 0; j < top_k; j++) {
        int other = __shfl_sync(0xffffffffu, id, j);
        if (j < first && other == id) first = j;
    }
    bool routed = k < top_k && id >= 0 && !(skip_a2a && id / n_local != rank);
    u32 mask = __ballot_sync(0xffffffffu, routed);
    if (routed) {
        int i = __popc(mask & ((1u << k) - 1u));
        sl.row[i] = first;
        sl.w[i] = w;
    }
    if (k == 0) sl.n = __popc(mask);
}

// The list from the ids and weights staged in sl.id and sl.tw (slot k by thread k, k < blockDim.x,
// or any thread beyond). Up to 32 slots by warp 0's lanes, each from the slot it staged
// (ep_list_lane_slots), with no barrier: the caller passes one before another warp reads the
// list. Beyond, by thread 0 between two barriers. Every thread calls it.
__device__ void ep_list_staged_slots(EpSlots& sl, int top_k, int rank, int n_local, int skip_a2a) {
    if (top_k <= 32) {
        int k = threadIdx.x;
        if (k < 32)
            ep_list_lane_slots(sl, k < top_k ? sl.id[k] : -1, k < top_k ? sl.tw[k] : 0.0f, top_k, rank, n_local,
                               skip_a2a);
        return;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int n = 0;
        for (int k = 0; k < top_k; k++) {
            int k0 = ep_routed_slot(sl.id, k, rank, n_local, skip_a2a);
            if (k0 < 0) continue;
            sl.row[n] = k0;
            sl.w[n] = sl.tw[k];
            n++;
        }
        sl.n = n;
    }
    __syncthreads();
}

// Token t's slot list: its ids and weights in one round of loads into the staging, then the list
// (ep_list_staged_slots). Every thread calls it; returns with a barrier passed.
__device__ void ep_list_slots(EpSlots& sl, int t, const int* ids, const float* weights, int top_k, int rank,
                              int n_local, int skip_a2a) {
    for (int k = threadIdx.x; k < top_k; k += blockDim.x) {
        sl.id[k] = ids[(u64)t * top_k + k];
        sl.tw[k] = weights[(u64)t * top_k + k];
    }
    ep_list_staged_slots(sl, top_k, rank, n_local, skip_a2a);
    __syncthreads();
}

// The end of a reduction's 8 columns c8 * 8 .. of token t, from their sums `acc`: the shared
// expert's row added (`shared_row`, null: none), one rounding to bf16, the epilogue, then into
// `out` (or, for an epilogue that takes the whole row, into `row` in f32).
__device__ __forceinline__ void ep_reduce_columns_out(float* acc, int c8, int t, const u16* shared_row, int hidden,
                                                      int epilogue, const u16* residual, float scale, bool whole_row,
                                                      float* row, u16* out) {
    float y[8];
    if (shared_row) {
        ep_unpack_bf16x8(((const uint4*)shared_row)[c8], y);
        for (int i = 0; i < 8; i++) acc[i] = __fadd_rn(acc[i], y[i]);
    }
    if (epilogue == EP_EPI_RESIDUAL) ep_unpack_bf16x8(((const uint4*)(residual + (u64)t * hidden))[c8], y);
    u16 h[8];
    for (int i = 0; i < 8; i++) {
        h[i] = arith_to_bf16(acc[i]);
        if (epilogue == EP_EPI_RESIDUAL) h[i] = arith_to_bf16(__fadd_rn(bf16_to_f32(h[i]), y[i]));
        else if (epilogue == EP_EPI_SCALE) h[i] = arith_to_bf16(__fmul_rn(bf16_to_f32(h[i]), scale));
        if (whole_row) row[c8 * 8 + i] = bf16_to_f32(h[i]);
    }
    if (!whole_row) ((uint4*)(out + (u64)t * hidden))[c8] = ep_pack_bf16x8(h);
}

// ep_reduce_token's LL form, without a whole-row epilogue, when a part's columns are a quarter of the block or fewer (the
// single-launch combine at decode sizes: 112-128 column groups a part, 512 threads): the block's
// threads in groups of a part's width, each group loading its slots' pieces of the columns
// (EP_LL_STAGE_SLOTS slots a round, two a thread, both loads issued before either is polled) into
// shared memory, then the first group summing them in slot order, as ep_reduce_token does. There,
// the part's width of threads loaded 4 slots' pieces, summed them, then loaded the next 4: two
// rounds of LL loads a token where this has one (top-8). Returns with a barrier passed.
#define EP_LL_STAGE_SLOTS 8
#define EP_LL_STAGE_WIDTH 128
// `ll_rows`: token t's LL rows; `shared_row`: its shared expert's row (null: none).
__device__ void ep_reduce_token_ll_staged(int t, int part, int per, const EpSlots& sl, int hidden,
                                          const ulonglong2* ll_rows, const u16* shared_row, int epilogue,
                                          const u16* residual, float scale, u16* out, const EpLlWait& ll) {
    __shared__ uint4 stage[EP_LL_STAGE_SLOTS][EP_LL_STAGE_WIDTH];
    const int n = sl.n, w8 = hidden / 8, groups = blockDim.x / per;
    const int c = threadIdx.x % per, q = threadIdx.x / per, c8 = part * per + c;
    const bool col = q < groups && c8 < min(w8, (part + 1) * per);
    float acc[8];
    for (int i = 0; i < 8; i++) acc[i] = 0.0f;
    for (int j0 = 0; j0 < n; j0 += EP_LL_STAGE_SLOTS) {
        const int nj = min(EP_LL_STAGE_SLOTS, n - j0);
        if (col) {
            uint4 v[2];
            bool got[2];
#pragma unroll
            for (int u = 0; u < 2; u++) {
                int j = q + u * groups;
                got[u] = j >= nj || ep_ll_load(ll_rows + (u64)sl.row[j0 + j] * w8 * 2, c8, w8, ll.seq, v[u]);
            }
            if (threadIdx.x == 0 && j0 == 0 && got[0]) EP_STAMP_FIRST(8);
#pragma unroll
            for (int u = 0; u < 2; u++) {
                int j = q + u * groups;
                if (j >= nj) continue;
                if (!got[u])
                    ep_ll_wait(ll_rows + (u64)sl.row[j0 + j] * w8 * 2, c8, w8, sl.id[sl.row[j0 + j]], ll, v[u]);
                stage[j][c] = v[u];
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) EP_STAMP_FIRST(9);
        if (col && q == 0)
            for (int j = 0; j < nj; j++) {
                float y[8];
                ep_unpack_bf16x8(stage[j][c], y);
                for (int i = 0; i < 8; i++) acc[i] = __fadd_rn(acc[i], __fmul_rn(sl.w[j0 + j], y[i]));
            }
        __syncthreads(); // the stage is the next round's
    }
    if (col && q == 0)
        ep_reduce_columns_out(acc, c8, t, shared_row, hidden, epilogue, residual, scale, false, nullptr, out);
    __syncthreads(); // the slot list is the next token's
}

// Token t's reduction from its slot list (ep_list_slots), by the whole block: acc = 0; acc +=
// w[k] * y[k] for k ascending (each product and sum rounded), the shared expert's row added last,
// one rounding to bf16, then the epilogue. Each thread takes 8 columns at a time, with the 16-byte
// loads of up to `Batch` contributing rows issued together, so a token costs a few memory
// latencies rather than one per (column, slot) (8 in the single-launch kernel; 4 in the reduce
// kernel, whose 1024-thread blocks have no registers for 8). `row` (dynamic shared memory, the
// row in f32) is only needed by the epilogues that take the whole row (ep_whole_row; `part` 0 of
// 1). Otherwise the row may be cut into `parts` column ranges of whole 8-column groups, this block
// reducing range `part` (at decode sizes, several blocks to a token: one pass of loads each).
// With `Ll` the rows are read from the rank's LL rows (`ll`, common.cuh) instead of `recv`, each
// piece polled until it is there; one that does not come within the slice leaves its value
// undefined and the status EP_MESSAGES_PENDING, so the host reduces again. Returns with a barrier
// passed.
template <int Batch, bool Ll>
__device__ void ep_reduce_token(int t, int part, int parts, const EpSlots& sl, float* row, const u16* recv,
                                int top_k, int hidden, const u16* shared_rows, int shared_start, int shared_end,
                                int epilogue, const u16* residual, float scale, u16* out, u8* fp8_payload,
                                float* fp8_scales, const EpLlWait& ll) {
    int n = sl.n;
    bool has_shared = shared_rows != 0 && t >= shared_start && t < shared_end;
    // Its row, worked out where it is read: held across the loop it cost registers (the
    // epilogue kernel spilled).
    auto shared_row = [&] { return has_shared ? shared_rows + (u64)(t - shared_start) * hidden : nullptr; };
    int w8 = hidden / 8; // hidden is a multiple of 8 for every format
    const uint4* rows = (const uint4*)(recv + (u64)t * top_k * hidden);
    const ulonglong2* ll_rows = Ll ? ll.rows + (u64)t * top_k * w8 * 2 : nullptr; // rows of 2 * w8 lines
    bool whole_row = ep_whole_row(epilogue); // kept in `row`, not stored
    int per = (w8 + parts - 1) / parts, c_end = min(w8, (part + 1) * per);
    if (Ll && !whole_row && per * 4 <= (int)blockDim.x && per <= EP_LL_STAGE_WIDTH) {
        ep_reduce_token_ll_staged(t, part, per, sl, hidden, ll_rows, shared_row(), epilogue, residual, scale, out, ll);
        return;
    }
    for (int c8 = part * per + threadIdx.x; c8 < c_end; c8 += blockDim.x) {
        float acc[8], y[8];
        for (int i = 0; i < 8; i++) acc[i] = 0.0f;
        for (int j0 = 0; j0 < n; j0 += Batch) {
            uint4 v[Batch];
            if (Ll) {
                // Every piece's loads first, then a poll for those not there yet.
                unsigned late = 0;
#pragma unroll
                for (int j = 0; j < Batch; j++)
                    if (j0 + j < n && !ep_ll_load(ll_rows + (u64)sl.row[j0 + j] * w8 * 2, c8, w8, ll.seq, v[j]))
                        late |= 1u << j;
#pragma unroll
                for (int j = 0; j < Batch; j++)
                    if (late >> j & 1)
                        ep_ll_wait(ll_rows + (u64)sl.row[j0 + j] * w8 * 2, c8, w8, sl.id[sl.row[j0 + j]], ll, v[j]);
            } else {
#pragma unroll
                for (int j = 0; j < Batch; j++)
                    if (j0 + j < n) v[j] = rows[(u64)sl.row[j0 + j] * w8 + c8];
            }
#pragma unroll
            for (int j = 0; j < Batch; j++) {
                if (j0 + j >= n) break;
                ep_unpack_bf16x8(v[j], y);
                for (int i = 0; i < 8; i++) acc[i] = __fadd_rn(acc[i], __fmul_rn(sl.w[j0 + j], y[i]));
            }
        }
        ep_reduce_columns_out(acc, c8, t, shared_row(), hidden, epilogue, residual, scale, whole_row, row, out);
    }
    if (epilogue == EP_EPI_FP8) {
        __syncthreads();
        // The encoder writes each scale's little-endian bytes: straight into the f32 array.
        ep_encode_row(EP_FMT_FP8, row, hidden, 1.0f, fp8_payload + (u64)t * hidden,
                      (u8*)(fp8_scales + (u64)t * (hidden / 128)));
    }
#ifdef EP_USER_EPILOGUE
    if (epilogue == EP_EPI_DEVICE) {
        __syncthreads();
        // Chunks of 128 columns, as ep_core::epilogue::EPILOGUE_CHUNK; bf16 bits per value.
        __shared__ u16 chunk[128];
        for (int c0 = 0; c0 < hidden; c0 += 128) {
            int n = hidden - c0 < 128 ? hidden - c0 : 128;
            for (int i = threadIdx.x; i < n; i += blockDim.x) chunk[i] = f32_to_bf16(row[c0 + i]);
            __syncthreads();
            if (threadIdx.x == 0) EP_USER_EPILOGUE(t, c0, chunk, n);
            __syncthreads();
        }
    }
#endif
    __syncthreads(); // the slot list (and `row`) are the next token's
}

// One block per token (ep_reduce_token). Dynamic shared memory (the row in f32) is only given for
// the FP8 and device epilogues.
// Launched with up to 1024 threads (comm/combine.rs): the bound keeps registers within what that allows.
extern "C" __global__ void __launch_bounds__(1024) ep_combine_reduce(const u16* recv, const int* ids, const float* weights, int top_k,
                                             int hidden, int rank, int n_local, int skip_a2a,
                                             const u16* shared_rows, int shared_start, int shared_end,
                                             int epilogue, const u16* residual, float scale, u16* out,
                                             u8* fp8_payload, float* fp8_scales, const u32* status) {
    if (!ep_wait_completed(status)) return;
    extern __shared__ float smem_f[];
    __shared__ EpSlots sl;
    ep_list_slots(sl, blockIdx.x, ids, weights, top_k, rank, n_local, skip_a2a);
    ep_reduce_token<4, false>(blockIdx.x, 0, 1, sl, smem_f, recv, top_k, hidden, shared_rows, shared_start,
                              shared_end, epilogue, residual, scale, out, fp8_payload, fp8_scales, EpLlWait{});
}

// ---- marked rows (prefill sizes, one node) ----------------------------------------------------
//
// A rank with many tokens (EP_NMSG_MARKED, comm/path.rs) reduces its tokens while their rows
// land: its counts come before the rows (ep_publish_rows), and each row's sender stores the
// combine's number at (token, slot) of the rank's marks after a fence (ep_send_row). The reduce
// (ep_combine_reduce_marked) runs on a second stream beside the send, after the counts' wait;
// the other kernels that read the rows (the unreduced layout, a device epilogue's reduce, a
// reduce launched again after a slice ran out) wait for the marks first (ep_combine_await_marks).

// Waits for token t's marked rows: the marks at slots rows[0 .. n) (this combine's number `seq`),
// polled until `deadline`. Every thread calls it; false when one did not come (ep_row_missing):
// the host then waits again, launches the reduce again, and at the deadline names the rank.
__device__ bool ep_await_marks(int t, const int* rows, int n, const u32* marks, const int* ids, int top_k,
                               int n_local, int n_ranks, u32 seq, u64 deadline, u32* status) {
    bool there = true;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const u32* mark = marks + (u64)t * top_k + rows[i];
        bool came = true;
        while (came && ep_load_acquire(mark) != seq) came = ep_globaltimer() < deadline;
        if (!came) ep_row_missing(status, ids[(u64)t * top_k + rows[i]], n_local, n_ranks);
        there = there && came;
    }
    return __syncthreads_and(there);
}

// The reduce of a rank that takes its rows marked, beside the send: a persistent grid (a share
// of the SMs, comm/combine.rs; a block per token would fill the SMs with blocks polling for rows
// that send blocks, then unable to start, were to write), each block taking tokens in order (the
// order ep_combine_send_ordered sends them), waiting for each one's marks. Nothing unless the
// counts' wait before it completed. Parameters: ep_combine_reduce's, then the marks.
extern "C" __global__ void __launch_bounds__(512) ep_combine_reduce_marked(
    const u16* recv, const int* ids, const float* weights, int top_k, int hidden, int rank, int n_local,
    int skip_a2a, const u16* shared_rows, int shared_start, int shared_end, int epilogue, const u16* residual,
    float scale, u16* out, u8* fp8_payload, float* fp8_scales, u32* status, int n_tokens, int n_ranks,
    const u32* marks, u32 seq, u64 slice_ns) {
    if (status[0] != EP_OK) return;
    extern __shared__ float smem_f[];
    __shared__ EpSlots sl;
    u64 deadline = ep_globaltimer() + slice_ns;
    for (int t = blockIdx.x; t < n_tokens; t += gridDim.x) {
        ep_list_slots(sl, t, ids, weights, top_k, rank, n_local, skip_a2a);
        if (!ep_await_marks(t, sl.row, sl.n, marks, ids, top_k, n_local, n_ranks, seq, deadline, status)) return;
        ep_reduce_token<4, false>(t, 0, 1, sl, smem_f, recv, top_k, hidden, shared_rows, shared_start, shared_end,
                                  epilogue, residual, scale, out, fp8_payload, fp8_scales, EpLlWait{});
    }
}

// Every token's marks, for the kernels after it that read the rows (above). One block per token;
// nothing unless the counts' wait completed.
extern "C" __global__ void ep_combine_await_marks(const int* ids, int top_k, int rank, int n_local, int n_ranks,
                                                  int skip_a2a, const u32* marks, u32 seq, u64 slice_ns,
                                                  u32* status) {
    __shared__ int rows[EP_MAX_TOP_K];
    __shared__ int n;
    if (!ep_wait_completed(status)) return;
    int t = blockIdx.x;
    if (threadIdx.x == 0) {
        const int* tid = ids + (u64)t * top_k;
        n = 0;
        for (int k = 0; k < top_k; k++)
            if (ep_routed_slot(tid, k, rank, n_local, skip_a2a) == k) rows[n++] = k;
    }
    __syncthreads();
    ep_await_marks(t, rows, n, marks, ids, top_k, n_local, n_ranks, seq, ep_globaltimer() + slice_ns, status);
}

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

// The block's rows (row blockIdx.x, then every gridDim.x-th, of `rows`) back to their ranks inside
// the node (a single-launch combine's), as ep_send_row sends them, up to EP_SEND_ROWS at a time:
// each thread loads its pieces of all of them (EP_SEND_PIECES at most) while warps 0 and 1 find
// where the next EP_SEND_TABLE rows go (ep_rows_where), then stores them; the rows to a rank that
// takes LL rows then one by one. One row at a time was three dependent round trips a row (its
// source, its slot, its payload): at 128 tokens a block's 8 rows took ~10 us on one H200 (v37).
// When the table held all the block's rows, the rows to a rank that takes them marked are marked
// here, after one fence (thread 0), and it returns true; otherwise the caller marks them
// (ep_mark_rows_sent).
#define EP_SEND_ROWS 4
#define EP_SEND_PIECES 8
__device__ bool ep_send_rows_batched(u64 rows, const u16* expert_out, const int* src_info, const int* row_src,
                                     int hidden, int top_k, const u64* recv_ptrs, int rank, int n_ranks,
                                     const u32* nmsg, u32 lane_nmsg, const u64* ll_ptrs, u32 seq,
                                     const u64* mark_ptrs) {
    __shared__ EpRowsWhere where;
    static_assert(EP_SEND_TABLE % EP_SEND_ROWS == 0, "a batch's rows in one table");
    const u32 n16 = hidden / 8; // hidden is a multiple of 8 for every format
    const u64 row_bytes = (u64)hidden * 2;
    const u64 mine = ep_block_rows(rows);
    for (u64 i0 = 0; i0 < mine; i0 += EP_SEND_ROWS) {
        const u64 r0 = blockIdx.x + i0 * gridDim.x;
        const u32 nr = (u32)min((u64)EP_SEND_ROWS, mine - i0), total = nr * n16, t0 = (u32)(i0 % EP_SEND_TABLE);
        const bool fill = t0 == 0;
        if (fill && i0 > 0) __syncthreads(); // the last table is read
        for (u32 p0 = 0; p0 < total; p0 += EP_SEND_PIECES * blockDim.x) {
            // The payload's loads first: they need nothing but the row number. Piece p is piece
            // p - i * n16 of the batch's row i (compares, not a division).
            uint4 v[EP_SEND_PIECES];
#pragma unroll
            for (int u = 0; u < EP_SEND_PIECES; u++) {
                u32 p = p0 + threadIdx.x + u * blockDim.x, i = 0;
#pragma unroll
                for (int j = 1; j < EP_SEND_ROWS; j++) i += p >= j * n16;
                if (p < total) v[u] = ((const uint4*)(expert_out + (r0 + (u64)i * gridDim.x) * hidden))[p - i * n16];
            }
            if (fill && p0 == 0) {
                ep_rows_where(where, i0, mine, src_info, row_src, top_k, recv_ptrs, nmsg, lane_nmsg, mark_ptrs,
                              row_bytes);
                __syncthreads();
            }
            if (threadIdx.x == 0) EP_STAMP_FIRST(i0 == 0 ? 11 : 13);
#pragma unroll
            for (int u = 0; u < EP_SEND_PIECES; u++) {
                u32 p = p0 + threadIdx.x + u * blockDim.x, i = 0;
#pragma unroll
                for (int j = 1; j < EP_SEND_ROWS; j++) i += p >= j * n16;
                u8* d = where.dst[t0 + i];
                if (p < total && d) ((uint4*)d)[p - i * n16] = v[u];
            }
            if (threadIdx.x == 0) EP_STAMP_FIRST(i0 == 0 ? 12 : 14);
        }
        for (u64 left = (where.ll >> t0) & ((1ull << nr) - 1); left; left &= left - 1)
            ep_send_row(r0 + (u64)(__ffsll((long long)left) - 1) * gridDim.x, expert_out, src_info, row_src, hidden,
                        top_k, recv_ptrs, rank, n_ranks, nullptr, nmsg, lane_nmsg, ll_ptrs, seq, mark_ptrs, false);
    }
    if (mine > EP_SEND_TABLE) return false;
    ep_mark_rows_where(where, (u32)mine, seq);
    return true;
}

// ---- the single-launch combine (decode sizes) -------------------------------------------------
//
// As ep_dispatch_single: the whole combine inside one node in one launch, a persistent grid whose
// blocks are all resident. Each block sends its share of the rows back (a few at a time,
// ep_send_rows_batched, unless every rank takes LL rows), then every block waits for every count,
// checks it, and reduces its share of the tokens (with weights; the unreduced output takes the
// kernels above). A destination that takes its rows in LL form (common.cuh) or marked (from
// SINGLE_MARKED_MIN_TOKENS, comm/path.rs) gets its counts from the grid's last block before its
// rows, with no fence: LL rows carry their number, and a block marks its marked rows after one
// fence for them all (ep_mark_rows_sent), so a reducer of a marked rank awaits its token's marks
// (ep_await_marks). The others' counts wait until every block's stores are visible (the last block
// to take the ticket publishes them; no ticket when every destination takes its counts early).
// What does not depend on the rows coming back is done beside them: a block with one token (or
// part of one) to reduce stages its ids and weights while it sends and lists its slots after; the
// counts to publish behind the fence are loaded while the stores drain. The last block of the grid
// resets the counts at its end (ep_reset_counts_when_read). `Ll`: this rank takes its own rows in
// LL form (ep_combine_single_ll). Dynamic shared memory: the larger of 8 * n_local * n_ranks (the
// counts) and the row in f32 for the FP8 and device epilogues. `ticket` holds two words, as
// ep_dispatch_single's.
template <bool Ll, int Epi>
__device__ __forceinline__ void ep_combine_single_body(
    const u16* expert_out, const int* src_info, const int* row_src, const u32* rows_end, int hidden, int top_k,
    const u64* recv_ptrs, int rank, u32* ticket, const u64* dispatch_counts, int n_local, int n_ranks, int skip_a2a,
    const u64* count_ptrs, u64* counts, u64 slice_ns, const u64* sent, u32* status, const u16* recv, const int* ids,
    const float* weights, int n_tokens, const u16* shared_rows, int shared_start, int shared_end, int epilogue,
    const u16* residual, float scale, u16* out, u8* fp8_payload, float* fp8_scales, const u32* nmsg,
    const u64* ll_ptrs, u32 seq, const u64* mark_ptrs) {
    // A kernel for one epilogue: the others' branches compile out (below).
    if (Epi >= 0) epilogue = Epi;
    extern __shared__ uint4 smem_u4[];
    __shared__ EpSlots sl;
    // Stamps (EP_CUDA_TRACE): 1 rows sent (and marked), 2 ticket (or the slots listed), 3 counts
    // published, 4 every count here, 7 the first token's list and marks there, 5 reduced, 6 counts
    // reset; in the staged LL reduce, 8 thread 0's first LL piece there at its first load, 9 the
    // first round staged; in the batched send (ep_send_rows_batched), 11 the first batch's rows
    // found (its barrier), 12 thread 0's stores of it issued, 13 and 14 the same of the second.
    EP_STAMPS
    u64 rows = *rows_end;
    u32 lane_nmsg = ep_lane_nmsg(nmsg, n_ranks);
    int n = n_local * n_ranks;
    u64* cnt = (u64*)smem_u4; // the counts to publish behind the fence, then the counts that came
    const EpDestForms forms = ep_dest_forms(lane_nmsg, nmsg, n_ranks, rank, skip_a2a);
    // The early destinations' counts, by the last block, before its rows: they vouch for no row
    // (LL rows carry their number, marked rows have their marks), so they wait for none. (After
    // the block's rows, at 128 tokens they came last: the reduce waited for them ~4 us after the
    // marks; one H200, v37.)
    bool early_publisher = blockIdx.x == gridDim.x - 1;
    if (early_publisher && forms.any_early)
        ep_publish_rows(dispatch_counts, n_local, n_ranks, rank, skip_a2a, count_ptrs, nmsg, lane_nmsg, true);
    // Tokens cut into column ranges of a block's pass each while the grid has blocks to spare
    // (a whole row per block for the epilogues that need one); LL rows, twice the bytes, into
    // ranges of 128 pieces (one load per thread and slot) so that more SMs read them. The items
    // are dealt from the grid's last block down (LL): at decode sizes the first blocks send the
    // rows, and a block's loads wait behind its stores.
    int per_part = Ll ? 128 : blockDim.x;
    int passes = (hidden / 8 + per_part - 1) / per_part;
    int parts = ep_whole_row(epilogue) || n_tokens == 0 ? 1 : max(1, min(passes, (int)gridDim.x / n_tokens));
    int items = n_tokens * parts, rb = Ll ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    bool one_item = rb < items && rb + (int)gridDim.x >= items;
    // A block with one item loads its token's ids and weights into the list's staging beside its
    // rows' loads (after the rows, they waited for the stores to drain), without registers: held
    // across the send, they were spilled, and the spill's store waited for the load. top_k <=
    // EP_MAX_TOP_K <= blockDim.x.
    if (one_item && (int)threadIdx.x < top_k) {
        ep_async_copy4(&sl.id[threadIdx.x], ids + (u64)(rb / parts) * top_k + threadIdx.x);
        ep_async_copy4(&sl.tw[threadIdx.x], weights + (u64)(rb / parts) * top_k + threadIdx.x);
    }
    // Every destination taking LL rows, the rows one by one: each block has one or none at those
    // sizes. Otherwise a few at a time (ep_send_rows_batched). The LL kernels (this rank has at
    // most EP_LL_MAX_TOKENS tokens) take them one by one too: the batches' registers cost them
    // 0.2-0.4 us at 1 and 8 tokens (one H200, v37).
    bool marked = false; // the block's marked rows marked already (ep_send_rows_batched)
    if (Ll) {
        for (u64 row = blockIdx.x; row < rows; row += gridDim.x)
            ep_send_row_loaded(row, expert_out, src_info, row_src, hidden, top_k, recv_ptrs, rank, n_ranks, nmsg,
                               lane_nmsg, ll_ptrs, seq, mark_ptrs);
    } else if (forms.all_ll) {
        for (u64 row = blockIdx.x; row < rows; row += gridDim.x)
            ep_send_row(row, expert_out, src_info, row_src, hidden, top_k, recv_ptrs, rank, n_ranks, nullptr, nmsg,
                        lane_nmsg, ll_ptrs, seq, mark_ptrs, false);
    } else {
        marked = ep_send_rows_batched(rows, expert_out, src_info, row_src, hidden, top_k, recv_ptrs, rank, n_ranks,
                                      nmsg, lane_nmsg, ll_ptrs, seq, mark_ptrs);
    }
    // Rows to a rank that takes them marked: one fence for the block's rows, then their marks.
    if (forms.any_marked && !marked)
        ep_mark_rows_sent(rows, src_info, row_src, top_k, nmsg, lane_nmsg, seq, mark_ptrs);
    EP_STAMP(1);
    // While the stores drain (before them, these loads held the sends back ~2.5 us at 1 token);
    // any block may be the ticket's last. (v18 tried publishing behind the ticket's own acquire
    // fence, by warp 0, one system-scope fence fewer: level in the sweep. The time from the rows
    // sent to the counts published is the release fence behind the NVLink stores; v19's LL rows
    // and v37's marked rows take it off the path.)
    if (forms.regular)
        for (int i = threadIdx.x; i < n; i += blockDim.x) cnt[i] = dispatch_counts[i];
    // Each thread's own staged slot is there after its wait; the list is read after the counts'
    // poll, whose barriers pass first.
    ep_async_wait();
    if (one_item) ep_list_staged_slots(sl, top_k, rank, n_local, skip_a2a);
    bool published = forms.regular && ep_last_block(ticket);
    EP_STAMP(2);
    if (published) ep_publish_rows(cnt, n_local, n_ranks, rank, skip_a2a, count_ptrs, nmsg, lane_nmsg, false);
    EP_STAMP(3);

    // This rank's LL rows, or (its rows come marked: its dispatch told the senders, comm/path.rs)
    // its marks, their address loaded while the counts are polled: loaded after them, it was a
    // round trip before the rows' first loads or the marks' first poll.
    const ulonglong2* ll_here = Ll ? (const ulonglong2*)ll_ptrs[rank] : nullptr;
    const u32* marks = !Ll && ep_rows_marked(ep_nmsg_of(rank, lane_nmsg, nmsg)) ? (const u32*)mark_ptrs[rank] : nullptr;
    u32 outcome = ep_poll_counts(counts, n, rank, n_ranks, skip_a2a, slice_ns, cnt, nullptr,
                                 EpRowsMatch{sent, n_local, n_ranks});
    EP_STAMP(4);
    ep_counts_read(outcome, ticket + 1, status);
    if (outcome == EP_OK) {
        EpLlWait ll{};
        if (Ll) ll = EpLlWait{ll_here, seq, ep_globaltimer() + slice_ns, status, n_local, n_ranks};
        // Marked rows: each token's marks before its rows are read; one that does not come within
        // the slice leaves the status EP_MESSAGES_PENDING and the host reduces again after the
        // marks' wait.
        u64 deadline = marks ? ep_globaltimer() + slice_ns : 0;
        for (int i = rb; i < items; i += gridDim.x) {
            if (!one_item) ep_list_slots(sl, i / parts, ids, weights, top_k, rank, n_local, skip_a2a);
            if (marks && !ep_await_marks(i / parts, sl.row, sl.n, marks, ids, top_k, n_local, n_ranks, seq, deadline,
                                         status))
                break;
            if (threadIdx.x == 0) EP_STAMP_FIRST(7);
            // LL: 4 slots' loads at a time (each twice the registers; 8 spilled).
            ep_reduce_token<Ll ? 4 : 8, Ll>(i / parts, i % parts, parts, sl, (float*)smem_u4, recv, top_k, hidden,
                                   shared_rows, shared_start, shared_end, epilogue, residual, scale, out, fp8_payload,
                                   fp8_scales, ll);
        }
    }
    EP_STAMP(5);
    // The block last in the items' order resets the counts: while the grid has blocks to spare it
    // reduces nothing. (The grid's last block reset them, which with LL rows reduces the first
    // item: its reset came after that, the last of the grid by ~0.5 us at 1 and 8 tokens; one
    // H100, v35.)
    if (rb == (int)gridDim.x - 1)
        ep_reset_counts_when_read(ticket + 1, gridDim.x, counts, n, rank, n_ranks, skip_a2a, status);
    EP_STAMP(6);
    EP_STAMPS_PRINT("combine", rank, forms.regular ? published : early_publisher);
}

// The kernels' parameters and arguments, ep_combine_single_body's (comm/mod.rs checks that the
// three lists agree).
#define EP_COMBINE_SINGLE_PARAMS                                                                                  \
    const u16 *expert_out, const int *src_info, const int *row_src, const u32 *rows_end, int hidden, int top_k,  \
        const u64 *recv_ptrs, int rank, u32 *ticket, const u64 *dispatch_counts, int n_local, int n_ranks,     \
        int skip_a2a, const u64 *count_ptrs, u64 *counts, u64 slice_ns, const u64 *sent, u32 *status,          \
        const u16 *recv, const int *ids, const float *weights, int n_tokens, const u16 *shared_rows,           \
        int shared_start, int shared_end, int epilogue, const u16 *residual, float scale, u16 *out,            \
        u8 *fp8_payload, float *fp8_scales, const u32 *nmsg, const u64 *ll_ptrs, u32 seq, const u64 *mark_ptrs
#define EP_COMBINE_SINGLE_ARGS                                                                                    \
    expert_out, src_info, row_src, rows_end, hidden, top_k, recv_ptrs, rank, ticket, dispatch_counts, n_local,  \
        n_ranks, skip_a2a, count_ptrs, counts, slice_ns, sent, status, recv, ids, weights, n_tokens, shared_rows, \
        shared_start, shared_end, epilogue, residual, scale, out, fp8_payload, fp8_scales, nmsg, ll_ptrs, seq,   \
        mark_ptrs
#define EP_COMBINE_SINGLE(name, ll, fixed_epilogue)                                                               \
    extern "C" __global__ void __launch_bounds__(512) name(EP_COMBINE_SINGLE_PARAMS) {                            \
        ep_combine_single_body<ll, fixed_epilogue>(EP_COMBINE_SINGLE_ARGS);                                       \
    }

// The specializations (NVRTC loads kernels by name): a rank that takes its rows in the receive
// buffer, and one that takes them in LL form (comm/path.rs: `ll_combine`), each for any epilogue
// and without one (`_plain`, `epilogue` must be EP_EPI_NONE; not in a program compiled for a
// device-code epilogue, which runs the others).
EP_COMBINE_SINGLE(ep_combine_single, false, -1)
EP_COMBINE_SINGLE(ep_combine_single_ll, true, -1)
#ifndef EP_USER_EPILOGUE
EP_COMBINE_SINGLE(ep_combine_single_plain, false, EP_EPI_NONE)
EP_COMBINE_SINGLE(ep_combine_single_ll_plain, true, EP_EPI_NONE)
#endif
