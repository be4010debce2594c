// The single-launch combine (part of the combine program: send.cu), and its batched row send.

#include "common/types.cuh"
#include "common/numerics.cuh"
#include "common/formats.cuh"
#include "common/ordering.cuh"
#include "common/protocol.cuh"
#include "common/trace.cuh"
#include "params.cuh"
#include "combine/send.cu"
#include "combine/reduce.cu"
#include "combine/marked.cu"

// The block's rows (row blockIdx.x, then every gridDim.x-th, of `rows`) back to their ranks inside
// the node (a single-launch combine's), as ep_send_row sends them, up to EP_SEND_ROWS at a time:
// each thread loads its pieces of all of them (EP_SEND_PIECES at most) while warps 0 and 1 find
// where the next EP_SEND_TABLE rows go (ep_rows_where), then stores them; the rows to a rank that
// takes LL rows then one by one. One row at a time was three dependent round trips a row (its
// source, its slot, its payload), which at 128 tokens made a block's rows a long chain (a9393d3).
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
// kernels above). A destination that takes its rows in LL form (common/protocol.cuh) or marked (from
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
__device__ __forceinline__ void ep_combine_single_body(const EpCombineSingleParams& p) {
    // A kernel for one epilogue: the others' branches compile out (below).
    const int epilogue = Epi >= 0 ? Epi : p.epilogue;
    extern __shared__ uint4 smem_u4[];
    __shared__ EpSlots sl;
    // Stamps (EP_CUDA_TRACE): 1 rows sent (and marked), 2 ticket (or the slots listed), 3 counts
    // published, 4 every count here, 7 the first token's list and marks there, 5 reduced, 6 counts
    // reset; in the staged LL reduce, 8 thread 0's first LL piece there at its first load, 9 the
    // first round staged; in the batched send (ep_send_rows_batched), 11 the first batch's rows
    // found (its barrier), 12 thread 0's stores of it issued, 13 and 14 the same of the second.
    ep_await_prior_grid(); // a phase's first kernel, launched chained (comm/mod.rs, `Chain::First`)
    const u32 seq = *p.seq;
    ep_advance_dispatch_round(p.next_round);
    EP_STAMPS
    u64 rows = *p.rows_end;
    u32 lane_nmsg = ep_lane_nmsg(p.nmsg, p.n_ranks);
    int n = p.n_local * p.n_ranks;
    u64* cnt = (u64*)smem_u4; // the counts to publish behind the fence, then the counts that came
    const EpDestForms forms = ep_dest_forms(lane_nmsg, p.nmsg, p.n_ranks, p.rank, p.skip_a2a);
    // The early destinations' counts, by the last block, before its rows: they vouch for no row
    // (LL rows carry their number, marked rows have their marks), so they wait for none. (After
    // the block's rows, at 128 tokens they came last and the reduce waited for them after the
    // marks; 3243984.)
    bool early_publisher = blockIdx.x == gridDim.x - 1;
    if (early_publisher && forms.any_early)
        ep_publish_rows(p.dispatch_counts, p.n_local, p.n_ranks, p.rank, p.skip_a2a, p.count_ptrs, p.nmsg, lane_nmsg,
                        true);
    // Tokens cut into column ranges of a block's pass each while the grid has blocks to spare
    // (a whole row per block for the epilogues that need one); LL rows, twice the bytes, into
    // ranges of 128 pieces (one load per thread and slot) so that more SMs read them. The items
    // are dealt from the grid's last block down (LL): at decode sizes the first blocks send the
    // rows, and a block's loads wait behind its stores.
    int per_part = Ll ? 128 : blockDim.x;
    int passes = (p.hidden / 8 + per_part - 1) / per_part;
    int parts = ep_whole_row(epilogue) || p.n_tokens == 0 ? 1 : max(1, min(passes, (int)gridDim.x / p.n_tokens));
    int items = p.n_tokens * parts, rb = Ll ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
    bool one_item = rb < items && rb + (int)gridDim.x >= items;
    // A block with one item loads its token's ids and weights into the list's staging beside its
    // rows' loads (after the rows, they waited for the stores to drain), without registers: held
    // across the send, they were spilled, and the spill's store waited for the load. top_k <=
    // EP_MAX_TOP_K <= blockDim.x.
    if (one_item && (int)threadIdx.x < p.top_k) {
        ep_async_copy4(&sl.id[threadIdx.x], p.ids + (u64)(rb / parts) * p.top_k + threadIdx.x);
        ep_async_copy4(&sl.tw[threadIdx.x], p.weights + (u64)(rb / parts) * p.top_k + threadIdx.x);
    }
    // Every destination taking LL rows, the rows one by one: each block has one or none at those
    // sizes. Otherwise a few at a time (ep_send_rows_batched). The LL kernels (this rank has at
    // most EP_LL_MAX_TOKENS tokens) take them one by one too: the batches' registers slowed them
    // at 1 and 8 tokens (f2d967e).
    bool marked = false; // the block's marked rows marked already (ep_send_rows_batched)
    if (Ll) {
        for (u64 row = blockIdx.x; row < rows; row += gridDim.x)
            ep_send_row_loaded(row, p.expert_out, p.src_info, p.row_src, p.hidden, p.top_k, p.recv_ptrs, p.rank,
                               p.n_ranks, p.nmsg,
                               lane_nmsg, p.ll_ptrs, seq, p.mark_ptrs);
    } else if (forms.all_ll) {
        for (u64 row = blockIdx.x; row < rows; row += gridDim.x)
            ep_send_row(row, p.expert_out, p.src_info, p.row_src, p.hidden, p.top_k, p.recv_ptrs, p.rank, p.n_ranks,
                        nullptr, p.nmsg,
                        lane_nmsg, p.ll_ptrs, seq, p.mark_ptrs, false);
    } else {
        marked = ep_send_rows_batched(rows, p.expert_out, p.src_info, p.row_src, p.hidden, p.top_k, p.recv_ptrs, p.rank,
                                      p.n_ranks,
                                      p.nmsg, lane_nmsg, p.ll_ptrs, seq, p.mark_ptrs);
    }
    // Rows to a rank that takes them marked: one fence for the block's rows, then their marks.
    if (forms.any_marked && !marked)
        ep_mark_rows_sent(rows, p.src_info, p.row_src, p.top_k, p.nmsg, lane_nmsg, seq, p.mark_ptrs);
    EP_STAMP(1);
    // While the stores drain (before them, these loads held the sends back; cb55e0d); any block
    // may be the ticket's last. (Publishing behind the ticket's own acquire fence, by warp 0, one
    // system-scope fence fewer, read level in the sweep: c50e682. The time from the rows sent to
    // the counts published is the release fence behind the NVLink stores; LL rows and marked rows
    // take it off the path.)
    if (forms.regular)
        for (int i = threadIdx.x; i < n; i += blockDim.x) cnt[i] = p.dispatch_counts[i];
    // Each thread's own staged slot is there after its wait; the list is read after the counts'
    // poll, whose barriers pass first.
    ep_async_wait();
    if (one_item) ep_list_staged_slots(sl, p.top_k, p.rank, p.n_local, p.skip_a2a);
    bool published = forms.regular && ep_last_block(p.ticket);
    EP_STAMP(2);
    if (published) ep_publish_rows(cnt, p.n_local, p.n_ranks, p.rank, p.skip_a2a, p.count_ptrs, p.nmsg, lane_nmsg,
                                   false);
    EP_STAMP(3);

    // This rank's LL rows, or (its rows come marked: its dispatch told the senders, comm/path.rs)
    // its marks, their address loaded while the counts are polled: loaded after them, it was a
    // round trip before the rows' first loads or the marks' first poll.
    const ulonglong2* ll_here = Ll ? (const ulonglong2*)p.ll_ptrs[p.rank] : nullptr;
    const u32* marks = !Ll && ep_rows_marked(ep_nmsg_of(p.rank, lane_nmsg,
                                                        p.nmsg)) ? (const u32*)p.mark_ptrs[p.rank] : nullptr;
    u32 outcome = ep_poll_counts(p.counts, n, p.rank, p.n_ranks, p.skip_a2a, ep_slice(p.slice_ns, p.status), cnt, nullptr,
                                 EpRowsMatch{p.sent, p.n_local, p.n_ranks});
    EP_STAMP(4);
    ep_counts_read(outcome, p.ticket + 1, p.status);
    if (outcome == EP_OK) {
        EpLlWait ll{};
        if (Ll) ll = EpLlWait{ll_here, seq, ep_globaltimer() + ep_slice(p.slice_ns, p.status), p.status, p.n_local, p.n_ranks};
        // Marked rows: each token's marks before its rows are read; one that does not come within
        // the slice leaves the status EP_MESSAGES_PENDING and the host reduces again after the
        // marks' wait.
        u64 deadline = marks ? ep_globaltimer() + ep_slice(p.slice_ns, p.status) : 0;
        for (int i = rb; i < items; i += gridDim.x) {
            if (!one_item) ep_list_slots(sl, i / parts, p.ids, p.weights, p.top_k, p.rank, p.n_local, p.skip_a2a);
            if (marks && !ep_await_marks(i / parts, sl.row, sl.n, marks, p.ids, p.top_k, p.n_local, p.n_ranks, seq,
                                         deadline, p.status))
                break;
            if (threadIdx.x == 0) EP_STAMP_FIRST(7);
            // LL: 4 slots' loads at a time (each twice the registers; 8 spilled).
            ep_reduce_token<Ll ? 4 : 8, Ll>(i / parts, i % parts, parts, sl, (float*)smem_u4, p.recv, p.top_k, p.hidden,
                                   p.shared_rows, p.shared_start, p.shared_end, epilogue, p.residual, p.scale, p.out,
                                   p.fp8_payload, p.fp8_scales, ll);
        }
    }
    EP_STAMP(5);
    // The block last in the items' order resets the counts: while the grid has blocks to spare it
    // reduces nothing. (The grid's last block reset them, which with LL rows reduces the first
    // item: its reset came after that, and it finished last of the grid; 38e4089.)
    if (rb == (int)gridDim.x - 1)
        ep_reset_counts_when_read(p.ticket + 1, gridDim.x, p.counts, n, p.rank, p.n_ranks, p.skip_a2a, p.status);
    EP_STAMP(6);
    EP_STAMPS_PRINT("combine", p.rank, forms.regular ? published : early_publisher);
}

// A single-launch combine kernel (params.cuh: EpCombineSingleParams).
#define EP_COMBINE_SINGLE(name, ll, fixed_epilogue)                                                                    \
    extern "C" __global__ void __launch_bounds__(512) name(const __grid_constant__ EpCombineSingleParams p) {          \
        ep_combine_single_body<ll, fixed_epilogue>(p);                                                                 \
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
