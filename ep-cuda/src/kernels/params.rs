//! The kernels' parameters: one `#[repr(C)]` struct per kind of kernel, each the twin of the CUDA
//! struct of the same name in `kernels/params.cuh`, which the kernel takes as its one parameter
//! (`const __grid_constant__ EpXxxParams p`, or a plain value where the body takes no address of it
//! and that compiled to faster code: the two reduces). Each struct is declared here once;
//! [`layouts`] gives its size and fields, which [`layout_check_source`] turns into checks that
//! NVRTC compiles against the header ([`check_layouts`], run by the kernels_compile test), so a
//! field added, removed, renamed, moved or resized on one side alone fails. Device pointers are
//! `u64` here; the header says what they point at.

use super::MsgLayout;

/// A kernel's one parameter, passed by value to `cuLaunchKernel` ([`super::launch_params`]).
///
/// # Safety
/// The type is `#[repr(C)]` and, field for field, the CUDA struct of the same name in
/// `kernels/params.cuh` (checked by [`layout_check_source`] under NVRTC and by a unit test without
/// it); a kernel launched with it declares that struct as its one parameter.
pub unsafe trait KernelParams: Copy {}

/// The layout of one parameter struct as Rust lays it out.
#[derive(Debug)]
pub struct Layout {
    /// The struct's name, the same in Rust and in `params.cuh`.
    pub name: &'static str,
    /// Its size, bytes.
    pub size: usize,
    /// Each field in order: its name, offset, size and alignment.
    pub fields: Vec<(&'static str, usize, usize, usize)>,
}

/// Declares each parameter struct once: the `#[repr(C)]` struct, its [`KernelParams`] and its
/// entry in [`layouts`].
macro_rules! kernel_params {
    ($($(#[doc = $doc:literal])* $name:ident {
        $($(#[doc = $fdoc:literal])* $field:ident: $ty:ty),* $(,)?
    })*) => {
        $(
            $(#[doc = $doc])*
            #[repr(C)]
            #[derive(Clone, Copy, Debug, Default)]
            pub struct $name {
                $($(#[doc = $fdoc])* pub $field: $ty),*
            }
            // SAFETY: #[repr(C)], declared with its CUDA twin's fields in the same order and
            // checked against it (`layout_check_source`).
            unsafe impl KernelParams for $name {}
        )*
        /// Every parameter struct's layout, in declaration order.
        pub fn layouts() -> Vec<Layout> {
            vec![$(Layout {
                name: stringify!($name),
                size: core::mem::size_of::<$name>(),
                fields: vec![$((
                    stringify!($field),
                    core::mem::offset_of!($name, $field),
                    core::mem::size_of::<$ty>(),
                    core::mem::align_of::<$ty>(),
                )),*],
            }),*]
        }
        /// Every parameter struct's field types as written here, in declaration order (the
        /// header test compares them with the CUDA types, beyond their sizes).
        #[cfg(test)]
        fn rust_types() -> Vec<(&'static str, Vec<&'static str>)> {
            vec![$((stringify!($name), vec![$(stringify!($ty)),*])),*]
        }
    };
}

kernel_params! {
/// ep_take_ids (dispatch/ids.cu): a round's expert ids from the caller's device memory, checked
/// while copied into the rank's own.
EpTakeIdsParams {
    /// Device pointer to the caller's expert ids, `[n_tokens, top_k]` (i32).
    src: u64,
    /// Device pointer to the rank's ids buffer the round reads, `[n_tokens, top_k]` (i32).
    dst: u64,
    /// This rank's tokens this round.
    n_tokens: i32,
    /// Expert slots per token.
    top_k: i32,
    /// Experts in the world: ids must be in `[-1, n_experts)`.
    n_experts: i32,
    /// Device pointer to the rank's refusal record, 4 words (u32): 1 once a batch was refused,
    /// then the first bad id's token, slot and value.
    refused: u64,
}
/// ep_assign_slots and ep_assign_chunks (dispatch/assign.cu): the row and message slots of the
/// round's tokens, and the counts published after them.
EpAssignParams {
    /// Device pointer to the tokens' expert ids, `[n_tokens, top_k]` (i32, -1 masks a slot).
    ids: u64,
    /// This rank's tokens this round.
    n_tokens: i32,
    /// Expert slots per token.
    top_k: i32,
    /// Experts in the world (`n_ranks * n_local`).
    n_experts: i32,
    /// Experts per rank.
    n_local: i32,
    /// Ranks in the world.
    n_ranks: i32,
    /// This rank.
    rank: i32,
    /// 1 when the config's `skip_a2a` is set: only this rank's own experts are routed to.
    skip_a2a: i32,
    /// Device pointer to each (token, slot)'s row slot among this rank's rows for its expert,
    /// `[n_tokens, top_k]` (i32, -1: none).
    slots: u64,
    /// Device pointer to each token's message slot at each destination rank, `[n_tokens, n_ranks]`
    /// (i32, -1: none).
    rank_slots: u64,
    /// Device pointer to each chunk's start per expert and per destination rank, `[chunks,
    /// n_experts + n_ranks]` (u32), which `slots` and `rank_slots` are relative to after
    /// ep_assign_chunks.
    chunk_base: u64,
    /// Device pointer to the rows this rank sends to each expert, `[n_experts]` (u64).
    sent: u64,
    /// Device pointer to the messages this rank sends to each rank, `[n_ranks]` (u32).
    msgs_to: u64,
    /// 1 in an overlapped or layout-first round: the counts go out before the payload
    /// (EP_NMSG_EARLY).
    early: i32,
    /// Device pointer to the launch's block tickets (u32): with `early` the last block to finish
    /// publishes the counts; zero between launches.
    ticket: u64,
    /// Device pointer to every rank's count words, `[n_ranks]` device addresses (u64), which this
    /// rank publishes its counts into.
    count_ptrs: u64,
    /// 1 when this rank's combine reduces its rows as they land (EP_NMSG_MARKED, comm/path.rs).
    marked: i32,
    /// 1 when this rank takes its combine rows in LL form (EP_NMSG_LL, comm/path.rs).
    ll: i32,
    /// Device pointer to the combine's round word (u32), which this kernel advances for the
    /// round's combine (`ep_advance_combine_round`; null: none).
    next_round: u64,
}
/// Where a dispatch token's messages go: its top-k slots (ids, slots, rank_slots, chunk_base), the
/// message, the receivers' buffers and the staging of the inter-node ones. ep_dispatch_put's
/// parameters (dispatch/send.cu) and part of the send's.
EpDispatchTargets {
    /// Device pointer to the tokens' expert ids, `[n_tokens, top_k]` (i32, -1 masks a slot).
    ids: u64,
    /// Device pointer to each (token, slot)'s row slot among this rank's rows for its expert,
    /// `[n_tokens, top_k]` (i32, -1: none).
    slots: u64,
    /// Device pointer to each token's message slot at each destination rank, `[n_tokens, n_ranks]`
    /// (i32, -1: none).
    rank_slots: u64,
    /// Device pointer to each chunk's start per expert and per destination rank, `[chunks,
    /// n_experts + n_ranks]` (u32), which `slots` and `rank_slots` are relative to after
    /// ep_assign_chunks.
    chunk_base: u64,
    /// Expert slots per token.
    top_k: i32,
    /// The dispatch message's layout on the wire.
    m: MsgLayout,
    /// Device pointer to every rank's receive buffer, `[n_ranks]` device addresses (u64).
    recv_ptrs: u64,
    /// This rank.
    rank: i32,
    /// Ranks in the world.
    n_ranks: i32,
    /// Experts per rank.
    n_local: i32,
    /// GPUs per node: receivers on another node are reached through `staging`.
    gpus_per_node: i32,
    /// The most tokens per rank the world is built for.
    max_tokens: i32,
    /// Device pointer to the staging bytes of the messages for other nodes, put after the send.
    staging: u64,
}
/// ep_dispatch_send and its variants (dispatch/send.cu): the rows, the targets, the shared
/// expert's messages, the counts' publication and the own rows' layout (ep_place_own_rows).
EpDispatchSendParams {
    /// Device pointer to this rank's rows, `[n_tokens, hidden]` (bf16 bits).
    tokens: u64,
    /// Device pointer to the tokens' input scales, `[n_tokens]` (f32), read only by the formats
    /// that take them.
    input_scales: u64,
    /// This rank's tokens this round.
    n_tokens: i32,
    /// Elements per row.
    hidden: i32,
    /// The wire format's number (common/formats.cuh).
    fmt: i32,
    /// Where each token's messages go.
    targets: EpDispatchTargets,
    /// First token of `[shared_start, shared_end)`, whose rows go to the fused shared expert on
    /// this rank.
    shared_start: i32,
    /// End of the fused shared expert's tokens (`shared_start == shared_end`: none).
    shared_end: i32,
    /// Device pointer to the fused shared expert's messages, one per token of `[shared_start,
    /// shared_end)`.
    shared_msgs: u64,
    /// 1 on one node: the last block publishes the counts (otherwise ep_dispatch_signal does, after
    /// the inter-node puts).
    signal: i32,
    /// Device pointer to the launch's block tickets (u32): the last block to finish takes the
    /// signal; zero between launches.
    ticket: u64,
    /// Device pointer to the rows this rank sends to each expert, `[n_experts]` (u64).
    sent: u64,
    /// Device pointer to the messages this rank sends to each rank, `[n_ranks]` (u32).
    msgs_to: u64,
    /// Experts in the world (`n_ranks * n_local`).
    n_experts: i32,
    /// 1 when the config's `skip_a2a` is set: only this rank's own experts are routed to.
    skip_a2a: i32,
    /// Device pointer to every rank's count words, `[n_ranks]` device addresses (u64), which this
    /// rank publishes its counts into.
    count_ptrs: u64,
    /// 1 in an overlapped or layout-first round: the counts go out before the payload
    /// (EP_NMSG_EARLY).
    early: i32,
    /// Device pointer to this round's number (u32, the rank's round word, advanced on the device:
    /// `next_round`), which the marks, the LL words and the layout's release carry.
    seq: u64,
    /// 1 when this rank's combine reduces its rows as they land (EP_NMSG_MARKED, comm/path.rs).
    marked: i32,
    /// 1 when this rank takes its combine rows in LL form (EP_NMSG_LL, comm/path.rs).
    ll: i32,
    /// Device pointer to the layout's two release words (u32): the round whose layout
    /// ep_dispatch_wait has written, then the messages the copy-out has taken; null: never
    /// released.
    layout_seq: u64,
    /// How long a block waits for the layout's release, ns (0 but in tests).
    layout_wait_ns: u64,
    /// Device pointer to each group's first row in the output, `[n_groups + 1]` (u32; the last: the
    /// rows in all).
    row_offsets: u64,
    /// Device pointer to where each source rank's rows begin in each group, `[n_groups, n_ranks +
    /// 1]` (u32).
    src_offsets: u64,
    /// 1 when the shared expert is fused (group 0 of the layout), else 0.
    shared_groups: i32,
    /// Device pointer to the dispatch's output rows, in the per-expert layout (the format's payload
    /// bytes per row).
    recv_tokens: u64,
    /// Device pointer to the output rows' scales (formats with scales).
    recv_scales: u64,
    /// Device pointer to each output row's source, `[rows, 2]` (i32: the token at its sender and
    /// its top-k slot; -1 for padding).
    src_info: u64,
    /// Device pointer to each output row's source rank, `[rows]` (i32, -1: padding).
    row_src: u64,
    /// Device pointer to each received message's rows by slot, `[n_ranks, max_tokens, top_k]` (i32,
    /// -1: not here); null where no combine sends its rows back in token order.
    msg_rows: u64,
}
/// ep_dispatch_signal (dispatch/send.cu): the counts, published after the inter-node puts.
EpDispatchSignalParams {
    /// Device pointer to the rows this rank sends to each expert, `[n_experts]` (u64).
    sent: u64,
    /// Device pointer to the messages this rank sends to each rank, `[n_ranks]` (u32).
    msgs_to: u64,
    /// Experts in the world (`n_ranks * n_local`).
    n_experts: i32,
    /// Experts per rank.
    n_local: i32,
    /// Ranks in the world.
    n_ranks: i32,
    /// This rank.
    rank: i32,
    /// 1 when the config's `skip_a2a` is set: only this rank's own experts are routed to.
    skip_a2a: i32,
    /// Device pointer to every rank's count words, `[n_ranks]` device addresses (u64), which this
    /// rank publishes its counts into.
    count_ptrs: u64,
}
/// ep_dispatch_wait (dispatch/layout.cu): the counts, their check and the groups' layout.
EpDispatchWaitParams {
    /// Device pointer to the count words this rank receives, `[n_local, n_ranks]` (u64), polled and
    /// reset to the sentinel for the next round.
    counts: u64,
    /// Experts per rank.
    n_local: i32,
    /// Ranks in the world.
    n_ranks: i32,
    /// This rank.
    rank: i32,
    /// 1 when the config's `skip_a2a` is set: only this rank's own experts are routed to.
    skip_a2a: i32,
    /// The longest this launch polls for what has not come, ns (a slice of the deadline).
    slice_ns: u64,
    /// The most tokens per rank the world is built for.
    max_tokens: i32,
    /// 1 when the shared expert is fused (group 0 of the layout), else 0.
    shared_groups: i32,
    /// The fused shared expert's rows on this rank (`shared_end - shared_start`).
    shared_len: i32,
    /// Each group's rows are padded up to a multiple of this.
    row_multiple: i32,
    /// Device pointer to the round's status words (u32): the wait's code, then a flag per (local
    /// expert, rank) count or row that did not come (common/protocol.cuh).
    status: u64,
    /// Device pointer to the counts as they came, `[n_local, n_ranks]` (u64), for the host.
    snapshot: u64,
    /// Device pointer to the message count from each rank, `[n_ranks]` (u32), written from its
    /// count words.
    nmsg: u64,
    /// Device pointer to each group's first row in the output, `[n_groups + 1]` (u32; the last: the
    /// rows in all), written once every count is there.
    row_offsets: u64,
    /// Device pointer to where each source rank's rows begin in each group, `[n_groups, n_ranks +
    /// 1]` (u32), written with `row_offsets`.
    src_offsets: u64,
    /// Device pointer to the layout's two release words (u32): the round released (`seq`), then the
    /// messages the copy-out has taken, zeroed; null: no release.
    layout_seq: u64,
    /// Device pointer to this round's number (u32, the rank's round word, advanced on the device:
    /// `next_round`), which the marks, the LL words and the layout's release carry.
    seq: u64,
}
/// What the copy-out kernels share (dispatch/copy_out.cu): the landed messages, the layout they
/// are copied into and the round's status.
EpDispatchCopy {
    /// Device pointer to this rank's dispatch receive buffer, where the senders' messages land.
    recv: u64,
    /// Device pointer to the message count from each rank, `[n_ranks]` (u32), as its count words
    /// carried it.
    nmsg: u64,
    /// Device pointer to each group's first row in the output, `[n_groups + 1]` (u32; the last: the
    /// rows in all).
    row_offsets: u64,
    /// Device pointer to where each source rank's rows begin in each group, `[n_groups, n_ranks +
    /// 1]` (u32).
    src_offsets: u64,
    /// Experts per rank.
    n_local: i32,
    /// Ranks in the world.
    n_ranks: i32,
    /// This rank.
    rank: i32,
    /// 1 when the config's `skip_a2a` is set: only this rank's own experts are routed to.
    skip_a2a: i32,
    /// 1 when the shared expert is fused (group 0 of the layout), else 0.
    shared_groups: i32,
    /// The most tokens per rank the world is built for.
    max_tokens: i32,
    /// Elements per row.
    hidden: i32,
    /// The wire format's number (common/formats.cuh).
    fmt: i32,
    /// The dispatch message's layout on the wire.
    m: MsgLayout,
    /// Device pointer to the dispatch's output rows, in the per-expert layout (the format's payload
    /// bytes per row).
    recv_tokens: u64,
    /// Device pointer to the output rows' scales (formats with scales).
    recv_scales: u64,
    /// Device pointer to each output row's source, `[rows, 2]` (i32: the token at its sender and
    /// its top-k slot; -1 for padding).
    src_info: u64,
    /// Device pointer to each output row's source rank, `[rows]` (i32, -1: padding).
    row_src: u64,
    /// Device pointer to each received message's rows by slot, `[n_ranks, max_tokens, top_k]` (i32,
    /// -1: not here); null where no combine sends its rows back in token order.
    msg_rows: u64,
    /// Device pointer to the round's status words (u32): the copy-out does nothing unless the wait
    /// completed.
    status: u64,
    /// Device pointer to this round's number (u32, the rank's round word, advanced on the device:
    /// `next_round`), which the marks, the LL words and the layout's release carry.
    seq: u64,
    /// The longest this launch polls for what has not come, ns (a slice of the deadline).
    slice_ns: u64,
}
/// ep_dispatch_copy_out: also the shared expert's rows, the padding and the blocks' share.
EpDispatchCopyOutParams {
    /// What the copy-out kernels share.
    copy: EpDispatchCopy,
    /// Device pointer to the fused shared expert's messages, one per token of `[shared_start,
    /// shared_end)`.
    shared_msgs: u64,
    /// Each group's rows are padded up to a multiple of this.
    row_multiple: i32,
    /// Block b does the work of block `b + first_block` (an overlapped round launches only the
    /// padding and shared-expert blocks).
    first_block: u64,
    /// Blocks per sending rank for its messages; each takes message j, j + per_sender, ...
    per_sender: u32,
}
/// ep_dispatch_copy_messages and ep_dispatch_copy_lean: also the layout's release word and
/// whether the blocks are the helpers after the send.
EpDispatchCopyMessagesParams {
    /// What the copy-out kernels share.
    copy: EpDispatchCopy,
    /// Device pointer to the layout's two release words (u32): the round whose layout
    /// ep_dispatch_wait has written, then the messages the copy-out has taken; null: never
    /// released.
    layout_seq: u64,
    /// 1 for the helpers launched after the send, which take what the copy-out beside the send
    /// left.
    helper: i32,
}
/// The single-launch dispatch kernels (dispatch/single.cu): the send's, the wait's and the
/// copy-out's in one.
EpDispatchSingleParams {
    /// Device pointer to this rank's rows, `[n_tokens, hidden]` (bf16 bits).
    tokens: u64,
    /// Device pointer to the tokens' input scales, `[n_tokens]` (f32), read only by the formats
    /// that take them.
    input_scales: u64,
    /// This rank's tokens this round.
    n_tokens: i32,
    /// Elements per row.
    hidden: i32,
    /// The wire format's number (common/formats.cuh).
    fmt: i32,
    /// Device pointer to the tokens' expert ids, `[n_tokens, top_k]` (i32, -1 masks a slot).
    ids: u64,
    /// Expert slots per token.
    top_k: i32,
    /// The dispatch message's layout on the wire.
    m: MsgLayout,
    /// Device pointer to every rank's receive buffer, `[n_ranks]` device addresses (u64).
    recv_ptrs: u64,
    /// This rank.
    rank: i32,
    /// Ranks in the world.
    n_ranks: i32,
    /// Experts per rank.
    n_local: i32,
    /// The most tokens per rank the world is built for.
    max_tokens: i32,
    /// First token of `[shared_start, shared_end)`, whose rows go to the fused shared expert on
    /// this rank.
    shared_start: i32,
    /// End of the fused shared expert's tokens (`shared_start == shared_end`: none).
    shared_end: i32,
    /// Device pointer to the fused shared expert's messages, one per token of `[shared_start,
    /// shared_end)`.
    shared_msgs: u64,
    /// Device pointer to the launch's block tickets (u32): the last block to finish takes the
    /// signal; zero between launches.
    ticket: u64,
    /// Device pointer to the rows this rank sends to each expert, `[n_experts]` (u64).
    sent: u64,
    /// Experts in the world (`n_ranks * n_local`).
    n_experts: i32,
    /// 1 when the config's `skip_a2a` is set: only this rank's own experts are routed to.
    skip_a2a: i32,
    /// Device pointer to every rank's count words, `[n_ranks]` device addresses (u64), which this
    /// rank publishes its counts into.
    count_ptrs: u64,
    /// Device pointer to the count words this rank receives, `[n_local, n_ranks]` (u64), polled and
    /// reset to the sentinel for the next round.
    counts: u64,
    /// The longest this launch polls for what has not come, ns (a slice of the deadline).
    slice_ns: u64,
    /// 1 when the shared expert is fused (group 0 of the layout), else 0.
    shared_groups: i32,
    /// Each group's rows are padded up to a multiple of this.
    row_multiple: i32,
    /// Device pointer to the round's status words (u32): the wait's code, then a flag per (local
    /// expert, rank) count or row that did not come (common/protocol.cuh).
    status: u64,
    /// Device pointer to the counts as they came, `[n_local, n_ranks]` (u64), for the host.
    snapshot: u64,
    /// Device pointer to each group's first row in the output, `[n_groups + 1]` (u32; the last: the
    /// rows in all).
    row_offsets: u64,
    /// Device pointer to where each source rank's rows begin in each group, `[n_groups, n_ranks +
    /// 1]` (u32).
    src_offsets: u64,
    /// Device pointer to this rank's dispatch receive buffer, where the senders' messages land.
    recv: u64,
    /// Device pointer to the message count from each rank, `[n_ranks]` (u32), as its count words
    /// carried it.
    nmsg: u64,
    /// Device pointer to the dispatch's output rows, in the per-expert layout (the format's payload
    /// bytes per row).
    recv_tokens: u64,
    /// Device pointer to the output rows' scales (formats with scales).
    recv_scales: u64,
    /// Device pointer to each output row's source, `[rows, 2]` (i32: the token at its sender and
    /// its top-k slot; -1 for padding).
    src_info: u64,
    /// Device pointer to each output row's source rank, `[rows]` (i32, -1: padding).
    row_src: u64,
    /// Device pointer to this round's number (u32, the rank's round word, advanced on the device:
    /// `next_round`), which the marks, the LL words and the layout's release carry.
    seq: u64,
    /// 1 when this rank takes its combine rows in LL form (EP_NMSG_LL, comm/path.rs).
    ll: i32,
    /// 1 when this rank's combine reduces its rows as they land (EP_NMSG_MARKED, comm/path.rs).
    marked: i32,
    /// Device pointer to the combine's round word (u32), which this kernel advances for the
    /// round's combine (`ep_advance_combine_round`; null: none).
    next_round: u64,
}
/// Where a combine row goes back: its source (src_info, row_src), the row count, the receivers'
/// buffers and the staging of the inter-node ones. ep_combine_put's parameters (combine/send.cu)
/// and part of the send's.
EpCombineTargets {
    /// Device pointer to each output row's source, `[rows, 2]` (i32: the token at its sender and
    /// its top-k slot; -1 for padding).
    src_info: u64,
    /// Device pointer to each output row's source rank, `[rows]` (i32, -1: padding).
    row_src: u64,
    /// Device pointer to the dispatch's rows in all (u32, the last entry of `row_offsets`).
    rows_end: u64,
    /// Elements per row.
    hidden: i32,
    /// Expert slots per token at the receivers.
    top_k: i32,
    /// Device pointer to every rank's combine receive buffer, `[n_ranks]` device addresses (u64).
    recv_ptrs: u64,
    /// This rank.
    rank: i32,
    /// GPUs per node: receivers on another node are reached through `staging`.
    gpus_per_node: i32,
    /// Device pointer to the staging bytes of the rows for other nodes, put after the send.
    staging: u64,
}
/// ep_combine_send (combine/send.cu): the expert outputs, the targets, and the counts' and marks'
/// publication.
EpCombineSendParams {
    /// Device pointer to the expert outputs, in the dispatch's per-expert layout, `[rows, hidden]`
    /// (bf16 bits).
    expert_out: u64,
    /// Where each row goes back.
    targets: EpCombineTargets,
    /// 1 on one node: the last block publishes the counts (otherwise ep_combine_signal does, after
    /// the inter-node puts).
    signal: i32,
    /// Device pointer to the launch's block tickets (u32): the last block to finish takes the
    /// signal; zero between launches.
    ticket: u64,
    /// Device pointer to the dispatch's counts as they came, `[n_local, n_ranks]` (u64): the rows
    /// going back to each rank.
    dispatch_counts: u64,
    /// Experts per rank.
    n_local: i32,
    /// Ranks in the world.
    n_ranks: i32,
    /// 1 when the config's `skip_a2a` is set: only this rank's own experts are routed to.
    skip_a2a: i32,
    /// Device pointer to every rank's combine count words, `[n_ranks]` device addresses (u64),
    /// which this rank publishes its counts into.
    count_ptrs: u64,
    /// Device pointer to the message count word from each rank, `[n_ranks]` (u32): its combine form
    /// (LL, marked) among the flags.
    nmsg: u64,
    /// Device pointer to every rank's LL rows, `[n_ranks]` device addresses (u64).
    ll_ptrs: u64,
    /// Device pointer to this combine's number (u32, the rank's round word, advanced on the
    /// device: `next_round`), which the marks and the LL words carry.
    seq: u64,
    /// Device pointer to every rank's combine marks, `[n_ranks]` device addresses (u64).
    mark_ptrs: u64,
    /// Device pointer to the dispatch's round word (u32), which this kernel advances for the
    /// next round's dispatch (`ep_advance_dispatch_round`; null: none).
    next_round: u64,
}
/// ep_combine_send_ordered: the send's, and each message's rows in token order.
EpCombineSendOrderedParams {
    /// The send's parameters.
    send: EpCombineSendParams,
    /// Device pointer to each received message's rows by slot, `[n_ranks, max_tokens, top_k]` (i32,
    /// -1: not here); null where no combine sends its rows back in token order.
    msg_rows: u64,
    /// The most tokens per rank the world is built for.
    max_tokens: i32,
}
/// ep_combine_signal (combine/send.cu): the counts, published after the inter-node puts.
EpCombineSignalParams {
    /// Device pointer to the dispatch's counts as they came, `[n_local, n_ranks]` (u64): the rows
    /// going back to each rank.
    dispatch_counts: u64,
    /// Experts per rank.
    n_local: i32,
    /// Ranks in the world.
    n_ranks: i32,
    /// This rank.
    rank: i32,
    /// 1 when the config's `skip_a2a` is set: only this rank's own experts are routed to.
    skip_a2a: i32,
    /// Device pointer to every rank's combine count words, `[n_ranks]` device addresses (u64),
    /// which this rank publishes its counts into.
    count_ptrs: u64,
    /// Device pointer to the message count word from each rank, `[n_ranks]` (u32).
    nmsg: u64,
}
/// ep_combine_net_rows (combine/send.cu): the rows NCCL brought from the ranks of other nodes
/// (net.rs), each slot whose expert is on one of them to the receive buffer.
EpCombineNetRowsParams {
    /// Device pointer to the inbox, `[remote ranks, max_tokens, top_k, hidden]` (bf16 bits).
    inbox: u64,
    /// Device pointer to this rank's combine receive buffer, `[max_tokens, top_k, hidden]`.
    recv: u64,
    /// Device pointer to the round's expert ids, `[tokens, top_k]` (i32, -1 masked).
    ids: u64,
    /// Elements per row.
    hidden: i32,
    /// Expert slots per token.
    top_k: i32,
    /// Tokens a rank may send (the inbox regions' size).
    max_tokens: i32,
    /// Experts per rank.
    n_local: i32,
    /// This rank.
    rank: i32,
    /// GPUs per node.
    gpus_per_node: i32,
}
/// ep_combine_wait (combine/send.cu): the counts and their check.
EpCombineWaitParams {
    /// Device pointer to the combine count words this rank receives, `[n_local, n_ranks]` (u64),
    /// polled and reset to the sentinel for the next round.
    counts: u64,
    /// Experts per rank.
    n_local: i32,
    /// Ranks in the world.
    n_ranks: i32,
    /// This rank.
    rank: i32,
    /// 1 when the config's `skip_a2a` is set: only this rank's own experts are routed to.
    skip_a2a: i32,
    /// The longest this launch polls for what has not come, ns (a slice of the deadline).
    slice_ns: u64,
    /// Device pointer to the combine rows this rank sent to each expert, `[n_experts]` (u64), which
    /// the counts it receives are checked against.
    sent: u64,
    /// Device pointer to the round's status words (u32): the wait's code, then a flag per (local
    /// expert, rank) count or row that did not come (common/protocol.cuh).
    status: u64,
    /// Device pointer to the counts as they came, `[n_local, n_ranks]` (u64), for the host.
    snapshot: u64,
}
/// ep_combine_await_marks (combine/marked.cu): each token's rows' marks.
EpCombineAwaitMarksParams {
    /// Device pointer to the tokens' expert ids, `[n_tokens, top_k]` (i32, -1 masks a slot).
    ids: u64,
    /// Expert slots per token.
    top_k: i32,
    /// This rank.
    rank: i32,
    /// Experts per rank.
    n_local: i32,
    /// Ranks in the world.
    n_ranks: i32,
    /// 1 when the config's `skip_a2a` is set: only this rank's own experts are routed to.
    skip_a2a: i32,
    /// Device pointer to this rank's combine marks, one per (token, slot), `[max_tokens, top_k]`
    /// (u32): the combine's number, written by the slot's sender after its row.
    marks: u64,
    /// Device pointer to this round's number (u32, the rank's round word, advanced on the device:
    /// `next_round`), which the marks, the LL words and the layout's release carry.
    seq: u64,
    /// The longest this launch polls for what has not come, ns (a slice of the deadline).
    slice_ns: u64,
    /// Device pointer to the round's status words (u32): the wait's code, then a flag per (local
    /// expert, rank) count or row that did not come (common/protocol.cuh).
    status: u64,
}
/// ep_combine_ll_unpack (combine/unreduced.cu): the LL rows into the receive buffer.
EpCombineLlUnpackParams {
    /// Device pointer to every rank's LL rows, `[n_ranks]` device addresses (u64).
    ll_ptrs: u64,
    /// Device pointer to this round's number (u32, the rank's round word, advanced on the device:
    /// `next_round`), which the marks, the LL words and the layout's release carry.
    seq: u64,
    /// The longest this launch polls for what has not come, ns (a slice of the deadline).
    slice_ns: u64,
    /// Device pointer to the tokens' expert ids, `[n_tokens, top_k]` (i32, -1 masks a slot).
    ids: u64,
    /// Expert slots per token.
    top_k: i32,
    /// Elements per row.
    hidden: i32,
    /// This rank.
    rank: i32,
    /// Experts per rank.
    n_local: i32,
    /// Ranks in the world.
    n_ranks: i32,
    /// 1 when the config's `skip_a2a` is set: only this rank's own experts are routed to.
    skip_a2a: i32,
    /// Device pointer to this rank's combine receive buffer, which the LL rows are unpacked into
    /// (bf16 bits).
    recv: u64,
    /// Device pointer to the round's status words (u32): the wait's code, then a flag per (local
    /// expert, rank) count or row that did not come (common/protocol.cuh).
    status: u64,
}
/// ep_combine_unreduced (combine/unreduced.cu): the rows in the unreduced layout.
EpCombineUnreducedParams {
    /// Device pointer to this rank's combine receive buffer: each (token, slot)'s row (bf16 bits).
    recv: u64,
    /// Device pointer to the tokens' expert ids, `[n_tokens, top_k]` (i32, -1 masks a slot).
    ids: u64,
    /// Expert slots per token.
    top_k: i32,
    /// Elements per row.
    hidden: i32,
    /// This rank.
    rank: i32,
    /// Experts per rank.
    n_local: i32,
    /// 1 when the config's `skip_a2a` is set: only this rank's own experts are routed to.
    skip_a2a: i32,
    /// Device pointer to the unreduced output, `[n_tokens, top_k, hidden]` (bf16 bits).
    out: u64,
    /// Device pointer to the round's status words (u32): the wait's code, then a flag per (local
    /// expert, rank) count or row that did not come (common/protocol.cuh).
    status: u64,
}
/// ep_combine_reduce (combine/reduce.cu): the weighted sum of each token's rows, and its epilogue.
EpCombineReduceParams {
    /// Device pointer to this rank's combine receive buffer: each (token, slot)'s row (bf16 bits).
    recv: u64,
    /// Device pointer to the tokens' expert ids, `[n_tokens, top_k]` (i32, -1 masks a slot).
    ids: u64,
    /// Device pointer to the router weights, `[n_tokens, top_k]` (f32).
    weights: u64,
    /// Expert slots per token.
    top_k: i32,
    /// Elements per row.
    hidden: i32,
    /// This rank.
    rank: i32,
    /// Experts per rank.
    n_local: i32,
    /// 1 when the config's `skip_a2a` is set: only this rank's own experts are routed to.
    skip_a2a: i32,
    /// Device pointer to the fused shared expert's output rows (bf16 bits, group 0 of
    /// `expert_out`); null when it is not fused.
    shared_rows: u64,
    /// First token of `[shared_start, shared_end)`, whose rows go to the fused shared expert on
    /// this rank.
    shared_start: i32,
    /// End of the fused shared expert's tokens (`shared_start == shared_end`: none).
    shared_end: i32,
    /// The epilogue applied to each reduced row (EP_EPI_*: none, residual, scale, FP8 or a
    /// device-code one).
    epilogue: i32,
    /// Device pointer to the residual added by the residual epilogue, `[n_tokens, hidden]` (bf16
    /// bits).
    residual: u64,
    /// The factor of the scale epilogue.
    scale: f32,
    /// Device pointer to the reduced output, `[n_tokens, hidden]` (bf16 bits).
    out: u64,
    /// Device pointer to the FP8 epilogue's e4m3 rows, `[n_tokens, hidden]` (bytes).
    fp8_payload: u64,
    /// Device pointer to the FP8 epilogue's block scales (f32).
    fp8_scales: u64,
    /// Device pointer to the round's status words (u32): the wait's code, then a flag per (local
    /// expert, rank) count or row that did not come (common/protocol.cuh).
    status: u64,
}
/// ep_combine_reduce_marked (combine/marked.cu): the reduce's, and the marks it reduces behind.
EpCombineReduceMarkedParams {
    /// The reduce's parameters.
    reduce: EpCombineReduceParams,
    /// This rank's tokens this round.
    n_tokens: i32,
    /// Ranks in the world.
    n_ranks: i32,
    /// Device pointer to this rank's combine marks, `[max_tokens, top_k]` (u32): the combine's
    /// number, written by the slot's sender after its row.
    marks: u64,
    /// Device pointer to this round's number (u32, the rank's round word, advanced on the device:
    /// `next_round`), which the marks, the LL words and the layout's release carry.
    seq: u64,
    /// The longest this launch polls for what has not come, ns (a slice of the deadline).
    slice_ns: u64,
}
/// The single-launch combine kernels (combine/single.cu): the send's, the wait's and the reduce's
/// in one.
EpCombineSingleParams {
    /// Device pointer to the expert outputs, in the dispatch's per-expert layout, `[rows, hidden]`
    /// (bf16 bits).
    expert_out: u64,
    /// Device pointer to each output row's source, `[rows, 2]` (i32: the token at its sender and
    /// its top-k slot; -1 for padding).
    src_info: u64,
    /// Device pointer to each output row's source rank, `[rows]` (i32, -1: padding).
    row_src: u64,
    /// Device pointer to the dispatch's rows in all (u32, the last entry of `row_offsets`).
    rows_end: u64,
    /// Elements per row.
    hidden: i32,
    /// Expert slots per token.
    top_k: i32,
    /// Device pointer to every rank's combine receive buffer, `[n_ranks]` device addresses (u64).
    recv_ptrs: u64,
    /// This rank.
    rank: i32,
    /// Device pointer to the launch's block tickets (u32): the last block to finish takes the
    /// signal; zero between launches.
    ticket: u64,
    /// Device pointer to the dispatch's counts as they came, `[n_local, n_ranks]` (u64): the rows
    /// going back to each rank.
    dispatch_counts: u64,
    /// Experts per rank.
    n_local: i32,
    /// Ranks in the world.
    n_ranks: i32,
    /// 1 when the config's `skip_a2a` is set: only this rank's own experts are routed to.
    skip_a2a: i32,
    /// Device pointer to every rank's count words, `[n_ranks]` device addresses (u64), which this
    /// rank publishes its counts into.
    count_ptrs: u64,
    /// Device pointer to the count words this rank receives, `[n_local, n_ranks]` (u64), polled and
    /// reset to the sentinel for the next round.
    counts: u64,
    /// The longest this launch polls for what has not come, ns (a slice of the deadline).
    slice_ns: u64,
    /// Device pointer to the combine rows this rank sent, which the counts it receives are checked
    /// against.
    sent: u64,
    /// Device pointer to the round's status words (u32): the wait's code, then a flag per (local
    /// expert, rank) count or row that did not come (common/protocol.cuh).
    status: u64,
    /// Device pointer to this rank's combine receive buffer: each (token, slot)'s row (bf16 bits).
    recv: u64,
    /// Device pointer to the tokens' expert ids, `[n_tokens, top_k]` (i32, -1 masks a slot).
    ids: u64,
    /// Device pointer to the router weights, `[n_tokens, top_k]` (f32).
    weights: u64,
    /// This rank's tokens this round.
    n_tokens: i32,
    /// Device pointer to the fused shared expert's output rows (bf16 bits, group 0 of
    /// `expert_out`); null when it is not fused.
    shared_rows: u64,
    /// First token of `[shared_start, shared_end)`, whose rows go to the fused shared expert on
    /// this rank.
    shared_start: i32,
    /// End of the fused shared expert's tokens (`shared_start == shared_end`: none).
    shared_end: i32,
    /// The epilogue applied to each reduced row (EP_EPI_*: none, residual, scale, FP8 or a
    /// device-code one).
    epilogue: i32,
    /// Device pointer to the residual added by the residual epilogue, `[n_tokens, hidden]` (bf16
    /// bits).
    residual: u64,
    /// The factor of the scale epilogue.
    scale: f32,
    /// Device pointer to the reduced output, `[n_tokens, hidden]` (bf16 bits).
    out: u64,
    /// Device pointer to the FP8 epilogue's e4m3 rows, `[n_tokens, hidden]` (bytes).
    fp8_payload: u64,
    /// Device pointer to the FP8 epilogue's block scales (f32).
    fp8_scales: u64,
    /// Device pointer to the message count word from each rank, `[n_ranks]` (u32): its combine form
    /// (LL, marked) among the flags.
    nmsg: u64,
    /// Device pointer to every rank's LL rows, `[n_ranks]` device addresses (u64).
    ll_ptrs: u64,
    /// Device pointer to this round's number (u32, the rank's round word, advanced on the device:
    /// `next_round`), which the marks, the LL words and the layout's release carry.
    seq: u64,
    /// Device pointer to every rank's combine marks, `[n_ranks]` device addresses (u64).
    mark_ptrs: u64,
    /// Device pointer to the dispatch's round word (u32), which this kernel advances for the
    /// next round's dispatch (`ep_advance_dispatch_round`; null: none).
    next_round: u64,
}
/// ep_swiglu (swiglu.cu): the gated activation of the dispatched rows, quantised.
EpSwigluParams {
    /// Device pointer to the gate and up halves of each row, `[rows, 2 * width]` (bf16 bits).
    x: u64,
    /// Rows to activate.
    rows: u64,
    /// Elements of each output row (half of an input row).
    width: i32,
    /// Device pointer to where each source rank's rows begin in each group, `[n_groups, n_ranks +
    /// 1]` (u32): the dispatch's layout, whose padding rows are left alone.
    src_offsets: u64,
    /// Groups of the dispatch's layout, `src_offsets`' rows.
    n_groups: i32,
    /// Ranks in the world (`src_offsets`' columns less one).
    n_ranks: i32,
    /// 1 when the gate and up elements alternate in a row, 0 when they are its two halves.
    interleaved: i32,
    /// 1 to clamp the inputs by `alpha` and `limit` (the clamped SwiGLU), else 0.
    clamp: i32,
    /// The clamped SwiGLU's alpha (read only with `clamp`).
    alpha: f32,
    /// The clamped SwiGLU's limit (read only with `clamp`).
    limit: f32,
    /// The output format's number (common/formats.cuh).
    fmt: i32,
    /// NVFP4's global input scale for the rows (ignored by the other formats).
    input_scale: f32,
    /// Bytes of one output row's payload.
    payload_bytes: i32,
    /// Device pointer to the output rows' payload, `[rows, payload_bytes]`.
    payload: u64,
    /// Device pointer to the output rows' scales (formats with scales).
    scales: u64,
}}

/// A program that NVRTC compiles (as C++20) only where each struct of `params.cuh` is laid out as
/// Rust lays out its twin: as many fields (a structured binding of exactly that many), the same
/// names in the same order (designated initializers, which C++20 holds to the declaration order),
/// each of the same size and alignment, and the same size in all; the offsets then agree. (NVRTC
/// has no `offsetof` to compare them directly.)
pub fn layout_check_source() -> String {
    let mut s = super::file_source("params.cuh");
    for l in layouts() {
        let n = l.name;
        let inits: Vec<_> = l
            .fields
            .iter()
            .map(|f| format!(".{} = {{}}", f.0))
            .collect();
        let binds: Vec<_> = (0..l.fields.len()).map(|i| format!("f{i}")).collect();
        s += &format!(
            "[[maybe_unused]] constexpr {n} ep_layout_{n}{{{}}};\n\
             __device__ void ep_layout_count_{n}(const {n}& p) {{ [[maybe_unused]] auto& [{}] = p; }}\n\
             static_assert(sizeof({n}) == {}, \"{n}: size\");\n",
            inits.join(", "),
            binds.join(", "),
            l.size
        );
        for (f, _, size, align) in l.fields {
            s += &format!(
                "static_assert(sizeof({n}::{f}) == {size} && alignof(decltype({n}::{f})) == {align}, \
                 \"{n}.{f}: size or alignment\");\n"
            );
        }
    }
    s
}

/// Compiles [`layout_check_source`] with NVRTC: an error names each struct or field whose layout
/// differs between `params.cuh` and this module.
pub fn check_layouts() -> ep_core::Result<()> {
    crate::driver::nvrtc_present()?;
    let opts = cudarc::nvrtc::CompileOptions {
        arch: Some("sm_90"),
        options: vec!["-std=c++20".into()],
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(layout_check_source(), opts)
        .map(|_| ())
        .map_err(|e| ep_core::EpError::Backend(format!("params.cuh and params.rs differ: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARAMS: &str = include_str!("params.cuh");

    /// The fields `params.cuh` declares for `name`, in order, as (type, field).
    fn cuda_fields(name: &str) -> Vec<(String, String)> {
        let head = format!("struct {name} {{\n");
        let at = PARAMS
            .find(&head)
            .unwrap_or_else(|| panic!("params.cuh has no {head:?}"))
            + head.len();
        let end = at + PARAMS[at..].find("};").unwrap();
        PARAMS[at..end]
            .lines()
            .map(|l| {
                let l = l.trim().trim_end_matches(';');
                let (ty, field) = l.rsplit_once(' ').unwrap();
                (ty.to_string(), field.to_string())
            })
            .collect()
    }

    /// Without NVRTC: the header declares each struct with Rust's fields in Rust's order, each of
    /// a size its CUDA type has (a pointer 8 bytes, int/u32/float 4, u64 8, a struct its own), and
    /// no struct Rust lacks.
    #[test]
    fn header_declares_the_rust_structs() {
        let all = layouts();
        for l in &all {
            let cuda = cuda_fields(l.name);
            let names: Vec<_> = cuda.iter().map(|(_, f)| f.as_str()).collect();
            let rust: Vec<_> = l.fields.iter().map(|f| f.0).collect();
            assert_eq!(names, rust, "{}", l.name);
            let types = &rust_types()
                .into_iter()
                .find(|(n, _)| *n == l.name)
                .unwrap()
                .1;
            for ((ty, f), rust_ty) in cuda.iter().zip(types) {
                // The Rust type each CUDA type is declared as: a device pointer is a u64.
                let want = match ty.as_str() {
                    t if t.ends_with('*') => "u64",
                    "int" => "i32",
                    "float" => "f32",
                    t => t,
                };
                assert_eq!(*rust_ty, want, "{}.{f}: {ty}", l.name);
            }
            for ((ty, f), &(_, _, size, _)) in cuda.iter().zip(&l.fields) {
                let want = if ty.ends_with('*') {
                    8
                } else {
                    match ty.as_str() {
                        "int" | "u32" | "float" => 4,
                        "u64" => 8,
                        "MsgLayout" => core::mem::size_of::<MsgLayout>(),
                        s => {
                            all.iter()
                                .find(|o| o.name == s)
                                .unwrap_or_else(|| panic!("{s}"))
                                .size
                        }
                    }
                };
                assert_eq!(size, want, "{}.{f}: {ty}", l.name);
            }
        }
        assert_eq!(PARAMS.matches("\nstruct ").count(), all.len());
    }

    /// The NVRTC check has a size check per struct and per field, and names every field.
    #[test]
    fn layout_check_covers_every_field() {
        let src = layout_check_source();
        let src = &src[super::super::file_source("params.cuh").len()..];
        let fields: usize = layouts().iter().map(|l| l.fields.len()).sum();
        assert_eq!(
            src.matches("static_assert(").count(),
            layouts().len() + fields
        );
        assert!(src.contains("constexpr EpDispatchTargets ep_layout_EpDispatchTargets{.ids = {}, "));
        assert!(src.contains("static_assert(sizeof(EpDispatchSendParams::targets) == 112 && "));
    }
}
