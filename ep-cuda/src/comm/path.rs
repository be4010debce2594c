//! Which path a round takes: one launch at decode sizes, the overlapped copy-out at prefill
//! sizes, LL combine rows for a rank with few tokens. Each choice has a threshold, measured where
//! the commit cited beside it says (docs/perf.md has the current numbers), and a field of
//! [`crate::CudaOptions`] that overrides it.

use ep_core::{Epilogue, Format};

use super::CudaComm;

/// Up to this many tokens on a rank, a combine inside one node is one launch
/// (`ep_combine_single`): at decode sizes the launches of the three-kernel path, and the
/// dependent loads each starts with, are much of the phase. As the tokens grow the saved launches
/// weigh less against the work, and from 512 tokens one launch was slower (measured at 2f1782d).
/// `CudaOptions::single_combine_max_tokens` overrides it (0: never).
const SINGLE_COMBINE_MAX_TOKENS: usize = 256;

/// The same for a rank that shares its GPU with other ranks, whose persistent grid gets only a
/// share of the SMs, so its work overtakes the launches it saves at fewer tokens (2f1782d).
const SINGLE_COMBINE_MAX_TOKENS_SHARED_GPU: usize = 128;

/// The same for the dispatch (`ep_dispatch_single`, its counts published before the payload):
/// one launch beats the four-kernel path up to 128 tokens, FP8 level from 32 (measured at
/// cb55e0d). `CudaOptions::single_dispatch_max_tokens` overrides it (0: never).
const SINGLE_DISPATCH_MAX_TOKENS: usize = 128;

/// The same for a rank that shares its GPU with other ranks: its persistent grid gets a share of
/// the SMs, so one launch wins at 1 token and loses from 32, where the grid's work dominates
/// (cb55e0d).
const SINGLE_DISPATCH_MAX_TOKENS_SHARED_GPU: usize = 1;

/// From this many tokens on a rank, a dispatch inside one node overlaps its copy-out with the
/// transfer (dispatch/wire.cu: the counts go out before the payload, each message marked landed, a
/// persistent copy-out grid on a second stream expands messages as they land). Below it the
/// transfer is too short to hide the copy-out behind and the second grid only competes for the
/// SMs; BF16, whose send does not encode, gains from 1024 tokens, the formats the send encodes
/// from 2048 (measured at 182b904 and b312990). On one GPU there is no NVLink transfer to hide,
/// and the layout-first chain (`LAYOUT_FIRST_MIN_TOKENS`) beats the overlapped path above these
/// thresholds too (9aabd44); they stay those of two GPUs over NVLink.
/// `CudaOptions::overlap_min_tokens` overrides both (0: never).
const OVERLAP_MIN_TOKENS: usize = 2048;
/// [`OVERLAP_MIN_TOKENS`] for BF16, whose send does not encode.
const OVERLAP_MIN_TOKENS_BF16: usize = 1024;

/// From this many tokens an overlapped BF16 round takes the lean kernels (`CudaComm::lean_dispatch`):
/// they pay where the copy-out sets the pace, and were slower at 2048 tokens and below
/// (measured between 2048 and 4096 tokens at 245d216).
/// `CudaOptions::lean_min_tokens` overrides it (0: never). BF16 only: the lean send has no encoder
/// (dispatch/send.cu), and FP8 was slower with it at every size.
pub(crate) const LEAN_MIN_TOKENS_BF16: usize = 2560;

/// From this many tokens a multi-kernel dispatch assigns its slots per chunk of 128 tokens
/// (`ep_assign_chunks`: each id read once, the chunks' starts laid out by the last block) rather
/// than a block per expert and per rank that each read every id (`ep_assign_slots`), whose blocks'
/// time grows with the tokens. The chunked kernel has a fixed cost (the chunks' layout) that the
/// per-column one only exceeds at 4096 tokens; at 2048 the dispatch was slower with it (measured
/// on one GPU, two ranks, at 84fc325). `CudaOptions::chunked_assign_min_tokens` overrides it
/// (0: never).
pub(crate) const CHUNKED_ASSIGN_MIN_TOKENS: usize = 4096;

