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
    pub name: &'static str,
    pub size: usize,
    /// Each field in order: its name, offset, size and alignment.
    pub fields: Vec<(&'static str, usize, usize, usize)>,
}

/// Declares each parameter struct once: the `#[repr(C)]` struct, its [`KernelParams`] and its
/// entry in [`layouts`].
macro_rules! kernel_params {
    ($($(#[doc = $doc:literal])* $name:ident { $($field:ident: $ty:ty),* $(,)? })*) => {
        $(
            $(#[doc = $doc])*
            #[repr(C)]
            #[derive(Clone, Copy, Debug, Default)]
            pub struct $name {
                $(pub $field: $ty),*
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
    };
}

kernel_params! {
/// ep_assign_slots and ep_assign_chunks (dispatch/assign.cu): the row and message slots of the
/// round's tokens, and the counts published after them.
EpAssignParams {
    ids: u64,
    n_tokens: i32,
    top_k: i32,
    n_experts: i32,
    n_local: i32,
    n_ranks: i32,
    rank: i32,
    skip_a2a: i32,
    slots: u64,
    rank_slots: u64,
    chunk_base: u64,
    sent: u64,
    msgs_to: u64,
    early: i32,
    ticket: u64,
    count_ptrs: u64,
    marked: i32,
    ll: i32,
}
/// Where a dispatch token's messages go: its top-k slots (ids, slots, rank_slots, chunk_base), the
/// message, the receivers' buffers and the staging of the inter-node ones. ep_dispatch_put's
/// parameters (dispatch/send.cu) and part of the send's.
EpDispatchTargets {
    ids: u64,
    slots: u64,
    rank_slots: u64,
    chunk_base: u64,
    top_k: i32,
    m: MsgLayout,
    recv_ptrs: u64,
    rank: i32,
    n_ranks: i32,
    n_local: i32,
    gpus_per_node: i32,
    max_tokens: i32,
    staging: u64,
}
/// ep_dispatch_send and its variants (dispatch/send.cu): the rows, the targets, the shared
/// expert's messages, the counts' publication and the own rows' layout (ep_place_own_rows).
EpDispatchSendParams {
    tokens: u64,
    input_scales: u64,
    n_tokens: i32,
    hidden: i32,
    fmt: i32,
    targets: EpDispatchTargets,
    shared_start: i32,
    shared_end: i32,
    shared_msgs: u64,
    signal: i32,
    ticket: u64,
    sent: u64,
    msgs_to: u64,
    n_experts: i32,
    skip_a2a: i32,
    count_ptrs: u64,
    early: i32,
    seq: u32,
    marked: i32,
    ll: i32,
    layout_seq: u64,
    layout_wait_ns: u64,
    row_offsets: u64,
    src_offsets: u64,
    shared_groups: i32,
    recv_tokens: u64,
    recv_scales: u64,
    src_info: u64,
    row_src: u64,
    msg_rows: u64,
}
/// ep_dispatch_signal (dispatch/send.cu): the counts, published after the inter-node puts.
EpDispatchSignalParams {
    sent: u64,
    msgs_to: u64,
    n_experts: i32,
    n_local: i32,
    n_ranks: i32,
    rank: i32,
    skip_a2a: i32,
    count_ptrs: u64,
}
/// ep_dispatch_wait (dispatch/layout.cu): the counts, their check and the groups' layout.
EpDispatchWaitParams {
    counts: u64,
    n_local: i32,
    n_ranks: i32,
    rank: i32,
    skip_a2a: i32,
    slice_ns: u64,
    max_tokens: i32,
    shared_groups: i32,
    shared_len: i32,
    row_multiple: i32,
    status: u64,
    snapshot: u64,
    nmsg: u64,
    row_offsets: u64,
    src_offsets: u64,
    layout_seq: u64,
    seq: u32,
}
/// What the copy-out kernels share (dispatch/copy_out.cu): the landed messages, the layout they
/// are copied into and the round's status.
EpDispatchCopy {
    recv: u64,
    nmsg: u64,
    row_offsets: u64,
    src_offsets: u64,
    n_local: i32,
    n_ranks: i32,
    rank: i32,
    skip_a2a: i32,
    shared_groups: i32,
    max_tokens: i32,
    hidden: i32,
    fmt: i32,
    m: MsgLayout,
    recv_tokens: u64,
    recv_scales: u64,
    src_info: u64,
    row_src: u64,
    msg_rows: u64,
    status: u64,
    seq: u32,
    slice_ns: u64,
}
/// ep_dispatch_copy_out: also the shared expert's rows, the padding and the blocks' share.
EpDispatchCopyOutParams {
    copy: EpDispatchCopy,
    shared_msgs: u64,
    row_multiple: i32,
    first_block: u64,
    per_sender: u32,
}
/// ep_dispatch_copy_messages and ep_dispatch_copy_lean: also the layout's release word and
/// whether the blocks are the helpers after the send.
EpDispatchCopyMessagesParams {
    copy: EpDispatchCopy,
    layout_seq: u64,
    helper: i32,
}
/// The single-launch dispatch kernels (dispatch/single.cu): the send's, the wait's and the
/// copy-out's in one.
EpDispatchSingleParams {
    tokens: u64,
    input_scales: u64,
    n_tokens: i32,
    hidden: i32,
    fmt: i32,
    ids: u64,
    top_k: i32,
    m: MsgLayout,
    recv_ptrs: u64,
    rank: i32,
    n_ranks: i32,
    n_local: i32,
    max_tokens: i32,
    shared_start: i32,
    shared_end: i32,
    shared_msgs: u64,
    ticket: u64,
    sent: u64,
    n_experts: i32,
    skip_a2a: i32,
    count_ptrs: u64,
    counts: u64,
    slice_ns: u64,
    shared_groups: i32,
    row_multiple: i32,
    status: u64,
    snapshot: u64,
    row_offsets: u64,
    src_offsets: u64,
    recv: u64,
    nmsg: u64,
    recv_tokens: u64,
    recv_scales: u64,
    src_info: u64,
    row_src: u64,
    seq: u32,
    ll: i32,
    marked: i32,
}
/// Where a combine row goes back: its source (src_info, row_src), the row count, the receivers'
/// buffers and the staging of the inter-node ones. ep_combine_put's parameters (combine/send.cu)
/// and part of the send's.
EpCombineTargets {
    src_info: u64,
    row_src: u64,
    rows_end: u64,
    hidden: i32,
    top_k: i32,
    recv_ptrs: u64,
    rank: i32,
    gpus_per_node: i32,
    staging: u64,
}
/// ep_combine_send (combine/send.cu): the expert outputs, the targets, and the counts' and marks'
/// publication.
EpCombineSendParams {
    expert_out: u64,
    targets: EpCombineTargets,
    signal: i32,
    ticket: u64,
    dispatch_counts: u64,
    n_local: i32,
    n_ranks: i32,
    skip_a2a: i32,
    count_ptrs: u64,
    nmsg: u64,
    ll_ptrs: u64,
    seq: u32,
    mark_ptrs: u64,
}
/// ep_combine_send_ordered: the send's, and each message's rows in token order.
EpCombineSendOrderedParams {
    send: EpCombineSendParams,
    msg_rows: u64,
    max_tokens: i32,
}
/// ep_combine_signal (combine/send.cu): the counts, published after the inter-node puts.
EpCombineSignalParams {
    dispatch_counts: u64,
    n_local: i32,
    n_ranks: i32,
    rank: i32,
    skip_a2a: i32,
    count_ptrs: u64,
    nmsg: u64,
}
/// ep_combine_wait (combine/send.cu): the counts and their check.
EpCombineWaitParams {
    counts: u64,
    n_local: i32,
    n_ranks: i32,
    rank: i32,
    skip_a2a: i32,
    slice_ns: u64,
    sent: u64,
    status: u64,
    snapshot: u64,
}
/// ep_combine_await_marks (combine/marked.cu): each token's rows' marks.
EpCombineAwaitMarksParams {
    ids: u64,
    top_k: i32,
    rank: i32,
    n_local: i32,
    n_ranks: i32,
    skip_a2a: i32,
    marks: u64,
    seq: u32,
    slice_ns: u64,
    status: u64,
}
/// ep_combine_ll_unpack (combine/unreduced.cu): the LL rows into the receive buffer.
EpCombineLlUnpackParams {
    ll_ptrs: u64,
    seq: u32,
    slice_ns: u64,
    ids: u64,
    top_k: i32,
    hidden: i32,
    rank: i32,
    n_local: i32,
    n_ranks: i32,
    skip_a2a: i32,
    recv: u64,
    status: u64,
}
/// ep_combine_unreduced (combine/unreduced.cu): the rows in the unreduced layout.
EpCombineUnreducedParams {
    recv: u64,
    ids: u64,
    top_k: i32,
    hidden: i32,
    rank: i32,
    n_local: i32,
    skip_a2a: i32,
    out: u64,
    status: u64,
}
/// ep_combine_reduce (combine/reduce.cu): the weighted sum of each token's rows, and its epilogue.
EpCombineReduceParams {
    recv: u64,
    ids: u64,
    weights: u64,
    top_k: i32,
    hidden: i32,
    rank: i32,
    n_local: i32,
    skip_a2a: i32,
    shared_rows: u64,
    shared_start: i32,
    shared_end: i32,
    epilogue: i32,
    residual: u64,
    scale: f32,
    out: u64,
    fp8_payload: u64,
    fp8_scales: u64,
    status: u64,
}
/// ep_combine_reduce_marked (combine/marked.cu): the reduce's, and the marks it reduces behind.
EpCombineReduceMarkedParams {
    reduce: EpCombineReduceParams,
    n_tokens: i32,
    n_ranks: i32,
    marks: u64,
    seq: u32,
    slice_ns: u64,
}
/// The single-launch combine kernels (combine/single.cu): the send's, the wait's and the reduce's
/// in one.
EpCombineSingleParams {
    expert_out: u64,
    src_info: u64,
    row_src: u64,
    rows_end: u64,
    hidden: i32,
    top_k: i32,
    recv_ptrs: u64,
    rank: i32,
    ticket: u64,
    dispatch_counts: u64,
    n_local: i32,
    n_ranks: i32,
    skip_a2a: i32,
    count_ptrs: u64,
    counts: u64,
    slice_ns: u64,
    sent: u64,
    status: u64,
    recv: u64,
    ids: u64,
    weights: u64,
    n_tokens: i32,
    shared_rows: u64,
    shared_start: i32,
    shared_end: i32,
    epilogue: i32,
    residual: u64,
    scale: f32,
    out: u64,
    fp8_payload: u64,
    fp8_scales: u64,
    nmsg: u64,
    ll_ptrs: u64,
    seq: u32,
    mark_ptrs: u64,
}
/// ep_swiglu (swiglu.cu): the gated activation of the dispatched rows, quantised.
EpSwigluParams {
    x: u64,
    rows: u64,
    width: i32,
    src_offsets: u64,
    n_groups: i32,
    n_ranks: i32,
    interleaved: i32,
    clamp: i32,
    alpha: f32,
    limit: f32,
    fmt: i32,
    input_scale: f32,
    payload_bytes: i32,
    payload: u64,
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
