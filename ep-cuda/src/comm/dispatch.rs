//! The dispatch's kernels (kernels/dispatch/), issued: slots, sends and signals; the single-launch
//! dispatch; the wait and the copy-out, overlapped with the send at prefill sizes.

use ep_core::format::TokenFormat;
use ep_core::{Format, Result};

use super::path::DispatchPath;
use super::{addr, Chain, CudaComm, SEND_THREADS, THREADS, WAIT_THREADS};
use crate::kernels::params::{
    EpAssignParams, EpDispatchCopy, EpDispatchCopyMessagesParams, EpDispatchCopyOutParams,
    EpDispatchSendParams, EpDispatchSignalParams, EpDispatchSingleParams, EpDispatchTargets,
    EpDispatchWaitParams,
};
use crate::kernels::MsgLayout;
use crate::CudaOptions;

pub(super) fn format_id(f: Format) -> i32 {
    match f {
        Format::Bf16 => 0,
        Format::Fp8 => 1,
        Format::Mxfp4 => 2,
        Format::Nvfp4 => 3,
        _ => unreachable!("every format of ep-core has a kernel path"),
    }
}

// The chunked assign's shape, shared with dispatch/assign.cu.
use crate::kernels::constants::{ASSIGN_CHUNK, ASSIGN_COLS, ASSIGN_THREADS};

/// Blocks of `ep_assign_chunks` for `tokens` tokens, and rows of the chunk starts it writes: a
/// chunk each, at least one (a rank without tokens still publishes its counts).
pub(crate) fn assign_chunks(tokens: usize) -> usize {
    tokens.div_ceil(ASSIGN_CHUNK).max(1)
}

/// Dynamic shared memory of an `ep_assign_chunks` block (`ep_assign_chunk`): the chunk's ids, each
/// warp's count per column of a pass (u16), each slot's place among its warp's (u8).
fn assign_smem(top_k: usize, columns: usize) -> usize {
    let warps = ASSIGN_THREADS as usize / 32;
    ASSIGN_CHUNK * top_k * 4 + warps * columns.min(ASSIGN_COLS) * 2 + ASSIGN_CHUNK * top_k
}

/// Dynamic shared memory a block needs to send a token (dispatch/route.cu, `ep_fetched_row`): the
/// message (BF16 fetches its row into it); FP8 also the row as fetched (bf16), which it encodes
/// from; the others (MXFP4, NVFP4) also the row in f32 before that.
fn send_smem(format: Format, m: &MsgLayout, hidden: usize) -> usize {
    match format {
        Format::Bf16 => m.bytes as usize,
        Format::Fp8 => m.bytes as usize + hidden * 2,
        _ => m.bytes as usize + hidden * (4 + 2),
    }
}

/// How a multi-kernel dispatch's blocks are shaped: the send's (a block per token) and, when the
/// round overlaps, the copy-out's beside it (a persistent grid, a warp per message at a time).
///
/// A send block is a chain of round trips (the row, the route, the stores), so the GPU needs many
/// tokens in flight, not many warps per token: at the same warps per SM, 256-thread blocks (four
/// per SM where 512-thread ones fit two) made the sequential send faster, and 128-thread blocks
/// no better (measured at 12476b5), except where 128-thread blocks take fewer waves of the grid
/// (`chain_send_threads`). Overlapped, a copy-out block must fit where a send block retires: the
/// copy-out's launch bounds keep it to 64 registers a thread, so a 512-thread copy block needs the
/// half an SM that a 512-thread send block frees, and a 256-thread one the quarter a 256-thread
/// send block frees (with 512-thread copy blocks beside 256-thread sends the copy-out starved).
/// The copy-out's grid is then a share of the SMs, in blocks as launched (`overlap_copy_grid`,
/// per SM), the best measured at 4096 tokens:
/// - BF16: 512-thread sends and copy blocks on two thirds of the SMs, on half of them from 2048
///   tokens (`BF16_COPY_PER_SM`). 256-thread shapes were slower here, the send then taking HBM
///   and NVLink from the copy-out.
/// - FP8: 256-thread sends and copy blocks, 2 copy blocks per SM. Its send is bound by its encode
///   and gains from the tokens in flight. Uniform routing prefers fewer copy blocks, skewed more
///   (the receiver of the hot experts copies the most); 2 per SM was the one shape faster in both
///   (12476b5). Where the send blocks write the rank's own rows (`places_own_rows`), the copy-out
///   has half the messages: `FP8_PLACED_COPY_PER_SM`.
/// - MXFP4 and NVFP4 (not measured): 512-thread blocks, the copy-out on a third of the SMs.
///
/// The copy-out's warps take messages from a shared count and the same kernel runs again after
/// the send on every SM (`copy_helpers`), so a grid that falls behind during the send is caught up
/// after it: the grids can be small, and leave the send more room.
///
/// [`CudaOptions::send_threads`] (a multiple of 32, 64 to 512; the copy blocks follow it) and
/// [`CudaOptions::overlap_copy_blocks`] (the grid) override them for every round.
fn send_threads(o: &CudaOptions, format: Format, overlap: bool) -> u32 {
    o.send_threads.unwrap_or(match (format, overlap) {
        (Format::Bf16, true) => 512,
        (Format::Bf16 | Format::Fp8, _) => 256,
        _ => SEND_THREADS,
    })
}

