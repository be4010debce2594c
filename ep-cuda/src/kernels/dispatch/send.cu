// The multi-kernel send (part of the dispatch program: wire.cu): a block per token
// (EP_DISPATCH_SEND's kernels), its messages marked landed, the rank's own rows written by the
// block that encodes them once the layout is known; and between nodes the put and the signal.

#include "common/types.cuh"
#include "common/numerics.cuh"
#include "common/formats.cuh"
#include "common/ordering.cuh"
#include "common/protocol.cuh"
#include "common/trace.cuh"
#include "params.cuh"
#include "dispatch/wire.cu"
#include "dispatch/assign.cu"
#include "dispatch/route.cu"
#include "dispatch/layout.cu"

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
    // and are read after the kernel): with no other message, no fence, which would otherwise sit
    // on every sending block's path (062a2eb).
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
// mark and the rows' stores (two dependent loads there would sit behind every block's stores).
struct EpOwnRows {
    EpRows rows;
    u64 total; // the output's rows (the FP8 scales' stride)
};

// The send's own message's rows, from its route, with lane k % 32's `start[k / 32]` the group
// start of slot k (ep_own_starts). Whether a slot has a row here is worked out again rather than
// kept from ep_own_starts: kept across the encode, it took ep_dispatch_send from 64 registers to
// 73-81 (sm_90), a 256-thread block fewer per SM (d5b8da8).
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
__device__ __forceinline__ void ep_dispatch_send_body(const EpDispatchSendParams& p) {
    int fmt = p.fmt;
    __shared__ EpRoute route;
    // The rank whose message's rows this block writes itself (ep_place_own_rows), -1: none.
    __shared__ int placed;
    __shared__ EpOwnRows own;
    if (Fmt >= 0) fmt = Fmt;
    int t = blockIdx.x;
    // Launched chained after the assign, or after a layout-first round's wait, which awaits the
    // assign (comm/dispatch.rs): the row, the round's input, is there before the assign starts;
    // the slots are not until it ends. No early release (common/ordering.cuh).
    if (t < p.n_tokens) {
        EP_STAMPS
        ep_fetch_row(t, p.tokens, p.hidden, fmt, p.targets.m);
        ep_await_prior_grid();
        ep_load_route(route, t, p.targets.ids, p.targets.slots, p.targets.rank_slots, p.targets.chunk_base,
                      p.targets.top_k, p.targets.n_local, p.targets.n_ranks);
        // While the row loads, the last warp looks for the layout, then issues the loads of the own
        // message's rows (ep_own_starts), which it reads once the message is marked. Each of its
        // lanes acquires the layout itself, since each reads it. (The rows found whole here, their
        // loads held the row's barrier back; 062a2eb.)
        const bool finder = threadIdx.x >= blockDim.x - 32;
        u32 start0 = 0, start1 = 0, total = 0;
        if (finder) {
            const bool mine = p.layout_seq && ep_layout_released(p.layout_seq, *p.seq, p.layout_wait_ns);
            const bool released = __all_sync(0xffffffffu, mine);
            if (threadIdx.x == blockDim.x - 32) placed = released ? p.targets.rank : -1;
            if (released) {
                ep_own_starts(route, p.targets.top_k, p.targets.rank, p.src_offsets, p.targets.n_local,
                              p.targets.n_ranks, p.shared_groups, start0, start1);
                total = p.row_offsets[p.targets.n_local + p.shared_groups];
            }
        }
        EP_STAMP(1);
        ep_send_token<Batch>(t, route, p.input_scales, p.hidden, p.targets.top_k, fmt, p.targets.m, p.targets.recv_ptrs,
                             p.targets.rank, p.targets.gpus_per_node,
                             p.targets.max_tokens, p.targets.staging, p.shared_start, p.shared_end, p.shared_msgs,
                             &placed);
        if (p.early)
            ep_mark_landed(route, p.targets.top_k, p.targets.m, *p.seq, ep_shared_msg(t, p.shared_start, p.shared_end,
                    p.shared_msgs, p.targets.m), placed);
        if (placed >= 0) {
            if (finder)
                ep_find_own_rows(route, p.targets.top_k, p.targets.rank, EpOwnRowsFound{&route, start0, start1,
                                 p.targets.rank, p.targets.n_local}, total,
                                 p.targets.max_tokens, p.targets.m, p.recv_tokens, own, p.msg_rows);
            __syncthreads();
            ep_place_own_rows(own, t, p.targets.rank, p.hidden, fmt, p.targets.m, p.recv_scales, p.src_info, p.row_src);
            EP_STAMP(3);
        }
        EP_STAMP(2);
        EP_STAMPS_PRINT("send", p.targets.rank, p.early);
    } else {
        ep_await_prior_grid(); // the ticket and the counts this block may publish are the assign's
    }
    if (!p.early && p.signal && ep_last_block(p.ticket))
        ep_publish_counts(p.sent, p.msgs_to, p.n_experts, p.targets.n_local, p.targets.n_ranks, p.targets.rank,
                          p.skip_a2a, p.count_ptrs, ep_nmsg_flags(0, p.ll, p.marked));
}

