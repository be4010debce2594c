//! `CudaComm`: one rank on a GPU. Its host thread issues the rank's kernels on its own stream;
//! every wait happens in a kernel that spins on acquire loads with a deadline, and reports what
//! never arrived through a status buffer the host reads after the stream finishes.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use cudarc::driver::CudaStream;
use ep_core::format::TokenFormat;
use ep_core::round::RoundTracker;
use ep_core::{
    bf16, swiglu, validate, CombineInput, CombineOutput, DispatchInput, DispatchOutput, EpComm,
    EpConfig, EpError, Epilogue, Format, MissingSignal, Phase, Result, RouterWeights,
    RoutingHandle, SwigluOptions, SwigluOutput,
};
use ndarray::{Array2, Array3, ArrayView2};

use crate::driver::cuda;
use crate::kernels::{launch, Kernels, MsgLayout};
use crate::memory::DevBuf;
use crate::world::{RankBuffers, World};
use cudarc::driver::{CudaEvent, CudaFunction};

const THREADS: u32 = 128;
const WAIT_THREADS: u32 = 256;
/// Dispatch send: a token's encode and its stores to up to top-k receivers are one block's work;
/// at decode sizes a few blocks are all the GPU runs, so each needs many warps in flight.
const SEND_THREADS: u32 = 512;
/// Up to this many tokens the combine reduce gives each token a block as wide as its row.
const REDUCE_WIDE_MAX_TOKENS: usize = 256;
/// How long one launch of a wait kernel spins before the host launches it again, until the
/// deadline (`ep_wait_counts` in common.cuh says why waits are sliced). A rank held up behind a
/// peer's wait loses at most this; a relaunch (one launch and a status read) costs microseconds.
const WAIT_SLICE: Duration = Duration::from_millis(10);

fn format_id(f: Format) -> i32 {
    match f {
        Format::Bf16 => 0,
        Format::Fp8 => 1,
        Format::Mxfp4 => 2,
        Format::Nvfp4 => 3,
        _ => unreachable!("every format of ep-core has a kernel path"),
    }
}

/// Dynamic shared memory a block needs to send a token (dispatch.cu, `ep_fetched_row`): the
/// message (BF16 fetches its row into it); FP8 also the row as fetched (bf16), which it encodes
/// from; the others (MXFP4, NVFP4) also the row in f32 before that.
fn send_smem(format: Format, m: &MsgLayout, hidden: usize) -> usize {
    match format {
        Format::Bf16 => m.bytes as usize,
        Format::Fp8 => m.bytes as usize + hidden * 2,
        _ => m.bytes as usize + hidden * (4 + 2),
    }
}

/// Up to this many tokens on a rank, a combine inside one node is one launch
/// (`ep_combine_single`): at decode sizes the launches of the three-kernel path, and the
/// dependent loads each starts with, are much of the phase (2x H200: 1 token 22.8 -> 20.7 us,
/// 128 tokens 49.0 -> 43.6 us). `EP_CUDA_SINGLE_COMBINE_MAX_TOKENS` overrides it (0: never).
const SINGLE_COMBINE_MAX_TOKENS: usize = 128;
/// The same for the dispatch (`ep_dispatch_single`, its counts published before the payload
/// since v15). Measured on 2x H200 against the four-kernel path (docs/perf.md, v15): 1 token
/// 30.8 -> 23.8 us (BF16), 34.4 -> 28.9 (FP8); 32 tokens 31.7 -> 26.9 (BF16), FP8 within 1%;
/// 128 tokens 40.6 -> 36.5 (BF16), FP8 within 1%. `EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS` overrides
/// it (0: never).
const SINGLE_DISPATCH_MAX_TOKENS: usize = 128;
/// The same for a rank that shares its GPU with other ranks, whose persistent grid gets a share
/// of the SMs: on one H100 with two ranks, 1 token 27.6 -> 19.7 us (BF16), 31.2 -> 25.1 (FP8), but
/// 32 tokens FP8 34.1 -> 37.0 and 128 tokens 40.2 -> 84.2 (BF16), 46.1 -> 112.1 (FP8).
const SINGLE_DISPATCH_MAX_TOKENS_SHARED_GPU: usize = 1;
/// From this many tokens on a rank, a dispatch inside one node overlaps its copy-out with the
/// transfer (dispatch.cu: the counts go out before the payload, each message is marked landed, a
/// persistent copy-out grid on a second stream expands messages as they land). Measured on 2x
/// H200 (docs/perf.md, v14): 4096 tokens BF16 13% faster in the sweep (FP8 within 1% there, 9%
/// faster measured alone); 1024 tokens within a few percent either way, 512 tokens 10% slower.
/// Again at v20 (`bench/results/history/prefill-ab-h200-x2-2026-11-22-v20.txt`, two reps):
/// 1024 tokens BF16 118.7 -> 105.5 / 104.4 us (p95 120.4 -> 128.6 / 116.5), FP8 95.0 -> 96.1 /
/// 97.5; 512 tokens 1-12 us slower. So BF16 from 1024, the formats the send encodes from 2048.
/// `EP_CUDA_OVERLAP_MIN_TOKENS` overrides both (0: never).
const OVERLAP_MIN_TOKENS: usize = 2048;
const OVERLAP_MIN_TOKENS_BF16: usize = 1024;
/// Threads of an overlapped copy-out block (16 warps, a message each). Its launch bounds keep it
/// to half an SM's registers, so one fits beside one 512-thread send block, but every SM that
/// holds one runs one send block instead of two. So the grid is a share of the SMs: two thirds
/// for BF16, a half for FP8 and a third for the other formats the send encodes (which need the
/// send's blocks more), the best of 1/8 to all of the SMs at 4096 tokens on 2x H200 (docs/perf.md,
/// v17: FP8 a third 273 us, a quarter 317; BF16 two thirds 304-308 us with p95 315, a half 291-335
/// with p95 338-372; v20, after the faster assign, two reps: FP8 a half 252.4 / 252.6 us with p95
/// 255 / 254, a third 262.0 / 251.9 with p95 270 / 268, a quarter 308 / 296; BF16 two thirds
/// still, 292 / 291 with p95 296 / 295). MXFP4 and NVFP4 were not measured.
/// `EP_CUDA_OVERLAP_COPY_BLOCKS` sets it.
const OVERLAP_COPY_THREADS: u32 = 512;
/// The status word the wait and copy-out kernels leave: common.cuh's `EP_*` codes (a test checks
/// that they agree).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
enum WaitStatus {
    Ok = 0,
    /// A wait slice ran out with counts missing.
    Pending = 1,
    CountOverflow = 2,
    CountMismatch = 3,
    /// The counts were there, a message of an overlapped sender was not: the copy-out again.
    MessagesPending = 4,
}

impl WaitStatus {
    const ALL: [WaitStatus; 5] = [
        WaitStatus::Ok,
        WaitStatus::Pending,
        WaitStatus::CountOverflow,
        WaitStatus::CountMismatch,
        WaitStatus::MessagesPending,
    ];