/// From this many tokens a multi-kernel dispatch that does not overlap lays out its groups before
/// the send (`DispatchPath::LayoutFirst`), on a rank with a GPU of its own: every send block then
/// writes the rank's own rows, which from 512 tokens saves more than the wait for the layout
/// costs, on a rank alone and on ranks sharing a GPU alike (measured at 9aabd44). Not by default on a rank that shares
/// its GPU: there the copy-out's blocks, each waiting for a peer's message, can hold the SMs that
/// the peer's send needs until the wait slice runs out.
/// `CudaOptions::layout_first_min_tokens` overrides it for every rank (0: never).
const LAYOUT_FIRST_MIN_TOKENS: usize = 512;

/// From this many tokens a rank takes its combine rows marked and reduces them beside the send
/// (`CudaComm::marked_combine`): the reduce then overlaps the transfer, which pays once the
/// transfer is long; at 512 tokens and below it was slower (measured at 0dbe4f5).
/// `CudaOptions::marked_min_tokens` overrides it (0: never).
pub(crate) const MARKED_MIN_TOKENS: usize = 1024;

/// From this many tokens (and past the LL rows' [`LL_MAX_TOKENS`]) a rank whose combine may be
/// one launch takes its rows marked too: each sending block marks its rows after one fence
/// (combine/send.cu, `ep_mark_rows_sent`), and the single-launch combine reduces a token once its
/// marks are there, with the counts published early (no fence), instead of after the grid's
/// ticket, the counts' fenced publish and their poll. Faster from 16 tokens, on a rank alone and
/// on ranks sharing a GPU (measured at acafc9d); 9-15 tokens not measured.
/// `CudaOptions::single_marked_min_tokens` overrides it (0: never).
pub(crate) const SINGLE_MARKED_MIN_TOKENS: usize = 16;

/// Up to this many tokens a rank takes its combine rows in LL form (common/protocol.cuh): each 8-byte word
/// 4 bytes of the row and the combine's number, so the rows need no fence and the counts do not
/// wait for them, at twice the bytes on the wire. The saved fence pays up to 8 tokens; at 16 it is
/// level and from 32 the doubled bytes cost more (measured at 9341b99). `CudaOptions::ll_max_tokens`
/// overrides it (0: never); one value per world ([`crate::CudaOptions::ll_max_tokens`]),
/// compiled into the kernels (kernels.rs) and used to size the buffers (world.rs), so every rank
/// of the node agrees.
pub(crate) const LL_MAX_TOKENS: usize = 8;

/// The kernels a dispatch round takes on a rank, in order of precedence (`CudaComm::dispatch_path`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum DispatchPath {
    /// One launch (`ep_dispatch_single`): one node, few tokens here (`SINGLE_DISPATCH_MAX_TOKENS`).
    Single,
    /// The copy-out overlapped with the transfer: one node, many tokens here
    /// (`OVERLAP_MIN_TOKENS`). The counts go out before the payload, each message is marked
    /// landed, a persistent copy-out grid on a second stream expands messages as they land.
    Overlapped,
    /// The groups laid out before the send: one node, from `LAYOUT_FIRST_MIN_TOKENS`. The assign
    /// publishes the counts (as an overlapped round's does), `ep_dispatch_wait` follows it on the
    /// rank's stream and releases the layout, so every send block writes the rank's own rows
    /// itself (`ep_place_own_rows`) and marks its other messages landed; the copy-out after the
    /// send then has only the peers' messages to expand.
    LayoutFirst,
    /// Assign, send (its last block publishes the counts), wait, copy-out: between nodes, and
    /// where no threshold above is met.
    Chain,
}