// A send kernel (params.cuh: EpDispatchSendParams, whose targets are ep_dispatch_put's parameters).
#define EP_DISPATCH_SEND(name, batch, fixed_fmt)                                                                       \
    extern "C" __global__ void __launch_bounds__(512) name(const __grid_constant__ EpDispatchSendParams p) {           \
        ep_dispatch_send_body<batch, fixed_fmt>(p);                                                                    \
    }

// Every format (`fmt` at run time). Launched with 256 or 512 threads (comm/dispatch.rs,
// send_threads); at 64 registers a thread (sm_90), four 256-thread blocks fit an SM, or two of 512.
EP_DISPATCH_SEND(ep_dispatch_send, 8, -1)
// The lean send: the message stored a piece at a time (ep_send_token's Batch), BF16 only (no
// encoder: 32 registers a thread instead of 64, sm_90, no spills; with every format's it took 40,
// and with the faster FP8 encode (a26c967) 40 with spills): three 512-thread blocks fit an SM, or
// two beside a lean copy-out block (ep_dispatch_copy_lean). With the lean copy-out and the own rows
// written by the send blocks, for BF16 from 2560 tokens (comm/path.rs, lean_dispatch).
EP_DISPATCH_SEND(ep_dispatch_send_lean, 1, EP_FMT_BF16)
// FP8 alone, two pieces a thread in flight: 40 registers (sm_90, no spills), so six 256-thread
// blocks fit an SM where four of ep_dispatch_send do. Every multi-kernel FP8 round (comm/dispatch.rs,
// `send_kernel`). Faster than ep_dispatch_send for FP8 from 1024 tokens, on a rank alone and on
// two ranks sharing a GPU (measured at 11b2983). Compiled for FP8 with ep_dispatch_send's batch of
// 8 (64 registers) it gained about half of that at 512-1024 tokens and a sixth at 4096: the rest
// is the registers.
EP_DISPATCH_SEND(ep_dispatch_send_fp8, 2, EP_FMT_FP8)

// The inter-node transport: puts of the staged messages to the ranks of other nodes. Runs after
// ep_dispatch_send and before ep_dispatch_signal on the same stream: put, then signal.
extern "C" __global__ void ep_dispatch_put(const __grid_constant__ EpDispatchTargets p) {
    __shared__ EpRoute route;
    int t = blockIdx.x;
    ep_load_route(route, t, p.ids, p.slots, p.rank_slots, p.chunk_base, p.top_k, p.n_local, p.n_ranks);
    int node = p.rank / p.gpus_per_node;
    for (int k = 0; k < p.top_k; k++) {
        int dest = route.dest[k];
        if (!route.carries[k] || dest / p.gpus_per_node == node) continue;
        ep_block_copy(ep_route_msg(route, k, p.recv_ptrs[dest], p.rank, p.max_tokens, p.m),
                      p.staging + (u64)t * p.m.bytes, p.m.bytes);
    }
}

// The counts, after the inter-node puts (between nodes the send kernel does not signal).
extern "C" __global__ void ep_dispatch_signal(const __grid_constant__ EpDispatchSignalParams p) {
    ep_publish_counts(p.sent, p.msgs_to, p.n_experts, p.n_local, p.n_ranks, p.rank, p.skip_a2a, p.count_ptrs, 0u);
}

// ep_find_own_rows, declared above for the send body, is the copy-out's (it reads the layout).
#include "dispatch/copy_out.cu"