    fn from_word(w: u32) -> Option<WaitStatus> {
        Self::ALL.into_iter().find(|&s| s as u32 == w)
    }
}

/// A token count set by the environment variable `var`, read once into `cell` (`None` when unset,
/// or with a warning when it is not a number): it overrides the tunable's default.
fn tokens_from_env(cell: &OnceLock<Option<usize>>, var: &str) -> Option<usize> {
    *cell.get_or_init(|| match std::env::var(var).as_deref().map(str::parse) {
        Err(_) => None,
        Ok(Ok(n)) => Some(n),
        Ok(Err(_)) => {
            eprintln!("ep-cuda: {var} is not a number; the default applies");
            None
        }
    })
}

/// Up to this many tokens a rank takes its combine rows in LL form (common.cuh): each 8-byte word
/// 4 bytes of the row and the combine's number, so the rows need no fence and the counts do not
/// wait for them, at twice the bytes on the wire. On 2x H200 (docs/perf.md, v19): 1-8 tokens
/// 0.7-1.3 µs faster, 16 level, 32 4 µs slower (the doubled bytes). `EP_CUDA_LL_MAX_TOKENS`
/// overrides it (0: never); read once per process, compiled into the kernels (kernels.rs) and
/// used to size the buffers (world.rs), so every rank of the node agrees.
const LL_MAX_TOKENS: usize = 8;

/// [`LL_MAX_TOKENS`] or its override.
pub(crate) fn ll_max_tokens() -> usize {
    static MAX: OnceLock<Option<usize>> = OnceLock::new();
    tokens_from_env(&MAX, "EP_CUDA_LL_MAX_TOKENS").unwrap_or(LL_MAX_TOKENS)
}

/// Parameters of the kernels whose argument lists are built as arrays here (a test checks them
/// against the kernels' declarations).
const SEND_ARGS: usize = 30;
const WAIT_ARGS: usize = 14;
const COPY_OUT_ARGS: usize = 23;
/// `ep_dispatch_copy_messages` takes the first of `ep_dispatch_copy_out`'s.
const COPY_MESSAGES_ARGS: usize = 20;
const COMBINE_SEND_ARGS: usize = 20;
const DISPATCH_SINGLE_ARGS: usize = 37;
const COMBINE_SINGLE_ARGS: usize = 34;

/// Which copy-out `CudaComm::issue_copy` launches.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CopyOut {
    /// Every message, padding row and shared-expert row, after the wait.
    All,
    /// An overlapped round's padding and shared-expert rows (the messages are done beside the send).
    Tail,
    /// An overlapped round's messages, on the copy stream, as they land.
    Messages,
}

/// What a round keeps on the host between phases (the data itself stays on the device).
#[derive(Default)]
struct RoundData {
    n_tokens: usize,
    shared: std::ops::Range<usize>,
    rows: usize,
    reduced: bool,
    epilogue: Option<Epilogue>,
    /// The last wait slice had every count but not every message: only the copy-out again.
    messages_pending: bool,
}

/// The scalars every kernel of a rank takes, as the kernels' `int`/`u64` parameters.
#[derive(Clone, Copy)]
struct Scalars {
    rank: i32,
    n: i32,
    l: i32,
    skip: i32,
    top_k: i32,
    hidden: i32,
    experts: i32,
    gpn: i32,
    max_t: i32,
}

impl Scalars {
    fn new(rank: usize, cfg: &EpConfig) -> Self {
        Scalars {
            rank: rank as i32,
            n: cfg.n_ranks() as i32,
            l: cfg.n_local_experts() as i32,
            skip: cfg.skip_a2a.is_some() as i32,
            top_k: cfg.top_k as i32,
            hidden: cfg.hidden as i32,
            experts: cfg.n_experts as i32,
            gpn: cfg.n_gpus_per_node as i32,
            max_t: cfg.max_tokens_per_rank as i32,
        }
    }
}

pub struct CudaComm {
    rank: usize,
    sc: Scalars,
    cfg: EpConfig,
    world: Arc<World>,
    stream: Arc<CudaStream>,
    /// The overlapped copy-out's stream (high priority, so its blocks get SMs as the send's
    /// retire), and the events that fork it from and join it to `stream`.
    copy_stream: Arc<CudaStream>,
    slots_done: CudaEvent,
    copied: CudaEvent,
    /// The dispatch round's number, the same on every rank: an overlapped sender marks its
    /// messages landed with it. Flags start at 0, so it starts at 1.
    seq: u32,
    /// The combine's number, the same on every rank: the word an LL row carries (common.cuh).
    /// The LL rows start at 0, so it starts at 1.
    cseq: u32,
    tracker: RoundTracker,
    round: RoundData,
    /// When set (`ep bench --breakdown`), an event after every kernel, to time each one.
    probe: std::cell::RefCell<Option<Vec<(&'static str, CudaEvent)>>>,
}

impl CudaComm {
    pub(crate) fn new(rank: usize, world: Arc<World>) -> Result<CudaComm> {
        let ctx = &world.kernels[rank].ctx;
        let stream = ctx.new_stream().map_err(cuda)?;
        ctx.bind_to_thread().map_err(cuda)?;
        let (_, highest) = cudarc::driver::result::stream::get_priority_range().map_err(cuda)?;
        let copy_stream = ctx.new_stream_with_priority(highest).map_err(cuda)?;
        let event = || {
            ctx.new_event(Some(
                cudarc::driver::sys::CUevent_flags::CU_EVENT_DISABLE_TIMING,
            ))
            .map_err(cuda)
        };
        let (slots_done, copied) = (event()?, event()?);
        Ok(CudaComm {
            rank,
            sc: Scalars::new(rank, &world.cfg),
            cfg: world.cfg.clone(),
            world,
            stream,
            copy_stream,
            slots_done,
            copied,
            seq: 0,
            cseq: 0,
            tracker: RoundTracker::new(rank),
            round: RoundData::default(),
            probe: Default::default(),
        })
    }

