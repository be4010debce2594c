//! The combine's kernels (kernels/combine/), issued: rows back to their tokens, the wait, and the
//! reduction (or the unreduced layout) with its epilogue; the single-launch combine.

use ep_core::{EpError, Epilogue, Result};

use super::{addr, contiguous, Chain, CudaComm, SEND_THREADS, THREADS, WAIT_THREADS};
use crate::kernels::params::{
    EpCombineAwaitMarksParams, EpCombineLlUnpackParams, EpCombineNetRowsParams,
    EpCombineReduceMarkedParams, EpCombineReduceParams, EpCombineSendOrderedParams,
    EpCombineSendParams, EpCombineSignalParams, EpCombineSingleParams, EpCombineTargets,
    EpCombineUnreducedParams, EpCombineWaitParams,
};

/// Up to this many tokens the combine reduce gives each token a block as wide as its row.
const REDUCE_WIDE_MAX_TOKENS: usize = 256;
/// Threads of a block of the reduce beside the send (a marked round): its launch bounds.
const MARKED_REDUCE_THREADS: u32 = 512;

/// The reduce's parameters that are worked out per round (`CudaComm::reduce_params`).
struct ReduceScalars {
    shared_rows: u64,
    shared_start: i32,
    shared_end: i32,
    epilogue: i32,
    scale: f32,
}

impl ReduceScalars {
    fn new(c: &CudaComm, epilogue: i32, scale: f32) -> Self {
        ReduceScalars {
            shared_rows: c.shared_rows(),
            shared_start: c.round.shared.start as i32,
            shared_end: c.round.shared.end as i32,
            epilogue,
            scale,
        }
    }
}

impl CudaComm {
    /// Where the dispatch left its row count on the device (`row_offsets[n_groups]`), which the
    /// combine kernels read.
    fn rows_end(&self) -> u64 {
        self.bufs().row_offsets.ptr + 4 * self.cfg.n_groups() as u64
    }

    /// A residual epilogue's rows to the device (the one input a round still takes from the
    /// host: `Epilogue::AddResidual` holds a host array).
    pub(crate) fn upload_residual(&self, epilogue: Option<&Epilogue>) -> Result<()> {
        if let Some(Epilogue::AddResidual(r)) = epilogue {
            // A copy from host memory is not a graph's to replay: refused inside a capture.
            if self.capturing()? {
                return Err(EpError::Incompatible {
                    rank: self.rank,
                    what: "Epilogue::AddResidual in a captured round",
                    why: "its rows are copied from host memory; add the residual in a kernel of your own",
                });
            }
            let view = r.view();
            let rows = contiguous(&view);
            self.bufs().residual.upload(rows.as_ref(), &self.stream)?;
            self.count_copy(std::mem::size_of_val(rows.as_ref()));
        }
        Ok(())
    }