/// The narrow send block of a round that does not overlap (`chain_send_threads`).
const NARROW_SEND_THREADS: u32 = 128;

/// The send's block size in a round that does not overlap, a block per token, where the rank's
/// share of the SMs holds `resident(threads)` blocks of `threads` at once: BF16 and FP8 take
/// 128-thread blocks where the round's tokens fit in fewer waves of them than of `send_threads`'
/// 256-thread ones, which each send a token sooner (twice the warps on its chain). The second
/// wave of a grid that just misses one holds the round back for a whole block's chain; where the
/// waves are the same, 256 threads stay ahead (measured at c516694).
fn chain_send_threads(
    o: &CudaOptions,
    format: Format,
    tokens: usize,
    resident: impl Fn(u32) -> usize,
) -> u32 {
    let wide = send_threads(o, format, false);
    if o.send_threads.is_some() || !matches!(format, Format::Bf16 | Format::Fp8) {
        return wide;
    }
    let waves = |threads| tokens.max(1).div_ceil(resident(threads).max(1));
    if waves(NARROW_SEND_THREADS) < waves(wide) {
        NARROW_SEND_THREADS
    } else {
        wide
    }
}

/// The multi-kernel send for a round of `format` (dispatch/send.cu, `EP_DISPATCH_SEND`): the lean
/// one where the round is lean (`lean`, comm/path.rs `lean_dispatch`), FP8's own (40 registers a
/// thread, six blocks an SM where the every-format kernel fits four) for FP8, otherwise the one for
/// every format. [`CudaOptions::send_fp8`] off sends FP8 with the every-format kernel.
fn send_kernel(o: &CudaOptions, format: Format, lean: bool) -> &'static str {
    if lean {
        "ep_dispatch_send_lean"
    } else if format == Format::Fp8 && o.send_fp8 {
        "ep_dispatch_send_fp8"
    } else {
        "ep_dispatch_send"
    }
}

/// The overlapped copy-out's grid and block size (`send_threads`) for a round of `tokens` tokens
/// on a rank where `most` blocks of 512 threads are resident (its share of the SMs).
fn overlap_copy_grid(o: &CudaOptions, format: Format, most: usize, tokens: usize) -> (u32, u32) {
    let threads = send_threads(o, format, true);
    let (num, den) = match format {
        Format::Bf16 if tokens >= BF16_HALF_COPY_MIN_TOKENS => BF16_COPY_PER_SM,
        Format::Bf16 => (2, 3),
        Format::Fp8 if places_own_rows(o, format, false) => FP8_PLACED_COPY_PER_SM,
        Format::Fp8 => (2, 1),
        _ => (1, 3),
    };
    let grid = o
        .overlap_copy_blocks
        .unwrap_or(most * num / den)
        .clamp(1, most * (512 / threads) as usize);
    (grid as u32, threads)
}

/// FP8's overlapped copy blocks (256 threads) per SM, as a fraction, when the send blocks write
/// the rank's own rows: the copy-out has half the messages left, and with the helpers after the
/// send (`copy_helpers`) catching up what it misses, half a block per SM was fastest for both
/// uniform and skewed routing at 4096 tokens, and level at 2048 (measured at ab0df6f).
const FP8_PLACED_COPY_PER_SM: (usize, usize) = (1, 2);

/// BF16's overlapped copy blocks (512 threads) per SM from `BF16_HALF_COPY_MIN_TOKENS`, with the
/// helpers after the send: fewer copy blocks leave the send more of the SMs, and the helpers
/// catch up after it; half a block per SM was fastest at 2048 and 4096 tokens, while at 1024
/// tokens two thirds stay best (measured at ab0df6f). The lean path (comm/path.rs
/// `lean_dispatch`) keeps it.
const BF16_COPY_PER_SM: (usize, usize) = (1, 2);
const BF16_HALF_COPY_MIN_TOKENS: usize = 2048;