    pub(crate) fn stream_ref(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The loaded round reduces with weights (device-resident benchmark rounds).
    pub(crate) fn set_reduced(&mut self) {
        self.round.reduced = true;
    }

    /// The GPU this rank runs on.
    pub fn device(&self) -> usize {
        self.world.device_of[self.rank]
    }

    pub(crate) fn world(&self) -> &World {
        &self.world
    }

    pub(crate) fn bufs(&self) -> &RankBuffers {
        &self.world.ranks[self.rank]
    }

    fn k(&self) -> &Kernels {
        &self.world.kernels[self.rank]
    }

    /// Launches kernel `name` of this rank's device on its stream.
    fn launch(
        &self,
        name: &'static str,
        grid: u32,
        block: u32,
        smem: u32,
        args: &[&dyn crate::kernels::KernelArg],
    ) -> Result<()> {
        self.launch_fn(name, self.k().get(name), grid, block, smem, args)
    }

    /// Launches `f` (kernel `name`, or a variant of it) on this rank's stream.
    fn launch_fn(
        &self,
        name: &'static str,
        f: &CudaFunction,
        grid: u32,
        block: u32,
        smem: u32,
        args: &[&dyn crate::kernels::KernelArg],
    ) -> Result<()> {
        launch(&self.stream, f, grid, block, smem, args)?;
        self.mark(name)
    }

    /// Records an event named `name` on the stream while probing.
    pub(crate) fn mark(&self, name: &'static str) -> Result<()> {
        if let Some(events) = self.probe.borrow_mut().as_mut() {
            let e = self
                .stream
                .context()
                .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(cuda)?;
            e.record(&self.stream).map_err(cuda)?;
            events.push((name, e));
        }
        Ok(())
    }

    /// Starts (`true`) or stops probing; stopping returns the events recorded since the start.
    pub(crate) fn set_probe(&self, on: bool) -> Vec<(&'static str, CudaEvent)> {
        std::mem::replace(&mut *self.probe.borrow_mut(), on.then(Vec::new)).unwrap_or_default()
    }

    fn bind(&self) -> Result<()> {
        self.k().ctx.bind_to_thread().map_err(cuda)
    }

    fn fail(&mut self, err: EpError) -> EpError {
        self.tracker.poison(&err);
        err
    }

    fn sync(&mut self) -> Result<()> {
        match self.stream.synchronize() {
            Ok(()) => Ok(()),
            Err(e) => Err(self.fail(cuda(e))),
        }
    }

    /// Runs a phase's wait to completion. `issue` launches the wait kernel with a slice of the
    /// deadline (in ns), and what follows it on the device; while counts are missing and time is
    /// left, the host launches it again. With `issued`, the first slice is already on the stream
    /// (a single-launch phase waits inside its one kernel). Returns with the stream idle. A
    /// timeout names the (rank, expert) pairs that never arrived.
    pub(crate) fn wait_sliced(
        &mut self,
        phase: Phase,
        mut issued: bool,
        issue: &mut dyn FnMut(&mut Self, u64) -> Result<()>,
    ) -> Result<()> {
        let start = Instant::now();
        let mut slices = 0u32;
        loop {
            let slice = self
                .cfg
                .timeout
                .saturating_sub(start.elapsed())
                .min(WAIT_SLICE);
            if !std::mem::take(&mut issued) {
                issue(self, slice.as_nanos() as u64)?;
            }
            self.sync()?;
            slices += 1;
            let give_up = start.elapsed() >= self.cfg.timeout;
            if self.wait_outcome(phase, start, give_up)? {
                break;
            }
        }
        if slices > 1 && std::env::var_os("EP_CUDA_LOG_WAITS").is_some() {
            eprintln!(
                "ep-cuda: rank {} {phase:?} wait took {slices} slices ({} ms)",
                self.rank,
                start.elapsed().as_millis()
            );
        }
        Ok(())
    }

    /// Reads the status a wait kernel left: `true` when every count (and, in a dispatch, every
    /// message awaited) arrived, `false` when its slice ran out first and `give_up` is not set
    /// yet.
    fn wait_outcome(&mut self, phase: Phase, start: Instant, give_up: bool) -> Result<bool> {
        let (n, l) = (self.cfg.n_ranks(), self.cfg.n_local_experts());
        // The outcome word alone on the way that every round takes; the per-count flags only
        // for the error.
        let mut code = [0u32];
        self.bufs().status.download(&mut code, &self.stream)?;
        let status = WaitStatus::from_word(code[0]);
        self.round.messages_pending = status == Some(WaitStatus::MessagesPending);
        let rank = self.rank;
        let err = match status {
            Some(WaitStatus::Ok) => return Ok(true),
            Some(WaitStatus::Pending | WaitStatus::MessagesPending) if !give_up => return Ok(false),
            Some(WaitStatus::Pending | WaitStatus::MessagesPending) => {
                let mut status = vec![0u32; 1 + l * n];
                self.bufs().status.download(&mut status, &self.stream)?;
                let missing = (0..l * n)
                    .filter(|&i| status[1 + i] != 0)
                    .map(|i| {
                        let (g, s) = (i / n, i % n);
                        match phase {
                            Phase::Combine => MissingSignal { src_rank: s, expert: s * l + g },
                            _ => MissingSignal { src_rank: s, expert: rank * l + g },
                        }
                    })
                    .collect();
                let waited_ms = start.elapsed().as_millis() as u64;
                EpError::Timeout { rank, phase, waited_ms, missing }
            }
            Some(WaitStatus::CountOverflow) => EpError::Backend(format!("rank {rank}: a receive count exceeds max_tokens_per_rank; the buffer protocol was violated")),
            Some(WaitStatus::CountMismatch) => EpError::Backend(format!("rank {rank}: combine received other row counts than this rank sent")),
            None => EpError::Backend(format!("rank {rank}: unknown wait status {}", code[0])),
        };
        Err(self.fail(err))
    }

    fn shared_groups(&self) -> i32 {
        self.cfg.shared_groups() as i32
    }

    /// The rank's dispatch inputs to the device (the driver stages pageable memory before
    /// returning, so `input` may go away afterwards).
    pub(crate) fn upload_dispatch(&mut self, input: &DispatchInput<'_>) -> Result<()> {
        self.bind()?;
        let t = input.n_tokens();
        let b = self.bufs();
        // Straight from the caller's arrays where they are contiguous (validation guarantees it
        // for the tokens); a copy only for strided ids or scales, and for absent scales.
        b.tokens
            .upload(contiguous(&input.tokens).as_ref(), &self.stream)?;
        b.ids
            .upload(contiguous(&input.topk_ids).as_ref(), &self.stream)?;
        match input.input_scales {
            Some(v) => b.scales_in.upload(contiguous(&v).as_ref(), &self.stream)?,
            None => b.scales_in.upload(&vec![1.0f32; t], &self.stream)?,
        }
        let shared = if self.cfg.fused_shared_expert {
            self.cfg.shared_token_range(self.rank, t)
        } else {
            0..0
        };
        self.round = RoundData {
            n_tokens: t,
            shared,
            ..Default::default()
        };
        Ok(())
    }

    /// This round's dispatch is one launch (`ep_dispatch_single`): one node, few tokens here,
    /// and room for a sending block and the counting block.
    pub(crate) fn single_dispatch(&self) -> bool {
        static MAX: OnceLock<Option<usize>> = OnceLock::new();
        let max = tokens_from_env(&MAX, "EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS").unwrap_or(
            if self.world.shares_gpu[self.rank] {
                SINGLE_DISPATCH_MAX_TOKENS_SHARED_GPU
            } else {
                SINGLE_DISPATCH_MAX_TOKENS
            },
        );
        self.world.single_launch_blocks[self.rank] >= 2 && self.single_launch(max)
    }

    /// This round's combine is one launch (`ep_combine_single`): one node, few tokens here, and
    /// a reduction with weights.
    pub(crate) fn single_combine(&self) -> bool {
        static MAX: OnceLock<Option<usize>> = OnceLock::new();
        let max = tokens_from_env(&MAX, "EP_CUDA_SINGLE_COMBINE_MAX_TOKENS")
            .unwrap_or(SINGLE_COMBINE_MAX_TOKENS);
        self.round.reduced && self.single_launch(max)
    }

    /// This rank takes this round's combine rows in LL form (common.cuh): one node and few tokens
    /// here. The dispatch told every sender so (`EP_NMSG_LL`, decided on the device by the same
    /// rule).
    fn ll_combine(&self) -> bool {
        self.cfg.n_nodes == 1 && self.round.n_tokens <= ll_max_tokens()
    }

    /// This round's dispatch overlaps its copy-out with the transfer: one node, many tokens here
    /// (`OVERLAP_MIN_TOKENS`). Ranks decide for themselves; a receiver awaits the messages of
    /// whichever senders overlapped (dispatch.cu).
    fn overlap_dispatch(&self) -> bool {
        static MIN: OnceLock<Option<usize>> = OnceLock::new();
        let min = tokens_from_env(&MIN, "EP_CUDA_OVERLAP_MIN_TOKENS").unwrap_or(
            if self.cfg.format == Format::Bf16 {
                OVERLAP_MIN_TOKENS_BF16
            } else {
                OVERLAP_MIN_TOKENS
            },
        );
        self.persistent_grids() && min > 0 && self.round.n_tokens >= min && !self.single_dispatch()
    }

    /// The dispatch's first wait slice is already on the stream once `issue_dispatch_send`
    /// returns (a single-launch or overlapped round).
    pub(crate) fn dispatch_wait_issued(&self) -> bool {
        self.single_dispatch() || self.overlap_dispatch()
    }

    fn single_launch(&self, max_tokens: usize) -> bool {
        self.persistent_grids() && max_tokens > 0 && self.round.n_tokens <= max_tokens
    }

    /// Whether this rank may run grids whose blocks wait on one another or on the send (the
    /// single-launch phases, the overlapped copy-out): one node, and room on the GPU for them.
    fn persistent_grids(&self) -> bool {
        self.cfg.n_nodes == 1 && self.world.single_launch_blocks[self.rank] > 0
    }

    /// Where the dispatch left its row count on the device (`row_offsets[n_groups]`), which the
    /// combine kernels read.
    fn rows_end(&self) -> u64 {
        self.bufs().row_offsets.ptr + 4 * self.cfg.n_groups() as u64
    }

    /// The first slice of a wait issued with its phase (single-launch or overlapped), in ns.
    fn first_slice_ns(&self) -> u64 {
        self.cfg.timeout.min(WAIT_SLICE).as_nanos() as u64
    }

    /// Slots, sends and signals (between nodes: sends, puts, signals): the dispatch_async
    /// kernels; at decode sizes inside one node, the whole dispatch in one launch; at prefill
    /// sizes inside one node, also the first slice of the wait and the copy-out, overlapped.
    pub(crate) fn issue_dispatch_send(&mut self) -> Result<()> {
        self.seq = self.seq.wrapping_add(1).max(1);
        self.round.messages_pending = false;
        if self.single_dispatch() {
            return self.issue_dispatch_single();
        }
        let overlap = self.overlap_dispatch();
        let early = overlap as i32;
        let cfg = &self.cfg;
        let b = self.bufs();
        let t = self.round.n_tokens;
        let shared = &self.round.shared;
        let one_node = (cfg.n_nodes == 1) as i32;
        let sc = &self.sc;
        let m = self.world.msg;
        // A block per expert (row slots), then one per destination rank (message slots).
        self.launch(
            "ep_assign_slots",
            (cfg.n_experts + cfg.n_ranks()) as u32,
            WAIT_THREADS,
            0,
            &[
                &b.ids.ptr,
                &(t as i32),
                &sc.top_k,
                &sc.experts,
                &sc.l,
                &sc.n,
                &sc.rank,
                &sc.skip,
                &b.slots.ptr,
                &b.rank_slots.ptr,
                &b.sent.ptr,
                &b.msgs_to.ptr,
                &early,
                &b.d_ticket.ptr,
                &b.d_count_ptrs.ptr,
                &b.d_nmsg_ptrs.ptr,
            ],
        )?;
        if overlap {
            // The copy stream: the wait (the counts come before the payload), then the messages'
            // copy-out as they land.
            self.slots_done.record(&self.stream).map_err(cuda)?;
            self.copy_stream.wait(&self.slots_done).map_err(cuda)?;
            let slice = self.first_slice_ns();
            self.launch_dispatch_wait(&self.copy_stream, slice)?;
            self.issue_copy(CopyOut::Messages, slice)?;
        }
        let smem = send_smem(cfg.format, &m, cfg.hidden) as u32;
        let send: [&dyn crate::kernels::KernelArg; SEND_ARGS] = [
            &b.tokens.ptr,
            &b.scales_in.ptr,
            &(t as i32),
            &sc.hidden,
            &format_id(cfg.format),
            &b.ids.ptr,
            &b.slots.ptr,
            &b.rank_slots.ptr,
            &sc.top_k,
            &m,
            &b.d_recv_ptrs.ptr,
            &sc.rank,
            &sc.n,
            &sc.l,
            &sc.gpn,
            &sc.max_t,
            &b.d_staging.ptr,
            &(shared.start as i32),
            &(shared.end as i32),
            &b.shared_msgs.ptr,
            &one_node,
            &b.d_ticket.ptr,
            &b.sent.ptr,
            &b.msgs_to.ptr,
            &sc.experts,
            &sc.skip,
            &b.d_count_ptrs.ptr,
            &b.d_nmsg_ptrs.ptr,
            &early,
            &self.seq,
        ];
        // At least one block: a rank without tokens still signals.
        self.launch(
            "ep_dispatch_send",
            t.max(1) as u32,
            SEND_THREADS,
            smem,
            &send,
        )?;
        if cfg.n_nodes > 1 {
            // ep_dispatch_put's parameters are ep_dispatch_send's from ids to staging (a test
            // checks them name for name).
            self.launch("ep_dispatch_put", t as u32, THREADS, 0, &send[5..17])?;
            self.launch(
                "ep_dispatch_signal",
                1,
                WAIT_THREADS,
                0,
                &[
                    &b.sent.ptr,
                    &b.msgs_to.ptr,
                    &sc.experts,
                    &sc.l,
                    &sc.n,
                    &sc.rank,
                    &sc.skip,
                    &b.d_count_ptrs.ptr,
                    &b.d_nmsg_ptrs.ptr,
                ],
            )?;
        }
        if overlap {
            // The main stream takes the copy stream back, then the rows no message fills.
            self.copied.record(&self.copy_stream).map_err(cuda)?;
            self.stream.wait(&self.copied).map_err(cuda)?;
            self.issue_copy(CopyOut::Tail, self.first_slice_ns())?;
        }
        Ok(())
    }

    /// The whole dispatch in one launch (`ep_dispatch_single` in dispatch.cu): a persistent grid
    /// no larger than the GPU holds at once, a block per token up to that and one that counts.
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
        // counts and layout.
        let smem = [
            send_smem(cfg.format, &m, cfg.hidden),
            4 * (cfg.n_experts + ranks),
            8 * counts + 4 * (groups + 1 + groups * (ranks + 1)),
        ]
        .into_iter()
        .max()
        .unwrap_or(0) as u32;
        let row_multiple = cfg.format.group_row_multiple() as i32;
        // A block per message this rank may receive, then the block that counts and publishes;
        // all resident at once (`single_dispatch` leaves room for two). The spread kernel also
        // takes a block per row this rank expects (t * top_k across all senders), among which it
        // cuts each message's rows, and is chosen when that leaves two blocks to spare for every
        // (token, rank), which it sends a block each. (With one, at 64 tokens on two ranks, it
        // read 0.4-0.7 us slower.)
        let most = self.world.single_launch_blocks[self.rank] as usize - 1;
        let spread_senders = (t * cfg.top_k).max(t * ranks).max(ranks).min(most);
        let spread = spread_senders >= 2 * t * ranks;
        let senders = if spread {
            spread_senders
        } else {
            (t * ranks).max(ranks).min(most)
        };
        let grid = (senders + 1) as u32;
        let kernel = if spread {
            "ep_dispatch_single_spread"
        } else {
            "ep_dispatch_single"
        };
        let args: [&dyn crate::kernels::KernelArg; DISPATCH_SINGLE_ARGS] = [
            &b.tokens.ptr,
            &b.scales_in.ptr,
            &(t as i32),
            &sc.hidden,
            &format_id(cfg.format),
            &b.ids.ptr,
            &sc.top_k,
            &m,
            &b.d_recv_ptrs.ptr,
            &sc.rank,
            &sc.n,
            &sc.l,
            &sc.max_t,
            &(shared.start as i32),
            &(shared.end as i32),
            &b.shared_msgs.ptr,
            &b.d_ticket.ptr,
            &b.sent.ptr,
            &sc.experts,
            &sc.skip,
            &b.d_count_ptrs.ptr,
            &b.d_nmsg_ptrs.ptr,
            &b.d_counts.ptr,
            &self.first_slice_ns(),
            &self.shared_groups(),
            &row_multiple,
            &b.status.ptr,
            &b.snapshot.ptr,
            &b.row_offsets.ptr,
            &b.src_offsets.ptr,
            &b.d_recv.ptr,
            &b.d_nmsg.ptr,
            &b.recv_tokens.ptr,
            &b.recv_scales.ptr,
            &b.src_info.ptr,
            &b.row_src.ptr,
            &self.seq,
        ];
        self.launch(kernel, grid, SEND_THREADS, smem, &args)
    }