    /// Rows back to their tokens and the signals (between nodes: then puts, then signals): the
    /// combine_async kernels; at decode sizes inside one node, the whole combine in one launch.
    /// `grid_rows` covers at least the rows the dispatch produced (the kernels stop at the
    /// device's row count): the multi-kernel send's grid, a block per row.
    pub(crate) fn issue_combine_send(&mut self, grid_rows: Option<usize>) -> Result<()> {
        if self.single_combine() {
            return self.issue_combine_single();
        }
        let cfg = &self.cfg;
        let b = self.bufs();
        let sc = &self.sc;
        let one_node = (cfg.n_nodes == 1) as i32;
        let send = EpCombineSendParams {
            expert_out: addr(&self.round.inputs.expert_out),
            targets: EpCombineTargets {
                src_info: b.src_info.ptr,
                row_src: b.row_src.ptr,
                rows_end: self.rows_end(),
                hidden: sc.hidden,
                top_k: sc.top_k,
                recv_ptrs: b.c_recv_ptrs.ptr,
                rank: sc.rank,
                gpus_per_node: sc.gpus_per_node,
                staging: b.c_staging.ptr,
            },
            signal: one_node,
            ticket: b.c_ticket.ptr,
            dispatch_counts: b.snapshot.ptr,
            n_local: sc.n_local,
            n_ranks: sc.n_ranks,
            skip_a2a: sc.skip_a2a,
            count_ptrs: b.c_count_ptrs.ptr,
            nmsg: b.d_nmsg.ptr,
            ll_ptrs: b.c_ll_ptrs.ptr,
            seq: self.combine_round(),
            mark_ptrs: b.c_mark_ptrs.ptr,
            next_round: self.dispatch_round(),
        };
        // At least one block: a rank that received no rows still signals. Where the host does not
        // know the rows (stream-ordered waits), the most a rank can receive.
        let grid = grid_rows.unwrap_or(cfg.max_recv_rows()).max(1) as u32;
        // A marked round (combine/marked.cu) reduces beside the send, on the copy stream: forked
        // before the send (the stream's inputs are there; the rows come with their marks), joined
        // after.
        let marked = self.marked_beside_send();
        let reduce_beside = self.reduce_beside_send();
        if reduce_beside {
            self.fork_copy_stream()?;
            let slice = self.first_slice_ns();
            self.launch_combine_wait(true, slice)?;
            self.launch_reduce_marked(slice)?;
        }
        if marked {
            // The rows in token order (the dispatch's copy-out wrote each message's rows).
            let ordered = EpCombineSendOrderedParams {
                send,
                msg_rows: b.msg_rows.ptr,
                max_tokens: sc.max_tokens,
            };
            let most = (cfg.n_ranks() * cfg.max_tokens_per_rank).max(1) as u32;
            // SAFETY: the rank's buffers and the world's receive buffers, allocated for its
            // config; the rows stop at the device's row count (`rows_end`).
            unsafe {
                self.launch(
                    Chain::First,
                    "ep_combine_send_ordered",
                    grid.min(most),
                    THREADS,
                    0,
                    &ordered,
                )?
            };
        } else {
            // Rows unknown: the blocks the rank's share of the GPU holds at once, each taking every
            // grid-th row, rather than a block for each possible row, most of which would start
            // only to find nothing to send (+6% on a 512-token combine, measured at cbd0ea3).
            let grid = match grid_rows {
                Some(_) => grid,
                None => grid.min(self.resident_blocks("ep_combine_send", THREADS, 0).max(1) as u32),
            };
            // SAFETY: as the ordered send's.
            unsafe { self.launch(Chain::First, "ep_combine_send", grid, THREADS, 0, &send)? };
        }
        if reduce_beside {
            self.join_copy_stream()?;
        }
        if cfg.n_nodes > 1 {
            // The puts take the send's targets.
            let signal = EpCombineSignalParams {
                dispatch_counts: b.snapshot.ptr,
                n_local: sc.n_local,
                n_ranks: sc.n_ranks,
                rank: sc.rank,
                skip_a2a: sc.skip_a2a,
                count_ptrs: b.c_count_ptrs.ptr,
                nmsg: b.d_nmsg.ptr,
            };
            // SAFETY: as the send's.
            unsafe {
                self.launch(
                    Chain::Plain,
                    "ep_combine_put",
                    grid,
                    THREADS,
                    0,
                    &send.targets,
                )?;
                self.launch(
                    Chain::Plain,
                    "ep_combine_signal",
                    1,
                    WAIT_THREADS,
                    0,
                    &signal,
                )?;
            }
            self.exchange_between_nodes()?;
        }
        Ok(())
    }

    /// Between nodes over NCCL (net.rs): the outboxes out, the other nodes' rows and counts in,
    /// and those rows to their slots (`ep_combine_net_rows`).
    fn exchange_between_nodes(&self) -> Result<()> {
        let Some(net) = &self.world.net else {
            return Ok(());
        };
        if self.cfg.skip_a2a.is_some() {
            return Ok(());
        }
        net.exchange(
            ep_core::Phase::Combine,
            &self.stream,
            0,
            self.bufs().c_counts.ptr,
        )?;
        self.place_net_rows()
    }

    /// The rows the exchange brought into the inbox, to their slots (`ep_combine_net_rows`).
    pub(super) fn place_net_rows(&self) -> Result<()> {
        let (Some(net), cfg, b) = (&self.world.net, &self.cfg, self.bufs()) else {
            return Ok(());
        };
        let t = self.round.n_tokens;
        if t == 0 {
            return Ok(());
        }
        let rows = EpCombineNetRowsParams {
            inbox: net.combine_inbox(),
            recv: b.c_recv.ptr,
            ids: addr(&self.round.inputs.ids),
            hidden: cfg.hidden as i32,
            top_k: cfg.top_k as i32,
            max_tokens: cfg.max_tokens_per_rank as i32,
            n_local: cfg.n_local_experts() as i32,
            rank: self.rank as i32,
            gpus_per_node: cfg.n_gpus_per_node as i32,
        };
        // SAFETY: the inbox holds `max_tokens x top_k` rows of every rank of another node, the
        // receive buffer and the ids `max_tokens x top_k`; `t` tokens this round.
        unsafe {
            self.launch(
                Chain::Plain,
                "ep_combine_net_rows",
                t as u32,
                THREADS,
                0,
                &rows,
            )
        }
    }