/// Whether an overlapped round's send blocks write the rank's own rows themselves once the layout
/// is known (dispatch/copy_out.cu, `ep_place_own_rows`), rather than store the rank's own message
/// for the copy-out to read back: FP8, whose send is bound by its encode and has room for the
/// stores (measured at 6764582). Not BF16: its send is at the NVLink ceiling already, and four
/// rows a token made its send blocks live longer, except in a lean round (`lean`, comm/path.rs
/// `lean_dispatch`), whose send has the registers to spare and whose copy-out sets the pace
/// (2d6de28). MXFP4 and NVFP4 not measured: not. [`CudaOptions::own_rows`] overrides it (false:
/// never, true: every format).
fn places_own_rows(o: &CudaOptions, format: Format, lean: bool) -> bool {
    o.own_rows.unwrap_or(format == Format::Fp8 || lean)
}

/// Whether an overlapped round launches the copy-out again after the send, on every SM, to take
/// the messages the copy-out beside the send has not (dispatch/copy_out.cu,
/// ep_dispatch_copy_messages). [`CudaOptions::copy_helpers`] turns it off.
fn copy_helpers(o: &CudaOptions) -> bool {
    o.copy_helpers
}

/// How long an overlapped round's send blocks wait for the layout before they send the rank's own
/// messages as messages instead of writing their rows (dispatch/copy_out.cu, `ep_place_own_rows`):
/// by default not at all, they look once, so the blocks that run before the layout is there lose no
/// time; at small sizes every block may run before it. The test hook `TestHooks::own_rows_wait_ns`
/// sets a wait, for tests that must take the rows path whatever the timing (the wait is bounded: a
/// layout that never comes costs the time, then the message goes as a message).
fn own_rows_wait_ns(o: &CudaOptions) -> u64 {
    #[cfg(feature = "test-hooks")]
    return o.hooks.own_rows_wait_ns;
    #[cfg(not(feature = "test-hooks"))]
    {
        let _ = o;
        0
    }
}

// ep_dispatch_copy_out's launch bounds (dispatch/copy_out.cu) take at most 128 threads.
const _: () = assert!(THREADS <= 128);

/// Where `ep_dispatch_wait` runs in a round, against the send: after it (the counts come with
/// its last block), beside an overlapped send on the copy stream, or before a layout-first send.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LayoutWait {
    After,
    Beside,
    Before,
}

/// Which copy-out `CudaComm::issue_copy` launches.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CopyOut {
    /// Every message, padding row and shared-expert row, after the wait.
    All,
    /// An overlapped round's padding and shared-expert rows (the messages are done beside the send).
    Tail,
    /// An overlapped round's messages, on the copy stream, as they land.
    Messages,
    /// An overlapped round's messages that the copy stream has not taken yet, after the send on
    /// the main stream, on every SM.
    MessagesLeft,
}

impl CudaComm {
    /// Blocks of `threads` threads of `kernel`, each with `smem` bytes of dynamic shared memory,
    /// that this rank's share of the SMs holds at once (0 where the driver does not say). Asked
    /// of the driver once per block size: the kernel and its shared memory are the world's.
    pub(super) fn resident_blocks(&self, kernel: &'static str, threads: u32, smem: u32) -> usize {
        let mut known = self.resident.borrow_mut();
        let per_sm = *known.entry((kernel, threads, smem)).or_insert_with(|| {
            self.k()
                .get(kernel)
                .occupancy_max_active_blocks_per_multiprocessor(threads, smem as usize, None)
                .unwrap_or(0)
        });
        per_sm as usize * self.world.rank(self.rank).sms as usize
    }

