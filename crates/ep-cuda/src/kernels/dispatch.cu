// Dispatch: each rank's tokens to the ranks that hold their experts, laid out per expert.
//
// Launch order on the rank's stream: ep_assign_slots -> ep_dispatch_send (which also signals,
// from its last block, inside one node) or, between nodes, ep_dispatch_send -> ep_dispatch_put ->
// ep_dispatch_signal; then ep_dispatch_wait -> ep_dispatch_copy_out, again
// while the wait's slice runs out before the counts are all there.
// Stream order makes every message store complete before the signal kernel's release stores.

__device__ __forceinline__ bool ep_routes_to(int skip_a2a, int src, int e, int n_local) {
    return !skip_a2a || e / n_local == src;
}

// Message `pos` from rank `src` for local expert `g` in a dispatch receive buffer
// [n_local, n_ranks, max_tokens, msg] (the contract's layout).
__device__ __forceinline__ u64 ep_recv_offset(int g, int n_ranks, int src, int max_tokens, u64 pos, int msg_bytes) {
    return (((u64)g * n_ranks + src) * max_tokens + pos) * msg_bytes;
}

// For every (token, slot): the slot's position among this rank's rows for its expert (token
// order), or -1 for duplicates, masked and (skip_a2a) off-device slots; and per expert the number
// of rows sent. One block per expert scans the tokens in order, 256 at a time, with a block-wide
// prefix count (ballot/popc): positions are deterministic. Every entry is written by exactly one
// block (its expert's; block 0 for masked slots), so no memset comes first.
extern "C" __global__ void ep_assign_slots(const int* ids, int n_tokens, int top_k, int n_experts, int n_local,
                                           int rank, int skip_a2a, int* slots, u64* sent) {
    __shared__ int warp_counts[32];
    __shared__ int base;
    int e = blockIdx.x;
    if (threadIdx.x == 0) base = 0;
    __syncthreads();
    bool routed = ep_routes_to(skip_a2a, rank, e, n_local);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    for (int t0 = 0; t0 < n_tokens; t0 += blockDim.x) {
        int t = t0 + threadIdx.x;
        int first = -1;
        if (t < n_tokens) {
            const int* row = ids + (u64)t * top_k;
            int* out = slots + (u64)t * top_k;
            for (int k = 0; k < top_k; k++) {
                int id = row[k];
                if (id == e) {
                    if (first < 0 && routed) first = k; // later slots naming e are duplicates
                    else out[k] = -1;
                } else if (id < 0 && e == 0) {
                    out[k] = -1;
                }
            }
        }
        unsigned mask = __ballot_sync(0xffffffffu, first >= 0);
        if (lane == 0) warp_counts[warp] = __popc(mask);
        __syncthreads();
        int before = 0, total = 0;
        for (int w = 0; w < warps; w++) {
            before += w < warp ? warp_counts[w] : 0;
            total += warp_counts[w];
        }
        if (first >= 0) slots[(u64)t * top_k + first] = base + before + __popc(mask & ((1u << lane) - 1u));
        __syncthreads();
        if (threadIdx.x == 0) base += total;
        __syncthreads();
    }
    if (threadIdx.x == 0) sent[e] = (u64)base;
}

