// The dispatch's slots (part of the dispatch program: wire.cu says how its files fit together).
// Each (token, slot)'s row slot and each token's message slot at every rank, by a block per
// expert and per rank (ep_assign_slots) or per chunk of tokens (ep_assign_chunks); the counts'
// words (ep_publish_counts), published after the send or, in an overlapped or layout-first round,
// by the assign before it.

#include "common/types.cuh"
#include "common/numerics.cuh"
#include "common/formats.cuh"
#include "common/ordering.cuh"
#include "common/protocol.cuh"
#include "common/trace.cuh"
#include "params.cuh"
#include "dispatch/wire.cu"

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
// and one scan of their flags packed in 16-bit fields gives every token its position. A thread
// reading one token's ids a pass with its own 4-byte loads, the block scanning after each, makes
// 16 passes of a 256-thread block at 4096 tokens, each a round trip and a scan (914e0b7).
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
    // ended well after the expert blocks at 4096 tokens; 914e0b7).
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
// read every id: one pass at 512 tokens, four at 4096, so their time grows with the tokens.
// EP_ASSIGN_CHUNK, EP_ASSIGN_THREADS and EP_ASSIGN_COLS are the host's (kernels/constants.rs).
#define EP_ASSIGN_WARPS (EP_ASSIGN_THREADS / 32)
#define EP_ASSIGN_WARP_TOKENS (EP_ASSIGN_CHUNK / EP_ASSIGN_WARPS) // <= 32: a ballot covers them
// Columns counted per pass over a chunk (the per-warp counts in shared memory are u16: a chunk
// holds at most EP_ASSIGN_CHUNK rows of a column). More columns take more passes.
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
        // the loads issued ~20 instructions apart, a long pass (5d07134).
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

// The flags of this rank's message count words (common/protocol.cuh): `early` from the publishing kernel,
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
// fence per warp sat on the counting block's chain; 6e00a8d). A late one (after every block's payload)
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
extern "C" __global__ void ep_assign_slots(const __grid_constant__ EpAssignParams p) {
    ep_await_prior_grid(); // a phase's first kernel, launched chained (comm/mod.rs, `Chain::First`)
    ep_advance_combine_round(p.next_round);
    ep_release_dependents(); // the send blocks may fetch their rows meanwhile (ep_dispatch_send_body)
    EP_STAMPS
    ep_assign_block(p.ids, p.n_tokens, p.top_k, p.n_experts, p.n_local, p.n_ranks, p.rank, p.skip_a2a, p.slots,
                    p.rank_slots, p.sent, p.msgs_to);
    EP_STAMP(1);
    bool publisher = p.early && ep_last_block(p.ticket, true);
    if (publisher)
        ep_assign_publish(p.sent, p.msgs_to, p.n_experts, p.n_local, p.n_ranks, p.rank, p.skip_a2a, p.count_ptrs,
                          p.marked, p.ll);
    EP_STAMPS_PRINT("assign", p.rank, publisher);
}

// Row and message slots, a block per chunk of tokens (ep_assign_chunk); the last block to finish
// lays out the chunks' starts and the totals (ep_assign_starts) and, with `early` (an overlapped
// or layout-first round), publishes the counts before the send, with `ll` and `marked` (this
// rank's combine form, ep_nmsg_flags). Every entry of slots, rank_slots and chunk_base is written
// by exactly one block, so no memset comes first.
extern "C" __global__ void __launch_bounds__(EP_ASSIGN_THREADS)
    ep_assign_chunks(const __grid_constant__ EpAssignParams p) {
    ep_await_prior_grid();   // as ep_assign_slots
    ep_advance_combine_round(p.next_round);
    ep_release_dependents(); // as ep_assign_slots
    EP_STAMPS
    ep_assign_chunk(p.ids, p.n_tokens, p.top_k, p.n_experts, p.n_local, p.n_ranks, p.rank, p.skip_a2a, p.slots,
                    p.rank_slots, p.chunk_base);
    EP_STAMP(1);
    bool publisher = ep_last_block(p.ticket, true);
    EP_STAMP(7);
    if (publisher) {
        ep_assign_starts(p.chunk_base, gridDim.x, p.n_experts, p.n_ranks, p.sent, p.msgs_to);
        EP_STAMP(8);
        if (p.early)
            ep_assign_publish(p.sent, p.msgs_to, p.n_experts, p.n_local, p.n_ranks, p.rank, p.skip_a2a, p.count_ptrs,
                              p.marked, p.ll);
    }
    EP_STAMPS_PRINT("chunks", p.rank, publisher);
}

