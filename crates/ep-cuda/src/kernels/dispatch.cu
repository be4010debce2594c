// Dispatch: each rank's tokens to the ranks that hold their experts, laid out per expert.
//
// Launch order on the rank's stream: ep_assign_slots (ep_assign_chunks from 4096 tokens:
// comm/path.rs, chunked_assign) -> ep_dispatch_send (which also signals, from its last block,
// inside one node) or, between nodes, ep_assign_slots -> ep_dispatch_send -> ep_dispatch_put ->
// ep_dispatch_signal; then ep_dispatch_wait -> ep_dispatch_copy_out, again
// while the wait's slice runs out before the counts are all there. A prefill round inside one node
// overlaps (below): ep_assign_slots (publishes the counts) -> ep_dispatch_send (marks each message
// landed), with ep_dispatch_wait -> ep_dispatch_copy_messages on a second stream beside the send,
// then ep_dispatch_copy_out for the padding and shared-expert rows. In such a round the send
// blocks that run once the wait has laid out the groups write the rank's own rows themselves
// (ep_place_own_rows; FP8 by default, comm/dispatch.rs).
// Stream order makes every message store complete before the signal kernel's release stores.

__device__ __forceinline__ bool ep_routes_to(int skip_a2a, int src, int e, int n_local) {
    return !skip_a2a || e / n_local == src;
}

// The wire layout departs from the contract's buffer section in one way, to move a token's
// payload once per destination rank instead of once per expert (a quarter of the bytes with two
// ranks and top-8 of 256): a receive buffer holds each sender's messages [n_ranks, max_tokens,
// msg] in the sender's token order, each message carries its row slots (MsgLayout), and the
// sender's count words carry how many messages it sent (ep_publish_counts). Slots, counts,
// signals, waits and outputs are the contract's.

// Message `pos` from rank `src` in a dispatch receive buffer [n_ranks, max_tokens, msg].
__device__ __forceinline__ u64 ep_recv_offset(int src, int max_tokens, u64 pos, int msg_bytes) {
    return ((u64)src * max_tokens + pos) * msg_bytes;
}

// Prefill rounds overlap the copy-out with the transfer (comm/path.rs: `overlap_dispatch`). Such a sender
// publishes its counts from ep_assign_slots, before any payload, with EP_NMSG_EARLY set in its
// message count, and marks each message landed once the message's stores are visible: its
// block's fence, then the round's number (`seq`, the same on every rank) in the message's header,
// in the 12 bytes the source token's 16 leave free. A receiver waits for that mark before it
// reads a message from a sender whose message count carries the bit; every other sender
// published its counts after its last store. (The word's flags: common.cuh.)
__device__ __forceinline__ u32* ep_landed_flag(u8* msg, MsgLayout m) { return (u32*)(msg + m.src_off + 8); }

// The mark of a message whose rows its sender wrote itself (the rank's own message in an
// overlapped round whose layout was known by the time the message was encoded: ep_place_own_rows);
// the copy-out skips it. Round numbers stay below it (comm/dispatch.rs).
#define EP_LANDED_PLACED 0x80000000u

// Inclusive prefix sum of `v` over the calling warp's lanes, by shuffles. Every lane calls it.
template <typename T>
__device__ __forceinline__ T ep_warp_scan(T v) {
    int lane = threadIdx.x & 31;
    for (int off = 1; off < 32; off <<= 1) {
        T o = __shfl_up_sync(0xffffffffu, v, off);
        if (lane >= off) v += o;
    }
    return v;
}

// Block-wide exclusive prefix sum of `v` over the threads in thread order; `total` returns the
// block's sum (the same in every thread). Sums may be packed fields (ep_assign_block's four
// 16-bit counts) as long as none overflows. Every thread of the block calls it; blockDim.x is a
// multiple of 32. Returns with a barrier passed.
__device__ u64 ep_scan_counts(u64 v, u64* warp_sums, u64& total) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    u64 incl = ep_warp_scan(v);
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    u64 before = 0;
    total = 0;
    for (int w = 0; w < warps; w++) {
        before += w < warp ? warp_sums[w] : 0;
        total += warp_sums[w];
    }
    __syncthreads();
    return before + incl - v;
}

// ep_assign_block's passes: the pass's ids staged in shared memory with 16-byte copies (up to
// EP_ASSIGN_TILE ints), then each thread takes EP_ASSIGN_RUN of its tokens, blockDim.x apart,
// and one scan of their flags packed in 16-bit fields gives every token its position. Until v20
// each thread read one token's ids a pass with its own 4-byte loads and the block scanned after
// each: 16 passes of a 256-thread block at 4096 tokens, ~20 us per block where staged they take
// ~13 (grid traces, bench/results/history/prefill-ab-h200-x2-2026-11-22-v20.txt).
#define EP_ASSIGN_RUN 4
#define EP_ASSIGN_TILE 8192

// One block of ep_assign_slots (the per-column form; ep_assign_chunks below for many tokens).
// Blocks 0 .. n_experts-1, one per expert: for every (token, slot),
// the slot's position among this rank's rows for its expert (token order), or -1 for duplicates,
// masked and (skip_a2a) off-device slots; and per expert the number of rows sent. Blocks
// n_experts .. + n_ranks-1, one per destination rank: each token's position among this rank's
// tokens that reach that rank (its message slot there), or -1, and the number of messages to that
// rank (`msgs_to`). Positions follow token order, so they are deterministic. Every entry is
// written by exactly one block (its expert's or rank's; block 0 for masked slots), so no memset
// comes first. blockDim.x <= 1024 (a 16-bit field holds a count per block).
__device__ void ep_assign_block(const int* ids, int n_tokens, int top_k, int n_experts, int n_local, int n_ranks,
                                int rank, int skip_a2a, int* slots, int* rank_slots, u64* sent, u32* msgs_to) {
    __shared__ u64 warp_sums[32];
    __shared__ __align__(16) int tile[EP_ASSIGN_TILE];
    bool by_rank = (int)blockIdx.x >= n_experts;
    int p = blockIdx.x - n_experts, e = blockIdx.x;
    // Rank p's experts are [lo, lo + n_local): a range test (with a division per id these blocks
    // ended ~7 us after the expert blocks at 4096 tokens).
    int lo = p * n_local;
    // Whether this rank sends to expert e (expert blocks) or to rank p (rank blocks) at all.
    bool routed = ep_routes_to(skip_a2a, rank, by_rank ? lo : e, n_local);
    // Tokens per pass: a multiple of 4, so that every pass's ids start 16-byte aligned.
    int per_pass = min(EP_ASSIGN_RUN * (int)blockDim.x, EP_ASSIGN_TILE / top_k) & ~3;
    bool aligned = ((u64)ids & 15) == 0;
    u64 done = 0; // positions given so far (every thread keeps the same count)
    for (int t0 = 0; t0 < n_tokens; t0 += per_pass) {
        int n = min(per_pass, n_tokens - t0), n_ints = n * top_k;
        const int* src = ids + (u64)t0 * top_k;
        int whole = aligned ? n_ints / 4 : 0;
        for (int i = threadIdx.x; i < whole; i += blockDim.x) ep_async_copy16(tile + 4 * i, src + 4 * i);
        for (int i = 4 * whole + threadIdx.x; i < n_ints; i += blockDim.x) tile[i] = src[i];
        ep_async_wait();
        __syncthreads();
        // Token i of the thread, t0 + threadIdx.x + i * blockDim.x: expert blocks, the first
        // slot naming e (-1: none sends); rank blocks, 0 when the token reaches rank p (-1: not).
        int hit[EP_ASSIGN_RUN];
        u64 flags = 0;
#pragma unroll
        for (int i = 0; i < EP_ASSIGN_RUN; i++) {
            int u = threadIdx.x + i * blockDim.x;
            const int* row = tile + u * top_k;
            int* out = slots + (u64)(t0 + u) * top_k;
            int h = -1;
            auto slot = [&](int k, int id) {
                if (by_rank) {
                    if (id >= lo && id < lo + n_local && routed) h = 0;
                } else if (id == e) {
                    if (h < 0 && routed) h = k; // later slots naming e are duplicates
                    else out[k] = -1;
                } else if (id < 0 && e == 0) {
                    out[k] = -1;
                }
            };
            if (u < n && top_k % 4 == 0) {
                // 16-byte reads: rows 32 bytes apart across a warp conflict 2-way, not 8
                for (int k = 0; k < top_k; k += 4) {
                    int4 w = *(const int4*)(row + k);
                    slot(k, w.x);
                    slot(k + 1, w.y);
                    slot(k + 2, w.z);
                    slot(k + 3, w.w);
                }
            } else {
                for (int k = 0; u < n && k < top_k; k++) slot(k, row[k]);
            }
            hit[i] = h;
            flags |= (u64)(h >= 0) << (16 * i);
        }
        // (Its first barrier also keeps the tile until every thread has read it.)
        u64 total;
        u64 before = ep_scan_counts(flags, warp_sums, total);
#pragma unroll
        for (int i = 0; i < EP_ASSIGN_RUN; i++) {
            int u = threadIdx.x + i * blockDim.x;
            int at = (int)(done + (before >> (16 * i) & 0xffffu));
            if (u < n) {
                u64 t = t0 + u;
                if (by_rank) rank_slots[t * n_ranks + p] = hit[i] >= 0 ? at : -1;
                else if (hit[i] >= 0) slots[t * top_k + hit[i]] = at;
            }
            done += total >> (16 * i) & 0xffffu;
        }
    }
    if (threadIdx.x == 0) {
        if (by_rank) msgs_to[p] = (u32)done;
        else sent[e] = done;
    }
}

// A block's dynamic shared memory (ep_assign_chunks' chunk; the send's message and row; the
// single-launch kernel's phases).
extern __shared__ uint4 smem_u4[];

// ep_assign_chunks, the form of ep_assign_slots for many tokens (comm/path.rs, chunked_assign),
// works on chunks of EP_ASSIGN_CHUNK tokens, a block of EP_ASSIGN_THREADS each
// (comm/dispatch.rs launches ceil(n_tokens / EP_ASSIGN_CHUNK), at least one), each warp on
// EP_ASSIGN_WARP_TOKENS consecutive tokens of its chunk. Columns are the experts, then the
// destination ranks (n_experts + n_ranks). A block writes each (token, slot)'s position among its
// chunk's rows for the slot's expert, and each (token, rank)'s among its chunk's tokens that reach
// the rank; the last block turns the chunks' totals into `chunk_base` [n_chunks, columns], the
// rows of each column in the chunks before, which ep_load_route adds. Positions so follow token
// order, as the contract's slots do, and every id is read once, where ep_assign_slots' blocks each
// read every id: a few µs at 512 tokens (one pass), ~19 at 4096 (four; one H100, two ranks).
#define EP_ASSIGN_CHUNK 128
#define EP_ASSIGN_THREADS 256
#define EP_ASSIGN_WARPS (EP_ASSIGN_THREADS / 32)
#define EP_ASSIGN_WARP_TOKENS (EP_ASSIGN_CHUNK / EP_ASSIGN_WARPS) // <= 32: a ballot covers them
// Columns counted per pass over a chunk (the per-warp counts in shared memory are u16: a chunk
// holds at most EP_ASSIGN_CHUNK rows of a column). More columns take more passes.
#define EP_ASSIGN_COLS 2048
// A slot's position in ep_assign_chunk's shared memory when the slot sends nothing.
#define EP_ASSIGN_NONE 0xFFu

// Bit q of the result: token `tok` of the chunk staged in `ids` reaches rank p0 + q (p0 + q <
// n_ranks) through an expert this rank sends to.
__device__ __forceinline__ u64 ep_assign_reach(const int* ids, int tok, int top_k, int n_local, int rank,
                                               int skip_a2a, int p0) {
    u64 reach = 0;
    for (int k = 0; k < top_k; k++) {
        int id = ids[tok * top_k + k];
        int q = id >= 0 ? id / n_local - p0 : -1;
        if (q >= 0 && q < 64 && ep_routes_to(skip_a2a, rank, id, n_local)) reach |= 1ull << q;
    }
    return reach;
}