    /// One slice of the combine wait, with the count check; for a rank that takes its rows in LL
    /// form, then those rows into the receive buffer (`ep_combine_ll_unpack`). After a slice that
    /// had every count but not every LL row (EP_MESSAGES_PENDING), the rows alone again: the counts
    /// are taken.
    pub(crate) fn issue_combine_wait(&self, slice_ns: u64) -> Result<()> {
        self.bind()?;
        let b = self.bufs();
        let sc = &self.sc;
        self.wait_counts_unless_taken(|c| c.launch_combine_wait(false, slice_ns))?;
        if self.marked_combine() {
            // The kernels after this one read the rows: their marks first (combine/marked.cu).
            let params = EpCombineAwaitMarksParams {
                ids: addr(&self.round.inputs.ids),
                top_k: sc.top_k,
                rank: sc.rank,
                n_local: sc.n_local,
                n_ranks: sc.n_ranks,
                skip_a2a: sc.skip_a2a,
                marks: b.c_marks.ptr,
                seq: self.combine_round(),
                slice_ns,
                status: b.status.ptr,
            };
            // SAFETY: the rank's buffers, allocated for the world's config.
            unsafe {
                self.launch(
                    Chain::Prior,
                    "ep_combine_await_marks",
                    self.round.n_tokens as u32,
                    THREADS,
                    0,
                    &params,
                )?
            };
        }
        if self.ll_combine() {
            let params = EpCombineLlUnpackParams {
                ll_ptrs: b.c_ll_ptrs.ptr,
                seq: self.combine_round(),
                slice_ns,
                ids: addr(&self.round.inputs.ids),
                top_k: sc.top_k,
                hidden: sc.hidden,
                rank: sc.rank,
                n_local: sc.n_local,
                n_ranks: sc.n_ranks,
                skip_a2a: sc.skip_a2a,
                recv: b.c_recv.ptr,
                status: b.status.ptr,
            };
            // SAFETY: the rank's buffers and LL buffers, allocated for the world's config.
            unsafe {
                self.launch(
                    Chain::Prior,
                    "ep_combine_ll_unpack",
                    self.round.n_tokens as u32,
                    THREADS,
                    0,
                    &params,
                )?
            };
        }
        Ok(())
    }

    /// `ep_combine_wait`: the counts and their check, on the rank's stream or (`beside_send`, a
    /// marked round's reduce beside the send) the copy stream.
    fn launch_combine_wait(&self, beside_send: bool, slice_ns: u64) -> Result<()> {
        let b = self.bufs();
        let sc = &self.sc;
        let params = EpCombineWaitParams {
            counts: b.c_counts.ptr,
            n_local: sc.n_local,
            n_ranks: sc.n_ranks,
            rank: sc.rank,
            skip_a2a: sc.skip_a2a,
            slice_ns,
            sent: b.sent.ptr,
            status: b.status.ptr,
            snapshot: b.c_snapshot.ptr,
        };
        // SAFETY: the rank's buffers, allocated for the world's config.
        unsafe {
            if beside_send {
                return self.launch_on(true, "ep_combine_wait", 1, WAIT_THREADS, 0, &params);
            }
            self.launch(Chain::Prior, "ep_combine_wait", 1, WAIT_THREADS, 0, &params)
        }
    }