// One block per token: encode the message once in shared memory, then store it into the receive
// slot of every expert the token reaches (16-byte stores). Messages for another node are staged
// for ep_dispatch_put; the shared expert's tokens are kept in `shared_msgs`.
__device__ void ep_send_token(int t, const u16* tokens, const int* ids, const float* input_scales,
                              const int* slots, int hidden, int top_k, int fmt, MsgLayout m, const u64* recv_ptrs,
                              int rank, int n_ranks, int n_local, int gpus_per_node, int max_tokens, u8* staging,
                              int shared_start, int shared_end, u8* shared_msgs) {
    extern __shared__ uint4 smem_u4[];
    u8* msg = (u8*)smem_u4;
    float* x = (float*)(msg + m.bytes);
    const int* row_ids = ids + (u64)t * top_k;
    const int* row_slots = slots + (u64)t * top_k;
    bool shared = t >= shared_start && t < shared_end;
    bool any = shared;
    for (int k = 0; k < top_k; k++) any = any || row_slots[k] >= 0;
    if (!any) return;

    // Everything after the payload (scales, padding, header) starts zeroed.
    for (int i = m.payload_bytes / 4 + threadIdx.x; i < m.bytes / 4; i += blockDim.x) ((u32*)msg)[i] = 0;
    if (fmt == EP_FMT_BF16) {
        // The payload is the row itself, 16 bytes at a time; only a NaN changes (it gains the
        // quiet bit, as bf16(f32(x)) does).
        const uint4* src = (const uint4*)(tokens + (u64)t * hidden);
        uint4* dst = (uint4*)msg;
        for (int i = threadIdx.x; i < hidden / 8; i += blockDim.x) {
            uint4 v = src[i];
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
    } else {
        for (int i = threadIdx.x; i < hidden; i += blockDim.x) x[i] = bf16_to_f32(tokens[(u64)t * hidden + i]);
        __syncthreads();
        ep_encode_row(fmt, x, hidden, input_scales[t], msg, msg + m.scales_off);
    }
    if (threadIdx.x == 0) {
        *(int*)(msg + m.src_off) = t;
        for (int k = 0; k < top_k; k++) {
            u16 v = row_ids[k] < 0 ? (u16)0xFFFF : (u16)row_ids[k];
            msg[m.ids_off + 2 * k] = (u8)v;
            msg[m.ids_off + 2 * k + 1] = (u8)(v >> 8);
        }
    }
    __syncthreads();

    int node = rank / gpus_per_node;
    bool staged = false;
    for (int k = 0; k < top_k; k++) {
        int pos = row_slots[k];
        if (pos < 0) continue;
        int e = row_ids[k];
        int dest = e / n_local, g = e % n_local;
        if (dest / gpus_per_node == node) {
            ep_block_copy((u8*)recv_ptrs[dest] + ep_recv_offset(g, n_ranks, rank, max_tokens, pos, m.bytes), msg, m.bytes);
        } else if (!staged) {
            ep_block_copy(staging + (u64)t * m.bytes, msg, m.bytes);
            staged = true;
        }
    }
    if (shared) ep_block_copy(shared_msgs + (u64)(t - shared_start) * m.bytes, msg, m.bytes);
}

// One count per (expert, this rank), zero included, published with a system-scope release by
// the calling threads of one block.
__device__ void ep_publish_counts(const u64* sent, int n_experts, int n_local, int n_ranks, int rank, int skip_a2a,
                                  const u64* count_ptrs) {
    for (int e = threadIdx.x; e < n_experts; e += blockDim.x) {
        if (!ep_routes_to(skip_a2a, rank, e, n_local)) continue;
        int dest = e / n_local, g = e % n_local;
        ep_store_release((u64*)count_ptrs[dest] + (u64)g * n_ranks + rank, sent[e]);
    }
}

// One block per token (at least one block, for a rank without tokens): ep_send_token, then,
// with `signal` (one node), the last block to finish publishes the counts.
// Launched with up to 512 threads (comm.rs): the bound keeps registers within what that allows.
// Parameters ids .. staging are ep_dispatch_put's, in its order (comm.rs passes that slice).
extern "C" __global__ void __launch_bounds__(512) ep_dispatch_send(const u16* tokens, const float* input_scales,
                                            int n_tokens, int hidden, int fmt, const int* ids, const int* slots,
                                            int top_k, MsgLayout m, const u64* recv_ptrs, int rank, int n_ranks,
                                            int n_local, int gpus_per_node, int max_tokens, u8* staging,
                                            int shared_start, int shared_end, u8* shared_msgs, int signal,
                                            u32* ticket, const u64* sent, int n_experts, int skip_a2a,
                                            const u64* count_ptrs) {
    if ((int)blockIdx.x < n_tokens)
        ep_send_token(blockIdx.x, tokens, ids, input_scales, slots, hidden, top_k, fmt, m, recv_ptrs, rank, n_ranks,
                      n_local, gpus_per_node, max_tokens, staging, shared_start, shared_end, shared_msgs);
    if (signal && ep_last_block(ticket)) ep_publish_counts(sent, n_experts, n_local, n_ranks, rank, skip_a2a, count_ptrs);
}

// The inter-node transport: puts of the staged messages into remote receive slots. Runs after
// ep_dispatch_send and before ep_dispatch_signal on the same stream: put, then signal.
extern "C" __global__ void ep_dispatch_put(const int* ids, const int* slots, int top_k, MsgLayout m,
                                           const u64* recv_ptrs, int rank, int n_ranks, int n_local,
                                           int gpus_per_node, int max_tokens, const u8* staging) {
    int t = blockIdx.x;
    int node = rank / gpus_per_node;
    for (int k = 0; k < top_k; k++) {
        int pos = slots[(u64)t * top_k + k];
        if (pos < 0) continue;
        int e = ids[(u64)t * top_k + k];
        int dest = e / n_local, g = e % n_local;
        if (dest / gpus_per_node == node) continue;
        ep_block_copy((u8*)recv_ptrs[dest] + ep_recv_offset(g, n_ranks, rank, max_tokens, pos, m.bytes),
                      staging + (u64)t * m.bytes, m.bytes);
    }
}

// The counts, after the inter-node puts (between nodes the send kernel does not signal).
extern "C" __global__ void ep_dispatch_signal(const u64* sent, int n_experts, int n_local, int n_ranks, int rank,
                                              int skip_a2a, const u64* count_ptrs) {
    __threadfence_system();
    ep_publish_counts(sent, n_experts, n_local, n_ranks, rank, skip_a2a, count_ptrs);
}

// Waits for every count, then lays out the groups: row_offsets [n_groups + 1] and src_offsets
// [n_groups, n_ranks + 1], with the shared expert (when fused) as group 0. One block; the counts
// and group sizes go through shared memory (dynamic: 4 * (n_local * n_ranks + n_groups + 1)
// bytes), one thread per group, and one thread scans the groups.
extern "C" __global__ void ep_dispatch_wait(u64* counts, int n_local, int n_ranks, int rank, int skip_a2a,
                                            u64 slice_ns, int max_tokens, int shared_groups, int shared_len,
                                            int row_multiple, u32* status, u64* snapshot, u32* row_offsets,
                                            u32* src_offsets) {
    extern __shared__ u32 smem_counts[];
    __shared__ int overflow;
    int n = n_local * n_ranks;
    if (!ep_wait_counts(counts, n, rank, n_ranks, skip_a2a, slice_ns, status, snapshot)) return;
    if (threadIdx.x == 0) overflow = 0;
    __syncthreads();
    int n_groups = n_local + shared_groups;
    u32* cnt = smem_counts;        // [n]
    u32* start = smem_counts + n;  // [n_groups + 1]: each group's first row
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        u64 v = snapshot[i];
        if (v > (u64)max_tokens) overflow = 1;
        cnt[i] = (u32)v;
    }
    __syncthreads();
    if (overflow) {
        if (threadIdx.x == 0) status[0] = EP_COUNT_OVERFLOW;
        return;
    }
    // Group sizes rounded up to the row multiple; since every start is a multiple of it, the
    // starts are the exclusive prefix sum of the rounded sizes.
    for (int g = threadIdx.x; g < n_groups; g += blockDim.x) {
        u32 size = 0;
        for (int s = 0; s < n_ranks; s++)
            size += g < shared_groups ? (s == rank ? shared_len : 0) : cnt[(g - shared_groups) * n_ranks + s];
        start[g + 1] = (size + row_multiple - 1) / row_multiple * row_multiple;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        start[0] = 0;
        for (int g = 0; g < n_groups; g++) start[g + 1] += start[g];
    }
    __syncthreads();
    for (int g = threadIdx.x; g <= n_groups; g += blockDim.x) row_offsets[g] = start[g];
    for (int g = threadIdx.x; g < n_groups; g += blockDim.x) {
        u32 cursor = start[g];
        for (int s = 0; s < n_ranks; s++) {
            src_offsets[g * (n_ranks + 1) + s] = cursor;
            cursor += g < shared_groups ? (s == rank ? shared_len : 0) : cnt[(g - shared_groups) * n_ranks + s];
        }
        src_offsets[g * (n_ranks + 1) + n_ranks] = cursor;
    }
}