// One block of ep_assign_chunks (above): its chunk's positions into `slots` [n_tokens, top_k] and
// `rank_slots` [n_tokens, n_ranks] (-1: duplicate, masked, or off-device with skip_a2a; the rank
// not reached), and the chunk's total per column into chunk_base's row. Per pass over
// EP_ASSIGN_COLS columns: each warp counts its tokens' rows per column in shared memory, in token
// order (__match_any_sync gives a row its place among the warp's rows for the same expert, a
// ballot a token its place among the warp's tokens for a rank), the block turns the warps' counts
// into each warp's start, then writes. Called by every thread of an EP_ASSIGN_THREADS block.
__device__ void ep_assign_chunk(const int* ids, int n_tokens, int top_k, int n_experts, int n_local, int n_ranks,
                                int rank, int skip_a2a, int* slots, int* rank_slots, u32* chunk_base) {
    int cols = n_experts + n_ranks;
    int t0 = blockIdx.x * EP_ASSIGN_CHUNK, n = max(0, min(EP_ASSIGN_CHUNK, n_tokens - t0)), n_ids = n * top_k;
    int* tile = (int*)smem_u4;                                  // [EP_ASSIGN_CHUNK * top_k] the chunk's ids
    u16* cnt = (u16*)(tile + EP_ASSIGN_CHUNK * top_k);          // [EP_ASSIGN_WARPS, EP_ASSIGN_COLS at most]
    int pass_cols = min(cols, EP_ASSIGN_COLS);
    u8* pos = (u8*)(cnt + EP_ASSIGN_WARPS * pass_cols);         // [EP_ASSIGN_CHUNK * top_k] place in the warp
    const int* src = ids + (u64)t0 * top_k;
    // 16-byte copies when the ids are 16-byte aligned (t0 * top_k * 4 is a multiple of 16).
    int whole = ((u64)ids & 15) == 0 ? n_ids / 4 : 0;
    for (int i = threadIdx.x; i < whole; i += blockDim.x) ep_async_copy16(tile + 4 * i, src + 4 * i);
    for (int i = 4 * whole + threadIdx.x; i < n_ids; i += blockDim.x) tile[i] = src[i];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    u32 lt = (1u << lane) - 1;
    int w0 = warp * EP_ASSIGN_WARP_TOKENS, w1 = min(w0 + EP_ASSIGN_WARP_TOKENS, n);
    int tok = w0 + lane; // the token of the lane in the rank steps
    bool has_tok = lane < EP_ASSIGN_WARP_TOKENS && tok < n;
    u16* wcnt = cnt + warp * pass_cols;
    // The lane's slot in its token at the warp's first step, and how far a step moves it (no
    // division per step: j % top_k kept up as j goes 32 at a time).
    int k_first = lane % top_k, k_step = 32 % top_k;
    for (int c0 = 0; c0 < cols; c0 += EP_ASSIGN_COLS) {
        int nc = min(EP_ASSIGN_COLS, cols - c0);
        for (int i = threadIdx.x; i < EP_ASSIGN_WARPS * nc; i += blockDim.x) cnt[(i / nc) * pass_cols + i % nc] = 0;
        ep_async_wait();
        __syncthreads();
        if (threadIdx.x == 0) EP_STAMP_FIRST(3);
        // The experts of this pass: a step of 32 of the warp's (token, slot) pairs at a time.
        for (int j0 = w0 * top_k, kk = k_first; j0 < w1 * top_k; j0 += 32) {
            int j = j0 + lane;
            int id = j < w1 * top_k ? tile[j] : -1;
            // A slot counts once: the first of its token's slots naming the expert.
            bool live = id >= 0 && ep_routes_to(skip_a2a, rank, id, n_local);
            for (int q = j - kk; live && q < j; q++) live = tile[q] != id;
            kk += k_step;
            if (kk >= top_k) kk -= top_k;
            bool here = live && id >= c0 && id < c0 + nc;
            u32 peers = __match_any_sync(0xffffffffu, here ? id : -1 - lane);
            u32 c = here ? wcnt[id - c0] : 0;
            __syncwarp();
            if (here && (peers & lt) == 0) wcnt[id - c0] = (u16)(c + __popc(peers));
            // (A live slot of a later pass's expert is placed in that pass.)
            if (here) pos[j] = (u8)(c + __popc(peers & lt));
            else if (c0 == 0 && j < w1 * top_k) pos[j] = live ? 0 : EP_ASSIGN_NONE;
            __syncwarp();
        }
        if (threadIdx.x == 0) EP_STAMP_FIRST(4);
        // The ranks of this pass: a warp's tokens fit one ballot.
        int p_lo = max(c0 - n_experts, 0), p_hi = min(c0 + nc - n_experts, n_ranks);
        u64 reach_lo = 0; // the first 64 ranks' bits, kept for the writes (others are worked out again)
        for (int p0 = p_lo; p0 < p_hi; p0 += 64) {
            u64 reach = has_tok ? ep_assign_reach(tile, tok, top_k, n_local, rank, skip_a2a, p0) : 0;
            if (p0 == p_lo) reach_lo = reach;
            for (int q = 0; q < 64 && p0 + q < p_hi; q++) {
                u32 b = __ballot_sync(0xffffffffu, reach >> q & 1);
                if (lane == 0) wcnt[n_experts + p0 + q - c0] = (u16)__popc(b);
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) EP_STAMP_FIRST(5);
        // Each warp's start in the chunk per column, and the chunk's total.
        for (int c = threadIdx.x; c < nc; c += blockDim.x) {
            u32 acc = 0;
            for (int w = 0; w < EP_ASSIGN_WARPS; w++) {
                u32 v = cnt[w * pass_cols + c];
                cnt[w * pass_cols + c] = (u16)acc;
                acc += v;
            }
            chunk_base[(u64)blockIdx.x * cols + c0 + c] = acc;
        }
        __syncthreads();
        if (threadIdx.x == 0) EP_STAMP_FIRST(6);
        for (int j = threadIdx.x; j < n_ids; j += blockDim.x) {
            int id = tile[j];
            u32 at = pos[j];
            if (at == EP_ASSIGN_NONE) {
                if (c0 == 0) slots[(u64)t0 * top_k + j] = -1;
            } else if (id >= c0 && id < c0 + nc) {
                int w = j / (top_k * EP_ASSIGN_WARP_TOKENS);
                slots[(u64)t0 * top_k + j] = (int)(cnt[w * pass_cols + id - c0] + at);
            }
        }
        for (int p0 = p_lo; p0 < p_hi; p0 += 64) {
            u64 reach = reach_lo;
            if (p0 != p_lo) reach = has_tok ? ep_assign_reach(tile, tok, top_k, n_local, rank, skip_a2a, p0) : 0;
            for (int q = 0; q < 64 && p0 + q < p_hi; q++) {
                bool r = reach >> q & 1;
                u32 b = __ballot_sync(0xffffffffu, r);
                int p = p0 + q, col = n_experts + p - c0;
                if (has_tok)
                    rank_slots[(u64)(t0 + tok) * n_ranks + p] = r ? (int)(wcnt[col] + __popc(b & lt)) : -1;
            }
        }
        __syncthreads();
    }
}

// After every chunk's block (the last block): chunk_base's rows, each chunk's totals, become each
// chunk's start per column, and the totals over all chunks go to `sent` (experts) and `msgs_to`
// (ranks). Each thread takes EP_ASSIGN_START_COLS columns blockDim.x apart at once (258 columns at
// 256 experts on two ranks: one column a thread went round twice), their chunks' totals loaded 32
// at a time, each load independent: one round trip up to 32 chunks (4096 tokens).
#define EP_ASSIGN_START_COLS 2
__device__ void ep_assign_starts(u32* chunk_base, int n_chunks, int n_experts, int n_ranks, u64* sent,
                                 u32* msgs_to) {
    int cols = n_experts + n_ranks;
    for (int c0 = threadIdx.x; c0 < cols; c0 += EP_ASSIGN_START_COLS * blockDim.x) {
        u32 acc[EP_ASSIGN_START_COLS] = {};
        // A pointer stepped a row at a time: with each address worked out from its chunk number
        // the loads issued ~20 instructions apart, and the pass took ~3 µs (one H100).
        u32* at = chunk_base + c0;
        for (int g0 = 0; g0 < n_chunks; g0 += 32) {
            u32 v[32][EP_ASSIGN_START_COLS];
            u32* row = at;
#pragma unroll
            for (int i = 0; i < 32; i++, row += cols)
#pragma unroll
                for (int h = 0; h < EP_ASSIGN_START_COLS; h++)
                    v[i][h] = g0 + i < n_chunks && c0 + h * blockDim.x < cols ? __ldcg(row + h * blockDim.x) : 0;
#pragma unroll
            for (int i = 0; i < 32; i++, at += cols)
#pragma unroll
                for (int h = 0; h < EP_ASSIGN_START_COLS; h++) {
                    if (g0 + i < n_chunks && c0 + h * blockDim.x < cols) at[h * blockDim.x] = acc[h];
                    acc[h] += v[i][h];
                }
        }
#pragma unroll
        for (int h = 0; h < EP_ASSIGN_START_COLS; h++) {
            int c = c0 + h * blockDim.x;
            if (c < n_experts) sent[c] = acc[h];
            else if (c < cols) msgs_to[c - n_experts] = acc[h];
        }
    }
    __syncthreads();
}

// The flags of this rank's message count words (common.cuh): `early` from the publishing kernel,
// `ll` and `marked` as the host chose this round's combine form (comm/path.rs).
__device__ __forceinline__ u32 ep_nmsg_flags(int early, int ll, int marked) {
    return (early ? EP_NMSG_EARLY : 0u) | (ll ? EP_NMSG_LL : 0u) | (marked ? EP_NMSG_MARKED : 0u);
}

// One count per (expert, this rank), zero included, published by the calling threads of one
// block: each word carries, in its high half, this rank's message count word for the destination
// (the number of messages sent there, with `flags`, ep_nmsg_flags), which the destination's poll
// keeps (ep_poll_counts' `nmsg`). A word is single-copy atomic, so a receiver that sees a count
// sees the message count with it, with no fence between them: an early publish (EP_NMSG_EARLY,
// the counts out before the payload) vouches for nothing else and takes none (a system-scope
// fence per warp was ~0.7 us of the counting block's chain; before v42 the message counts were
// words of their own, stored first and ordered by it). A late one (after every block's payload)
// still fences, warp by warp (ep_publish). `sent` is global (u64) or, from the block that
// counted, shared (u32).
template <typename Sent>
__device__ void ep_publish_counts(const Sent* sent, const u32* msgs_to, int n_experts, int n_local, int n_ranks,
                                  int rank, int skip_a2a, const u64* count_ptrs, u32 flags) {
    bool early = flags & EP_NMSG_EARLY;
    for (int e0 = 0; e0 < n_experts; e0 += blockDim.x) {
        int e = e0 + threadIdx.x;
        u64* at = nullptr;
        u64 v = 0;
        if (e < n_experts && ep_routes_to(skip_a2a, rank, e, n_local)) {
            int dest = e / n_local;
            at = (u64*)count_ptrs[dest] + (u64)(e % n_local) * n_ranks + rank;
            v = (u64)(msgs_to[dest] | flags) << 32 | (u32)sent[e];
        }
        if (early) {
            if (at) ep_store_relaxed_sys(at, v);
        } else {
            ep_publish(at, v);
        }
    }
}

// An overlapped or layout-first round's counts, published by the assign's last block before the
// send (stamp 2).
__device__ void ep_assign_publish(const u64* sent, const u32* msgs_to, int n_experts, int n_local, int n_ranks,
                                  int rank, int skip_a2a, const u64* count_ptrs, int marked,
                                  int ll) {
    ep_publish_counts(sent, msgs_to, n_experts, n_local, n_ranks, rank, skip_a2a, count_ptrs,
                      ep_nmsg_flags(1, ll, marked));
#ifdef EP_TRACE
    __syncthreads();
    EP_STAMP(2);
#endif
}

// Row and message slots, a block per expert then one per destination rank (ep_assign_block). With
// `early` (an overlapped or layout-first round) the last block publishes the counts, before the
// send, with `ll` and `marked` (this rank's combine form, ep_nmsg_flags). The slots are whole: the
// route reads no chunk_base (ep_assign_chunks' parameters, which this kernel shares, name one it
// leaves alone).
extern "C" __global__ void ep_assign_slots(const int* ids, int n_tokens, int top_k, int n_experts, int n_local,
                                           int n_ranks, int rank, int skip_a2a, int* slots, int* rank_slots,
                                           u32* chunk_base, u64* sent, u32* msgs_to, int early, u32* ticket,
                                           const u64* count_ptrs, int marked, int ll) {
    ep_release_dependents(); // the send blocks may fetch their rows meanwhile (ep_dispatch_send_body)
    EP_STAMPS
    ep_assign_block(ids, n_tokens, top_k, n_experts, n_local, n_ranks, rank, skip_a2a, slots, rank_slots, sent,
                    msgs_to);
    EP_STAMP(1);
    bool publisher = early && ep_last_block(ticket, true);
    if (publisher)
        ep_assign_publish(sent, msgs_to, n_experts, n_local, n_ranks, rank, skip_a2a, count_ptrs, marked,
                          ll);
    EP_STAMPS_PRINT("assign", rank, publisher);
}

// Row and message slots, a block per chunk of tokens (ep_assign_chunk); the last block to finish
// lays out the chunks' starts and the totals (ep_assign_starts) and, with `early` (an overlapped
// or layout-first round), publishes the counts before the send, with `ll` and `marked` (this
// rank's combine form, ep_nmsg_flags). Every entry of slots, rank_slots and chunk_base is written
// by exactly one block, so no memset comes first.
extern "C" __global__ void __launch_bounds__(EP_ASSIGN_THREADS)
    ep_assign_chunks(const int* ids, int n_tokens, int top_k, int n_experts, int n_local, int n_ranks, int rank,
                    int skip_a2a, int* slots, int* rank_slots, u32* chunk_base, u64* sent, u32* msgs_to, int early,
                    u32* ticket, const u64* count_ptrs, int marked, int ll) {
    ep_release_dependents(); // as ep_assign_slots
    EP_STAMPS
    ep_assign_chunk(ids, n_tokens, top_k, n_experts, n_local, n_ranks, rank, skip_a2a, slots, rank_slots, chunk_base);
    EP_STAMP(1);
    bool publisher = ep_last_block(ticket, true);
    EP_STAMP(7);
    if (publisher) {
        ep_assign_starts(chunk_base, gridDim.x, n_experts, n_ranks, sent, msgs_to);
        EP_STAMP(8);
        if (early)
            ep_assign_publish(sent, msgs_to, n_experts, n_local, n_ranks, rank, skip_a2a, count_ptrs,
                              marked, ll);
    }
    EP_STAMPS_PRINT("chunks", rank, publisher);
}

// One token's routing, in shared memory for the block that sends it, so the send loop reads no
// global memory (with the ids and slots in global memory every step waited on a load that the
// stores before it might have changed). Per slot k: the expert id (-1 masked), its row slot (-1:
// nothing goes for this slot), the expert's rank (divided once: an integer division is a long
// instruction sequence), whether it carries the token's message to its rank (the first sending
// slot for that rank), and the message's slot at that rank; ep_send_token adds where a carrying
// slot's message goes inside this node.
struct EpRoute {
    int id[EP_MAX_TOP_K];
    int dest[EP_MAX_TOP_K];
    int slot[EP_MAX_TOP_K];
    int msg_at[EP_MAX_TOP_K];
    bool carries[EP_MAX_TOP_K];
    u8* at[EP_MAX_TOP_K];
};

// Which sending slots carry the token's message to their rank: the first sending slot for each
// rank. Every thread calls it, with r.id, r.dest and r.slot set; returns with a barrier passed.
__device__ void ep_route_carries(EpRoute& r, int top_k) {
    for (int k = threadIdx.x; k < top_k; k += blockDim.x) {
        bool carries = r.slot[k] >= 0;
        for (int j = 0; j < k; j++) carries = carries && !(r.slot[j] >= 0 && r.dest[j] == r.dest[k]);
        r.carries[k] = carries;
    }
    __syncthreads();
}

// Where carrying slot k's message goes: this rank's message slot r.msg_at[k] in the receive buffer
// of rank r.dest[k] (`recv_base`: that buffer, mapped here).
__device__ __forceinline__ u8* ep_route_msg(const EpRoute& r, int k, u64 recv_base, int rank, int max_tokens,
                                            MsgLayout m) {
    return (u8*)recv_base + ep_recv_offset(rank, max_tokens, r.msg_at[k], m.bytes);
}

// Keeps rank `dest`'s message alone in the route: no other slot carries. Every thread calls it;
// returns with a barrier passed.
__device__ void ep_route_only_to(EpRoute& r, int top_k, int dest) {
    for (int k = threadIdx.x; k < top_k; k += blockDim.x) r.carries[k] = r.carries[k] && r.dest[k] == dest;
    __syncthreads();
}

// Token t's route from the slot arrays ep_assign_slots wrote, or ep_assign_chunks: then each
// position in its chunk, plus the rows of the chunks before (`chunk_base`, columns: the experts,
// then the ranks; null after ep_assign_slots). Every thread calls it.
__device__ void ep_load_route(EpRoute& r, int t, const int* ids, const int* slots, const int* rank_slots,
                              const u32* chunk_base, int top_k, int n_local, int n_ranks) {
    const u32* base = chunk_base ? chunk_base + (u64)(t / EP_ASSIGN_CHUNK) * (n_local + 1) * n_ranks : nullptr;
    for (int k = threadIdx.x; k < top_k; k += blockDim.x) {
        int id = ids[(u64)t * top_k + k], in_chunk = slots[(u64)t * top_k + k];
        int dest = id >= 0 ? id / n_local : -1;
        int slot = in_chunk < 0 ? -1 : base ? in_chunk + (int)base[id] : in_chunk;
        r.id[k] = id;
        r.dest[k] = dest;
        r.slot[k] = slot;
        int msg_at = slot >= 0 ? rank_slots[(u64)t * n_ranks + dest] : -1;
        r.msg_at[k] = slot >= 0 && base ? msg_at + (int)base[n_local * n_ranks + dest] : msg_at;
    }
    __syncthreads();
    ep_route_carries(r, top_k);
}

// Where ep_fetch_row puts a token's row in the block's dynamic shared memory: BF16 straight into
// the message's payload; FP8 (encoded from the bf16 row itself) after the message; MXFP4 and
// NVFP4 after the message and the row in f32, which their encoders read. comm/dispatch.rs's send_smem
// sizes the same layout.
__device__ __forceinline__ u8* ep_fetched_row(int fmt, MsgLayout m, int hidden) {
    u8* msg = (u8*)smem_u4;
    return fmt == EP_FMT_BF16 ? msg : fmt == EP_FMT_FP8 ? msg + m.bytes : msg + m.bytes + 4 * hidden;
}

// Starts loading token t's row into shared memory (ep_fetched_row) and returns at once: issued
// before the block works out the token's route, so that the row's load and the route's overlap.
// ep_send_token waits for it. Every thread calls it.
__device__ void ep_fetch_row(int t, const u16* tokens, int hidden, int fmt, MsgLayout m) {
    u8* dst = ep_fetched_row(fmt, m, hidden);
    const uint4* src = (const uint4*)(tokens + (u64)t * hidden);
    for (int i = threadIdx.x; i < hidden / 8; i += blockDim.x) ep_async_copy16(dst + 16 * i, src + i);
}

// One block per token, its row fetched (ep_fetch_row): encode the message once in shared memory,
// then store it at every carrying slot's rank of this node (every rank the token reaches, unless
// ep_route_only_to kept one, except rank *placed_at, whose rows the block writes itself: null or
// -1, none; 16-byte stores; r.at, which ep_mark_landed reads too). Messages for another node are
// staged for ep_dispatch_put; the shared expert's tokens are kept in `shared_msgs`.
// `Batch`: the 16-byte pieces a thread loads from shared memory before storing them (ep_copy_to).
// A block's threads have ~2 pieces of a 7168-wide message each, so a batch of 8 only holds
// registers: the lean send (ep_dispatch_send_lean) takes 1. `hold` (null: none): the stores wait
// until that word reads `hold_seq`, or `hold_ns` have passed (ep_dispatch_single_body).
template <int Batch = 8>
__device__ void ep_send_token(int t, EpRoute& r, const float* input_scales, int hidden, int top_k, int fmt,
                              MsgLayout m, const u64* recv_ptrs, int rank, int gpus_per_node, int max_tokens,
                              u8* staging, int shared_start, int shared_end, u8* shared_msgs,
                              const int* placed_at = nullptr, const u32* hold = nullptr, u32 hold_seq = 0,
                              u64 hold_ns = 0, u64 peer = 0) {
    u8* msg = (u8*)smem_u4;
    int node = rank / gpus_per_node;
    // The global loads the send needs besides the row, issued while the row's load completes:
    // each carrying slot's peer buffer (loaded only when the stores began, it was a round trip on
    // the path; `peer`, when not 0, is slot threadIdx.x's, loaded with the route: ep_own_route)
    // and NVFP4's input scale (the only encoder that reads one).
    for (int k = threadIdx.x; k < top_k; k += blockDim.x)
        r.at[k] = !(r.carries[k] && r.dest[k] / gpus_per_node == node) ? nullptr
                  : k == (int)threadIdx.x && peer ? ep_route_msg(r, k, peer, rank, max_tokens, m)
                                                  : ep_route_msg(r, k, recv_ptrs[r.dest[k]], rank, max_tokens, m);
    float input_scale = fmt == EP_FMT_NVFP4 ? input_scales[t] : 1.0f;
    if (threadIdx.x < top_k && r.at[threadIdx.x]) EP_STAMP_FIRST(20);
    ep_async_wait(); // the fetched row, before anything returns or reads it
    __syncthreads();
    if (threadIdx.x == 0) EP_STAMP_FIRST(12);
    // The hold's word, loaded once the row is in: back by the time the message is encoded.
    // (Loaded after the encode it was a round trip on the sending block's path; loaded at the
    // send's start it was most often not there yet at 1 token, and polled after the encode.)
    u32 held = hold && threadIdx.x == 0 ? *(volatile const u32*)hold : 0u;
    bool shared = t >= shared_start && t < shared_end;
    bool any = shared;
    for (int k = 0; k < top_k; k++) any = any || r.carries[k];
    if (!any) return;

    // Everything after the payload (scales, padding, header) starts zeroed.
    for (int i = m.payload_bytes / 4 + threadIdx.x; i < m.bytes / 4; i += blockDim.x) ((u32*)msg)[i] = 0;
    if (fmt == EP_FMT_BF16) {
        // The payload is the row itself, fetched in place; only a NaN changes (it gains the
        // quiet bit, as bf16(f32(x)) does).
        uint4* dst = (uint4*)msg;
        for (int i = threadIdx.x; i < hidden / 8; i += blockDim.x) {
            uint4 v = dst[i];
            u32* w = (u32*)&v;
            for (int j = 0; j < 4; j++) {
                u32 lo = w[j] & 0xffffu, hi = w[j] >> 16;
                if ((lo & 0x7fffu) > 0x7f80u) lo |= 0x40u;
                if ((hi & 0x7fffu) > 0x7f80u) hi |= 0x40u;
                w[j] = lo | (hi << 16);
            }
            dst[i] = v;
        }
        __syncthreads();
    } else if (fmt == EP_FMT_FP8) {
        __syncthreads(); // the zeroed header, before the scales go in
        // 8 lanes a block, four blocks a warp (ep_encode_fp8_warps).
        ep_encode_fp8_warps<8>((const u16*)ep_fetched_row(fmt, m, hidden), hidden, msg, msg + m.scales_off);
    } else {
        const u16* row = (const u16*)ep_fetched_row(fmt, m, hidden);
        float* x = (float*)(msg + m.bytes);
        for (int i = threadIdx.x; i < hidden; i += blockDim.x) x[i] = bf16_to_f32(row[i]);
        __syncthreads();
        ep_encode_row(fmt, x, hidden, input_scale, msg, msg + m.scales_off);
    }
    if (threadIdx.x == 0) EP_STAMP_FIRST(21);
    if (threadIdx.x == 0) *(int*)(msg + m.src_off) = t;
    for (int k = threadIdx.x; k < top_k; k += blockDim.x) {
        ((u16*)(msg + m.ids_off))[k] = r.id[k] < 0 ? (u16)0xFFFF : (u16)r.id[k];
        ((int*)(msg + m.slots_off))[k] = r.slot[k];
    }
    __syncthreads();
    if (threadIdx.x == 0) EP_STAMP_FIRST(13);
    if (hold) {
        if (threadIdx.x == 0 && held != hold_seq) {
            u64 deadline = 0;
            while (*(volatile const u32*)hold != hold_seq) {
                u64 now = ep_globaltimer();
                if (!deadline) deadline = now + hold_ns;
                else if (now > deadline) break;
            }
        }
        __syncthreads();
    }

    // In registers: the stores below may alias shared memory as far as the compiler knows, so a
    // read of `r` in their loop is a reload after every store, and testing each slot there was a
    // shared-memory round trip after another (top_k of them before the last carrying slot's
    // stores). The slots that send are read at once, a mask.
    const int placed = placed_at ? *placed_at : -1;
    u64 sending = 0;
#pragma unroll 8
    for (int k = 0; k < top_k; k++)
        sending |= (u64)(r.carries[k] && !(placed >= 0 && r.dest[k] == placed)) << k;
    bool staged = false;
    for (u64 left = sending; left; left &= left - 1) {
        int k = __ffsll((long long)left) - 1;
        if (r.at[k]) {
            ep_block_copy<Batch>(r.at[k], msg, m.bytes);
        } else if (!staged) {
            ep_block_copy<Batch>(staging + (u64)t * m.bytes, msg, m.bytes);
            staged = true;
        }
    }
    if (shared) ep_block_copy<Batch>(shared_msgs + (u64)(t - shared_start) * m.bytes, msg, m.bytes);
    if (threadIdx.x == 0) EP_STAMP_FIRST(14);
}

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
// totals), or as it was before v38, the 1-token FP8 dispatch read 0.4-0.7 us slower (one H200,
// v38 review). Returns with a barrier passed.
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
extern "C" __global__ void ep_dispatch_wait(u64* counts, int n_local, int n_ranks, int rank, int skip_a2a,
                                            u64 slice_ns, int max_tokens, int shared_groups, int shared_len,
                                            int row_multiple, u32* status, u64* snapshot, u32* nmsg,
                                            u32* row_offsets, u32* src_offsets, u32* layout_seq, u32 seq) {
    extern __shared__ u32 start[]; // [n_groups + 1]
    int n = n_local * n_ranks, n_groups = n_local + shared_groups;
    ep_await_prior_grid(); // launched chained after the send (comm/dispatch.rs)
    // The counts and the layout, the counts' misses in status[1 ..], the outcome in status[0]; the
    // counts reset once every one was there.
    u32 outcome = ep_poll_layout(counts, n_local, n_ranks, rank, skip_a2a, slice_ns, max_tokens, snapshot, status + 1,
                                 nmsg, shared_groups, shared_len, row_multiple, start, src_offsets);
    if (outcome != EP_PENDING) ep_reset_counts(counts, n, rank, n_ranks, skip_a2a);
    if (threadIdx.x == 0) status[0] = outcome;
    if (outcome != EP_OK) return;
    ep_release_dependents(); // the next kernel's blocks (copy-out, or a layout-first send) may launch
    for (int g = threadIdx.x; g <= n_groups; g += blockDim.x) row_offsets[g] = start[g];
    if (!layout_seq) return;
    __syncthreads();
    if (threadIdx.x == 0) {
        layout_seq[1] = 0;
        ep_store_release_gpu(layout_seq, seq);
    }
}

// Marks token t's messages inside this node (r.at, from ep_send_token), and its shared-expert
// message (`shared_msg`, null when it has none), landed for round `seq` (a sender that published
// early, above): the block's stores are ordered before one fence, then a system-scope store per
// message; rank `placed`'s message (-1: none) as placed (EP_LANDED_PLACED: its rows are the
// block's to write, ep_place_own_rows). Every thread calls it.
__device__ void ep_mark_landed(const EpRoute& r, int top_k, MsgLayout m, u32 seq, u8* shared_msg, int placed = -1) {
    // Which slots have a message here, read while the block comes to the barrier (as the send's
    // mask, ep_send_token: not one shared-memory round trip after another past the fence).
    u64 marked = 0, own = 0;
    if (threadIdx.x == 0) {
#pragma unroll 8
        for (int k = 0; k < top_k; k++) marked |= (u64)(r.at[k] != nullptr) << k;
        if (placed >= 0)
            for (int k = 0; k < top_k; k++) own |= (u64)(r.at[k] != nullptr && r.dest[k] == placed) << k;
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    EP_STAMP_FIRST(22);
    if (!marked && !shared_msg) return;
    // A placed mark vouches for no store (the copy-out skips the message; its rows come after it
    // and are read after the kernel): with no other message, no fence (~1.2 us of each sending
    // block at 512 tokens FP8, one H200, one rank alone, v47).
    if (placed < 0 || (marked & ~own) || shared_msg) ep_fence_acq_rel();
    EP_STAMP_FIRST(23);
    if (shared_msg) ep_store_relaxed_sys(ep_landed_flag(shared_msg, m), seq);
    for (; marked; marked &= marked - 1) {
        int k = __ffsll((long long)marked) - 1;
        ep_store_relaxed_sys(ep_landed_flag(r.at[k], m),
                             placed >= 0 && r.dest[k] == placed ? seq | EP_LANDED_PLACED : seq);
    }
}

// Token t's shared-expert message (null when the token has none).
__device__ __forceinline__ u8* ep_shared_msg(int t, int shared_start, int shared_end, u8* shared_msgs, MsgLayout m) {
    return t >= shared_start && t < shared_end ? shared_msgs + (u64)(t - shared_start) * m.bytes : nullptr;
}

// Whether ep_dispatch_wait has released round `seq`'s layout into `layout_seq`, waiting for it up to
// `wait_ns` (0: a look), and (`status`, null: not) no longer once the status is not EP_OK (the
// wait failed, and will not release it). One thread.
__device__ bool ep_layout_released(const u32* layout_seq, u32 seq, u64 wait_ns, const u32* status = nullptr) {
    bool there = ep_load_acquire_gpu(layout_seq) == seq;
    if (there || wait_ns == 0) return there;
    u64 deadline = ep_globaltimer() + wait_ns;
    while (!there && (!status || *(volatile const u32*)status == EP_OK) && ep_globaltimer() < deadline) {
        __nanosleep(256);
        there = ep_load_acquire_gpu(layout_seq) == seq;
    }
    return there;
}

// The rows here of one message, the scratch a warp's copy of it works in (shared memory; the
// overlapped copy-out has one per warp, the send's own rows one per block): each row's output
// address, index and the top-k slot it came from.
struct EpRows {
    u8* dst[EP_MAX_TOP_K];
    u64 row[EP_MAX_TOP_K];
    int slot[EP_MAX_TOP_K];
    int n;
};

// An overlapped or layout-first round's own message, expanded by the block that encodes it (when
// ep_dispatch_wait had released the layout by the time its route was loaded): this rank's rows of
// it, from the message still in shared memory, as ep_block_copy_message would copy them from the
// receive buffer, which then only holds its mark (ep_mark_landed). The message is neither written
// nor read back: at 4096 tokens BF16, 58 MB of HBM writes and as much of reads fewer per rank with
// two ranks. The rows' group starts are loaded while the token's row loads (ep_own_starts, by one
// warp) and read once the message is marked (ep_find_own_rows), so that no load is between the
// mark and the rows' stores (up to v46 two dependent loads were, behind every block's stores).
struct EpOwnRows {
    EpRows rows;
    u64 total; // the output's rows (the FP8 scales' stride)
};

// The send's own message's rows, from its route, with lane k % 32's `start[k / 32]` the group
// start of slot k (ep_own_starts). Whether a slot has a row here is worked out again rather than
// kept from ep_own_starts: kept across the encode, it took ep_dispatch_send from 64 registers to
// 73-81 (sm_90), a 256-thread block fewer per SM (v47 review).
struct EpOwnRowsFound {
    const EpRoute* r;
    u32 start0, start1;
    int rank, n_local;
    __device__ __forceinline__ bool operator()(int k, u64& row) const {
        int sl = r->slot[k], local = r->id[k] - rank * n_local;
        bool here = sl >= 0 && (unsigned)local < (unsigned)n_local;
        row = here ? (u64)(k < 32 ? start0 : start1) + sl : 0;
        return here;
    }
};

// The calling lane's group starts of slots lane and lane + 32 of the token's own message (0: no
// row here), loaded into registers that nothing reads until ep_find_own_rows.
__device__ __forceinline__ void ep_own_starts(const EpRoute& r, int top_k, int rank, const u32* src_offsets,
                                              int n_local, int n_ranks, int shared_groups, u32& start0,
                                              u32& start1) {
    const int lane = threadIdx.x & 31;
    auto start = [&](int k) -> u32 {
        if (k >= top_k) return 0u;
        int local = r.id[k] - rank * n_local;
        bool here = r.slot[k] >= 0 && (unsigned)local < (unsigned)n_local;
        return here ? src_offsets[(local + shared_groups) * (n_ranks + 1) + rank] : 0u;
    };
    start0 = start(lane);
    start1 = start(lane + 32);
}

// Defined with the copy-out, whose row finding and copy they share.
__device__ void ep_find_own_rows(const EpRoute& r, int top_k, int rank, const EpOwnRowsFound& found, u32 total,
                                 int max_tokens, MsgLayout m, u8* recv_tokens, EpOwnRows& own, int* msg_rows);
__device__ void ep_place_own_rows(const EpOwnRows& own, int t, int rank, int hidden, int fmt, MsgLayout m,
                                  u8* recv_scales, int* src_info, int* row_src);

// One block per token (at least one block, for a rank without tokens): the token's route, then
// ep_send_token; with `early` each block marks its messages landed (ep_assign_slots published the
// counts), otherwise with `signal` (one node) the last block to finish publishes the counts, with
// `ll` and `marked` (this rank's combine form, ep_nmsg_flags). With `early`, a block that finds
// the round's layout released (`layout_seq`, null: never; waiting up to `layout_wait_ns` for it,
// which only tests set) expands its own message into this rank's rows itself (ep_place_own_rows,
// with the copy-out's parameters after layout_seq). `Fmt`: the format the kernel is compiled for
// (`fmt` is then that one), or -1, `fmt`'s at run time.
template <int Batch, int Fmt>
__device__ __forceinline__ void ep_dispatch_send_body(
        const u16* tokens, const float* input_scales, int n_tokens, int hidden, int fmt, const int* ids,
        const int* slots, const int* rank_slots, const u32* chunk_base, int top_k, MsgLayout m, const u64* recv_ptrs,
        int rank, int n_ranks, int n_local, int gpus_per_node, int max_tokens, u8* staging, int shared_start,
        int shared_end, u8* shared_msgs,
        int signal, u32* ticket, const u64* sent, const u32* msgs_to, int n_experts, int skip_a2a,
        const u64* count_ptrs, int early, u32 seq, int marked, int ll, const u32* layout_seq,
        u64 layout_wait_ns, const u32* row_offsets, const u32* src_offsets, int shared_groups, u8* recv_tokens,
        u8* recv_scales, int* src_info, int* row_src, int* msg_rows) {
    __shared__ EpRoute route;
    // The rank whose message's rows this block writes itself (ep_place_own_rows), -1: none.
    __shared__ int placed;
    __shared__ EpOwnRows own;
    if (Fmt >= 0) fmt = Fmt;
    int t = blockIdx.x;
    // Launched chained after the assign, or after a layout-first round's wait, which awaits the
    // assign (comm/dispatch.rs): the row, the round's input, is there before the assign starts;
    // the slots are not until it ends. No early release (common.cuh).
    if (t < n_tokens) {
        EP_STAMPS
        ep_fetch_row(t, tokens, hidden, fmt, m);
        ep_await_prior_grid();
        ep_load_route(route, t, ids, slots, rank_slots, chunk_base, top_k, n_local, n_ranks);
        // While the row loads, the last warp looks for the layout, then issues the loads of the own
        // message's rows (ep_own_starts), which it reads once the message is marked. Each of its
        // lanes acquires the layout itself, since each reads it. (The rows found whole here, their
        // loads held the row's barrier ~0.4 us at 512 tokens FP8; one H200, v47.)
        const bool finder = threadIdx.x >= blockDim.x - 32;
        u32 start0 = 0, start1 = 0, total = 0;
        if (finder) {
            const bool mine = layout_seq && ep_layout_released(layout_seq, seq, layout_wait_ns);
            const bool released = __all_sync(0xffffffffu, mine);
            if (threadIdx.x == blockDim.x - 32) placed = released ? rank : -1;
            if (released) {
                ep_own_starts(route, top_k, rank, src_offsets, n_local, n_ranks, shared_groups, start0, start1);
                total = row_offsets[n_local + shared_groups];
            }
        }
        EP_STAMP(1);
        ep_send_token<Batch>(t, route, input_scales, hidden, top_k, fmt, m, recv_ptrs, rank, gpus_per_node,
                             max_tokens, staging, shared_start, shared_end, shared_msgs, &placed);
        if (early)
            ep_mark_landed(route, top_k, m, seq, ep_shared_msg(t, shared_start, shared_end, shared_msgs, m), placed);
        if (placed >= 0) {
            if (finder)
                ep_find_own_rows(route, top_k, rank, EpOwnRowsFound{&route, start0, start1, rank, n_local}, total,
                                 max_tokens, m, recv_tokens, own, msg_rows);
            __syncthreads();
            ep_place_own_rows(own, t, rank, hidden, fmt, m, recv_scales, src_info, row_src);
            EP_STAMP(3);
        }
        EP_STAMP(2);
        EP_STAMPS_PRINT("send", rank, early);
    } else {
        ep_await_prior_grid(); // the ticket and the counts this block may publish are the assign's
    }
    if (!early && signal && ep_last_block(ticket))
        ep_publish_counts(sent, msgs_to, n_experts, n_local, n_ranks, rank, skip_a2a, count_ptrs,
                          ep_nmsg_flags(0, ll, marked));
}

// The send kernels' parameters and arguments, ep_dispatch_send_body's (comm/mod.rs checks that the
// three lists agree). Parameters ids .. staging are ep_dispatch_put's, in its order (comm/dispatch.rs
// passes that slice).
#define EP_DISPATCH_SEND_PARAMS                                                                                 \
    const u16 *tokens, const float *input_scales, int n_tokens, int hidden, int fmt, const int *ids,            \
        const int *slots, const int *rank_slots, const u32 *chunk_base, int top_k, MsgLayout m,                 \
        const u64 *recv_ptrs, int rank, int n_ranks, int n_local, int gpus_per_node, int max_tokens,            \
        u8 *staging, int shared_start, int shared_end, u8 *shared_msgs, int signal, u32 *ticket,                \
        const u64 *sent, const u32 *msgs_to, int n_experts, int skip_a2a, const u64 *count_ptrs, int early,     \
        u32 seq, int marked, int ll, const u32 *layout_seq, u64 layout_wait_ns, const u32 *row_offsets,         \
        const u32 *src_offsets, int shared_groups, u8 *recv_tokens, u8 *recv_scales, int *src_info,             \
        int *row_src, int *msg_rows
#define EP_DISPATCH_SEND_ARGS                                                                                   \
    tokens, input_scales, n_tokens, hidden, fmt, ids, slots, rank_slots, chunk_base, top_k, m, recv_ptrs, rank, \
        n_ranks, n_local, gpus_per_node, max_tokens, staging, shared_start, shared_end, shared_msgs, signal,    \
        ticket, sent, msgs_to, n_experts, skip_a2a, count_ptrs, early, seq, marked, ll, layout_seq,             \
        layout_wait_ns, row_offsets, src_offsets, shared_groups, recv_tokens, recv_scales, src_info, row_src,   \
        msg_rows
#define EP_DISPATCH_SEND(name, batch, fixed_fmt)                                                                \
    extern "C" __global__ void __launch_bounds__(512) name(EP_DISPATCH_SEND_PARAMS) {                           \
        ep_dispatch_send_body<batch, fixed_fmt>(EP_DISPATCH_SEND_ARGS);                                         \
    }

// Every format (`fmt` at run time). Launched with 256 or 512 threads (comm/dispatch.rs,
// send_threads); at 64 registers a thread (sm_90), four 256-thread blocks fit an SM, or two of 512.
EP_DISPATCH_SEND(ep_dispatch_send, 8, -1)
// The lean send: the message stored a piece at a time (ep_send_token's Batch), BF16 only (no
// encoder: 32 registers a thread instead of 64, sm_90, no spills; with every format's it took 40,
// and the faster FP8 encode of v36 made that 40 with spills): three 512-thread blocks fit an SM, or
// two beside a lean copy-out block (ep_dispatch_copy_lean). With the lean copy-out and the own rows
// written by the send blocks, for BF16 from 2560 tokens (comm/path.rs, lean_dispatch).
EP_DISPATCH_SEND(ep_dispatch_send_lean, 1, EP_FMT_BF16)
// FP8 alone, two pieces a thread in flight: 40 registers (sm_90, no spills), so six 256-thread
// blocks fit an SM where four of ep_dispatch_send do. Every multi-kernel FP8 round (comm/dispatch.rs,
// `send_kernel`). One H200 (docs/perf.md, v48), one rank alone: 1024 tokens 49.7-49.9 ->
// 47.8-48.2 us, 4096 158.8-160.2 -> 144.4-151.9; two ranks sharing it, 4096 322.4-324.3 ->
// 300.5-306.5. Compiled for FP8 with ep_dispatch_send's batch of 8 (64 registers) it took about
// half of that at 512-1024 tokens and a sixth at 4096: the rest is the registers.
EP_DISPATCH_SEND(ep_dispatch_send_fp8, 2, EP_FMT_FP8)

// The inter-node transport: puts of the staged messages to the ranks of other nodes. Runs after
// ep_dispatch_send and before ep_dispatch_signal on the same stream: put, then signal.
extern "C" __global__ void ep_dispatch_put(const int* ids, const int* slots, const int* rank_slots,
                                           const u32* chunk_base, int top_k, MsgLayout m, const u64* recv_ptrs,
                                           int rank, int n_ranks, int n_local, int gpus_per_node, int max_tokens,
                                           const u8* staging) {
    __shared__ EpRoute route;
    int t = blockIdx.x;
    ep_load_route(route, t, ids, slots, rank_slots, chunk_base, top_k, n_local, n_ranks);
    int node = rank / gpus_per_node;
    for (int k = 0; k < top_k; k++) {
        int dest = route.dest[k];
        if (!route.carries[k] || dest / gpus_per_node == node) continue;
        ep_block_copy(ep_route_msg(route, k, recv_ptrs[dest], rank, max_tokens, m), staging + (u64)t * m.bytes,
                      m.bytes);
    }
}

// The counts, after the inter-node puts (between nodes the send kernel does not signal).
extern "C" __global__ void ep_dispatch_signal(const u64* sent, const u32* msgs_to, int n_experts, int n_local,
                                              int n_ranks, int rank, int skip_a2a, const u64* count_ptrs) {
    ep_publish_counts(sent, msgs_to, n_experts, n_local, n_ranks, rank, skip_a2a, count_ptrs, 0u);
}

// Whether the threads of a team copying a message load its first payload pieces (EP_COPY_FIRST
// each: a thread's share of a 7168-wide BF16 row in a 512-thread block) and their first FP8 scale
// word with its header (EpMsgHead). A block's do; a warp's (the overlapped copy-out) do not: its
// threads have ~14 pieces of a row each to copy anyway, and the registers spilled.
#define EP_COPY_FIRST 2
template <bool Warp> __device__ __forceinline__ constexpr int ep_copy_first() { return Warp ? 0 : EP_COPY_FIRST; }

// What a thread of the team copying message `msg` loads of it in one round, together with the
// header (ep_load_message): its first payload pieces and first FP8 scale word (ep_copy_first),
// the source token. Up to v16 these were three round trips after the header's: the payload,
// then the token and the scales, reloaded after stores that might alias.
struct EpMsgHead {
    uint4 piece[EP_COPY_FIRST];
    u32 scale;
    int token;
};

template <bool Warp>
__device__ __forceinline__ EpMsgHead ep_load_message(const u8* msg, int hidden, int fmt, MsgLayout m) {
    const unsigned id = ep_team_id<Warp>(), size = ep_team_size<Warp>();
    EpMsgHead h;
    if (ep_copy_first<Warp>() > 0 && ep_aligned16(msg, m.payload_bytes)) {
        u64 n = m.payload_bytes / 16;
#pragma unroll
        for (int u = 0; u < ep_copy_first<Warp>(); u++)
            if (id + u * size < n) h.piece[u] = ((const uint4*)msg)[id + u * size];
    }
    h.scale = ep_copy_first<Warp>() > 0 && fmt == EP_FMT_FP8 && (int)id < hidden / 128
                  ? ((const u32*)(msg + m.scales_off))[id]
                  : 0;
    h.token = *(const int*)(msg + m.src_off);
    return h;
}

// Rows r.row[0 .. r.n) of the output (of `rows`) from message `msg` (its source token in
// `h.token`), by the calling warp or (not `Warp`, the send's own rows, `Shared`) the block: the
// payload read once and stored to every row, then each row's scales, src_info (source token,
// r.slot[i]) and source rank `src` (-1: none). `Shared`: the message is in shared memory, and the
// payload goes a piece at a time (ep_copy_to). A warp's lanes load `WarpBatch` pieces each before
// storing them (the lean copy-out takes 2, for its registers). (A block's copy of a message from
// the receive buffer is ep_block_copy_message's, its first pieces loaded with the header.)
template <bool Warp, bool Shared = false, int WarpBatch = 8>
__device__ void ep_copy_rows(const EpRows& r, const EpMsgHead& h, u64 rows, const u8* msg, int src, int hidden,
                             int fmt, MsgLayout m, u8* recv_scales, int* src_info, int* row_src) {
    static_assert(Warp != Shared, "a warp's copy from the receive buffer, or the block's own rows from shared memory");
    ep_copy_to<Warp, Shared ? 1 : WarpBatch>(r.dst, r.n, msg, m.payload_bytes);
    for (int i = 0; i < r.n; i++) {
        u64 row = r.row[i];
        ep_place_scales<Warp>(fmt, hidden, rows, row, msg + m.scales_off, recv_scales);
        if (ep_team_id<Warp>() == 0) {
            src_info[2 * row] = h.token;
            src_info[2 * row + 1] = r.slot[i];
            row_src[row] = src;
        }
    }
}

// How a copy-out waits for a message of an overlapped round (above): the round, and how long.
struct EpLanding {
    u32 seq;
    u64 slice_ns;
};

// What a copy-out finds of a message (ep_message_ready): not there when its slice ran out; there,
// to be copied; placed, its rows written by its sender (EP_LANDED_PLACED).
#define EP_MSG_MISSING 0
#define EP_MSG_THERE 1
#define EP_MSG_PLACED 2
// The type of that: a bool (EP_MSG_MISSING or EP_MSG_THERE) for a reader that never meets a placed
// mark (below), whose code then is what it was before placed marks existed.
template <bool Placed> struct EpFound { typedef u32 T; };
template <> struct EpFound<false> { typedef bool T; };

// Waits (one thread) until message `msg` from rank `s` carries the round's mark, or the slice
// runs out: then the status names every expert of `s` here and says EP_MESSAGES_PENDING, and the
// host launches the copy-out again. The clock is read only once the mark is not there yet.
// Returns what it found (EP_MSG_); a placed mark counts only for a reader that may meet one
// (`Placed`: the multi-kernel copy-outs; the single-launch dispatch's senders never place, and
// its code stays what it was before placed marks existed).
template <bool Placed>
__device__ typename EpFound<Placed>::T ep_message_landed(const u8* msg, int s, MsgLayout m, EpLanding landing,
                                                          int n_local, int n_ranks, u32* status) {
    const u32* flag = ep_landed_flag((u8*)msg, m);
    const u32 placed = landing.seq | EP_LANDED_PLACED;
    EP_STAMP_FIRST(25);
    u32 v = ep_load_acquire(flag);
    if (v != ~0u) EP_STAMP_FIRST(30); // (never ~0u: the stamp waits for the load)
    if (v == landing.seq) return EP_MSG_THERE;
    if (Placed && v == placed) return EP_MSG_PLACED;
    u64 deadline = ep_globaltimer() + landing.slice_ns;
    bool there = false;
    while (!there && ep_globaltimer() < deadline) {
        __nanosleep(64);
        v = ep_load_acquire(flag);
        there = v == landing.seq || (Placed && v == placed);
    }
    if (!there) {
        for (int g = 0; g < n_local; g++) status[1 + g * n_ranks + s] = 1;
        ep_messages_pending(status);
    }
    return !there ? EP_MSG_MISSING : Placed && v == placed ? EP_MSG_PLACED : EP_MSG_THERE;
}

// Whether message `msg` from rank `s` may be read (EP_MSG_), in every lane of the calling warp:
// at once when its sender published after its last store (`nm`, its message count word, without
// EP_NMSG_EARLY), otherwise once its mark is there (ep_message_landed, by lane 0). Without
// `Placed` a bool goes through the warp, as before placed marks existed.
template <bool Placed>
__device__ typename EpFound<Placed>::T ep_message_ready(const u8* msg, int s, u32 nm, MsgLayout m, EpLanding landing,
                                                         int n_local, int n_ranks, u32* status) {
    typedef typename EpFound<Placed>::T T;
    T got = (T)EP_MSG_THERE;
    if (nm & EP_NMSG_EARLY) {
        T mine = (threadIdx.x & 31) == 0 ? ep_message_landed<Placed>(msg, s, m, landing, n_local, n_ranks, status)
                                         : (T)EP_MSG_MISSING;
        got = __shfl_sync(0xffffffffu, mine, 0);
    }
    if (got != (T)EP_MSG_MISSING && threadIdx.x == 0) EP_STAMP_FIRST(9);
    return got;
}

// Where the slots of a message from rank `s` have their rows here: `(k, row)` says whether slot
// k has a row here (a row slot, and its expert here: the expert's index here without a division,
// two of which ran on the receivers' path) and which: the group's start for the source + the row
// slot the message carries. EpHeaderRows reads the slots from the message's header (u16 ids,
// 0xFFFF masked) and the starts from the layout (the copy-out's); EpOwnRowsFound, the send's own
// message before it is encoded, from the route and starts loaded earlier (ep_own_starts).
struct EpHeaderRows {
    const int* slot;
    const u16* id;
    const u32* src_offsets;
    int s, n_local, n_ranks, rank, shared_groups;
    __device__ __forceinline__ bool operator()(int k, u64& row) const {
        int sl = slot[k], local = (int)id[k] - rank * n_local;
        bool here = sl >= 0 && (unsigned)local < (unsigned)n_local;
        row = here ? (u64)src_offsets[(local + shared_groups) * (n_ranks + 1) + s] + sl : 0;
        return here;
    }
};
__device__ __forceinline__ EpHeaderRows ep_header_rows(const u8* msg, MsgLayout m, int s, const u32* src_offsets,
                                                       int n_local, int n_ranks, int rank, int shared_groups) {
    return {(const int*)(msg + m.slots_off), (const u16*)(msg + m.ids_off), src_offsets, s, n_local, n_ranks, rank,
            shared_groups};
}

// Slots k0 .. k0 + 31 of message `j` from rank `s` (`rows`: where they are here), a lane each
// (k0 + lane), by the calling warp: the lane's row here (`row`, and, by a `writer` warp with part
// 0, every slot's row, -1: not here, into `msg_rows`, null: none); returns the ballot of this
// part's rows: of the rows here, the i-th over the message (`n` before this chunk, which it
// advances) is part i % parts's.
template <typename Rows>
__device__ __forceinline__ unsigned ep_chunk_rows(const Rows& rows, int k0, int s, u32 j, int part, int parts, int& n,
                                                  int max_tokens, MsgLayout m, int* msg_rows, bool writer, u64& row) {
    const unsigned lane = threadIdx.x & 31, below = (1u << lane) - 1u;
    const int k = k0 + lane;
    bool here = false;
    row = 0;
    if (k < m.top_k) {
        here = rows(k, row);
        if (writer && msg_rows && part == 0) msg_rows[((u64)s * max_tokens + j) * m.top_k + k] = here ? (int)row : -1;
    }
    const unsigned mask = __ballot_sync(0xffffffffu, here);
    const unsigned mine =
        parts == 1 ? mask : __ballot_sync(0xffffffffu, here && (n + __popc(mask & below)) % parts == part);
    n += __popc(mask);
    return mine;
}

// This rank's rows of message `j` from rank `s` (`rows`: EpHeaderRows, or the send's
// EpOwnRowsFound), found by the calling warp with a ballot per 32 slots (every real row has
// exactly one). Of those, the i-th goes into `r` when i % parts == part (the rest are other
// blocks'); with part 0 also every slot's row (-1: not here) into `msg_rows` (null: none), for a
// combine that sends them back in token order.
template <typename Rows>
__device__ void ep_message_rows(const Rows& rows, int s, u32 j, int part, int parts, int max_tokens, MsgLayout m,
                                u8* recv_tokens, EpRows& r, int* msg_rows) {
    const unsigned lane = threadIdx.x & 31, below = (1u << lane) - 1u;
    int n = 0, n_mine = 0;
    for (int k0 = 0; k0 < m.top_k; k0 += 32) {
        u64 row;
        unsigned mine = ep_chunk_rows(rows, k0, s, j, part, parts, n, max_tokens, m, msg_rows, true, row);
        if (mine >> lane & 1) {
            int i = n_mine + __popc(mine & below);
            r.dst[i] = recv_tokens + row * m.payload_bytes;
            r.row[i] = row;
            r.slot[i] = k0 + lane;
        }
        n_mine += __popc(mine);
    }
    if (lane == 0) r.n = n_mine;
}

// Message `j` from rank `s` (its message count word `nmsg_s`), by the calling warp (the
// overlapped copy-out's): this rank's rows of it (ep_message_rows: part `part` of `parts`), found
// in the same round of loads as the payload's first pieces (ep_load_message), then the payload
// read once and written to each. From an overlapped sender it first waits for the message's mark;
// returns false when it did not come, true at once when the mark says its sender placed the rows
// itself. `WarpBatch`: ep_copy_rows'.
template <bool Placed = true, int WarpBatch = 8>
__device__ bool ep_warp_copy_message(int s, u32 j, int part, int parts, u32 nmsg_s, EpLanding landing,
                                     const u8* recv, const u32* src_offsets, u64 rows, int n_local, int n_ranks,
                                     int rank, int shared_groups, int max_tokens, int hidden, int fmt, MsgLayout m,
                                     u8* recv_tokens, u8* recv_scales, int* src_info, int* row_src, u32* status,
                                     EpRows& r, int* msg_rows = nullptr) {
    const u8* msg = recv + ep_recv_offset(s, max_tokens, j, m.bytes);
#ifdef EP_TRACE
    u64 t_begin = ep_globaltimer();
#endif
    auto got = ep_message_ready<Placed>(msg, s, nmsg_s, m, landing, n_local, n_ranks, status);
    if (!got) return false;
#ifdef EP_TRACE
    u64 t_ready = ep_globaltimer();
#endif
    if (Placed && got == EP_MSG_PLACED) {
        __syncwarp(); // as below: the next message's ep_message_ready after it
        return true;
    }
    EpMsgHead h = ep_load_message<true>(msg, hidden, fmt, m);
    ep_message_rows(ep_header_rows(msg, m, s, src_offsets, n_local, n_ranks, rank, shared_groups), s, j, part, parts,
                    max_tokens, m, recv_tokens, r, msg_rows);
    __syncwarp();
    if (r.n > 0) ep_copy_rows<true, false, WarpBatch>(r, h, rows, msg, s, hidden, fmt, m, recv_scales, src_info, row_src);
    __syncwarp(); // `r` is the next message's
#ifdef EP_TRACE
    // "msg" (id: sender * max_tokens + message): taken, its mark seen, its rows written.
    if ((threadIdx.x & 31) == 0) EP_TRACE_WORK("msg", rank, (u64)s * max_tokens + j, t_begin, t_ready, ep_globaltimer());
#endif
    return true;
}

// The calling thread's pieces of message `msg`'s payload (its first ones in `h`: ep_load_message,
// by the block) into output row `row` of `rows`, and its share of the row's scales. No barrier:
// each thread stores only what it loaded. (Through ep_copy_to, the same stores read 0.6-0.8 us
// slower at 256-512 tokens FP8 one rank alone and 1.5 faster two ranks sharing 512 BF16, one
// H200, v44 review calls 8-10: code layout, not work; this form is the one-rank-per-GPU path's.)
__device__ __forceinline__ void ep_block_store_row(const u8* msg, const EpMsgHead& h, u64 row, u64 rows, int hidden,
                                                   int fmt, MsgLayout m, u8* recv_tokens, u8* recv_scales) {
    const u64 pb = m.payload_bytes, n16 = pb / 16;
    const unsigned id = threadIdx.x, size = blockDim.x;
    u8* dst = recv_tokens + row * pb;
    if (ep_aligned16(msg, pb) && (u64)recv_tokens % 16 == 0) {
#pragma unroll
        for (int u = 0; u < EP_COPY_FIRST; u++)
            if (id + u * size < n16) ((uint4*)dst)[id + u * size] = h.piece[u];
        for (u64 i = id + EP_COPY_FIRST * size; i < n16; i += size) ((uint4*)dst)[i] = ((const uint4*)msg)[i];
    } else {
        for (u64 i = id; i < pb / 4; i += size) ((u32*)dst)[i] = ((const u32*)msg)[i];
    }
    ep_place_scales<false>(fmt, hidden, rows, row, msg + m.scales_off, recv_scales, &h.scale);
}

// A message as ep_warp_copy_message copies it, by the block with no barrier: each warp waits for
// the mark itself, finds the
// rows itself (from the header, loaded in the same round as its threads' payload pieces) and
// stores those pieces to each row; warp 0's lanes write the rows' source info (and `msg_rows`),
// a row each. The block form passed a barrier after the mark and one after the rows, and its
// thread 0 wrote every row's source info after its own stores: at 1 token ~2.1 us from the mark
// to the rows copied in the single-launch dispatch (one H200, v43's trace). A warp whose mark did
// not come returns false while others may have copied (the host copies the message again).
// Past each thread's first pieces (hidden > 8192 BF16) the payload is read again per row
// (ep_block_store_row).
template <bool Placed>
__device__ bool ep_block_copy_message(int s, u32 j, int part, int parts, u32 nmsg_s, EpLanding landing,
                                      const u8* recv, const u32* src_offsets, u64 rows, int n_local, int n_ranks,
                                      int rank, int shared_groups, int max_tokens, int hidden, int fmt, MsgLayout m,
                                      u8* recv_tokens, u8* recv_scales, int* src_info, int* row_src, u32* status,
                                      int* msg_rows = nullptr) {
    const u8* msg = recv + ep_recv_offset(s, max_tokens, j, m.bytes);
    const unsigned lane = threadIdx.x & 31;
#ifdef EP_TRACE
    u64 t_begin = ep_globaltimer();
#endif
    auto got = ep_message_ready<Placed>(msg, s, nmsg_s, m, landing, n_local, n_ranks, status);
    if (!got) return false;
    if (Placed && got == EP_MSG_PLACED) return true;
#ifdef EP_TRACE
    u64 t_ready = ep_globaltimer();
#endif
    EpMsgHead h = ep_load_message<false>(msg, hidden, fmt, m);
    int n = 0; // rows here before this chunk of slots, for the parts
    for (int k0 = 0; k0 < m.top_k; k0 += 32) {
        u64 row;
        unsigned mine = ep_chunk_rows(ep_header_rows(msg, m, s, src_offsets, n_local, n_ranks, rank, shared_groups), k0,
                                      s, j, part, parts, n, max_tokens, m, msg_rows, threadIdx.x < 32, row);
        if (threadIdx.x == 0) EP_STAMP_FIRST(27);
        if (threadIdx.x < 32 && (mine >> lane & 1)) {
            src_info[2 * row] = h.token;
            src_info[2 * row + 1] = k0 + lane;
            row_src[row] = s;
        }
        for (unsigned left = mine; left; left &= left - 1) {
            ep_block_store_row(msg, h, __shfl_sync(0xffffffffu, row, __ffs(left) - 1), rows, hidden, fmt, m,
                               recv_tokens, recv_scales);
            if (threadIdx.x == 0) EP_STAMP_FIRST(28);
        }
    }
#ifdef EP_TRACE
    if (threadIdx.x == 0) EP_TRACE_WORK("msg", rank, (u64)s * max_tokens + j, t_begin, t_ready, ep_globaltimer());
#endif
    return true;
}

// This rank's rows of the token's own message into `own` (none when it has no message here), by
// the warp that loaded `found`'s starts; `total`: the output's rows, loaded with them.
__device__ void ep_find_own_rows(const EpRoute& r, int top_k, int rank, const EpOwnRowsFound& found, u32 total,
                                 int max_tokens, MsgLayout m, u8* recv_tokens, EpOwnRows& own, int* msg_rows) {
    int k = 0;
    while (k < top_k && !(r.carries[k] && r.dest[k] == rank)) k++;
    if (k == top_k) {
        if ((threadIdx.x & 31) == 0) own.rows.n = 0;
        return;
    }
    if ((threadIdx.x & 31) == 0) own.total = total;
    ep_message_rows(found, rank, r.msg_at[k], 0, 1, max_tokens, m, recv_tokens, own.rows, msg_rows);
}

// The rows ep_find_own_rows found, written by the block from the message in shared memory (token
// t's, encoded). Every thread calls it, past a barrier after ep_find_own_rows.
__device__ void ep_place_own_rows(const EpOwnRows& own, int t, int rank, int hidden, int fmt, MsgLayout m,
                                  u8* recv_scales, int* src_info, int* row_src) {
    if (own.rows.n == 0) return;
    EpMsgHead h;
    h.token = t;
    ep_copy_rows<false, true>(own.rows, h, own.total, (const u8*)smem_u4, rank, hidden, fmt, m, recv_scales,
                              src_info, row_src);
}

// Padding item `item` of n_groups * (row_multiple - 1): group g = item % n_groups's i-th padding
// row, i = item / n_groups, which it has when the row is before the next group's start
// (`src_offsets` [n_groups, n_ranks + 1]: column n_ranks is where its padding starts). Returns
// the row, or -1 when the group has fewer padding rows. Groups vary fastest, so that items dealt
// in turn give every taker a mix of first and last padding rows: with the padding index fastest,
// three takers each got one index of every group (FP8: 3 per group), and the one with the first
// rows, which nearly every group has, wrote three times the rows of the one with the last.
__device__ __forceinline__ long long ep_padding_row(u32 item, int n_groups, const u32* src_offsets,
                                                    const u32* row_offsets, int n_ranks) {
    u32 g = item % (u32)n_groups;
    u64 row = (u64)src_offsets[g * (n_ranks + 1) + n_ranks] + item / (u32)n_groups;
    return row < row_offsets[g + 1] ? (long long)row : -1;
}

// A padding row, by the block or (Warp) the calling warp: zero payload and scales, src_info
// (-1, -1), no source rank.
template <bool Warp>
__device__ void ep_pad_row(u64 row, u64 rows, int hidden, int fmt, MsgLayout m, u8* recv_tokens, u8* recv_scales,
                           int* src_info, int* row_src) {
    u8* out = recv_tokens + row * m.payload_bytes;
    if (ep_aligned16(out, m.payload_bytes))
        for (int i = ep_team_id<Warp>(); i < m.payload_bytes / 16; i += ep_team_size<Warp>())
            ((uint4*)out)[i] = make_uint4(0, 0, 0, 0);
    else
        for (int i = ep_team_id<Warp>(); i < m.payload_bytes / 4; i += ep_team_size<Warp>()) ((u32*)out)[i] = 0;
    ep_place_scales<Warp>(fmt, hidden, rows, row, nullptr, recv_scales);
    if (ep_team_id<Warp>() == 0) { src_info[2 * row] = -1; src_info[2 * row + 1] = -1; row_src[row] = -1; }
}

// Row `first + i` of the fused shared expert (group 0): this rank's token shared_start + i, from
// `shared_msgs` (slot -1, no source rank: these rows never travel back), by the block's warps each
// on their own (as ep_block_copy_message). The rank's own message count word `nm_own` says whether
// it published early; then, as any message from such a sender, the shared-expert message is
// awaited for its mark (in the single-launch dispatch the block that sends the token may still be
// writing it). Returns false when the mark did not come (to the warp that waited).
__device__ bool ep_copy_shared_row(u64 first, u64 i, u64 rows, const u8* shared_msgs, u32 nm_own, EpLanding landing,
                                   int rank, int n_local, int n_ranks, int hidden, int fmt, MsgLayout m,
                                   u8* recv_tokens, u8* recv_scales, int* src_info, int* row_src, u32* status) {
    const u8* msg = shared_msgs + i * m.bytes;
    if (!ep_message_ready<false>(msg, rank, nm_own, m, landing, n_local, n_ranks, status)) return false;
    EpMsgHead h = ep_load_message<false>(msg, hidden, fmt, m);
    const u64 row = first + i;
    if (threadIdx.x == 0) {
        src_info[2 * row] = h.token;
        src_info[2 * row + 1] = -1;
        row_src[row] = -1;
    }
    ep_block_store_row(msg, h, row, rows, hidden, fmt, m, recv_tokens, recv_scales);
    return true;
}

// The copy-out into the per-expert layout, launched with the wait (it does nothing unless the
// wait completed: `status`), so that every byte of the output up to the row count is written
// without a host round trip. Three kinds of blocks:
// - `per_sender` per sending rank for its messages, each block taking message j, j + per_sender,
//   ... of its sender (those past the sender's message count exit). The host gives max_tokens
//   where the world is built for the round's tokens (a block per possible message), fewer where
//   it is built for more (comm/dispatch.rs, `copy_out_per_sender`);
// - n_groups * (row_multiple - 1) for padding rows;
// - max_tokens for the fused shared expert's rows.
// Each message is read from memory once (its rows are far apart in the output, so a block per
// row re-read it per row: 470 MB read instead of 117 MB at 4096 tokens). Block b does the work of
// block b + first_block (an overlapped round launches only the padding and shared-expert blocks
// here; ep_dispatch_copy_messages did the messages). A message from an overlapped sender is
// awaited for up to `slice_ns` (ep_message_landed). Parameters recv .. slice_ns are
// ep_dispatch_copy_messages', in its order (comm/dispatch.rs passes that slice). Launched with
// 128 threads (comm/mod.rs, THREADS); held to 48 registers, ten blocks an SM, as before its loop
// over a sender's messages (which took it to 56).
extern "C" __global__ void __launch_bounds__(128, 10)
        ep_dispatch_copy_out(const u8* recv, const u32* nmsg, const u32* row_offsets, const u32* src_offsets,
                             int n_local, int n_ranks, int rank, int skip_a2a, int shared_groups, int max_tokens,
                             int hidden, int fmt, MsgLayout m, u8* recv_tokens, u8* recv_scales, int* src_info,
                             int* row_src, int* msg_rows, u32* status, u32 seq, u64 slice_ns, const u8* shared_msgs,
                             int row_multiple, u64 first_block, u32 per_sender) {
    ep_await_prior_grid(); // launched chained after the wait (comm/dispatch.rs)
    int n_groups = n_local + shared_groups;
    u32 done = status[0];
    u64 rows = row_offsets[n_groups];
    if (done != EP_OK) return;
    u64 b = blockIdx.x + first_block;
    u64 message_blocks = (u64)n_ranks * per_sender;
    if (b < message_blocks) {
        int s = b / per_sender;
        u32 nm = nmsg[s], count = ep_messages_from(nm, s, rank, skip_a2a, max_tokens);
#pragma unroll 1
        for (u32 j = b % per_sender; j < count; j += per_sender)
            if (!ep_block_copy_message<true>(s, j, 0, 1, nm, EpLanding{seq, slice_ns}, recv, src_offsets, rows,
                                             n_local, n_ranks, rank, shared_groups, max_tokens, hidden, fmt, m,
                                             recv_tokens, recv_scales, src_info, row_src, status, msg_rows))
                return;
        return;
    }
    b -= message_blocks;
    u64 padding_blocks = (u64)n_groups * (row_multiple - 1);
    if (b < padding_blocks) {
        long long row = ep_padding_row((u32)b, n_groups, src_offsets, row_offsets, n_ranks);
        if (row >= 0) ep_pad_row<false>(row, rows, hidden, fmt, m, recv_tokens, recv_scales, src_info, row_src);
        return;
    }
    b -= padding_blocks;
    if (shared_groups == 0) return;
    u64 first = src_offsets[rank], end = src_offsets[rank + 1];
    if (first + b < end)
        ep_copy_shared_row(first, b, rows, shared_msgs, nmsg[rank], EpLanding{seq, slice_ns}, rank, n_local, n_ranks,
                           hidden, fmt, m, recv_tokens, recv_scales, src_info, row_src, status);
}

// The next item of a walk shared by every warp that takes from `claimed` (one atomic by lane 0).
__device__ __forceinline__ u32 ep_warp_claim(u32* claimed) {
    u32 w = 0;
    if ((threadIdx.x & 31) == 0) w = atomicAdd(claimed, 1u);
    return __shfl_sync(0xffffffffu, w, 0);
}

// Messages first, first + step, ... of a walk over every received message in the order they are
// sent, every sender's j-th message before any j+1-th (item w: sender w % n_ranks, its message
// w / n_ranks), each by the block (ep_block_copy_message) or (Warp) the calling warp
// (ep_warp_copy_message). With `Spread` (blocks, at the smallest sizes) a message's rows are cut
// into parts when there are blocks to spare (step / messages, up to top_k): one block's stores to
// a message's rows took ~2 us at 1 token, where each SM has only so many stores in flight. With
// `Claimed` (warps) each warp takes the walk's next item from the count `claimed` instead, so that
// grids launched apart share the walk (the overlapped copy-out and its helpers after the send;
// `first` and `step` unused). `scratch`: the calling warp's rows (Warp; null for a block).
// `busy`: of the `step` blocks, how many are still sending (the single-launch dispatch's, which
// walk from `first` rotated past them): Spread cuts a message only among the others.
// `WarpBatch`: ep_copy_rows'. Returns false when a message's mark did not come.
template <bool Warp, bool Spread = false, bool Placed = true, bool Claimed = false, int WarpBatch = 8>
__device__ bool ep_copy_messages(u32 first, u32 step, const u8* recv, const u32* nmsg, const u32* src_offsets,
                                 u64 rows, int n_local, int n_ranks, int rank, int skip_a2a, int shared_groups,
                                 int max_tokens, int hidden, int fmt, MsgLayout m, u8* recv_tokens, u8* recv_scales,
                                 int* src_info, int* row_src, u32* status, EpLanding landing, EpRows* scratch,
                                 int* msg_rows = nullptr, u32* claimed = nullptr, u32 busy = 0) {
    if (threadIdx.x == 0) EP_STAMP_FIRST(24);
    // In 32 bits (items: messages * parts <= n_ranks * max_tokens * top_k), the loop rolled: the
    // 64-bit divisions' code and 7 KB of the loop unrolled were on the receivers' path between the
    // counts and the first mark's poll.
    u32 most = 0;
#pragma unroll 1
    for (int s = 0; s < n_ranks; s++) most = max(most, ep_messages_from(nmsg[s], s, rank, skip_a2a, max_tokens));
    const u32 ranks = n_ranks, messages = most * ranks, spare = step - min(busy, step);
    const u32 parts = !Spread || messages == 0 ? 1u : max(1u, min((u32)m.top_k, spare / messages));
    static_assert(!Claimed || (Warp && !Spread), "a message is taken by a warp, whole");
    for (u32 w = Claimed ? ep_warp_claim(claimed) : first; w < messages * parts;
         w = Claimed ? ep_warp_claim(claimed) : w + step) {
        u32 v = Spread ? w / parts : w;
        int s = v % ranks, part = Spread ? w % parts : 0;
        u32 j = v / ranks, nm = nmsg[s];
        if (j >= ep_messages_from(nm, s, rank, skip_a2a, max_tokens)) continue;
        bool copied;
        if constexpr (Warp)
            copied = ep_warp_copy_message<Placed, WarpBatch>(s, j, part, parts, nm, landing, recv, src_offsets, rows,
                                                             n_local, n_ranks, rank, shared_groups, max_tokens, hidden,
                                                             fmt, m, recv_tokens, recv_scales, src_info, row_src,
                                                             status, *scratch, msg_rows);
        else
            copied = ep_block_copy_message<Placed>(s, j, part, parts, nm, landing, recv, src_offsets, rows, n_local,
                                                   n_ranks, rank, shared_groups, max_tokens, hidden, fmt, m,
                                                   recv_tokens, recv_scales, src_info, row_src, status, msg_rows);
        if (!copied) return false;
    }
    return true;
}

// Up to this many warps in a block of ep_dispatch_copy_messages.
#define EP_COPY_WARPS 16

// The messages of an overlapped round (above), copied out while they land: launched on a second
// stream beside ep_dispatch_send, after ep_dispatch_wait has laid out the groups from the early
// counts. A persistent grid (comm/dispatch.rs, overlap_copy_grid: a share of the SMs, its blocks the size of
// the send's, so that one takes the registers a retiring send block frees) gives each warp a message
// at a time (a block per message left each SM one message in flight: a chain of round trips per
// message, 3x slower than the send), in the order they are sent, waiting for each one's mark: each
// warp takes the next message from the count `layout_seq[1]` (ep_copy_messages, Claimed). While
// the send runs most warps wait, holding registers the send could use, so the grid is small; the
// same kernel is launched again after the send on the main stream (`helper`), on every SM, and
// takes what is left. A helper is ordered after the send, not after ep_dispatch_wait: it first
// waits for the layout (`layout_seq[0]` = seq), up to the slice, else leaves the messages to the
// copy-out beside the send, which takes every one that no helper took. The padding and
// shared-expert rows follow on the main stream (ep_dispatch_copy_out with first_block past the
// messages).
template <int WarpBatch>
__device__ __forceinline__ void ep_dispatch_copy_messages_body(
        const u8* recv, const u32* nmsg, const u32* row_offsets, const u32* src_offsets, int n_local, int n_ranks,
        int rank, int skip_a2a, int shared_groups, int max_tokens, int hidden, int fmt, MsgLayout m, u8* recv_tokens,
        u8* recv_scales, int* src_info, int* row_src, int* msg_rows, u32* status, u32 seq, u64 slice_ns,
        u32* layout_seq, int helper) {
    __shared__ EpRows scratch[EP_COPY_WARPS];
    __shared__ bool laid_out;
    if (helper) {
        if (threadIdx.x == 0) laid_out = ep_layout_released(layout_seq, seq, slice_ns, status);
        __syncthreads();
        if (!laid_out) return;
    }
    if (status[0] != EP_OK) return;
    EP_STAMPS
    u64 rows = row_offsets[n_local + shared_groups];
    int warp = threadIdx.x >> 5;
    ep_copy_messages<true, false, true, true, WarpBatch>(
        0, 0, recv, nmsg, src_offsets, rows, n_local, n_ranks, rank, skip_a2a, shared_groups, max_tokens, hidden, fmt,
        m, recv_tokens, recv_scales, src_info, row_src, status, EpLanding{seq, slice_ns}, &scratch[warp], msg_rows,
        layout_seq + 1);
#ifdef EP_TRACE
    __syncthreads();
    EP_STAMP(2);
    EP_STAMPS_PRINT(helper ? "helper" : "copy", rank, 0);
#endif
}

// ep_dispatch_copy_messages_body's kernel: 8 pieces a lane at a time, 64 registers a thread.
extern "C" __global__ void __launch_bounds__(512, 2)
    ep_dispatch_copy_messages(const u8* recv, const u32* nmsg, const u32* row_offsets, const u32* src_offsets,
                              int n_local, int n_ranks, int rank, int skip_a2a, int shared_groups, int max_tokens,
                              int hidden, int fmt, MsgLayout m, u8* recv_tokens, u8* recv_scales, int* src_info,
                              int* row_src, int* msg_rows, u32* status, u32 seq, u64 slice_ns, u32* layout_seq,
                              int helper) {
    ep_dispatch_copy_messages_body<8>(recv, nmsg, row_offsets, src_offsets, n_local, n_ranks, rank, skip_a2a,
                                      shared_groups, max_tokens, hidden, fmt, m, recv_tokens, recv_scales, src_info,
                                      row_src, msg_rows, status, seq, slice_ns, layout_seq, helper);
}

// The lean copy-out, beside the lean send (ep_dispatch_send_lean): ep_dispatch_copy_messages at 48
// registers a thread (__maxnreg__, which cannot be combined with launch bounds; launched with up to
// 512 threads), its warps copying 2 pieces a lane at a time (24 bytes of spills; 4 spilled 56, 8
// at 64 registers 40). A 512-thread block then fits an SM beside two lean send blocks: 24,576 +
// 2 x 20,480 = the 65,536 registers of sm_90. The same parameters.
extern "C" __global__ void __maxnreg__(48)
    ep_dispatch_copy_lean(const u8* recv, const u32* nmsg, const u32* row_offsets, const u32* src_offsets,
                              int n_local, int n_ranks, int rank, int skip_a2a, int shared_groups, int max_tokens,
                              int hidden, int fmt, MsgLayout m, u8* recv_tokens, u8* recv_scales, int* src_info,
                              int* row_src, int* msg_rows, u32* status, u32 seq, u64 slice_ns, u32* layout_seq,
                              int helper) {
    ep_dispatch_copy_messages_body<2>(recv, nmsg, row_offsets, src_offsets, n_local, n_ranks, rank, skip_a2a,
                                      shared_groups, max_tokens, hidden, fmt, m, recv_tokens, recv_scales, src_info,
                                      row_src, msg_rows, status, seq, slice_ns, layout_seq, helper);
}

// ---- the single-launch dispatch (decode sizes) ------------------------------------------------
//
// At decode sizes every kernel of the path above does almost no work, and the chain of dependent
// memory and NVLink round trips is the phase's time. ep_dispatch_single does the whole phase in
// one launch of a persistent grid whose blocks are all resident (comm/dispatch.rs sizes it from the
// occupancy), with the counts off the payload's path, as an overlapped round has them: the last
// block counts the round's rows and publishes the counts first (EP_NMSG_EARLY), while the others
// each find their tokens' slots themselves, send them and mark each message landed. Every block
// then waits for every count, lays out the groups and writes its share of the output, awaiting
// each message's mark. Same wire messages, counts and outputs as the paths above, so ranks on
// any path talk to each other. (Up to v14 the counts went after the payload: a ticket after
// every block's stores, then the last block counted and published, ~6 us more at 1 token.)

// Ids of tokens first .. first + n and the rank of each (-1: masked), staged in shared memory by
// the whole block (n * top_k <= EP_STAGE_INTS): one round of coalesced loads, and each division
// done once (an integer division is a long instruction sequence on the GPU; in the loops below it
// cost ~8 us a token at 128 tokens). Returns with a barrier passed.
#define EP_STAGE_INTS 2048
__shared__ __align__(16) int ep_stage[EP_STAGE_INTS], ep_stage_rank[EP_STAGE_INTS];
__device__ void ep_stage_ids(const int* ids, int first, int n, int top_k, int n_local) {
    __syncthreads(); // the previous chunk is read
    for (int i = threadIdx.x; i < n * top_k; i += blockDim.x) {
        int x = ids[(u64)first * top_k + i];
        ep_stage[i] = x;
        ep_stage_rank[i] = x >= 0 ? x / n_local : -1;
    }
    __syncthreads();
}

// Slot k of a staged token (`row`, `row_rank`: its ids and their ranks in ep_stage): whether it
// sends (its expert is routed here and no earlier slot names it) and whether it carries the
// token's message to its rank (it sends and no earlier slot is at that rank), as ep_assign_slots
// and ep_route_carries decide them.
__device__ __forceinline__ void ep_staged_slot(const int* row, const int* row_rank, int k, int rank, int skip_a2a,
                                               bool& sends, bool& carries) {
    int id = row[k], p = row_rank[k];
    sends = id >= 0 && (!skip_a2a || p == rank);
    carries = sends;
    for (int j = 0; j < k; j++) {
        sends = sends && row[j] != id;
        carries = carries && row_rank[j] != p;
    }
}

// Whether staged token u (ep_stage) names expert `id` and whether it reaches rank `dest`, ORed
// into the flags: 16-byte loads when a token's ids are whole 16-byte pieces.
__device__ __forceinline__ void ep_staged_token_meets(int u, int top_k, int id, int dest, bool& named,
                                                      bool& reached) {
    const int* x = ep_stage + u * top_k;
    const int* xr = ep_stage_rank + u * top_k;
    if (top_k % 4 == 0) {
#pragma unroll 2
        for (int j = 0; j < top_k / 4; j++) {
            int4 a = ((const int4*)x)[j], b = ((const int4*)xr)[j];
            named = named || a.x == id || a.y == id || a.z == id || a.w == id;
            reached = reached || b.x == dest || b.y == dest || b.z == dest || b.w == dest;
        }
    } else {
        for (int j = 0; j < top_k; j++) {
            named = named || x[j] == id;
            reached = reached || xr[j] == dest;
        }
    }
}

// Token t's route, worked out by its own block from the ids (no ep_assign_slots): a slot's row
// slot is how many earlier tokens name its expert, a carrying slot's message slot how many
// earlier tokens reach its rank: the positions ep_assign_slots gives (token order). Returns slot
// threadIdx.x's rank's receive buffer (0: none), for ep_send_token's `peer`.
__device__ u64 ep_own_route(EpRoute& r, int t, const int* ids, int top_k, int n_local, int rank, int skip_a2a,
                            const u64* recv_ptrs) {
    __shared__ u32 names[EP_MAX_TOP_K], reaches[EP_MAX_TOP_K];
    // The sending slots, compacted: expert, its rank, its slot k.
    __shared__ int s_id[EP_MAX_TOP_K], s_rank[EP_MAX_TOP_K], s_k[EP_MAX_TOP_K];
    __shared__ int n_send;
    // The token's ids, staged with the earlier tokens' when they fit (one round of loads).
    int chunk = EP_STAGE_INTS / top_k;
    bool all_staged = t < chunk;
    ep_stage_ids(ids, all_staged ? 0 : t, all_staged ? t + 1 : 1, top_k, n_local);
    const int* own = ep_stage + (all_staged ? t * top_k : 0);
    const int* own_rank = ep_stage_rank + (all_staged ? t * top_k : 0);
    if (threadIdx.x == 0) EP_STAMP_FIRST(11);
    // Slot threadIdx.x's rank's receive buffer, loaded now and read by the same thread in
    // ep_send_token: loaded there, after the route, it was a round trip on the sending block's
    // path (~0.5 us at 128 tokens, one H200, v46 trace).
    const u64 peer = threadIdx.x < top_k && own_rank[threadIdx.x] >= 0 ? recv_ptrs[own_rank[threadIdx.x]] : 0;
    for (int k = threadIdx.x; k < top_k; k += blockDim.x) {
        bool sends, carries;
        ep_staged_slot(own, own_rank, k, rank, skip_a2a, sends, carries);
        r.id[k] = own[k];
        r.dest[k] = own_rank[k];
        r.slot[k] = sends ? 0 : -1;
        r.msg_at[k] = sends ? 0 : -1;
        r.carries[k] = carries;
        names[k] = 0;
        reaches[k] = 0;
    }
    __syncthreads();
    if (threadIdx.x == 0) EP_STAMP_FIRST(16);
    // The first token has no earlier tokens: its slots are all 0 as they stand (at 1 token the
    // compaction and the count below were ~0.8 us of the sending block's path, three barriers).
    if (t == 0) return peer;
    // Warp 0 compacts the sending slots (a ballot per 32 slots).
    int lane = threadIdx.x & 31;
    if (threadIdx.x < 32) {
        int n = 0;
        for (int k0 = 0; k0 < top_k; k0 += 32) {
            int k = k0 + lane;
            bool sends = k < top_k && r.slot[k] >= 0;
            u32 ballot = __ballot_sync(0xffffffffu, sends);
            if (sends) {
                int i = n + __popc(ballot & ((1u << lane) - 1));
                s_id[i] = r.id[k];
                s_rank[i] = r.dest[k];
                s_k[i] = k;
            }
            n += __popc(ballot);
        }
        if (lane == 0) n_send = n;
    }
    __syncthreads();
    if (threadIdx.x == 0) EP_STAMP_FIRST(17);
    int ns = n_send;
    // Earlier tokens: a thread per (sending slot i, earlier token u), slot-major in whole warps,
    // so that every warp counts for one slot: a ballot for "names the slot's expert", one for
    // "reaches its rank" (a routed expert there; the slot's own expert is routed, so any expert
    // of that rank is), one shared atomic each. Up to v16 a thread took an earlier token against
    // every sending slot: 64 dependent steps a thread, ~4.5 us whatever the number of tokens.
    for (int c0 = 0; c0 < t; c0 += chunk) {
        int nc = min(chunk, t - c0);
        if (!all_staged) ep_stage_ids(ids, c0, nc, top_k, n_local);
        int span = (nc + 31) & ~31;
        for (int p = threadIdx.x; p < ns * span; p += blockDim.x) {
            int i = p / span, u = p - i * span;
            bool named = false, reached = false;
            if (u < nc) ep_staged_token_meets(u, top_k, s_id[i], s_rank[i], named, reached);
            u32 a = __popc(__ballot_sync(0xffffffffu, named)), b = __popc(__ballot_sync(0xffffffffu, reached));
            if (lane == 0 && a) atomicAdd(&names[s_k[i]], a);
            if (lane == 0 && b) atomicAdd(&reaches[s_k[i]], b);
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) EP_STAMP_FIRST(18);
    for (int k = threadIdx.x; k < top_k; k += blockDim.x) {
        bool sends = r.slot[k] >= 0;
        r.msg_at[k] = sends ? (int)reaches[k] : -1;
        if (sends) r.slot[k] = (int)names[k];
    }
    __syncthreads();
    if (threadIdx.x == 0) EP_STAMP_FIRST(19);
    return peer;
}

// The totals ep_assign_slots leaves, counted by one block in `hist` (shared memory): rows sent to
// each expert (hist[0 .. n_experts), also stored in `sent`, which the combine checks its counts
// against) and messages to each rank (hist[n_experts ..), which only the publish reads).
__device__ void ep_count_sent(const int* ids, int n_tokens, int top_k, int n_experts, int n_local, int n_ranks,
                              int rank, int skip_a2a, u32* hist, u64* sent) {
    for (int i = threadIdx.x; i < n_experts + n_ranks; i += blockDim.x) hist[i] = 0;
    int chunk = EP_STAGE_INTS / top_k;
    for (int c0 = 0; c0 < n_tokens; c0 += chunk) {
        int nc = min(chunk, n_tokens - c0);
        ep_stage_ids(ids, c0, nc, top_k, n_local);
        // A thread per (token, slot): a thread per token took 8 slots' checks in a row, a chain
        // of dependent steps as long as the whole count at decode sizes.
        for (int q = threadIdx.x; q < nc * top_k; q += blockDim.x) {
            int u = q / top_k, k = q - u * top_k;
            const int* row = ep_stage + u * top_k;
            const int* row_rank = ep_stage_rank + u * top_k;
            bool sends, carries;
            ep_staged_slot(row, row_rank, k, rank, skip_a2a, sends, carries);
            if (sends) atomicAdd(&hist[row[k]], 1u);
            if (carries) atomicAdd(&hist[n_experts + row_rank[k]], 1u);
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < n_experts; e += blockDim.x) sent[e] = hist[e];
    __syncthreads();
}

// Block b of `blocks`' share of a single-launch dispatch's output, once the groups are laid out
// (`start`, `src_off` from the counts `got`): block 0 stores the layout; padding rows, a row per
// warp over the blocks not still sending, first (they wait for nothing; a group per warp after
// the messages made the blocks with padding the last by ~3 us at 128 tokens FP8); then the
// messages, a block each in the order they are sent (ep_copy_messages); the shared expert's rows,
// a block each, its warps each on their own (ep_block_copy_message, ep_copy_shared_row). A
// message (or shared-expert message) is awaited for its mark; when one does not come the warp
// stops there (the status says EP_MESSAGES_PENDING and the host launches the copy-out again).
// (A warp per message when there were more messages than blocks was slower: 32 tokens BF16 30.5
// -> 42.5 us on 2x H200.)
template <bool Spread>
__device__ void ep_single_copy_out(const u64* got, const u32* start, const u32* src_off, u32 b, u32 blocks,
                                   int shared_len, const u8* shared_msgs, int row_multiple, EpLanding landing,
                                   const u8* recv, const u32* nmsg, int n_local, int n_ranks, int rank, int skip_a2a,
                                   int shared_groups, int max_tokens, int hidden, int fmt, MsgLayout m,
                                   u8* recv_tokens, u8* recv_scales, int* src_info, int* row_src, u32* status,
                                   u64* snapshot, u32* row_offsets, u32* src_offsets, u32 busy) {
    int n = n_local * n_ranks, n_groups = n_local + shared_groups;
    u64 rows = start[n_groups];
    if (b == 0) {
        for (int g = threadIdx.x; g <= n_groups; g += blockDim.x) row_offsets[g] = start[g];
        for (int i = threadIdx.x; i < n_groups * (n_ranks + 1); i += blockDim.x) src_offsets[i] = src_off[i];
        for (int i = threadIdx.x; i < n; i += blockDim.x) snapshot[i] = got[i];
    }
    // Padding rows, a warp each, dealt in turn over the blocks not still sending (the `busy` last
    // ones in this walk take none), so that every block has its share: in blocks of items
    // (item = b * warps + warp), at 128 tokens FP8 on one H100 the first third of the grid wrote
    // them all and reached its messages up to 3 us after the rest; and at 1 token the block that
    // sent took its share after its send and was the last to finish by ~1 us. A warp works out
    // its next 32 items at once, a lane each, then writes the rows among them: one item after
    // another (most of them no row: each group's possible padding, 256 groups) was ~1.5 us of a
    // 1-token FP8 dispatch (one H100, v36).
    u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5, pad_blocks = blocks - busy;
    u32 items = b < pad_blocks ? n_groups * (row_multiple - 1) : 0, stride = pad_blocks * warps;
    for (u32 first = warp * pad_blocks + b; first < items; first += 32 * stride) {
        u32 item = first + lane * stride;
        long long row = item < items ? ep_padding_row(item, n_groups, src_off, start, n_ranks) : -1;
        for (u32 left = __ballot_sync(0xffffffffu, row >= 0); left; left &= left - 1)
            ep_pad_row<true>(__shfl_sync(0xffffffffu, row, __ffs(left) - 1), rows, hidden, fmt, m, recv_tokens,
                             recv_scales, src_info, row_src);
    }
    EP_STAMP(8);
    bool copied = ep_copy_messages<false, Spread, false>(b, blocks, recv, nmsg, src_off, rows, n_local, n_ranks, rank,
                                                         skip_a2a, shared_groups, max_tokens, hidden, fmt, m,
                                                         recv_tokens, recv_scales, src_info, row_src, status, landing,
                                                         nullptr, nullptr, nullptr, busy);
    if (!copied) return; // (the calling warp's: each copies on its own)
    EP_STAMP(10);
    u64 first = src_off[rank];
    for (int i = b; shared_groups > 0 && i < shared_len; i += blocks)
        if (!ep_copy_shared_row(first, i, rows, shared_msgs, nmsg[rank], landing, rank, n_local, n_ranks, hidden,
                                fmt, m, recv_tokens, recv_scales, src_info, row_src, status))
            return;
}

// The longest a sending block holds its row for the counts (ep_dispatch_single_body, Spread).
#define EP_HOLD_NS 2000

// The whole dispatch inside one node, in one launch (see above): blocks 0 .. gridDim.x - 2 send
// the tokens, the last block counts and publishes (gridDim.x >= 2). Dynamic shared memory: the
// largest of the send's (message + row in f32), the totals' (4 * (n_experts + n_ranks)) and the
// layout's (8 * n + 4 * (n_groups + 1 + n_groups * (n_ranks + 1) + n_ranks): the counts, the
// layout and the message counts), n = n_local * n_ranks.
// `ticket` holds three words; the second counts the sending blocks that have read the counts, which
// the counting block then resets (ep_counts_read, ep_reset_counts_when_read); it takes no share of
// the output. The third is the round whose counts the counting block has published, which Spread's
// sending blocks wait for before their rows' stores (ep_send_token's `hold`).
// `Spread` (ep_dispatch_single_spread, for the smallest sizes, where the grid has blocks to
// spare): a block per (token, destination rank), so that a token's stores to each rank and
// their fence are one block's alone (at 1 token one block took 1.8 us to issue both ranks'
// stores), and a message's rows cut among blocks (ep_copy_messages). A kernel of its own: in
// the same kernel the choice cost 0.5-1.7 us at 128 tokens, where neither applies.
template <bool Spread, int Fmt>
__device__ __forceinline__ void ep_dispatch_single_body(
    const u16* tokens, const float* input_scales, int n_tokens, int hidden, int fmt, const int* ids, int top_k,
    MsgLayout m, const u64* recv_ptrs, int rank, int n_ranks, int n_local, int max_tokens, int shared_start,
    int shared_end, u8* shared_msgs, u32* ticket, u64* sent, int n_experts, int skip_a2a,
    const u64* count_ptrs, u64* counts, u64 slice_ns, int shared_groups, int row_multiple,
    u32* status, u64* snapshot, u32* row_offsets, u32* src_offsets, const u8* recv, u32* nmsg,
    u8* recv_tokens, u8* recv_scales, int* src_info, int* row_src, u32 seq, int ll, int marked) {
    // A kernel for one format: the others' encoders and scale layouts compile out (below), and
    // BF16's padding walk with them (its groups take no padding: format/bf16.rs).
    if (Fmt >= 0) fmt = Fmt;
    if (Fmt == EP_FMT_BF16) row_multiple = 1;
    __shared__ EpRoute route;
    // Stamps (EP_CUDA_TRACE, scripts/trace_summary.py): 11 the token's ids staged, 1 its route,
    // 12 its row here, 13 its message encoded, 14 its stores issued, 2 its messages marked (the
    // counting block: 1 counted, 2 published), 3 the block's tokens sent, 4 every count here and
    // the groups laid out (ep_poll_layout; up to v41 5 was the layout), 5 the message counts kept,
    // 8 padding rows, 9 the first message's mark seen (by warp 0), 10 messages copied, 6
    // copy-out done, 7 counts reset. Sub-steps: 16-19 the route's barriers
    // (ep_own_route), 20 a peer buffer's address loaded, 21 the message encoded, 22 every
    // store issued (ep_mark_landed's barrier), 23 its fence passed; 24 the copy-out's walk
    // begun, 25 a mark's first poll issued,
    // 30 a mark's first poll returned, 27 its rows found by warp 0, 28 thread 0's stores to the
    // first row issued (ep_block_copy_message; the first message each).
    EP_STAMPS
    int senders = gridDim.x - 1;
    bool counter = blockIdx.x == senders;
    if (counter) {
        // (Every rank's count address loaded beside the ids, not in the
        // publish, read level: the count took the 0.25 us the publish saved; one H200, v38.)
        u32* hist = (u32*)smem_u4;
        ep_count_sent(ids, n_tokens, top_k, n_experts, n_local, n_ranks, rank, skip_a2a, hist, sent);
        EP_STAMP(1);
        EP_DELAY(3);
        ep_publish_counts(hist, hist + n_experts, n_experts, n_local, n_ranks, rank, skip_a2a, count_ptrs,
                          ep_nmsg_flags(1, ll, marked));
        __syncthreads(); // every warp's counts stored
        if (threadIdx.x == 0) *(volatile u32*)(ticket + 2) = seq;
        EP_STAMP(2);
    }
    // Spread: each block sends one token to one rank (item i: token i / n_ranks, rank
    // i % n_ranks); otherwise a block sends a token to every rank.
    int items = Spread ? n_tokens * n_ranks : n_tokens;
    for (int i = blockIdx.x; !counter && i < items; i += senders) {
        int t = Spread ? i / n_ranks : i, dest = Spread ? i % n_ranks : -1;
        ep_fetch_row(t, tokens, hidden, fmt, m);
        const u64 peer = ep_own_route(route, t, ids, top_k, n_local, rank, skip_a2a, recv_ptrs);
        if (Spread) ep_route_only_to(route, top_k, dest);
        EP_DELAY(1);
        // The shared expert's message is this rank's own: the block for this rank writes it.
        bool own = dest < 0 || dest == rank;
        if (i == blockIdx.x) EP_STAMP(1);
        // Spread (the smallest sizes): a token's stores wait until the counts are out, at most
        // EP_HOLD_NS. Across NVLink the counts, not the row, set the phase's pace there, and a row's
        // stores and fence going out beside the publish delayed the counts behind them: a sending
        // block held back 1 us made the 1-token BF16 dispatch 0.4-0.8 us faster (2x H200, v41).
        ep_send_token(t, route, input_scales, hidden, top_k, fmt, m, recv_ptrs, rank, n_ranks, max_tokens, nullptr,
                      own ? shared_start : 0, own ? shared_end : 0, shared_msgs, nullptr,
                      Spread ? ticket + 2 : nullptr, seq, EP_HOLD_NS, peer);
        u8* shared_msg = own ? ep_shared_msg(t, shared_start, shared_end, shared_msgs, m) : nullptr;
        ep_mark_landed(route, top_k, m, seq, shared_msg);
        EP_DELAY(2);
        if (i == blockIdx.x) EP_STAMP(2);
        __syncthreads(); // the route and the message in shared memory are the next token's
    }
    __syncthreads();
    EP_STAMP(3);

    int n = n_local * n_ranks, n_groups = n_local + shared_groups;
    // The counting block takes no share of the output: it resets the counts as soon as every
    // sending block has read them. With a share, its reset came after it, ~0.75 us after the
    // rest of the grid had finished at 1 token (one H100, v35).
    if (counter) {
        ep_reset_counts_when_read(ticket + 1, senders, counts, n, rank, n_ranks, skip_a2a, status);
        EP_STAMP(7);
    } else {
        u64* got = (u64*)smem_u4;                        // [n]
        u32* start = (u32*)(got + n);                    // [n_groups + 1]
        u32* src_off = start + n_groups + 1;             // [n_groups, n_ranks + 1]
        u32* nmsg_here = src_off + n_groups * (n_ranks + 1); // [n_ranks]
        int shared_len = shared_end - shared_start;
        u32 outcome = ep_poll_layout(counts, n_local, n_ranks, rank, skip_a2a, slice_ns, max_tokens, got, nullptr,
                                     nmsg_here, shared_groups, shared_len, row_multiple, start, src_off);
        EP_STAMP(4);
        EP_DELAY(4);
        ep_counts_read(outcome, ticket + 1, status);
        if (outcome == EP_OK) {
            // The message counts came with the counts (ep_publish_counts); block 0 keeps them for
            // the combine, which reads them from `nmsg`.
            if (blockIdx.x == 0)
                for (int s = threadIdx.x; s < n_ranks; s += blockDim.x) nmsg[s] = nmsg_here[s];
            EP_STAMP(5);
            EP_DELAY(5);
            // While some sending blocks had no token to send, the copy-out's walk starts past the
            // ones that did (the last to get here, ~1.3 us after the others at 1 token), which take
            // its items only when the others cannot (one H200, one rank alone: 1 token BF16 13.0 ->
            // 12.1 us, 32 tokens FP8 18.2 -> 14.7). When more than half sent, the walk stays as it
            // was (with one rank alone, block b then copies the message it sent): every block waits
            // for the counts alike, and the few that sent nothing were left every padding row (at
            // 128 tokens FP8 on 2x H200, 3 blocks of 131 wrote ~1.4 MB and finished ~11 us after
            // the rest; v40).
            u32 busy = 2 * items <= senders ? items : 0;
            ep_single_copy_out<Spread>(got, start, src_off, (blockIdx.x + senders - busy) % senders, senders,
                                       shared_len, shared_msgs, row_multiple, EpLanding{seq, slice_ns}, recv,
                                       nmsg_here,
                                       n_local, n_ranks, rank, skip_a2a, shared_groups, max_tokens, hidden, fmt, m,
                                       recv_tokens, recv_scales, src_info, row_src, status, snapshot, row_offsets,
                                       src_offsets, busy);
        }
        EP_STAMP(6);
    }
    EP_STAMPS_PRINT("dispatch", rank, counter);
}

// The kernels' parameters and arguments, ep_dispatch_single_body's but `Fmt` (comm/mod.rs checks
// that the three lists agree).
#define EP_DISPATCH_SINGLE_PARAMS                                                                                \
    const u16 *tokens, const float *input_scales, int n_tokens, int hidden, int fmt, const int *ids, int top_k,  \
        MsgLayout m, const u64 *recv_ptrs, int rank, int n_ranks, int n_local, int max_tokens, int shared_start, \
        int shared_end, u8 *shared_msgs, u32 *ticket, u64 *sent, int n_experts, int skip_a2a,                    \
        const u64 *count_ptrs, u64 *counts, u64 slice_ns, int shared_groups,               \
        int row_multiple, u32 *status, u64 *snapshot, u32 *row_offsets, u32 *src_offsets, const u8 *recv,       \
        u32 *nmsg, u8 *recv_tokens, u8 *recv_scales, int *src_info, int *row_src, u32 seq, int ll,         \
        int marked
#define EP_DISPATCH_SINGLE_ARGS                                                                                  \
    tokens, input_scales, n_tokens, hidden, fmt, ids, top_k, m, recv_ptrs, rank, n_ranks, n_local, max_tokens,   \
        shared_start, shared_end, shared_msgs, ticket, sent, n_experts, skip_a2a, count_ptrs, counts, \
        slice_ns, shared_groups, row_multiple, status, snapshot, row_offsets, src_offsets, recv, nmsg,          \
        recv_tokens, recv_scales, src_info, row_src, seq, ll, marked
#define EP_DISPATCH_SINGLE(name, spread, fixed_fmt)                                                              \
    extern "C" __global__ void __launch_bounds__(512, 1) name(EP_DISPATCH_SINGLE_PARAMS) {                       \
        ep_dispatch_single_body<spread, fixed_fmt>(EP_DISPATCH_SINGLE_ARGS);                                     \
    }

// Any format (`fmt` at run time), and with `Spread` (ep_dispatch_single_spread, for the smallest
// sizes, where the grid has blocks to spare).
EP_DISPATCH_SINGLE(ep_dispatch_single, false, -1)
EP_DISPATCH_SINGLE(ep_dispatch_single_spread, true, -1)
// The decode formats, each compiled for itself (`fmt` must be the kernel's; 156 KB of SASS is 115
// for BF16 alone). On one H100, one rank alone: 1 token BF16 12.7 -> 11.6 us, 128 tokens 22.0-22.4
// -> 19.4-19.7; FP8 14.5 -> 14.0-14.1 and 22.6-22.8 -> 20.8-21.3 (docs/perf.md, v34). What pays is
// the path without the other formats' branches, not the size: 13 KB less of ep_copy_to's unrolled
// loops read level.
EP_DISPATCH_SINGLE(ep_dispatch_single_bf16, false, EP_FMT_BF16)
EP_DISPATCH_SINGLE(ep_dispatch_single_spread_bf16, true, EP_FMT_BF16)
EP_DISPATCH_SINGLE(ep_dispatch_single_fp8, false, EP_FMT_FP8)
EP_DISPATCH_SINGLE(ep_dispatch_single_spread_fp8, true, EP_FMT_FP8)
