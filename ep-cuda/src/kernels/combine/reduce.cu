// The reduce (part of the combine program: send.cu says how its files fit together): a token's
// slots listed once, its returned rows summed in f32 in ascending slot order with the router
// weights and rounded once, then the epilogue (ep_reduce_token, ep_combine_reduce).

#include "common/types.cuh"
#include "common/numerics.cuh"
#include "common/formats.cuh"
#include "common/protocol.cuh"
#include "common/trace.cuh"
#include "params.cuh"
#include "combine/send.cu"

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
// 0 alone was a chain of shared-memory loads, one after another, between two barriers.)
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
// With `Ll` the rows are read from the rank's LL rows (`ll`, common/protocol.cuh) instead of `recv`, each
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
// The parameter is a plain value, not __grid_constant__ as elsewhere: the body takes no address
// of it, and with the qualifier the kernel compiled to measurably slower code.
extern "C" __global__ void __launch_bounds__(1024) ep_combine_reduce(const EpCombineReduceParams p) {
    if (!ep_wait_completed(p.status)) return;
    extern __shared__ float smem_f[];
    __shared__ EpSlots sl;
    ep_list_slots(sl, blockIdx.x, p.ids, p.weights, p.top_k, p.rank, p.n_local, p.skip_a2a);
    ep_reduce_token<4, false>(blockIdx.x, 0, 1, sl, smem_f, p.recv, p.top_k, p.hidden, p.shared_rows, p.shared_start,
                              p.shared_end, p.epilogue, p.residual, p.scale, p.out, p.fp8_payload, p.fp8_scales,
                              EpLlWait{});
}

