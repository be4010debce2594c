// The kernels' parameters: each kernel of the dispatch, combine and swiglu programs takes one of
// these structs by value (`const __grid_constant__ EpXxxParams p`: read where the launch put it, in
// the parameter space, not copied to local memory). kernels/params.rs declares each struct's
// #[repr(C)] twin; kernels_compile has NVRTC compile this header against their layouts
// (`params::check_layouts`), so a field changed on one side alone fails. Device pointers are u64
// there.

#include "common/types.cuh"

// ep_take_ids (dispatch/ids.cu): a round's expert ids from the caller's device memory, checked
// while copied into the rank's own.
struct EpTakeIdsParams {
    const int* src;
    int* dst;
    int n_tokens;
    int top_k;
    int n_experts;
    u32* refused;
};

// ep_assign_slots and ep_assign_chunks (dispatch/assign.cu): the row and message slots of the
// round's tokens, and the counts published after them.
struct EpAssignParams {
    const int* ids;
    int n_tokens;
    int top_k;
    int n_experts;
    int n_local;
    int n_ranks;
    int rank;
    int skip_a2a;
    int* slots;
    int* rank_slots;
    u32* chunk_base;
    u64* sent;
    u32* msgs_to;
    int early;
    u32* ticket;
    const u64* count_ptrs;
    int marked;
    int ll;
    u32* next_round;
};

// Where a dispatch token's messages go: its top-k slots (ids, slots, rank_slots, chunk_base), the
// message, the receivers' buffers and the staging of the inter-node ones. ep_dispatch_put's
// parameters (dispatch/send.cu) and part of the send's.
struct EpDispatchTargets {
    const int* ids;
    const int* slots;
    const int* rank_slots;
    const u32* chunk_base;
    int top_k;
    MsgLayout m;
    const u64* recv_ptrs;
    int rank;
    int n_ranks;
    int n_local;
    int gpus_per_node;
    int max_tokens;
    u8* staging;
};

// ep_dispatch_send and its variants (dispatch/send.cu): the rows, the targets, the shared
// expert's messages, the counts' publication and the own rows' layout (ep_place_own_rows).
struct EpDispatchSendParams {
    const u16* tokens;
    const float* input_scales;
    int n_tokens;
    int hidden;
    int fmt;
    EpDispatchTargets targets;
    int shared_start;
    int shared_end;
    u8* shared_msgs;
    int signal;
    u32* ticket;
    const u64* sent;
    const u32* msgs_to;
    int n_experts;
    int skip_a2a;
    const u64* count_ptrs;
    int early;
    const u32* seq;
    int marked;
    int ll;
    const u32* layout_seq;
    u64 layout_wait_ns;
    const u32* row_offsets;
    const u32* src_offsets;
    int shared_groups;
    u8* recv_tokens;
    u8* recv_scales;
    int* src_info;
    int* row_src;
    int* msg_rows;
};

// ep_dispatch_signal (dispatch/send.cu): the counts, published after the inter-node puts.
struct EpDispatchSignalParams {
    const u64* sent;
    const u32* msgs_to;
    int n_experts;
    int n_local;
    int n_ranks;
    int rank;
    int skip_a2a;
    const u64* count_ptrs;
};

// ep_dispatch_wait (dispatch/layout.cu): the counts, their check and the groups' layout.
struct EpDispatchWaitParams {
    u64* counts;
    int n_local;
    int n_ranks;
    int rank;
    int skip_a2a;
    u64 slice_ns;
    int max_tokens;
    int shared_groups;
    int shared_len;
    int row_multiple;
    u32* status;
    u64* snapshot;
    u32* nmsg;
    u32* row_offsets;
    u32* src_offsets;
    u32* layout_seq;
    const u32* seq;
};

// What the copy-out kernels share (dispatch/copy_out.cu): the landed messages, the layout they
// are copied into and the round's status.
struct EpDispatchCopy {
    const u8* recv;
    const u32* nmsg;
    const u32* row_offsets;
    const u32* src_offsets;
    int n_local;
    int n_ranks;
    int rank;
    int skip_a2a;
    int shared_groups;
    int max_tokens;
    int hidden;
    int fmt;
    MsgLayout m;
    u8* recv_tokens;
    u8* recv_scales;
    int* src_info;
    int* row_src;
    int* msg_rows;
    u32* status;
    const u32* seq;
    u64 slice_ns;
};

// ep_dispatch_copy_out: also the shared expert's rows, the padding and the blocks' share.
struct EpDispatchCopyOutParams {
    EpDispatchCopy copy;
    const u8* shared_msgs;
    int row_multiple;
    u64 first_block;
    u32 per_sender;
};

// ep_dispatch_copy_messages and ep_dispatch_copy_lean: also the layout's release word and
// whether the blocks are the helpers after the send.
struct EpDispatchCopyMessagesParams {
    EpDispatchCopy copy;
    u32* layout_seq;
    int helper;
};

// The single-launch dispatch kernels (dispatch/single.cu): the send's, the wait's and the
// copy-out's in one.
struct EpDispatchSingleParams {
    const u16* tokens;
    const float* input_scales;
    int n_tokens;
    int hidden;
    int fmt;
    const int* ids;
    int top_k;
    MsgLayout m;
    const u64* recv_ptrs;
    int rank;
    int n_ranks;
    int n_local;
    int max_tokens;
    int shared_start;
    int shared_end;
    u8* shared_msgs;
    u32* ticket;
    u64* sent;
    int n_experts;
    int skip_a2a;
    const u64* count_ptrs;
    u64* counts;
    u64 slice_ns;
    int shared_groups;
    int row_multiple;
    u32* status;
    u64* snapshot;
    u32* row_offsets;
    u32* src_offsets;
    const u8* recv;
    u32* nmsg;
    u8* recv_tokens;
    u8* recv_scales;
    int* src_info;
    int* row_src;
    const u32* seq;
    int ll;
    int marked;
    u32* next_round;
};