    /// Slots, sends and signals (between nodes: sends, puts, signals): the dispatch_async
    /// kernels; at decode sizes inside one node, the whole dispatch in one launch; at prefill
    /// sizes inside one node, also the first slice of the wait and the copy-out, overlapped; in
    /// between, the first slice of the wait before the send and the copy-out after it
    /// (layout-first).
    pub(crate) fn issue_dispatch_send(&mut self) -> Result<()> {
        self.round.messages_pending = false;
        let path = self.dispatch_path();
        if path == DispatchPath::Single {
            return self.issue_dispatch_single();
        }
        let overlap = path == DispatchPath::Overlapped;
        let first = path == DispatchPath::LayoutFirst;
        // The counts go out with the assign, before the payload (each message is marked landed).
        let early = (overlap || first) as i32;
        let marked = self.marked_combine() as i32;
        let ll = self.ll_combine() as i32;
        let cfg = &self.cfg;
        let b = self.bufs();
        let t = self.round.n_tokens;
        let shared = &self.round.shared;
        let one_node = (cfg.n_nodes == 1) as i32;
        let sc = &self.sc;
        let m = self.world.msg;
        // Row and message slots: a block per chunk of tokens, the slots in the chunk and the
        // chunks' starts; or a block per expert, then one per destination rank, the whole slots.
        let chunked = self.chunked_assign();
        let (assign, grid, threads, smem) = if chunked {
            let smem = assign_smem(cfg.top_k, cfg.n_experts + cfg.n_ranks());
            ("ep_assign_chunks", assign_chunks(t), ASSIGN_THREADS, smem)
        } else {
            let grid = cfg.n_experts + cfg.n_ranks();
            ("ep_assign_slots", grid, WAIT_THREADS, 0)
        };
        let chunk_base = if chunked { b.chunk_base.ptr } else { 0 };
        if overlap {
            // The layout's wait on the copy stream beside the assign: its one block polls the
            // counts as they come, so the send blocks find the layout from the start. Forked after
            // the assign it gets no SM until send blocks retire, and most send blocks then miss
            // the layout and leave their own message to the copy-out (measured at 0ded2a3).
            self.fork_copy_stream()?;
            self.launch_dispatch_wait(LayoutWait::Beside, self.first_slice_ns())?;
        }
        let params = EpAssignParams {
            ids: addr(&self.round.inputs.ids),
            n_tokens: t as i32,
            top_k: sc.top_k,
            n_experts: sc.experts,
            n_local: sc.n_local,
            n_ranks: sc.n_ranks,
            rank: sc.rank,
            skip_a2a: sc.skip_a2a,
            slots: b.slots.ptr,
            rank_slots: b.rank_slots.ptr,
            chunk_base,
            sent: b.sent.ptr,
            msgs_to: b.msgs_to.ptr,
            early,
            ticket: b.d_ticket.ptr,
            count_ptrs: b.d_count_ptrs.ptr,
            marked,
            ll,
            next_round: self.combine_round(),
        };
        // SAFETY: the rank's buffers (`RankBuffers`), allocated for the world's config; the
        // round's tokens are within them (`upload_dispatch`).
        unsafe {
            self.launch(
                Chain::First,
                assign,
                grid as u32,
                threads,
                smem as u32,
                &params,
            )?
        };
        if overlap {
            // The messages' copy-out as they land, after the assign. Launched before it too, its
            // blocks would hold their share of the SMs from the start, which slowed a rank alone
            // (0ded2a3).
            self.fork_copy_stream()?;
            self.issue_copy(CopyOut::Messages, self.first_slice_ns())?;
        }
        if first {
            // The layout before the send: every send block then writes the rank's own rows.
            self.launch_dispatch_wait(LayoutWait::Before, self.first_slice_ns())?;
        }
        let smem = send_smem(cfg.format, &m, cfg.hidden) as u32;
        let targets = EpDispatchTargets {
            ids: addr(&self.round.inputs.ids),
            slots: b.slots.ptr,
            rank_slots: b.rank_slots.ptr,
            // Null after the per-column assign, whose slots are whole.
            chunk_base,
            top_k: sc.top_k,
            m,
            recv_ptrs: b.d_recv_ptrs.ptr,
            rank: sc.rank,
            n_ranks: sc.n_ranks,
            n_local: sc.n_local,
            gpus_per_node: sc.gpus_per_node,
            max_tokens: sc.max_tokens,
            staging: b.d_staging.ptr,
        };
        let send = EpDispatchSendParams {
            tokens: addr(&self.round.inputs.tokens),
            input_scales: self.scales_ptr(),
            n_tokens: t as i32,
            hidden: sc.hidden,
            fmt: format_id(cfg.format),
            targets,
            shared_start: shared.start as i32,
            shared_end: shared.end as i32,
            shared_msgs: b.shared_msgs.ptr,
            signal: one_node,
            ticket: b.d_ticket.ptr,
            sent: b.sent.ptr,
            msgs_to: b.msgs_to.ptr,
            n_experts: sc.experts,
            skip_a2a: sc.skip_a2a,
            count_ptrs: b.d_count_ptrs.ptr,
            early,
            seq: self.dispatch_round(),
            marked,
            ll,
            // The own rows' layout, written beside an overlapped send or before a layout-first
            // one (`ep_place_own_rows`).
            layout_seq: self.layout_seq(path),
            layout_wait_ns: own_rows_wait_ns(self.opts()),
            row_offsets: b.row_offsets.ptr,
            src_offsets: b.src_offsets.ptr,
            shared_groups: self.shared_groups(),
            recv_tokens: b.recv_tokens.ptr,
            recv_scales: b.recv_scales.ptr,
            src_info: b.src_info.ptr,
            row_src: b.row_src.ptr,
            msg_rows: self.msg_rows(),
        };
        // At least one block: a rank without tokens still signals.
        let kernel = send_kernel(self.opts(), cfg.format, self.lean_dispatch());
        // Chained after the assign, except beside an overlapped copy-out: send blocks launched
        // early would take the SMs the copy-out's grid, launched after the assign on the copy
        // stream, needs (measured at d77baae).
        let threads = if overlap {
            send_threads(self.opts(), cfg.format, true)
        } else {
            chain_send_threads(self.opts(), cfg.format, t, |n| {
                self.resident_blocks(kernel, n, smem)
            })
        };
        let chain = if overlap { Chain::Plain } else { Chain::Prior };
        // SAFETY: the rank's buffers, allocated for the world's config; the receivers' buffers
        // (`recv_ptrs`) and the staging are the world's, for `max_tokens` messages of `m` a rank.
        unsafe { self.launch(chain, kernel, t.max(1) as u32, threads, smem, &send)? };
        if cfg.n_nodes > 1 {
            // The puts take the send's targets.
            let signal = EpDispatchSignalParams {
                sent: b.sent.ptr,
                msgs_to: b.msgs_to.ptr,
                n_experts: sc.experts,
                n_local: sc.n_local,
                n_ranks: sc.n_ranks,
                rank: sc.rank,
                skip_a2a: sc.skip_a2a,
                count_ptrs: b.d_count_ptrs.ptr,
            };
            // SAFETY: as the send's.
            unsafe {
                self.launch(
                    Chain::Plain,
                    "ep_dispatch_put",
                    t as u32,
                    THREADS,
                    0,
                    &send.targets,
                )?;
                self.launch(
                    Chain::Plain,
                    "ep_dispatch_signal",
                    1,
                    WAIT_THREADS,
                    0,
                    &signal,
                )?;
            }
            // Between nodes over NCCL (net.rs): the outboxes out, the other nodes' messages
            // and counts in.
            if let Some(net) = self.world.net.as_ref().filter(|_| cfg.skip_a2a.is_none()) {
                net.exchange(
                    ep_core::Phase::Dispatch,
                    &self.stream,
                    b.d_recv.ptr,
                    b.d_counts.ptr,
                )?;
            }
        }
        if overlap {
            // What the copy stream has not taken yet, by every SM now that the send is done.
            if copy_helpers(self.opts()) {
                self.issue_copy(CopyOut::MessagesLeft, self.first_slice_ns())?;
            }
            // The main stream takes the copy stream back, then the rows no message fills.
            self.join_copy_stream()?;
            self.issue_copy(CopyOut::Tail, self.first_slice_ns())?;
        }
        if first {
            // The peers' messages, each awaited for its mark; the own ones are placed.
            self.issue_copy(CopyOut::All, self.first_slice_ns())?;
        }
        Ok(())
    }

