// The copy-out (part of the dispatch program: wire.cu): each message read once and written to
// its rows of the per-expert output, the padding rows, the shared expert's rows; after the wait
// (ep_dispatch_copy_out), beside an overlapped send (ep_dispatch_copy_messages), and the pieces
// the single-launch dispatch takes (single.cu).

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
#include "dispatch/send.cu"

// Whether the threads of a team copying a message load its first payload pieces (EP_COPY_FIRST
// each: a thread's share of a 7168-wide BF16 row in a 512-thread block) and their first FP8 scale
// word with its header (EpMsgHead). A block's do; a warp's (the overlapped copy-out) do not: its
// threads have ~14 pieces of a row each to copy anyway, and the registers spilled.
#define EP_COPY_FIRST 2
template <bool Warp> __device__ __forceinline__ constexpr int ep_copy_first() { return Warp ? 0 : EP_COPY_FIRST; }

// What a thread of the team copying message `msg` loads of it in one round, together with the
// header (ep_load_message): its first payload pieces and first FP8 scale word (ep_copy_first),
// the source token. Loaded apart they would be three round trips after the header's: the
// payload, then the token and the scales, reloaded after stores that might alias (be2db5e).
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
// each thread stores only what it loaded. (Through ep_copy_to, the same stores read slower for a
// rank alone and faster for two ranks sharing a GPU: code layout, not work; this form is the
// one-rank-per-GPU path's. Measured at 3c7c93e.)
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
// thread 0 wrote every row's source info after its own stores, all on the path from the mark
// to the rows copied in the single-launch dispatch (27a9626). A warp whose mark did
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
        ep_dispatch_copy_out(const __grid_constant__ EpDispatchCopyOutParams p) {
    ep_await_prior_grid(); // launched chained after the wait (comm/dispatch.rs)
    int n_groups = p.copy.n_local + p.copy.shared_groups;
    u32 done = p.copy.status[0];
    u64 rows = p.copy.row_offsets[n_groups];
    if (done != EP_OK) return;
    u64 b = blockIdx.x + p.first_block;
    u64 message_blocks = (u64)p.copy.n_ranks * p.per_sender;
    if (b < message_blocks) {
        int s = b / p.per_sender;
        u32 nm = p.copy.nmsg[s], count = ep_messages_from(nm, s, p.copy.rank, p.copy.skip_a2a, p.copy.max_tokens);
#pragma unroll 1
        for (u32 j = b % p.per_sender; j < count; j += p.per_sender)
            if (!ep_block_copy_message<true>(s, j, 0, 1, nm, EpLanding{*p.copy.seq, ep_slice(p.copy.slice_ns, p.copy.status)}, p.copy.recv,
                                             p.copy.src_offsets, rows,
                                             p.copy.n_local, p.copy.n_ranks, p.copy.rank, p.copy.shared_groups,
                                             p.copy.max_tokens, p.copy.hidden, p.copy.fmt, p.copy.m,
                                             p.copy.recv_tokens, p.copy.recv_scales, p.copy.src_info, p.copy.row_src,
                                             p.copy.status, p.copy.msg_rows))
                return;
        return;
    }
    b -= message_blocks;
    u64 padding_blocks = (u64)n_groups * (p.row_multiple - 1);
    if (b < padding_blocks) {
        long long row = ep_padding_row((u32)b, n_groups, p.copy.src_offsets, p.copy.row_offsets, p.copy.n_ranks);
        if (row >= 0) ep_pad_row<false>(row, rows, p.copy.hidden, p.copy.fmt, p.copy.m, p.copy.recv_tokens,
                                        p.copy.recv_scales, p.copy.src_info, p.copy.row_src);
        return;
    }
    b -= padding_blocks;
    if (p.copy.shared_groups == 0) return;
    u64 first = p.copy.src_offsets[p.copy.rank], end = p.copy.src_offsets[p.copy.rank + 1];
    if (first + b < end)
        ep_copy_shared_row(first, b, rows, p.shared_msgs, p.copy.nmsg[p.copy.rank], EpLanding{*p.copy.seq,
                           ep_slice(p.copy.slice_ns, p.copy.status)}, p.copy.rank, p.copy.n_local, p.copy.n_ranks,
                           p.copy.hidden, p.copy.fmt, p.copy.m, p.copy.recv_tokens, p.copy.recv_scales, p.copy.src_info,
                           p.copy.row_src, p.copy.status);
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
// a message's rows are slow at 1 token, where each SM has only so many stores in flight. With
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
// message, far slower than the send; 12476b5), in the order they are sent, waiting for each one's mark: each
// warp takes the next message from the count `layout_seq[1]` (ep_copy_messages, Claimed). While
// the send runs most warps wait, holding registers the send could use, so the grid is small; the
// same kernel is launched again after the send on the main stream (`helper`), on every SM, and
// takes what is left. A helper is ordered after the send, not after ep_dispatch_wait: it first
// waits for the layout (`layout_seq[0]` = seq), up to the slice, else leaves the messages to the
// copy-out beside the send, which takes every one that no helper took. The padding and
// shared-expert rows follow on the main stream (ep_dispatch_copy_out with first_block past the
// messages).
template <int WarpBatch>
__device__ __forceinline__ void ep_dispatch_copy_messages_body(const EpDispatchCopyMessagesParams& p) {
    __shared__ EpRows scratch[EP_COPY_WARPS];
    __shared__ bool laid_out;
    if (p.helper) {
        if (threadIdx.x == 0) laid_out = ep_layout_released(p.layout_seq, *p.copy.seq, ep_slice(p.copy.slice_ns, p.copy.status), p.copy.status);
        __syncthreads();
        if (!laid_out) return;
    }
    if (p.copy.status[0] != EP_OK) return;
    EP_STAMPS
    u64 rows = p.copy.row_offsets[p.copy.n_local + p.copy.shared_groups];
    int warp = threadIdx.x >> 5;
    ep_copy_messages<true, false, true, true, WarpBatch>(
        0, 0, p.copy.recv, p.copy.nmsg, p.copy.src_offsets, rows, p.copy.n_local, p.copy.n_ranks, p.copy.rank,
        p.copy.skip_a2a, p.copy.shared_groups, p.copy.max_tokens, p.copy.hidden, p.copy.fmt,
        p.copy.m, p.copy.recv_tokens, p.copy.recv_scales, p.copy.src_info, p.copy.row_src, p.copy.status,
        EpLanding{*p.copy.seq, ep_slice(p.copy.slice_ns, p.copy.status)}, &scratch[warp], p.copy.msg_rows, p.layout_seq + 1);
#ifdef EP_TRACE
    __syncthreads();
    EP_STAMP(2);
    EP_STAMPS_PRINT(p.helper ? "helper" : "copy", p.copy.rank, 0);
#endif
}

// A copy kernel of `name` with `bounds` and the body's `batch` (params.cuh: EpDispatchCopyMessagesParams).
#define EP_DISPATCH_COPY_MESSAGES(name, bounds, batch)                                                                 \
    extern "C" __global__ void bounds name(const __grid_constant__ EpDispatchCopyMessagesParams p) {                   \
        ep_dispatch_copy_messages_body<batch>(p);                                                                      \
    }

// ep_dispatch_copy_messages_body's kernel: 8 pieces a lane at a time, 64 registers a thread.
EP_DISPATCH_COPY_MESSAGES(ep_dispatch_copy_messages, __launch_bounds__(512, 2), 8)

// The lean copy-out, beside the lean send (ep_dispatch_send_lean): ep_dispatch_copy_messages at 48
// registers a thread (__maxnreg__, which cannot be combined with launch bounds; launched with up to
// 512 threads), its warps copying 2 pieces a lane at a time (24 bytes of spills; 4 spilled 56, 8
// at 64 registers 40). A 512-thread block then fits an SM beside two lean send blocks: 24,576 +
// 2 x 20,480 = the 65,536 registers of sm_90.
EP_DISPATCH_COPY_MESSAGES(ep_dispatch_copy_lean, __maxnreg__(48), 2)

