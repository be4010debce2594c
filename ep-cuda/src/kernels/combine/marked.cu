// Marked rows (part of the combine program: send.cu): the reduce beside the send at prefill
// sizes, and the wait for the marks before the kernels that read the rows otherwise.

#include "common/types.cuh"
#include "common/numerics.cuh"
#include "common/formats.cuh"
#include "common/ordering.cuh"
#include "common/protocol.cuh"
#include "params.cuh"
#include "combine/reduce.cu"

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
// A plain value parameter, as ep_combine_reduce's (reduce.cu says why).
extern "C" __global__ void __launch_bounds__(512)
    ep_combine_reduce_marked(const EpCombineReduceMarkedParams p) {
    if (p.reduce.status[0] != EP_OK) return;
    extern __shared__ float smem_f[];
    __shared__ EpSlots sl;
    u64 deadline = ep_globaltimer() + ep_slice(p.slice_ns, p.reduce.status);
    for (int t = blockIdx.x; t < p.n_tokens; t += gridDim.x) {
        ep_list_slots(sl, t, p.reduce.ids, p.reduce.weights, p.reduce.top_k, p.reduce.rank, p.reduce.n_local,
                      p.reduce.skip_a2a);
        if (!ep_await_marks(t, sl.row, sl.n, p.marks, p.reduce.ids, p.reduce.top_k, p.reduce.n_local, p.n_ranks, *p.seq,
                            deadline, p.reduce.status)) return;
        ep_reduce_token<4, false>(t, 0, 1, sl, smem_f, p.reduce.recv, p.reduce.top_k, p.reduce.hidden,
                                  p.reduce.shared_rows, p.reduce.shared_start, p.reduce.shared_end,
                                  p.reduce.epilogue, p.reduce.residual, p.reduce.scale, p.reduce.out,
                                  p.reduce.fp8_payload, p.reduce.fp8_scales, EpLlWait{});
    }
}

// Every token's marks, for the kernels after it that read the rows (above). One block per token;
// nothing unless the counts' wait completed.
extern "C" __global__ void ep_combine_await_marks(const __grid_constant__ EpCombineAwaitMarksParams p) {
    __shared__ int rows[EP_MAX_TOP_K];
    __shared__ int n;
    if (!ep_wait_completed(p.status)) return;
    int t = blockIdx.x;
    if (threadIdx.x == 0) {
        const int* tid = p.ids + (u64)t * p.top_k;
        n = 0;
        for (int k = 0; k < p.top_k; k++)
            if (ep_routed_slot(tid, k, p.rank, p.n_local, p.skip_a2a) == k) rows[n++] = k;
    }
    __syncthreads();
    ep_await_marks(t, rows, n, p.marks, p.ids, p.top_k, p.n_local, p.n_ranks, *p.seq, ep_globaltimer() + ep_slice(p.slice_ns, p.status),
                   p.status);
}