    /// One slice of the wait and the copy-out into the per-expert layout (which does nothing
    /// unless the wait completed): the dispatch_wait kernels. The row count stays on the device.
    /// After a slice that had every count but not every message of an overlapped sender
    /// (EP_MESSAGES_PENDING), the copy-out alone again: the counts are taken.
    pub(crate) fn issue_dispatch_wait(&self, slice_ns: u64) -> Result<()> {
        self.bind()?;
        self.wait_counts_unless_taken(|c| {
            c.launch_dispatch_wait(&c.stream, slice_ns)?;
            c.mark("ep_dispatch_wait")
        })?;
        self.issue_copy(CopyOut::All, slice_ns)
    }

    /// A wait slice's count wait (`wait`), unless the last slice had every count but not every
    /// message or LL row (EP_MESSAGES_PENDING): the counts are taken then, and only the status
    /// is reset for the kernels that wait for the rest.
    fn wait_counts_unless_taken(&self, wait: impl FnOnce(&Self) -> Result<()>) -> Result<()> {
        if self.round.messages_pending {
            let b = self.bufs();
            b.status.fill_async(0, b.status.len, &self.stream)
        } else {
            wait(self)
        }
    }

    /// `ep_dispatch_wait` on `stream`: the counts, their check and the groups' layout.
    fn launch_dispatch_wait(&self, stream: &CudaStream, slice_ns: u64) -> Result<()> {
        let cfg = &self.cfg;
        let b = self.bufs();
        let sc = &self.sc;
        let row_multiple = cfg.format.group_row_multiple() as i32;
        let layout_smem =
            (8 * cfg.n_local_experts() * cfg.n_ranks() + 4 * (cfg.n_groups() + 1)) as u32;
        let wait: [&dyn crate::kernels::KernelArg; WAIT_ARGS] = [
            &b.d_counts.ptr,
            &sc.l,
            &sc.n,
            &sc.rank,
            &sc.skip,
            &slice_ns,
            &sc.max_t,
            &self.shared_groups(),
            &(self.round.shared.len() as i32),
            &row_multiple,
            &b.status.ptr,
            &b.snapshot.ptr,
            &b.row_offsets.ptr,
            &b.src_offsets.ptr,
        ];
        let f = self.k().get("ep_dispatch_wait");
        launch(stream, f, 1, WAIT_THREADS, layout_smem, &wait)
    }