impl CudaComm {
    /// The path of this round's dispatch (`DispatchPath`): the first whose threshold the round
    /// meets, in the enum's order. A function of the round alone, so the dispatch and the combine
    /// read the same answer; ranks decide for themselves (a receiver follows each sender's
    /// message count word, dispatch/wire.cu).
    pub(crate) fn dispatch_path(&self) -> DispatchPath {
        let o = self.opts();
        let single_max = o
            .single_dispatch_max_tokens
            .unwrap_or(self.own_or_shared_gpu(
                SINGLE_DISPATCH_MAX_TOKENS,
                SINGLE_DISPATCH_MAX_TOKENS_SHARED_GPU,
            ));
        // A sending block and the counting block resident at once.
        if self.world.single_launch_blocks(self.rank) >= 2 && self.single_launch(single_max) {
            return DispatchPath::Single;
        }
        let from = |set: Option<usize>, default: usize| {
            let min = set.unwrap_or(default);
            self.persistent_grids() && min > 0 && self.round.n_tokens >= min
        };
        let overlap_min = if self.cfg.format == Format::Bf16 {
            OVERLAP_MIN_TOKENS_BF16
        } else {
            OVERLAP_MIN_TOKENS
        };
        // Not by default on a rank that shares its GPU (`LAYOUT_FIRST_MIN_TOKENS` says why).
        let first_min = self.own_or_shared_gpu(LAYOUT_FIRST_MIN_TOKENS, 0);
        if from(o.overlap_min_tokens, overlap_min) {
            DispatchPath::Overlapped
        } else if from(o.layout_first_min_tokens, first_min) {
            DispatchPath::LayoutFirst
        } else {
            DispatchPath::Chain
        }
    }

    /// This round's dispatch is one launch (`DispatchPath::Single`).
    pub(crate) fn single_dispatch(&self) -> bool {
        self.dispatch_path() == DispatchPath::Single
    }

    /// This round's dispatch overlaps its copy-out with the transfer (`DispatchPath::Overlapped`).
    pub(super) fn overlap_dispatch(&self) -> bool {
        self.dispatch_path() == DispatchPath::Overlapped
    }

    /// The dispatch's first wait slice is already on the stream once `issue_dispatch_send`
    /// returns: every path but the chain, whose wait the host issues.
    pub(crate) fn dispatch_wait_issued(&self) -> bool {
        self.dispatch_path() != DispatchPath::Chain
    }

    /// This round's combine is one launch (`ep_combine_single`): one node, few tokens here, and
    /// a reduction with weights.
    pub(crate) fn single_combine(&self) -> bool {
        self.round.reduced && self.single_combine_size() && !self.marked_beside_send()
    }

    /// Whether a combine of this round may be one launch (`single_combine` but for the weights,
    /// which only the combine knows: a function of the round alone, so the dispatch can read it).
    fn single_combine_size(&self) -> bool {
        let max = self
            .opts()
            .single_combine_max_tokens
            .unwrap_or(self.own_or_shared_gpu(
                SINGLE_COMBINE_MAX_TOKENS,
                SINGLE_COMBINE_MAX_TOKENS_SHARED_GPU,
            ));
        self.single_launch(max)
    }

    /// The combine's first wait slice (and what follows it) is already on the stream once
    /// `issue_combine_send` returns: a single-launch combine, or a marked round's reduce beside
    /// its send.
    pub(crate) fn combine_wait_issued(&self) -> bool {
        self.single_combine() || self.reduce_beside_send()
    }

    /// A marked round's reduce runs beside its send (`issue_combine_send`): with weights, and
    /// unless a device epilogue, compiled into a reduce kernel of its own, takes the row.
    pub(super) fn reduce_beside_send(&self) -> bool {
        self.marked_beside_send()
            && self.round.reduced
            && !matches!(self.round.epilogue, Some(Epilogue::Device(_)))
    }

    /// This round's combine rows come back marked (combine/marked.cu): reduced beside the send
    /// (`marked_beside_send`) or by a single-launch combine (`SINGLE_MARKED_MIN_TOKENS`). The
    /// dispatch tells every sender (`EP_NMSG_MARKED`); a function of the round alone, so the
    /// dispatch and the combine read the same answer.
    pub(super) fn marked_combine(&self) -> bool {
        self.marked_beside_send() || self.marked_single()
    }