    /// `ep_combine_reduce_marked` on the copy stream, beside the send: a persistent grid on a
    /// share of the SMs ([`crate::CudaOptions::marked_reduce_blocks`] sets it), each block reducing its tokens
    /// in order as their marks come. Two thirds of the SMs: fewer leave the reduce behind the
    /// send, more take SMs the send needs; two thirds was best or level at 1024 and 4096 tokens
    /// (measured at 1d77ddb).
    fn launch_reduce_marked(&self, slice_ns: u64) -> Result<()> {
        let b = self.bufs();
        let (epi, scale, _) = self.epilogue_args()?;
        let r = ReduceScalars::new(self, epi, scale);
        let most = self.world.single_launch_blocks(self.rank) as usize;
        let grid = self
            .opts()
            .marked_reduce_blocks
            .unwrap_or(most * 2 / 3)
            .clamp(1, most.max(1));
        let params = EpCombineReduceMarkedParams {
            reduce: self.reduce_params(&r),
            n_tokens: self.round.n_tokens as i32,
            n_ranks: self.sc.n_ranks,
            marks: b.c_marks.ptr,
            seq: self.combine_round(),
            slice_ns,
        };
        // SAFETY: the rank's buffers, allocated for the world's config.
        unsafe {
            self.launch_on(
                true,
                "ep_combine_reduce_marked",
                grid as u32,
                MARKED_REDUCE_THREADS,
                self.whole_row_smem(),
                &params,
            )
        }
    }

    /// `ep_combine_reduce`'s parameters, which `ep_combine_reduce_marked` takes first.
    fn reduce_params(&self, r: &ReduceScalars) -> EpCombineReduceParams {
        let b = self.bufs();
        let sc = &self.sc;
        EpCombineReduceParams {
            recv: b.c_recv.ptr,
            ids: addr(&self.round.inputs.ids),
            weights: addr(&self.round.inputs.weights),
            top_k: sc.top_k,
            hidden: sc.hidden,
            rank: sc.rank,
            n_local: sc.n_local,
            skip_a2a: sc.skip_a2a,
            shared_rows: r.shared_rows,
            shared_start: r.shared_start,
            shared_end: r.shared_end,
            epilogue: r.epilogue,
            residual: b.residual.ptr,
            scale: r.scale,
            out: b.out.ptr,
            fp8_payload: b.fp8_payload.ptr,
            fp8_scales: b.fp8_scales.ptr,
            status: b.status.ptr,
        }
    }

    /// The reducing kernels' epilogue arguments: its code, the scale, and the kernels compiled
    /// with a device-code epilogue.
    fn epilogue_args(&self) -> Result<(i32, f32, Option<crate::kernels::EpilogueKernels>)> {
        Ok(match &self.round.epilogue {
            None => (0, 1.0f32, None),
            Some(Epilogue::AddResidual(_)) => (1, 1.0, None),
            Some(Epilogue::Scale(x)) => (2, *x, None),
            Some(Epilogue::QuantizeFp8) => (3, 1.0, None),
            Some(Epilogue::Device(d)) => (
                4,
                1.0,
                Some(self.k().reduce_with_epilogue(&d.name, &d.source)?),
            ),
            Some(Epilogue::Host(_)) => {
                unreachable!("refused by validation: no host closures on GPUs")
            }
        })
    }

    /// The fused shared expert's rows (the first of the expert outputs), or null.
    fn shared_rows(&self) -> u64 {
        if self.cfg.fused_shared_expert {
            self.bufs().expert_out.ptr
        } else {
            0
        }
    }

    /// Dynamic shared memory for the row in f32, for the epilogues that need the whole row.
    fn whole_row_smem(&self) -> u32 {
        let whole_row = matches!(
            self.round.epilogue,
            Some(Epilogue::QuantizeFp8 | Epilogue::Device(_))
        );
        if whole_row {
            (self.cfg.hidden * 4) as u32
        } else {
            0
        }
    }