    /// The copy-out into the per-expert layout (dispatch.cu): `ep_dispatch_copy_out` on the main
    /// stream (a block per possible message, per possible padding row, per shared-expert row; the
    /// last two kinds alone for `Tail`), or the overlapped round's `ep_dispatch_copy_messages` on
    /// the copy stream, whose parameters are the first of `ep_dispatch_copy_out`'s.
    fn issue_copy(&self, what: CopyOut, slice_ns: u64) -> Result<()> {
        let cfg = &self.cfg;
        let b = self.bufs();
        let sc = &self.sc;
        let row_multiple = cfg.format.group_row_multiple() as i32;
        let messages = cfg.n_ranks() * cfg.max_tokens_per_rank;
        let first_block = if what == CopyOut::Tail {
            messages as u64
        } else {
            0
        };
        let args: [&dyn crate::kernels::KernelArg; COPY_OUT_ARGS] = [
            &b.d_recv.ptr,
            &b.d_nmsg.ptr,
            &b.row_offsets.ptr,
            &b.src_offsets.ptr,
            &sc.l,
            &sc.n,
            &sc.rank,
            &sc.skip,
            &self.shared_groups(),
            &sc.max_t,
            &sc.hidden,
            &format_id(cfg.format),
            &self.world.msg,
            &b.recv_tokens.ptr,
            &b.recv_scales.ptr,
            &b.src_info.ptr,
            &b.row_src.ptr,
            &b.status.ptr,
            &self.seq,
            &slice_ns,
            &b.shared_msgs.ptr,
            &row_multiple,
            &first_block,
        ];
        if what == CopyOut::Messages {
            static BLOCKS: OnceLock<Option<usize>> = OnceLock::new();
            let most = self.world.single_launch_blocks[self.rank] as usize;
            let (num, den) = match cfg.format {
                Format::Bf16 => (2, 3),
                Format::Fp8 => (1, 2),
                _ => (1, 3),
            };
            let grid = tokens_from_env(&BLOCKS, "EP_CUDA_OVERLAP_COPY_BLOCKS")
                .unwrap_or(most * num / den)
                .clamp(1, most);
            let f = self.k().get("ep_dispatch_copy_messages");
            return launch(
                &self.copy_stream,
                f,
                grid as u32,
                OVERLAP_COPY_THREADS,
                0,
                &args[..COPY_MESSAGES_ARGS],
            );
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
        self.launch("ep_dispatch_copy_out", grid as u32, THREADS, 0, &args)
    }

    /// Expert outputs, weights and a residual to the device.
    pub(crate) fn upload_combine(&self, input: &CombineInput<'_>) -> Result<()> {
        let b = self.bufs();
        let s = &self.stream;
        b.expert_out
            .upload(contiguous(&input.expert_out).as_ref(), s)?;
        match &input.weights {
            Some(RouterWeights::F32(w)) => b.weights.upload(contiguous(w).as_ref(), s)?,
            Some(RouterWeights::Bf16(w)) => {
                let w: Vec<f32> = w.iter().map(|x| x.to_f32()).collect();
                b.weights.upload(&w, s)?
            }
            None => {}
        }
        if let Some(Epilogue::AddResidual(r)) = input.epilogue {
            b.residual.upload(contiguous(&r.view()).as_ref(), s)?;
        }
        Ok(())
    }

    /// Rows back to their tokens and the signals (between nodes: then puts, then signals): the
    /// combine_async kernels; at decode sizes inside one node, the whole combine in one launch.
    /// `grid_rows` covers at least the rows the dispatch produced (the kernels stop at the
    /// device's row count).
    pub(crate) fn issue_combine_send(&mut self, grid_rows: usize) -> Result<()> {
        self.cseq = self.cseq.wrapping_add(1).max(1);
        if self.single_combine() {
            return self.issue_combine_single(grid_rows);
        }
        let cfg = &self.cfg;
        let b = self.bufs();
        let sc = &self.sc;
        let one_node = (cfg.n_nodes == 1) as i32;
        let send: [&dyn crate::kernels::KernelArg; COMBINE_SEND_ARGS] = [
            &b.expert_out.ptr,
            &b.src_info.ptr,
            &b.row_src.ptr,
            &self.rows_end(),
            &sc.hidden,
            &sc.top_k,
            &b.c_recv_ptrs.ptr,
            &sc.rank,
            &sc.gpn,
            &b.c_staging.ptr,
            &one_node,
            &b.c_ticket.ptr,
            &b.snapshot.ptr,
            &sc.l,
            &sc.n,
            &sc.skip,
            &b.c_count_ptrs.ptr,
            &b.d_nmsg.ptr,
            &b.c_ll_ptrs.ptr,
            &self.cseq,
        ];
        // At least one block: a rank that received no rows still signals.
        let grid = grid_rows.max(1) as u32;
        self.launch("ep_combine_send", grid, THREADS, 0, &send)?;
        if cfg.n_nodes > 1 {
            // ep_combine_put's parameters are ep_combine_send's from src_info to staging (a test
            // checks them name for name).
            self.launch("ep_combine_put", grid, THREADS, 0, &send[1..10])?;
            self.launch(
                "ep_combine_signal",
                1,
                WAIT_THREADS,
                0,
                &[
                    &b.snapshot.ptr,
                    &sc.l,
                    &sc.n,
                    &sc.rank,
                    &sc.skip,
                    &b.c_count_ptrs.ptr,
                ],
            )?;
        }
        Ok(())
    }

    /// One slice of the combine wait, with the count check; for a rank that takes its rows in LL
    /// form, then those rows into the receive buffer (`ep_combine_ll_unpack`). After a slice that
    /// had every count but not every LL row (EP_MESSAGES_PENDING), the rows alone again: the counts
    /// are taken.
    pub(crate) fn issue_combine_wait(&self, slice_ns: u64) -> Result<()> {
        self.bind()?;
        let b = self.bufs();
        let sc = &self.sc;
        self.wait_counts_unless_taken(|c| c.launch_combine_wait(slice_ns))?;
        if self.ll_combine() {
            self.launch(
                "ep_combine_ll_unpack",
                self.round.n_tokens as u32,
                THREADS,
                0,
                &[
                    &b.c_ll_ptrs.ptr,
                    &self.cseq,
                    &slice_ns,
                    &b.ids.ptr,
                    &sc.top_k,
                    &sc.hidden,
                    &sc.rank,
                    &sc.l,
                    &sc.n,
                    &sc.skip,
                    &b.c_recv.ptr,
                    &b.status.ptr,
                ],
            )?;
        }
        Ok(())
    }

    /// `ep_combine_wait`: the counts and their check.
    fn launch_combine_wait(&self, slice_ns: u64) -> Result<()> {
        let b = self.bufs();
        let sc = &self.sc;
        self.launch(
            "ep_combine_wait",
            1,
            WAIT_THREADS,
            0,
            &[
                &b.c_counts.ptr,
                &sc.l,
                &sc.n,
                &sc.rank,
                &sc.skip,
                &slice_ns,
                &b.sent.ptr,
                &b.status.ptr,
                &b.c_snapshot.ptr,
            ],
        )
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

    /// The whole combine in one launch (`ep_combine_single` in combine.cu), with weights: a
    /// persistent grid no larger than the GPU holds at once, a block per row to send up to that.
    fn issue_combine_single(&self, grid_rows: usize) -> Result<()> {
        let cfg = &self.cfg;
        let b = self.bufs();
        let sc = &self.sc;
        let t = self.round.n_tokens;
        let (epi, scale, device) = self.epilogue_args()?;
        let k = self.k();
        let (name, f) = match (&device, self.ll_combine()) {
            (None, false) => ("ep_combine_single", k.get("ep_combine_single")),
            (None, true) => ("ep_combine_single_ll", k.get("ep_combine_single_ll")),
            (Some(d), false) => ("ep_combine_single", &d.single),
            (Some(d), true) => ("ep_combine_single_ll", &d.single_ll),
        };
        let counts = cfg.n_local_experts() * cfg.n_ranks();
        let smem = self.whole_row_smem().max(8 * counts as u32);
        let grid = grid_rows
            .max(t)
            .max(1)
            .min(self.world.single_launch_blocks[self.rank] as usize) as u32;
        let args: [&dyn crate::kernels::KernelArg; COMBINE_SINGLE_ARGS] = [
            &b.expert_out.ptr,
            &b.src_info.ptr,
            &b.row_src.ptr,
            &self.rows_end(),
            &sc.hidden,
            &sc.top_k,
            &b.c_recv_ptrs.ptr,
            &sc.rank,
            &b.c_ticket.ptr,
            &b.snapshot.ptr,
            &sc.l,
            &sc.n,
            &sc.skip,
            &b.c_count_ptrs.ptr,
            &b.c_counts.ptr,
            &self.first_slice_ns(),
            &b.sent.ptr,
            &b.status.ptr,
            &b.c_recv.ptr,
            &b.ids.ptr,
            &b.weights.ptr,
            &(t as i32),
            &self.shared_rows(),
            &(self.round.shared.start as i32),
            &(self.round.shared.end as i32),
            &epi,
            &b.residual.ptr,
            &scale,
            &b.out.ptr,
            &b.fp8_payload.ptr,
            &b.fp8_scales.ptr,
            &b.d_nmsg.ptr,
            &b.c_ll_ptrs.ptr,
            &self.cseq,
        ];
        self.launch_fn(name, f, grid, SEND_THREADS, smem, &args)
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
            let args: [&dyn crate::kernels::KernelArg; 9] = [
                &b.c_recv.ptr,
                &b.ids.ptr,
                &sc.top_k,
                &(hidden as i32),
                &sc.rank,
                &sc.l,
                &sc.skip,
                &b.out.ptr,
                &b.status.ptr,
            ];
            return self.launch("ep_combine_unreduced", t as u32, THREADS, 0, &args);
        }
        let (epi, scale, device) = self.epilogue_args()?;
        let shared_rows = self.shared_rows();
        let f = device
            .as_ref()
            .map_or(k.get("ep_combine_reduce"), |d| &d.reduce);
        let smem = self.whole_row_smem();
        // Few tokens: one thread per 8 columns (one 16-byte load of each slot's row, up to
        // 1024 threads), so a token is one round of loads. Many tokens: 128-thread blocks, which
        // pack the SMs better (2x H200, hidden 7168: 1 token 19.6 -> 10.4 us wide; 4096 tokens
        // 161 us at 128 threads, 267 us wide).
        let reduce_threads = if t <= REDUCE_WIDE_MAX_TOKENS {
            (hidden / 8).next_multiple_of(32).clamp(32, 1024) as u32
        } else {
            THREADS
        };
        self.launch_fn(
            "ep_combine_reduce",
            f,
            t as u32,
            reduce_threads,
            smem,
            &[
                &b.c_recv.ptr,
                &b.ids.ptr,
                &b.weights.ptr,
                &sc.top_k,
                &(hidden as i32),
                &sc.rank,
                &sc.l,
                &sc.skip,
                &shared_rows,
                &(self.round.shared.start as i32),
                &(self.round.shared.end as i32),
                &epi,
                &b.residual.ptr,
                &scale,
                &b.out.ptr,
                &b.fp8_payload.ptr,
                &b.fp8_scales.ptr,
                &b.status.ptr,
            ],
        )
    }
}

/// The elements of `a` in row-major order: borrowed when the array is contiguous, copied when
/// it is strided.
fn contiguous<'a, T: Clone, D: ndarray::Dimension>(
    a: &'a ndarray::ArrayView<'_, T, D>,
) -> std::borrow::Cow<'a, [T]> {
    match a.as_slice() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(a.iter().cloned().collect()),
    }
}