    /// The whole dispatch in one launch (`ep_dispatch_single` in dispatch/single.cu): a persistent
    /// grid no larger than the GPU holds at once, a block per token up to that and one that counts.
    fn issue_dispatch_single(&self) -> Result<()> {
        let cfg = &self.cfg;
        let b = self.bufs();
        let t = self.round.n_tokens;
        let shared = &self.round.shared;
        let sc = &self.sc;
        let m = self.world.msg;
        let (ranks, groups) = (cfg.n_ranks(), cfg.n_groups());
        let counts = cfg.n_local_experts() * ranks;
        // The kernel's phases share its dynamic shared memory: the send's, the totals, the
        // counts, layout and message counts.
        let smem = [
            send_smem(cfg.format, &m, cfg.hidden),
            4 * (cfg.n_experts + ranks),
            8 * counts + 4 * (groups + 1 + groups * (ranks + 1) + ranks),
        ]
        .into_iter()
        .max()
        .unwrap_or(0) as u32;
        let row_multiple = cfg.format.group_row_multiple() as i32;
        // A block per message this rank may receive, then the block that counts and publishes;
        // all resident at once (`single_dispatch` leaves room for two). The spread kernel also
        // takes a block per row this rank expects (t * top_k across all senders), among which it
        // cuts each message's rows, and is chosen when that leaves two blocks to spare for every
        // (token, rank), which it sends a block each. (With one to spare, the spread's extra
        // blocks cost more than they save: measured at 5457638.)
        let most = self.world.single_launch_blocks(self.rank) as usize - 1;
        let spread_senders = (t * cfg.top_k).max(t * ranks).max(ranks).min(most);
        let spread = spread_senders >= 2 * t * ranks;
        let senders = if spread {
            spread_senders
        } else {
            (t * ranks).max(ranks).min(most)
        };
        let grid = (senders + 1) as u32;
        // BF16 and FP8 have kernels of their own (their code alone; dispatch/single.cu).
        let kernel = match (spread, cfg.format) {
            (false, Format::Bf16) => "ep_dispatch_single_bf16",
            (true, Format::Bf16) => "ep_dispatch_single_spread_bf16",
            (false, Format::Fp8) => "ep_dispatch_single_fp8",
            (true, Format::Fp8) => "ep_dispatch_single_spread_fp8",
            (false, _) => "ep_dispatch_single",
            (true, _) => "ep_dispatch_single_spread",
        };
        let params = EpDispatchSingleParams {
            tokens: addr(&self.round.inputs.tokens),
            input_scales: self.scales_ptr(),
            n_tokens: t as i32,
            hidden: sc.hidden,
            fmt: format_id(cfg.format),
            ids: addr(&self.round.inputs.ids),
            top_k: sc.top_k,
            m,
            recv_ptrs: b.d_recv_ptrs.ptr,
            rank: sc.rank,
            n_ranks: sc.n_ranks,
            n_local: sc.n_local,
            max_tokens: sc.max_tokens,
            shared_start: shared.start as i32,
            shared_end: shared.end as i32,
            shared_msgs: b.shared_msgs.ptr,
            ticket: b.d_ticket.ptr,
            sent: b.sent.ptr,
            n_experts: sc.experts,
            skip_a2a: sc.skip_a2a,
            count_ptrs: b.d_count_ptrs.ptr,
            counts: b.d_counts.ptr,
            slice_ns: self.first_slice_ns(),
            shared_groups: self.shared_groups(),
            row_multiple,
            status: b.status.ptr,
            snapshot: b.snapshot.ptr,
            row_offsets: b.row_offsets.ptr,
            src_offsets: b.src_offsets.ptr,
            recv: b.d_recv.ptr,
            nmsg: b.d_nmsg.ptr,
            recv_tokens: b.recv_tokens.ptr,
            recv_scales: b.recv_scales.ptr,
            src_info: b.src_info.ptr,
            row_src: b.row_src.ptr,
            seq: self.dispatch_round(),
            ll: self.ll_combine() as i32,
            marked: self.marked_combine() as i32,
            next_round: self.combine_round(),
        };
        // SAFETY: the rank's buffers and the world's receive buffers, allocated for its config.
        unsafe { self.launch(Chain::First, kernel, grid, SEND_THREADS, smem, &params) }
    }

