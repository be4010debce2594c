// The single-launch dispatch (part of the dispatch program: wire.cu).

#include "common/types.cuh"
#include "common/numerics.cuh"
#include "common/formats.cuh"
#include "common/ordering.cuh"
#include "common/protocol.cuh"
#include "common/trace.cuh"
#include "params.cuh"
#include "dispatch/assign.cu"
#include "dispatch/route.cu"
#include "dispatch/layout.cu"
#include "dispatch/send.cu"
#include "dispatch/copy_out.cu"

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
// any path talk to each other. (Counts sent after the payload, behind a ticket after every
// block's stores, put the whole send on the counts' path; cb55e0d.)

// Ids of tokens first .. first + n and the rank of each (-1: masked), staged in shared memory by
// the whole block (n * top_k <= EP_STAGE_INTS): one round of coalesced loads, and each division
// done once (an integer division is a long instruction sequence on the GPU, and in the loops
// below it would be paid per token and slot). Returns with a barrier passed.
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
    // ep_send_token: loaded there, after the route, it is a round trip on the sending block's
    // path (484eacf).
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
    // compaction and the count below would be three barriers on the sending block's path).
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
    // of that rank is), one shared atomic each. A thread per earlier token, against every sending
    // slot, would be a chain of 64 dependent steps whatever the number of tokens (3fc9c4b).
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
// the messages made the blocks with padding the last to finish; 30c8f6d); then the
// messages, a block each in the order they are sent (ep_copy_messages); the shared expert's rows,
// a block each, its warps each on their own (ep_block_copy_message, ep_copy_shared_row). A
// message (or shared-expert message) is awaited for its mark; when one does not come the warp
// stops there (the status says EP_MESSAGES_PENDING and the host launches the copy-out again).
// (A warp per message when there were more messages than blocks was slower: a message's copy
// is then one warp's chain of round trips; cb55e0d.)
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
    // (item = b * warps + warp) the first third of the grid wrote them all and reached its
    // messages last, and at 1 token the block that sent took its share after its send and
    // finished last (0a73af2). A warp works out its next 32 items at once, a lane each, then
    // writes the rows among them: one item after another (most of them no row: each group's
    // possible padding, 256 groups) is a long serial walk on a decode round's path (853cdc9).
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
// their fence are one block's alone (one block issuing every rank's stores serialises them),
// and a message's rows cut among blocks (ep_copy_messages). A kernel of its own: in the same
// kernel the choice slowed the sizes where it does not apply (measured at 5457638).
template <bool Spread, int Fmt>
__device__ __forceinline__ void ep_dispatch_single_body(const EpDispatchSingleParams& p) {
    int fmt = p.fmt;
    int row_multiple = p.row_multiple;
    // A kernel for one format: the others' encoders and scale layouts compile out (below), and
    // BF16's padding walk with them (its groups take no padding: format/bf16.rs).
    if (Fmt >= 0) fmt = Fmt;
    if (Fmt == EP_FMT_BF16) row_multiple = 1;
    __shared__ EpRoute route;
    // Stamps (EP_CUDA_TRACE, scripts/trace_summary.py): 11 the token's ids staged, 1 its route,
    // 12 its row here, 13 its message encoded, 14 its stores issued, 2 its messages marked (the
    // counting block: 1 counted, 2 published), 3 the block's tokens sent, 4 every count here and
    // the groups laid out (ep_poll_layout), 5 the message counts kept,
    // 8 padding rows, 9 the first message's mark seen (by warp 0), 10 messages copied, 6
    // copy-out done, 7 counts reset. Sub-steps: 16-19 the route's barriers
    // (ep_own_route), 20 a peer buffer's address loaded, 21 the message encoded, 22 every
    // store issued (ep_mark_landed's barrier), 23 its fence passed; 24 the copy-out's walk
    // begun, 25 a mark's first poll issued,
    // 30 a mark's first poll returned, 27 its rows found by warp 0, 28 thread 0's stores to the
    // first row issued (ep_block_copy_message; the first message each).
    ep_await_prior_grid(); // a phase's first kernel, launched chained (comm/mod.rs, `Chain::First`)
    const u32 seq = *p.seq;
    ep_advance_combine_round(p.next_round);
    EP_STAMPS
    int senders = gridDim.x - 1;
    bool counter = blockIdx.x == senders;
    if (counter) {
        // (Every rank's count address loaded beside the ids, not in the publish, read level:
        // the count took what the publish saved; f662fb1.)
        u32* hist = (u32*)smem_u4;
        ep_count_sent(p.ids, p.n_tokens, p.top_k, p.n_experts, p.n_local, p.n_ranks, p.rank, p.skip_a2a, hist, p.sent);
        EP_STAMP(1);
        EP_DELAY(3);
        ep_publish_counts(hist, hist + p.n_experts, p.n_experts, p.n_local, p.n_ranks, p.rank, p.skip_a2a, p.count_ptrs,
                          ep_nmsg_flags(1, p.ll, p.marked));
        __syncthreads(); // every warp's counts stored
        if (threadIdx.x == 0) *(volatile u32*)(p.ticket + 2) = seq;
        EP_STAMP(2);
    }
    // Spread: each block sends one token to one rank (item i: token i / n_ranks, rank
    // i % n_ranks); otherwise a block sends a token to every rank.
    int items = Spread ? p.n_tokens * p.n_ranks : p.n_tokens;
    for (int i = blockIdx.x; !counter && i < items; i += senders) {
        int t = Spread ? i / p.n_ranks : i, dest = Spread ? i % p.n_ranks : -1;
        ep_fetch_row(t, p.tokens, p.hidden, fmt, p.m);
        const u64 peer = ep_own_route(route, t, p.ids, p.top_k, p.n_local, p.rank, p.skip_a2a, p.recv_ptrs);
        if (Spread) ep_route_only_to(route, p.top_k, dest);
        EP_DELAY(1);
        // The shared expert's message is this rank's own: the block for this rank writes it.
        bool own = dest < 0 || dest == p.rank;
        if (i == blockIdx.x) EP_STAMP(1);
        // Spread (the smallest sizes): a token's stores wait until the counts are out, at most
        // EP_HOLD_NS. Across NVLink the counts, not the row, set the phase's pace there, and a row's
        // stores and fence going out beside the publish delay the counts behind them, so holding
        // the sending blocks back made the 1-token dispatch faster (measured at 136783f).
        ep_send_token(t, route, p.input_scales, p.hidden, p.top_k, fmt, p.m, p.recv_ptrs, p.rank, p.n_ranks,
                      p.max_tokens, nullptr,
                      own ? p.shared_start : 0, own ? p.shared_end : 0, p.shared_msgs, nullptr,
                      Spread ? p.ticket + 2 : nullptr, seq, EP_HOLD_NS, peer);
        u8* shared_msg = own ? ep_shared_msg(t, p.shared_start, p.shared_end, p.shared_msgs, p.m) : nullptr;
        ep_mark_landed(route, p.top_k, p.m, seq, shared_msg);
        EP_DELAY(2);
        if (i == blockIdx.x) EP_STAMP(2);
        __syncthreads(); // the route and the message in shared memory are the next token's
    }
    __syncthreads();
    EP_STAMP(3);

    int n = p.n_local * p.n_ranks, n_groups = p.n_local + p.shared_groups;
    // The counting block takes no share of the output: it resets the counts as soon as every
    // sending block has read them. With a share, its reset came after it, and the grid's last
    // finisher was the counting block (38e4089).
    if (counter) {
        ep_reset_counts_when_read(p.ticket + 1, senders, p.counts, n, p.rank, p.n_ranks, p.skip_a2a, p.status);
        EP_STAMP(7);
    } else {
        u64* got = (u64*)smem_u4;                        // [n]
        u32* start = (u32*)(got + n);                    // [n_groups + 1]
        u32* src_off = start + n_groups + 1;             // [n_groups, n_ranks + 1]
        u32* nmsg_here = src_off + n_groups * (p.n_ranks + 1); // [n_ranks]
        int shared_len = p.shared_end - p.shared_start;
        u32 outcome = ep_poll_layout(p.counts, p.n_local, p.n_ranks, p.rank, p.skip_a2a, ep_slice(p.slice_ns, p.status), p.max_tokens, got,
                                     nullptr,
                                     nmsg_here, p.shared_groups, shared_len, row_multiple, start, src_off);
        EP_STAMP(4);
        EP_DELAY(4);
        ep_counts_read(outcome, p.ticket + 1, p.status);
        if (outcome == EP_OK) {
            // The message counts came with the counts (ep_publish_counts); block 0 keeps them for
            // the combine, which reads them from `nmsg`.
            if (blockIdx.x == 0)
                for (int s = threadIdx.x; s < p.n_ranks; s += blockDim.x) p.nmsg[s] = nmsg_here[s];
            EP_STAMP(5);
            EP_DELAY(5);
            // While some sending blocks had no token to send, the copy-out's walk starts past the
            // ones that did (the last to get here), which take its items only when the others
            // cannot (measured at ead51ec). When more than half sent, the walk stays as it was
            // (with one rank alone, block b then copies the message it sent): every block waits
            // for the counts alike, and the few that sent nothing would be left every padding row
            // and finish long after the rest (14029b0).
            u32 busy = 2 * items <= senders ? items : 0;
            ep_single_copy_out<Spread>(got, start, src_off, (blockIdx.x + senders - busy) % senders, senders,
                                       shared_len, p.shared_msgs, row_multiple, EpLanding{seq, ep_slice(p.slice_ns, p.status)}, p.recv,
                                       nmsg_here,
                                       p.n_local, p.n_ranks, p.rank, p.skip_a2a, p.shared_groups, p.max_tokens,
                                       p.hidden, fmt, p.m,
                                       p.recv_tokens, p.recv_scales, p.src_info, p.row_src, p.status, p.snapshot,
                                       p.row_offsets, p.src_offsets, busy);
        }
        EP_STAMP(6);
    }
    EP_STAMPS_PRINT("dispatch", p.rank, counter);
}