impl EpComm for CudaComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn config(&self) -> &EpConfig {
        &self.cfg
    }

    fn dispatch_async(&mut self, input: &DispatchInput<'_>) -> Result<()> {
        self.tracker.check_dispatch_async()?;
        validate::dispatch_input(&self.cfg, self.rank, input)?;
        self.upload_dispatch(input)?;
        self.issue_dispatch_send()?;
        self.tracker.dispatch_sent();
        Ok(())
    }

    fn dispatch_wait(&mut self) -> Result<DispatchOutput> {
        self.tracker.check_dispatch_wait()?;
        let issued = self.dispatch_wait_issued();
        self.wait_sliced(Phase::Dispatch, issued, &mut |c, slice| {
            c.issue_dispatch_wait(slice)
        })?;

        let cfg = &self.cfg;
        let (g, hidden) = (cfg.n_groups(), cfg.hidden);
        let b = self.bufs();
        let mut row_offsets = vec![0u32; g + 1];
        let mut src_offsets = vec![0u32; g * (cfg.n_ranks() + 1)];
        b.row_offsets.download(&mut row_offsets, &self.stream)?;
        b.src_offsets.download(&mut src_offsets, &self.stream)?;
        let rows = row_offsets[g] as usize;
        let fmt = cfg.format;
        let scale_len = fmt.output_scales_bytes(hidden, rows);
        let payload = self.world.msg.payload_bytes as usize;
        let mut recv_tokens = vec![0u8; rows * payload];
        let mut recv_scales = vec![0u8; scale_len];
        let mut src_info = vec![0i32; rows * 2];
        b.recv_tokens.download(&mut recv_tokens, &self.stream)?;
        b.recv_scales.download(&mut recv_scales, &self.stream)?;
        b.src_info.download(&mut src_info, &self.stream)?;
        let mut expert_ids = vec![-1; cfg.shared_groups()];
        expert_ids.extend(0..cfg.n_local_experts() as i32);
        let n_ranks = cfg.n_ranks();
        self.round.rows = rows;
        let handle = self.tracker.dispatched();
        Ok(DispatchOutput {
            handle,
            format: fmt,
            hidden,
            recv_tokens: Array2::from_shape_vec((rows, payload), recv_tokens)
                .expect("rows x payload"),
            recv_scales,
            row_offsets,
            expert_ids,
            src_info: Array2::from_shape_vec((rows, 2), src_info).expect("rows x 2"),
            src_offsets: Array2::from_shape_vec((g, n_ranks + 1), src_offsets)
                .expect("groups x ranks+1"),
        })
    }

    fn combine_async(&mut self, handle: &RoutingHandle, input: &CombineInput<'_>) -> Result<()> {
        self.tracker.check_combine_async(handle)?;
        validate::combine_input(
            &self.cfg,
            self.rank,
            self.round.rows,
            self.round.n_tokens,
            input,
            false,
        )?;
        self.bind()?;
        if let Some(Epilogue::Device(d)) = input.epilogue {
            // Compile first, so a bad source fails with nothing sent.
            self.k().reduce_with_epilogue(&d.name, &d.source)?;
        }
        self.upload_combine(input)?;
        self.round.reduced = input.weights.is_some();
        self.round.epilogue = input.epilogue.cloned();
        self.issue_combine_send(self.round.rows)?;
        self.tracker.combine_sent();
        Ok(())
    }

    fn combine_wait(&mut self) -> Result<CombineOutput> {
        self.tracker.check_combine_wait()?;
        let single = self.single_combine();
        self.wait_sliced(Phase::Combine, single, &mut |c, slice| {
            c.issue_combine_wait(slice)?;
            c.issue_combine_output()
        })?;
        let (t, top_k, hidden) = (self.round.n_tokens, self.cfg.top_k, self.cfg.hidden);
        let b = self.bufs();
        let s = &self.stream;
        let output = match (self.round.reduced, &self.round.epilogue) {
            (false, _) => {
                let mut out = vec![bf16::ZERO; t * top_k * hidden];
                b.out.download(&mut out, s)?;
                CombineOutput::Unreduced(
                    Array3::from_shape_vec((t, top_k, hidden), out).expect("shape"),
                )
            }
            (true, Some(Epilogue::QuantizeFp8)) => {
                let mut payload = vec![0u8; t * hidden];
                let mut scales = vec![0f32; t * (hidden / 128)];
                b.fp8_payload.download(&mut payload, s)?;
                b.fp8_scales.download(&mut scales, s)?;
                CombineOutput::Fp8 {
                    payload: Array2::from_shape_vec((t, hidden), payload).expect("shape"),
                    scales: Array2::from_shape_vec((t, hidden / 128), scales).expect("shape"),
                }
            }
            (true, Some(Epilogue::Device(_))) => {
                s.synchronize().map_err(cuda)?;
                CombineOutput::Consumed
            }
            (true, _) => {
                let mut out = vec![bf16::ZERO; t * hidden];
                b.out.download(&mut out, s)?;
                CombineOutput::Reduced(Array2::from_shape_vec((t, hidden), out).expect("shape"))
            }
        };
        self.tracker.combined();
        Ok(output)
    }

    fn swiglu(
        &mut self,
        routing: &DispatchOutput,
        input: ArrayView2<'_, bf16>,
        opts: &SwigluOptions,
    ) -> Result<SwigluOutput> {
        self.tracker.check_routing(&routing.handle)?;
        swiglu::check(self.rank, routing, &input, opts)?;
        self.bind()?;
        let ctx = &self.k().ctx;
        let s = &self.stream;
        let (rows, width) = (input.nrows(), input.ncols() / 2);
        let fmt = opts.format;
        let payload_bytes = fmt.payload_bytes(width);
        let scale_len = fmt.output_scales_bytes(width, rows);
        let x = DevBuf::new(ctx, rows * 2 * width * 2)?;
        let payload = DevBuf::new(ctx, rows * payload_bytes)?;
        let scales = DevBuf::new(ctx, scale_len)?;
        x.upload(contiguous(&input).as_ref(), s)?;
        scales.fill_async(0, scale_len, s)?;
        let (clamp, alpha, limit) = match opts.clamp {
            Some(c) => (1, c.alpha, c.limit),
            None => (0, 0.0, 0.0),
        };
        let interleaved = (opts.layout == ep_core::GateUp::Interleaved) as i32;
        let smem = (width * 4 + fmt.scale_bytes(width) + 16) as u32;
        let b = self.bufs();
        self.launch(
            "ep_swiglu",
            rows as u32,
            THREADS,
            smem,
            &[
                &x.ptr,
                &(rows as u64),
                &(width as i32),
                &b.src_offsets.ptr,
                &(self.cfg.n_groups() as i32),
                &(self.cfg.n_ranks() as i32),
                &interleaved,
                &clamp,
                &alpha,
                &limit,
                &format_id(fmt),
                &opts.input_scale,
                &(payload_bytes as i32),
                &payload.ptr,
                &scales.ptr,
            ],
        )?;
        let mut out = vec![0u8; rows * payload_bytes];
        let mut sc = vec![0u8; scale_len];
        payload.download(&mut out, s)?;
        scales.download(&mut sc, s)?;
        Ok(SwigluOutput {
            format: fmt,
            width,
            payload: Array2::from_shape_vec((rows, payload_bytes), out).expect("shape"),
            scales: sc,
        })
    }

    fn memory_digest(&self) -> Result<u64> {
        self.bind()?;
        let b = self.bufs();
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for buf in [
            &b.d_recv,
            &b.d_nmsg,
            &b.d_counts,
            &b.c_recv,
            &b.c_counts,
            &b.c_ll,
        ] {
            let mut host = vec![0u8; buf.len];
            buf.download(&mut host, &self.stream)?;
            for chunk in host.chunks(8) {
                let mut w = [0u8; 8];
                w[..chunk.len()].copy_from_slice(chunk);
                h = (h ^ u64::from_le_bytes(w))
                    .wrapping_mul(0x100_0000_01b3)
                    .rotate_left(29);
            }
        }
        Ok(h)
    }
}