    /// One slice of the wait and the copy-out into the per-expert layout (which does nothing
    /// unless the wait completed): the dispatch_wait kernels. The row count stays on the device.
    /// After a slice that had every count but not every message of an overlapped sender
    /// (EP_MESSAGES_PENDING), the copy-out alone again: the counts are taken.
    pub(crate) fn issue_dispatch_wait(&self, slice_ns: u64) -> Result<()> {
        self.bind()?;
        self.wait_counts_unless_taken(|c| c.launch_dispatch_wait(LayoutWait::After, slice_ns))?;
        self.issue_copy(CopyOut::All, slice_ns)
    }

    /// `ep_dispatch_wait`: the counts, their check and the groups' layout, on the rank's stream
    /// or beside an overlapped round's send (on the copy stream); beside or before the send, it
    /// also releases the word that tells the send blocks the layout is there (`layout_seq`).
    fn launch_dispatch_wait(&self, at: LayoutWait, slice_ns: u64) -> Result<()> {
        let cfg = &self.cfg;
        let b = self.bufs();
        let sc = &self.sc;
        let row_multiple = cfg.format.group_row_multiple() as i32;
        // The group starts (dispatch/layout.cu, ep_dispatch_wait).
        let layout_smem = (4 * (cfg.n_groups() + 1)) as u32;
        let wait = EpDispatchWaitParams {
            counts: b.d_counts.ptr,
            n_local: sc.n_local,
            n_ranks: sc.n_ranks,
            rank: sc.rank,
            skip_a2a: sc.skip_a2a,
            slice_ns,
            max_tokens: sc.max_tokens,
            shared_groups: self.shared_groups(),
            shared_len: self.round.shared.len() as i32,
            row_multiple,
            status: b.status.ptr,
            snapshot: b.snapshot.ptr,
            nmsg: b.d_nmsg.ptr,
            row_offsets: b.row_offsets.ptr,
            src_offsets: b.src_offsets.ptr,
            // The layout released to the send blocks, and an overlapped copy-out's count of
            // messages taken zeroed.
            layout_seq: if at == LayoutWait::After {
                0
            } else {
                b.layout_seq.ptr
            },
            seq: self.dispatch_round(),
        };
        // SAFETY: the rank's buffers, allocated for the world's config.
        unsafe {
            if at == LayoutWait::Beside {
                return self.launch_on(
                    true,
                    "ep_dispatch_wait",
                    1,
                    WAIT_THREADS,
                    layout_smem,
                    &wait,
                );
            }
            self.launch(
                Chain::Prior,
                "ep_dispatch_wait",
                1,
                WAIT_THREADS,
                layout_smem,
                &wait,
            )
        }
    }

