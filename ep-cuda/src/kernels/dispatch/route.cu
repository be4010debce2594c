// A token's route and its send (part of the dispatch program: wire.cu): the route in shared
// memory, the row fetched and encoded, the message stored to every rank it reaches
// (ep_send_token), shared by the multi-kernel send (send.cu) and the single-launch dispatch
// (single.cu).

#include "common/types.cuh"
#include "common/numerics.cuh"
#include "common/formats.cuh"
#include "common/ordering.cuh"
#include "common/protocol.cuh"
#include "common/trace.cuh"
#include "dispatch/wire.cu"
#include "dispatch/assign.cu"

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
        // The payload is the row itself, fetched in place, bit for bit (a NaN's payload and
        // signalling bit included: TokenFormat::encode_bf16).
        __syncthreads(); // the zeroed header, before it is written below
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