// A single-launch dispatch kernel (params.cuh: EpDispatchSingleParams).
#define EP_DISPATCH_SINGLE(name, spread, fixed_fmt)                                                                    \
    extern "C" __global__ void __launch_bounds__(512, 1) name(const __grid_constant__ EpDispatchSingleParams p) {      \
        ep_dispatch_single_body<spread, fixed_fmt>(p);                                                                 \
    }

// Any format (`fmt` at run time), and with `Spread` (ep_dispatch_single_spread, for the smallest
// sizes, where the grid has blocks to spare).
EP_DISPATCH_SINGLE(ep_dispatch_single, false, -1)
EP_DISPATCH_SINGLE(ep_dispatch_single_spread, true, -1)
// The decode formats, each compiled for itself (`fmt` must be the kernel's; 156 KB of SASS is 115
// for BF16 alone), faster at 1 and 128 tokens in both formats (measured at 4934a97). What pays is
// the path without the other formats' branches, not the size: 13 KB less of ep_copy_to's unrolled
// loops read level.
EP_DISPATCH_SINGLE(ep_dispatch_single_bf16, false, EP_FMT_BF16)
EP_DISPATCH_SINGLE(ep_dispatch_single_spread_bf16, true, EP_FMT_BF16)
EP_DISPATCH_SINGLE(ep_dispatch_single_fp8, false, EP_FMT_FP8)
EP_DISPATCH_SINGLE(ep_dispatch_single_spread_fp8, true, EP_FMT_FP8)