    /// The word that tells the send blocks the layout is there: a layout-first round's, and an
    /// overlapped round's whose send blocks write the rank's own rows (`places_own_rows`); null
    /// otherwise.
    fn layout_seq(&self, path: DispatchPath) -> u64 {
        let places = match path {
            DispatchPath::LayoutFirst => true,
            DispatchPath::Overlapped => {
                places_own_rows(self.opts(), self.cfg.format, self.lean_dispatch())
            }
            _ => false,
        };
        if places {
            self.bufs().layout_seq.ptr
        } else {
            0
        }
    }

    /// Each message's rows, only for a round whose marked rows are reduced beside the send (the
    /// buffer is empty between nodes; a null pointer writes nothing).
    fn msg_rows(&self) -> u64 {
        if self.marked_beside_send() {
            self.bufs().msg_rows.ptr
        } else {
            0
        }
    }

    /// `ep_dispatch_copy_out`'s message blocks per sending rank: a block per possible message
    /// (`max_tokens_per_rank`) in a world built for the round's tokens, as the sweep runs; in one
    /// built for more, as many as this rank's round has tokens, and at least the rank's share of
    /// the resident blocks divided among the senders, each block taking every `per_sender`-th
    /// message of its sender. A block per possible message makes a small round in a large world
    /// launch and retire many blocks with nothing to copy (measured at 5cdab6a).
    /// The test hook `TestHooks::copy_out_per_sender` (at least 1) sets it, so that tests take
    /// the loop in small worlds.
    fn copy_out_per_sender(&self) -> usize {
        let cfg = &self.cfg;
        #[cfg(feature = "test-hooks")]
        if let Some(n) = self.opts().hooks.copy_out_per_sender {
            return n.clamp(1, cfg.max_tokens_per_rank);
        }
        let resident = self.resident_blocks("ep_dispatch_copy_out", THREADS, 0);
        let least = resident / cfg.n_ranks();
        if least == 0 {
            return cfg.max_tokens_per_rank; // the driver did not say
        }
        self.round.n_tokens.max(least).min(cfg.max_tokens_per_rank)
    }