// Where a combine row goes back: its source (src_info, row_src), the row count, the receivers'
// buffers and the staging of the inter-node ones. ep_combine_put's parameters (combine/send.cu)
// and part of the send's.
struct EpCombineTargets {
    const int* src_info;
    const int* row_src;
    const u32* rows_end;
    int hidden;
    int top_k;
    const u64* recv_ptrs;
    int rank;
    int gpus_per_node;
    u8* staging;
};

// ep_combine_send (combine/send.cu): the expert outputs, the targets, and the counts' and marks'
// publication.
struct EpCombineSendParams {
    const u16* expert_out;
    EpCombineTargets targets;
    int signal;
    u32* ticket;
    const u64* dispatch_counts;
    int n_local;
    int n_ranks;
    int skip_a2a;
    const u64* count_ptrs;
    const u32* nmsg;
    const u64* ll_ptrs;
    const u32* seq;
    const u64* mark_ptrs;
    u32* next_round;
};

// ep_combine_send_ordered: the send's, and each message's rows in token order.
struct EpCombineSendOrderedParams {
    EpCombineSendParams send;
    const int* msg_rows;
    int max_tokens;
};

// ep_combine_signal (combine/send.cu): the counts, published after the inter-node puts.
struct EpCombineSignalParams {
    const u64* dispatch_counts;
    int n_local;
    int n_ranks;
    int rank;
    int skip_a2a;
    const u64* count_ptrs;
    const u32* nmsg;
};

// ep_combine_net_rows (combine/send.cu): the rows NCCL brought from other nodes, to their slots.
struct EpCombineNetRowsParams {
    const u8* inbox;
    u8* recv;
    const int* ids;
    int hidden;
    int top_k;
    int max_tokens;
    int n_local;
    int rank;
    int gpus_per_node;
};

// ep_combine_wait (combine/send.cu): the counts and their check.
struct EpCombineWaitParams {
    u64* counts;
    int n_local;
    int n_ranks;
    int rank;
    int skip_a2a;
    u64 slice_ns;
    const u64* sent;
    u32* status;
    u64* snapshot;
};

// ep_combine_await_marks (combine/marked.cu): each token's rows' marks.
struct EpCombineAwaitMarksParams {
    const int* ids;
    int top_k;
    int rank;
    int n_local;
    int n_ranks;
    int skip_a2a;
    const u32* marks;
    const u32* seq;
    u64 slice_ns;
    u32* status;
};

// ep_combine_ll_unpack (combine/unreduced.cu): the LL rows into the receive buffer.
struct EpCombineLlUnpackParams {
    const u64* ll_ptrs;
    const u32* seq;
    u64 slice_ns;
    const int* ids;
    int top_k;
    int hidden;
    int rank;
    int n_local;
    int n_ranks;
    int skip_a2a;
    u16* recv;
    u32* status;
};

// ep_combine_unreduced (combine/unreduced.cu): the rows in the unreduced layout.
struct EpCombineUnreducedParams {
    const u16* recv;
    const int* ids;
    int top_k;
    int hidden;
    int rank;
    int n_local;
    int skip_a2a;
    u16* out;
    const u32* status;
};

// ep_combine_reduce (combine/reduce.cu): the weighted sum of each token's rows, and its epilogue.
struct EpCombineReduceParams {
    const u16* recv;
    const int* ids;
    const float* weights;
    int top_k;
    int hidden;
    int rank;
    int n_local;
    int skip_a2a;
    const u16* shared_rows;
    int shared_start;
    int shared_end;
    int epilogue;
    const u16* residual;
    float scale;
    u16* out;
    u8* fp8_payload;
    float* fp8_scales;
    u32* status;
};

// ep_combine_reduce_marked (combine/marked.cu): the reduce's, and the marks it reduces behind.
struct EpCombineReduceMarkedParams {
    EpCombineReduceParams reduce;
    int n_tokens;
    int n_ranks;
    const u32* marks;
    const u32* seq;
    u64 slice_ns;
};

// The single-launch combine kernels (combine/single.cu): the send's, the wait's and the reduce's
// in one.
struct EpCombineSingleParams {
    const u16* expert_out;
    const int* src_info;
    const int* row_src;
    const u32* rows_end;
    int hidden;
    int top_k;
    const u64* recv_ptrs;
    int rank;
    u32* ticket;
    const u64* dispatch_counts;
    int n_local;
    int n_ranks;
    int skip_a2a;
    const u64* count_ptrs;
    u64* counts;
    u64 slice_ns;
    const u64* sent;
    u32* status;
    const u16* recv;
    const int* ids;
    const float* weights;
    int n_tokens;
    const u16* shared_rows;
    int shared_start;
    int shared_end;
    int epilogue;
    const u16* residual;
    float scale;
    u16* out;
    u8* fp8_payload;
    float* fp8_scales;
    const u32* nmsg;
    const u64* ll_ptrs;
    const u32* seq;
    const u64* mark_ptrs;
    u32* next_round;
};

// ep_swiglu (swiglu.cu): the gated activation of the dispatched rows, quantised.
struct EpSwigluParams {
    const u16* x;
    u64 rows;
    int width;
    const u32* src_offsets;
    int n_groups;
    int n_ranks;
    int interleaved;
    int clamp;
    float alpha;
    float limit;
    int fmt;
    float input_scale;
    int payload_bytes;
    u8* payload;
    u8* scales;
};