    /// Marked rows reduced as they land, beside the send (`reduce_beside_send`, sent in token
    /// order from the rows the dispatch's copy-out recorded): one node, many tokens here
    /// (`MARKED_MIN_TOKENS`) and a multi-kernel dispatch.
    pub(super) fn marked_beside_send(&self) -> bool {
        let min = self.opts().marked_min_tokens;
        self.persistent_grids()
            && min > 0
            && self.round.n_tokens >= min
            && !self.single_dispatch()
            && !self.ll_combine() // LL rows carry their number: no marks (common/protocol.cuh)
    }

    /// Marked rows for a combine that may be one launch (`SINGLE_MARKED_MIN_TOKENS`). A combine
    /// without weights, which is never one launch, waits for the marks in a kernel of its own
    /// (`issue_combine_wait`), as a marked round's kernels after the send do.
    fn marked_single(&self) -> bool {
        let min = self.opts().single_marked_min_tokens;
        min > 0
            && self.round.n_tokens >= min
            && self.single_combine_size()
            && !self.marked_beside_send()
            && !self.ll_combine()
    }

    /// This rank takes this round's combine rows in LL form (common/protocol.cuh): one node and few tokens
    /// here. The dispatch kernels tell every sender so (their `ll`, `EP_NMSG_LL`).
    pub(super) fn ll_combine(&self) -> bool {
        self.cfg.n_nodes == 1 && self.round.n_tokens <= self.opts().ll_max_tokens
    }

    /// This overlapped round's send and copy-out leave each other room (kernels/dispatch/:
    /// `ep_dispatch_send_lean` and `ep_dispatch_copy_lean`: 32 and 48 registers a thread, so a
    /// copy block sits beside two send blocks), and the send blocks write the rank's own rows
    /// (`places_own_rows`). With the registers, the send runs near the NVLink ceiling and the
    /// copy-out, HBM-bound, sets the pace; writing the own rows at the sender takes 117 MB of HBM
    /// traffic off the copy-out at 4096 tokens BF16. BF16 from `LEAN_MIN_TOKENS_BF16`.
    pub(super) fn lean_dispatch(&self) -> bool {
        let min = self.opts().lean_min_tokens;
        self.cfg.format == Format::Bf16
            && self.overlap_dispatch()
            && min > 0
            && self.round.n_tokens >= min
    }

    /// This round's slots are assigned per chunk of tokens (`ep_assign_chunks`).
    pub(super) fn chunked_assign(&self) -> bool {
        let min = self.opts().chunked_assign_min_tokens;
        min > 0 && self.round.n_tokens >= min
    }

    /// Whether the kernels after a phase's first launch go chained (programmatic dependent
    /// launch, `kernels::launch_ex`): each may start launching while the one before it
    /// finishes. Hopper and later; [`crate::CudaOptions::chained_launch`] turns it off.
    pub(super) fn chained_launches(&self) -> bool {
        self.opts().chained_launch && self.k().chained_launches
    }

    /// Whether a phase's first kernel goes chained to what the stream ran before the phase
    /// (`Chain::First`); [`crate::CudaOptions::chained_first`] turns it off (and
    /// `chained_launch` every chained launch).
    pub(super) fn chained_first(&self) -> bool {
        self.opts().chained_first && self.chained_launches()
    }

    fn single_launch(&self, max_tokens: usize) -> bool {
        self.persistent_grids() && max_tokens > 0 && self.round.n_tokens <= max_tokens
    }

    /// A threshold's default: `own` on a rank with a GPU of its own, `shared` on a rank that shares
    /// its GPU with other ranks (whose persistent grids get a share of the SMs).
    fn own_or_shared_gpu(&self, own: usize, shared: usize) -> usize {
        if self.world.rank(self.rank).shares_gpu {
            shared
        } else {
            own
        }
    }

    /// Whether this rank may run grids whose blocks wait on one another or on the send (the
    /// single-launch phases, the overlapped copy-out): one node, and room on the GPU for them.
    fn persistent_grids(&self) -> bool {
        self.cfg.n_nodes == 1 && self.world.single_launch_blocks(self.rank) > 0
    }
}