    /// The copy-out into the per-expert layout (dispatch/copy_out.cu): `ep_dispatch_copy_out` on
    /// the main stream (a block per possible message, per possible padding row, per shared-expert
    /// row; the last two kinds alone for `Tail`), or the overlapped round's
    /// `ep_dispatch_copy_messages` on the copy stream, whose parameters are the first of
    /// `ep_dispatch_copy_out`'s.
    fn issue_copy(&self, what: CopyOut, slice_ns: u64) -> Result<()> {
        let cfg = &self.cfg;
        let b = self.bufs();
        let sc = &self.sc;
        let row_multiple = cfg.format.group_row_multiple() as i32;
        let per_sender = self.copy_out_per_sender();
        let messages = cfg.n_ranks() * per_sender;
        let first_block = if what == CopyOut::Tail {
            messages as u64
        } else {
            0
        };
        let msg_rows = self.msg_rows();
        let copy = EpDispatchCopy {
            recv: b.d_recv.ptr,
            nmsg: b.d_nmsg.ptr,
            row_offsets: b.row_offsets.ptr,
            src_offsets: b.src_offsets.ptr,
            n_local: sc.n_local,
            n_ranks: sc.n_ranks,
            rank: sc.rank,
            skip_a2a: sc.skip_a2a,
            shared_groups: self.shared_groups(),
            max_tokens: sc.max_tokens,
            hidden: sc.hidden,
            fmt: format_id(cfg.format),
            m: self.world.msg,
            recv_tokens: b.recv_tokens.ptr,
            recv_scales: b.recv_scales.ptr,
            src_info: b.src_info.ptr,
            row_src: b.row_src.ptr,
            msg_rows,
            status: b.status.ptr,
            seq: self.dispatch_round(),
            slice_ns,
        };
        if matches!(what, CopyOut::Messages | CopyOut::MessagesLeft) {
            let most = self.world.single_launch_blocks(self.rank) as usize;
            let (grid, threads) =
                overlap_copy_grid(self.opts(), cfg.format, most, self.round.n_tokens);
            let beside = what == CopyOut::Messages;
            // The helpers after the send: every block the rank's share of the GPU holds.
            let grid = if beside {
                grid
            } else {
                (most * (512 / threads as usize)) as u32
            };
            let messages = EpDispatchCopyMessagesParams {
                copy,
                layout_seq: b.layout_seq.ptr,
                helper: !beside as i32,
            };
            // The helpers after a lean send take the lean copy-out too: on the full-batch kernel
            // they were no faster, skewed slower (measured at 993a406).
            let kernel = if self.lean_dispatch() {
                "ep_dispatch_copy_lean"
            } else {
                "ep_dispatch_copy_messages"
            };
            // SAFETY: the rank's buffers and receive buffer, allocated for the world's config.
            return unsafe { self.launch_on(beside, kernel, grid, threads, 0, &messages) };
        }
        let grid = messages - first_block as usize
            + cfg.n_groups() * (row_multiple as usize - 1)
            + if cfg.fused_shared_expert {
                cfg.max_tokens_per_rank
            } else {
                0
            };
        if grid == 0 {
            return Ok(());
        }
        // The tail after the copy stream's join, not the wait kernel: not chained.
        let chain = if what == CopyOut::Tail {
            Chain::Plain
        } else {
            Chain::Prior
        };
        let params = EpDispatchCopyOutParams {
            copy,
            shared_msgs: b.shared_msgs.ptr,
            row_multiple,
            first_block,
            per_sender: per_sender as u32,
        };
        // SAFETY: the rank's buffers and receive buffer, allocated for the world's config.
        unsafe {
            self.launch(
                chain,
                "ep_dispatch_copy_out",
                grid as u32,
                THREADS,
                0,
                &params,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 128-thread send blocks where they take fewer waves (`chain_send_threads`), with one H200's
    /// residency (132 SMs; FP8: six 256-thread blocks an SM, nine of 128; BF16: four, eight).
    #[test]
    fn chain_send_waves() {
        let fp8 = |n: u32| if n == 256 { 6 * 132 } else { 9 * 132 };
        let bf16 = |n: u32| if n == 256 { 4 * 132 } else { 8 * 132 };
        let threads = |format, tokens, resident: &dyn Fn(u32) -> usize| {
            chain_send_threads(&CudaOptions::default(), format, tokens, resident)
        };
        // One wave either way, or two either way: the wide blocks.
        for tokens in [0, 1, 256, 768, 792, 1536] {
            assert_eq!(threads(Format::Fp8, tokens, &fp8), 256, "{tokens} tokens");
        }
        // 793-1188 tokens: two waves of 256 threads, one of 128.
        for tokens in [793, 1024, 1188] {
            assert_eq!(threads(Format::Fp8, tokens, &fp8), 128, "{tokens} tokens");
        }
        assert_eq!(threads(Format::Bf16, 512, &bf16), 256);
        assert_eq!(threads(Format::Bf16, 768, &bf16), 128);
        // A driver that cannot say keeps the wide blocks; the formats not measured keep theirs.
        assert_eq!(
            threads(Format::Fp8, 1024, &|n| if n == 256 { 792 } else { 0 }),
            256
        );
        assert_eq!(threads(Format::Nvfp4, 1024, &fp8), SEND_THREADS);
    }

    /// The shapes measured (`send_threads`), and an overlapped copy-out grid that stays within
    /// what is resident for its block size.
    #[test]
    fn block_shapes() {
        let d = &CudaOptions::default();
        assert_eq!(send_threads(d, Format::Bf16, true), 512);
        assert_eq!(send_threads(d, Format::Fp8, true), 256);
        assert_eq!(send_threads(d, Format::Bf16, false), 256);
        assert_eq!(send_threads(d, Format::Nvfp4, false), SEND_THREADS);
        assert!(places_own_rows(d, Format::Fp8, false) && !places_own_rows(d, Format::Bf16, false));
        assert!(places_own_rows(d, Format::Bf16, true));
        assert_eq!(overlap_copy_grid(d, Format::Fp8, 132, 4096), (66, 256));
        assert_eq!(overlap_copy_grid(d, Format::Bf16, 132, 4096), (66, 512));
        assert_eq!(overlap_copy_grid(d, Format::Bf16, 132, 1024), (88, 512));
        for format in [Format::Bf16, Format::Fp8, Format::Mxfp4, Format::Nvfp4] {
            for most in [1, 16, 132] {
                let (grid, threads) = overlap_copy_grid(d, format, most, 4096);
                assert!(
                    grid >= 1 && grid as usize <= most * (512 / threads) as usize,
                    "{format:?}"
                );
            }
        }
    }

    /// The options override the shapes and switches, for every round.
    #[test]
    fn options_override_shapes() {
        let o = CudaOptions::default()
            .send_threads(128)
            .own_rows(false)
            .send_fp8(false)
            .overlap_copy_blocks(10);
        assert_eq!(send_threads(&o, Format::Bf16, true), 128);
        assert_eq!(chain_send_threads(&o, Format::Fp8, 1024, |_| 1), 128);
        assert!(!places_own_rows(&o, Format::Fp8, true));
        assert_eq!(send_kernel(&o, Format::Fp8, false), "ep_dispatch_send");
        assert_eq!(
            send_kernel(&CudaOptions::default(), Format::Fp8, false),
            "ep_dispatch_send_fp8"
        );
        assert_eq!(overlap_copy_grid(&o, Format::Bf16, 132, 4096), (10, 128));
        assert!(!copy_helpers(&o.copy_helpers(false)));
        assert_eq!(own_rows_wait_ns(&CudaOptions::default()), 0);
    }
}