// One block per capacity row; rows past row_offsets[n_groups] (read here, on the device) exit,
// and every row when the wait did not complete (`status`): it is launched with the wait, before
// the host knows.
// Copies the payload, places the scales, fills src_info and the row's source rank (-1 for padding
// and shared-expert rows, which never travel back). Padding rows get zero payload and zero scales,
// so every byte of the output up to the row count is written without a host round trip.
extern "C" __global__ void ep_dispatch_copy_out(const u8* recv, const u8* shared_msgs, const u32* row_offsets,
                                                const u32* src_offsets, int n_local, int n_ranks, int rank,
                                                int shared_groups, int max_tokens, int hidden, int fmt, MsgLayout m,
                                                u8* recv_tokens, u8* recv_scales, int* src_info, int* row_src,
                                                const u32* status) {
    if (status[0] != EP_OK) return;
    int n_groups = n_local + shared_groups;
    u64 rows = row_offsets[n_groups];
    u64 row = blockIdx.x;
    if (row >= rows) return;
    // The group holding this row: the last g with row_offsets[g] <= row (binary search).
    int lo = 0, hi = n_groups - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (row_offsets[mid] <= row) lo = mid; else hi = mid - 1;
    }
    int g = lo;
    const u32* so = src_offsets + g * (n_ranks + 1);
    u8* out = recv_tokens + row * m.payload_bytes;
    if (fmt == EP_FMT_NVFP4) {
        // Scale columns padded to a multiple of 4 are zero in every row.
        int cols = hidden / 16;
        for (int c = cols + threadIdx.x; c < (cols + 3) / 4 * 4; c += blockDim.x) recv_scales[ep_swizzled(row, c, cols)] = 0;
    }
    if (row >= so[n_ranks]) {
        for (int i = threadIdx.x; i < m.payload_bytes / 4; i += blockDim.x) ((u32*)out)[i] = 0;
        ep_zero_scales(fmt, hidden, rows, row, recv_scales);
        if (threadIdx.x == 0) { src_info[2 * row] = -1; src_info[2 * row + 1] = -1; row_src[row] = -1; }
        return;
    }
    int s = 0;
    while (row >= so[s + 1]) s++;
    u64 j = row - so[s];
    const u8* msg;
    int expert = -1;
    if (g < shared_groups) {
        msg = shared_msgs + j * m.bytes;
    } else {
        int lg = g - shared_groups;
        expert = rank * n_local + lg;
        msg = recv + ep_recv_offset(lg, n_ranks, s, max_tokens, j, m.bytes);
    }
    ep_block_copy(out, msg, m.payload_bytes);
    ep_place_scales(fmt, hidden, rows, row, msg + m.scales_off, recv_scales);
    if (threadIdx.x == 0) {
        int slot = -1;
        if (expert >= 0) {
            for (int k = 0; k < m.top_k; k++) {
                u16 v = (u16)msg[m.ids_off + 2 * k] | ((u16)msg[m.ids_off + 2 * k + 1] << 8);
                if (v == (u16)expert) { slot = k; break; }
            }
        }
        src_info[2 * row] = *(const int*)(msg + m.src_off);
        src_info[2 * row + 1] = slot;
        row_src[row] = g < shared_groups ? -1 : s;
    }
}