impl Drop for CudaComm {
    fn drop(&mut self) {
        // Nothing of this rank may still run when its buffers are freed.
        let _ = self.stream.synchronize();
    }
}

#[cfg(test)]
mod tests {
    use crate::kernels::tests::parameter_names;
    use crate::kernels::{COMBINE, DISPATCH};

    /// Each status code is common.cuh's `EP_` + the variant's name in upper snake case.
    #[test]
    fn status_codes_match_common_cuh() {
        let defined = |name: &str| -> u32 {
            let line = crate::kernels::COMMON
                .lines()
                .find(|l| l.starts_with(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("{name} not in common.cuh"));
            line.split_whitespace().nth(2).unwrap().parse().unwrap()
        };
        for status in super::WaitStatus::ALL {
            let mut name = String::from("EP");
            for c in format!("{status:?}").chars() {
                if c.is_uppercase() {
                    name.push('_');
                }
                name.push(c.to_ascii_uppercase());
            }
            assert_eq!(defined(&name), status as u32, "{name}");
            assert_eq!(super::WaitStatus::from_word(status as u32), Some(status));
        }
    }

    /// The argument lists built here have as many entries as the kernels declare, and the put
    /// kernels take a slice of their send kernel's list (comm.rs passes `send[a..b]`), so their
    /// parameters must be that slice, name for name.
    #[test]
    fn argument_lists_match_the_kernels() {
        use super::{
            COMBINE_SEND_ARGS, COMBINE_SINGLE_ARGS, COPY_MESSAGES_ARGS, COPY_OUT_ARGS,
            DISPATCH_SINGLE_ARGS, SEND_ARGS, WAIT_ARGS,
        };
        let send = parameter_names(DISPATCH, "ep_dispatch_send");
        assert_eq!(send.len(), SEND_ARGS);
        assert_eq!(
            parameter_names(DISPATCH, "ep_dispatch_wait").len(),
            WAIT_ARGS
        );
        assert_eq!(parameter_names(DISPATCH, "ep_dispatch_put"), send[5..17]);
        let copy = parameter_names(DISPATCH, "ep_dispatch_copy_out");
        assert_eq!(copy.len(), COPY_OUT_ARGS);
        assert_eq!(
            parameter_names(DISPATCH, "ep_dispatch_copy_messages"),
            copy[..COPY_MESSAGES_ARGS]
        );
        let send = parameter_names(COMBINE, "ep_combine_send");
        assert_eq!(send.len(), COMBINE_SEND_ARGS);
        assert_eq!(parameter_names(COMBINE, "ep_combine_put"), send[1..10]);
        let single = parameter_names(DISPATCH, "ep_dispatch_single");
        assert_eq!(single.len(), DISPATCH_SINGLE_ARGS);
        assert_eq!(
            parameter_names(DISPATCH, "ep_dispatch_single_spread"),
            single
        );
        let single = parameter_names(COMBINE, "ep_combine_single");
        assert_eq!(single.len(), COMBINE_SINGLE_ARGS);
        assert_eq!(parameter_names(COMBINE, "ep_combine_single_ll"), single);
    }
}