    /// The whole combine in one launch (`ep_combine_single` in combine/single.cu), with weights: a
    /// persistent grid of every block the rank's share of the GPU holds at once, whatever the
    /// rows. Blocks past the rows to send split each token's reduce (its `parts`), so that a
    /// few tokens' reduce is spread over the whole grid rather than a block per row produced:
    /// faster for a rank alone at 1-8 tokens, level otherwise (measured at ee0f1a5).
    fn issue_combine_single(&self) -> Result<()> {
        let cfg = &self.cfg;
        let b = self.bufs();
        let sc = &self.sc;
        let t = self.round.n_tokens;
        let (epi, scale, device) = self.epilogue_args()?;
        let k = self.k();
        // Without an epilogue, kernels compiled for none (combine/single.cu); a device-code
        // epilogue's program has its own `ep_combine_single[_ll]`.
        let ll = self.ll_combine();
        let name = match (ll, self.round.epilogue.is_none()) {
            (false, false) => "ep_combine_single",
            (true, false) => "ep_combine_single_ll",
            (false, true) => "ep_combine_single_plain",
            (true, true) => "ep_combine_single_ll_plain",
        };
        let f = match &device {
            None => k.get(name),
            Some(d) if ll => &d.single_ll,
            Some(d) => &d.single,
        };
        let counts = cfg.n_local_experts() * cfg.n_ranks();
        let smem = self.whole_row_smem().max(8 * counts as u32);
        let grid = self.world.single_launch_blocks(self.rank).max(1);
        let params = EpCombineSingleParams {
            expert_out: addr(&self.round.inputs.expert_out),
            src_info: b.src_info.ptr,
            row_src: b.row_src.ptr,
            rows_end: self.rows_end(),
            hidden: sc.hidden,
            top_k: sc.top_k,
            recv_ptrs: b.c_recv_ptrs.ptr,
            rank: sc.rank,
            ticket: b.c_ticket.ptr,
            dispatch_counts: b.snapshot.ptr,
            n_local: sc.n_local,
            n_ranks: sc.n_ranks,
            skip_a2a: sc.skip_a2a,
            count_ptrs: b.c_count_ptrs.ptr,
            counts: b.c_counts.ptr,
            slice_ns: self.first_slice_ns(),
            sent: b.sent.ptr,
            status: b.status.ptr,
            recv: b.c_recv.ptr,
            ids: addr(&self.round.inputs.ids),
            weights: addr(&self.round.inputs.weights),
            n_tokens: t as i32,
            shared_rows: self.shared_rows(),
            shared_start: self.round.shared.start as i32,
            shared_end: self.round.shared.end as i32,
            epilogue: epi,
            residual: b.residual.ptr,
            scale,
            out: b.out.ptr,
            fp8_payload: b.fp8_payload.ptr,
            fp8_scales: b.fp8_scales.ptr,
            nmsg: b.d_nmsg.ptr,
            ll_ptrs: b.c_ll_ptrs.ptr,
            seq: self.combine_round(),
            mark_ptrs: b.c_mark_ptrs.ptr,
            next_round: self.dispatch_round(),
        };
        // SAFETY: the rank's buffers and the world's receive and LL buffers, allocated for its
        // config; `f` is `name` or its device-epilogue variant, which takes the same struct.
        unsafe { self.launch_fn(name, f, Chain::First, grid, SEND_THREADS, smem, &params) }
    }

    /// The reduction (or unreduced layout) and the epilogue, into the device output buffers;
    /// nothing unless the combine wait before it completed.
    pub(crate) fn issue_combine_output(&self) -> Result<()> {
        let cfg = &self.cfg;
        let sc = &self.sc;
        let (t, hidden) = (self.round.n_tokens, cfg.hidden);
        let b = self.bufs();
        let k = self.k();
        if !self.round.reduced {
            let params = EpCombineUnreducedParams {
                recv: b.c_recv.ptr,
                ids: addr(&self.round.inputs.ids),
                top_k: sc.top_k,
                hidden: hidden as i32,
                rank: sc.rank,
                n_local: sc.n_local,
                skip_a2a: sc.skip_a2a,
                out: b.out.ptr,
                status: b.status.ptr,
            };
            // SAFETY: the rank's buffers, allocated for the world's config.
            return unsafe {
                self.launch(
                    Chain::Prior,
                    "ep_combine_unreduced",
                    t as u32,
                    THREADS,
                    0,
                    &params,
                )
            };
        }
        let (epi, scale, device) = self.epilogue_args()?;
        let r = ReduceScalars::new(self, epi, scale);
        let f = device
            .as_ref()
            .map_or(k.get("ep_combine_reduce"), |d| &d.reduce);
        let smem = self.whole_row_smem();
        // Few tokens: one thread per 8 columns (one 16-byte load of each slot's row, up to
        // 1024 threads), so a token is one round of loads. Many tokens: 128-thread blocks, which
        // pack the SMs better once there are blocks enough to fill them (measured at cc18bea).
        let reduce_threads = if t <= REDUCE_WIDE_MAX_TOKENS {
            (hidden / 8).next_multiple_of(32).clamp(32, 1024) as u32
        } else {
            THREADS
        };
        // SAFETY: the rank's buffers, allocated for the world's config; `f` is the reduce or its
        // device-epilogue variant, which takes the same struct.
        unsafe {
            self.launch_fn(
                "ep_combine_reduce",
                f,
                Chain::Prior,
                t as u32,
                reduce_threads,
                smem,
                &self.reduce_params(&r),
            )
        }
    }
}
