//! `CudaComm`: one rank on a GPU. Its host thread issues the rank's kernels on its own stream;
//! every wait happens in a kernel that spins on acquire loads with a deadline, and reports what
//! never arrived through a status buffer the host reads after the stream finishes.
//!
//! This file holds the rank's state and the `EpComm` methods; the rest, one concern each:
//! - `path`: which path a round takes (single-launch, overlapped, LL rows) and the thresholds
//!   that choose it;
//! - `dispatch`: the dispatch's kernels, issued;
//! - `combine`: the combine's kernels, issued;
//! - `wait`: the sliced waits and what their status word means;
//! - `late_inputs`: a test hook (feature `test-hooks`), the inputs written late by a kernel
//!   before the phase.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ep_core::format::TokenFormat;
use ep_core::host_memory::zeroed_vec;
use ep_core::round::RoundTracker;
use ep_core::{
    bf16, swiglu, validate, CombineArgs, Combined, DispatchArgs, DispatchOutput, Dispatched,
    Element, EpComm, EpConfig, EpError, Epilogue, PendingCombine, PendingDispatch, Phase, Result,
    RoutingHandle, Staging, SwigluOptions, SwigluOutput,
};
use ndarray::{Array2, ArrayView2};

use crate::buffer::DeviceBuffer;
use ep_core::Buffer;

use crate::driver::cuda;
use crate::kernels::params::{EpSwigluParams, EpTakeIdsParams};
use crate::kernels::{launch_params, KernelParams, Kernels};
use crate::memory::DevBuf;
use crate::world::{RankBuffers, World};
use cudarc::driver::{CudaEvent, CudaFunction};

mod combine;
mod dispatch;
#[cfg(feature = "test-hooks")]
mod late_inputs;
mod path;
mod wait;

pub(crate) use dispatch::assign_chunks;
use dispatch::format_id;
pub(crate) use path::{
    CHUNKED_ASSIGN_MIN_TOKENS, LEAN_MIN_TOKENS_BF16, LL_MAX_TOKENS, MARKED_MIN_TOKENS,
    SINGLE_MARKED_MIN_TOKENS,
};

/// How a kernel is launched behind the one before it on the rank's stream (`CudaComm::launch`).
/// A chained launch (programmatic dependent launch, where the device takes it) may start while
/// the kernel before it finishes; the kernel waits for it on the device (`ep_await_prior_grid`,
/// which it must call).
#[derive(Clone, Copy)]
enum Chain {
    /// After it has ended.
    Plain,
    /// Chained to a kernel of the same phase (`chained_launches`).
    Prior,
    /// A phase's first kernel, chained to whatever the caller's stream ran before the phase
    /// (`chained_first`): in a model's step its blocks launch while the kernel before it (the
    /// router, the expert GEMM) finishes, sooner than a plain launch, which waits for that
    /// kernel to end (measured at a68bc06).
    First,
}

const THREADS: u32 = 128;
const WAIT_THREADS: u32 = 256;
/// The single-launch phases, and the multi-kernel send of the formats not measured with fewer
/// (dispatch.rs, `send_threads`): at decode sizes a few blocks are all the GPU runs, so each needs
/// many warps in flight.
const SEND_THREADS: u32 = 512;

/// Where a round's kernels read its inputs: the caller's buffers, held until the next round
/// (the combine reads the dispatch's ids again), so that memory the backend made stays
/// allocated while a kernel may read it.
#[derive(Default)]
struct RoundInputs {
    tokens: Option<DeviceBuffer<bf16>>,
    ids: Option<DeviceBuffer<i32>>,
    /// `None`: every token's scale is 1.0 (`CudaComm::ones`).
    scales: Option<DeviceBuffer<f32>>,
    expert_out: Option<DeviceBuffer<bf16>>,
    weights: Option<DeviceBuffer<f32>>,
}

impl RoundInputs {
    /// Whether any of them is the last handle to its memory (`DeviceBuffer::last_handle`).
    fn last_handles(&self) -> bool {
        fn last<T: Element>(b: &Option<DeviceBuffer<T>>) -> bool {
            b.as_ref().is_some_and(DeviceBuffer::last_handle)
        }
        last(&self.tokens)
            || last(&self.ids)
            || last(&self.scales)
            || last(&self.expert_out)
            || last(&self.weights)
    }
}

/// The device address of a round input (0 before the phase that sets it).
fn addr<T: Element>(b: &Option<DeviceBuffer<T>>) -> u64 {
    b.as_ref().map_or(0, DeviceBuffer::device_ptr)
}

/// What a round keeps on the host between phases (the data itself stays on the device).
#[derive(Default)]
struct RoundData {
    inputs: RoundInputs,
    n_tokens: usize,
    shared: std::ops::Range<usize>,
    /// The rows the dispatch produced, where the host read them (host waits).
    rows: Option<usize>,
    reduced: bool,
    epilogue: Option<Epilogue>,
    /// The last wait slice had every count but not every message: only the copy-out again.
    messages_pending: bool,
    /// The last wait returned `PeerRejected` with the counts left in place: the next wait of the
    /// phase launches the wait kernels again (nothing of the phase's first launch is on the
    /// stream).
    resume: bool,
    /// When this rank's wait first met a peer's poison in this round. Waits taken up again after
    /// `PeerRejected` share the round's one deadline from then on, so a peer that never calls
    /// again ends in a timeout naming it, not in endless retries.
    rejected_since: Option<std::time::Instant>,
    /// A wait slice ended with a count error but no poisoned count was found afterwards: the
    /// rejecting peer may have replaced it with its real count in between, so the slice is
    /// launched once more before the error is believed.
    rechecked: bool,
}

/// The scalars every kernel of a rank takes, as the kernels' `int`/`u64` parameters.
#[derive(Clone, Copy)]
struct Scalars {
    rank: i32,
    n_ranks: i32,
    n_local: i32,
    /// 1 under `EpConfig::skip_a2a`, else 0.
    skip_a2a: i32,
    top_k: i32,
    hidden: i32,
    experts: i32,
    gpus_per_node: i32,
    max_tokens: i32,
}

impl Scalars {
    fn new(rank: usize, cfg: &EpConfig) -> Self {
        Scalars {
            rank: rank as i32,
            n_ranks: cfg.n_ranks() as i32,
            n_local: cfg.n_local_experts() as i32,
            skip_a2a: cfg.skip_a2a.is_some() as i32,
            top_k: cfg.top_k as i32,
            hidden: cfg.hidden as i32,
            experts: cfg.n_experts as i32,
            gpus_per_node: cfg.n_gpus_per_node as i32,
            max_tokens: cfg.max_tokens_per_rank as i32,
        }
    }
}

/// One rank of a CUDA world ([`CudaBackend`](crate::CudaBackend)'s `EpComm`): its config, its
/// buffers on its GPU, and its stream, on which it issues its dispatch, combine and SwiGLU.
pub struct CudaComm {
    rank: usize,
    sc: Scalars,
    cfg: EpConfig,
    world: Arc<World>,
    stream: Arc<CudaStream>,
    /// The stream of the work beside a send (the overlapped dispatch's layout wait, from beside
    /// the assign, and its copy-out; the marked combine's reduce; high priority, so its blocks
    /// get SMs as the send's retire), and the events that fork it from and join it to `stream`
    /// (`fork_copy_stream`, `join_copy_stream`).
    copy_stream: Arc<CudaStream>,
    forked: CudaEvent,
    joined: CudaEvent,
    tracker: RoundTracker,
    round: RoundData,
    /// When set (`ep bench --breakdown`), an event after every kernel, to time each one.
    probe: std::cell::RefCell<Option<Vec<(&'static str, CudaEvent)>>>,
    /// Blocks per SM by kernel, block size and shared memory (dispatch.rs, `resident_blocks`).
    resident: std::cell::RefCell<std::collections::HashMap<(&'static str, u32, u32), u32>>,
    /// Under the late-inputs test hook (`TestHooks::late_inputs_ns`), the late writer's state.
    #[cfg(feature = "test-hooks")]
    late: Option<late_inputs::LateInputs>,
    /// Per phase (dispatch, combine): this rank's last call of the phase rejected its input, so
    /// its peers' counts hold its poison until its next call of the phase replaces it.
    poisoned: [bool; 2],
    /// Waits are stream-ordered: a wait kernel runs to the deadline behind the phase on the
    /// stream and the host does not wait for it (`wait_on_stream`); where ranks share a GPU the
    /// host waits in slices instead (common/protocol.cuh, `ep_wait_counts`, says why).
    stream_waits: bool,
    /// The earliest phase whose wait is on the stream unread (`check_waits`).
    unchecked: Option<Phase>,
    /// The host saw the status word other than EP_OK: it is reset before the next wait
    /// (`clean_status`).
    status_dirty: bool,
    /// A round took its ids from device memory through `ep_take_ids` (and a captured one may
    /// again, replayed): the host reads its refusal record at every check (`check_refused`).
    ids_on_device: bool,
    /// Earlier rounds' inputs, held until the stream has run them (`sync`): a caller's buffer
    /// whose last handle was a round's is freed only then, never under a kernel or a capture.
    retired: Vec<RoundInputs>,
    /// SwiGLU's device buffers (its input, payload and scales), grown to the largest call yet
    /// rather than allocated per call (`swiglu_space`).
    swiglu_space: [DevBuf; 3],
    /// `max_tokens_per_rank` scales of 1.0: a round's input scales when the caller gives none.
    ones: DevBuf,
    /// Copies between host and device this rank made, and their bytes (`CudaComm::copies`).
    copies: std::cell::Cell<(u64, u64)>,
}

impl CudaComm {
    pub(crate) fn new(rank: usize, world: Arc<World>) -> Result<CudaComm> {
        let ctx = &world.rank(rank).kernels.ctx;
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
        let (forked, joined) = (event()?, event()?);
        let stream_waits = !world.rank(rank).shares_gpu;
        let t = world.cfg.max_tokens_per_rank;
        let ones = DevBuf::new(ctx, t * 4)?;
        let swiglu_space = [
            DevBuf::new(ctx, 0)?,
            DevBuf::new(ctx, 0)?,
            DevBuf::new(ctx, 0)?,
        ];
        ones.upload(&vec![1.0f32; t], &stream)?;
        stream.synchronize().map_err(cuda)?;
        #[cfg(feature = "test-hooks")]
        let late = late_inputs::LateInputs::from_options(
            &world.cfg,
            &world.options,
            &world.rank(rank).kernels,
        )?;
        Ok(CudaComm {
            rank,
            sc: Scalars::new(rank, &world.cfg),
            cfg: world.cfg.clone(),
            world,
            stream,
            copy_stream,
            forked,
            joined,
            tracker: RoundTracker::new(rank),
            round: RoundData::default(),
            probe: Default::default(),
            resident: Default::default(),
            #[cfg(feature = "test-hooks")]
            late,
            poisoned: [false; 2],
            swiglu_space,
            ones,
            copies: Default::default(),
            stream_waits,
            unchecked: None,
            status_dirty: false,
            ids_on_device: false,
            retired: Vec::new(),
        })
    }

    /// The stream this rank issues its rounds on: its own, or the caller's
    /// ([`CudaComm::set_stream`]). Work the caller puts on it before a round is done before the
    /// round reads its inputs; work after it sees the round's outputs.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Issues this rank's rounds on `stream` from now on: the caller's (a stream of its own, or
    /// one borrowed from another framework with `CudaContext::wrap_borrowed_stream`), so that a
    /// round is ordered with the caller's kernels without a host wait, and can be captured into
    /// a CUDA graph. Waits for what the rank issued on its previous stream. The stream must be
    /// of this rank's GPU ([`CudaComm::context`]).
    pub fn set_stream(&mut self, stream: Arc<CudaStream>) -> Result<()> {
        if stream.context().cu_ctx() != self.context().cu_ctx() {
            return Err(EpError::Incompatible {
                rank: self.rank,
                what: "the stream",
                why: "it belongs to another CUDA context than the rank's (its GPU's primary one)",
            });
        }
        self.sync()?;
        self.stream = stream;
        Ok(())
    }

    /// Whether this rank's waits are stream-ordered (it has its GPU to itself): then a round
    /// issues no host wait between `dispatch_async` and `combine_wait`, and can be captured
    /// into a CUDA graph on [`CudaComm::stream`]. Where ranks share a GPU the host waits in
    /// slices (common/protocol.cuh, `ep_wait_counts`, says why) and a capture fails.
    pub fn stream_ordered_waits(&self) -> bool {
        self.stream_waits
    }

    /// The CUDA context of this rank's GPU (its primary context, as PyTorch's), for the
    /// caller's own kernels and streams.
    pub fn context(&self) -> &Arc<cudarc::driver::CudaContext> {
        &self.k().ctx
    }

    /// The loaded round reduces with weights (device-resident benchmark rounds).
    #[cfg(feature = "bench")]
    pub(crate) fn set_reduced(&mut self) {
        self.round.reduced = true;
    }

    /// The GPU this rank runs on.
    pub fn device(&self) -> usize {
        self.world.rank(self.rank).device
    }

    /// The world this rank belongs to (shared by its ranks).
    #[cfg(feature = "bench")]
    pub(crate) fn world(&self) -> &Arc<World> {
        &self.world
    }

    pub(crate) fn bufs(&self) -> &RankBuffers {
        &self.world.rank(self.rank).bufs
    }

    /// The loaded round's tokens, and whether it has input scales (`start_staged_round`).
    #[cfg(feature = "bench")]
    pub(crate) fn loaded_round(&self) -> (usize, bool) {
        (self.round.n_tokens, self.round.inputs.scales.is_some())
    }

    /// Starts a round whose inputs are the staging buffers (`EpComm::staging`), written by the
    /// caller: tokens, ids, `scales` or not, expert outputs and weights (benchmark rounds).
    #[cfg(feature = "bench")]
    pub(crate) fn start_staged_round(&mut self, n_tokens: usize, scales: bool) -> Result<()> {
        let st = self.staging()?;
        let inputs = RoundInputs {
            tokens: Some(st.tokens),
            ids: Some(st.topk_ids),
            scales: scales.then_some(st.input_scales),
            expert_out: Some(st.expert_out),
            weights: Some(st.weights),
        };
        self.start_dispatch(n_tokens, inputs)
    }

    /// The backend's options ([`crate::CudaOptions`]), as the world was made with them.
    pub(super) fn opts(&self) -> &crate::CudaOptions {
        &self.world.options
    }

    pub(super) fn k(&self) -> &Kernels {
        &self.world.rank(self.rank).kernels
    }

    /// Launches kernel `name` of this rank's device on its stream, behind the kernel before it as
    /// `chain` says (`Chain`), with `params` as its one parameter.
    ///
    /// # Safety
    /// As [`launch_params`]: `name` takes `P`, and every pointer in `params` is null where the
    /// kernel allows it or a live allocation of the size the kernel indexes.
    unsafe fn launch<P: KernelParams>(
        &self,
        chain: Chain,
        name: &'static str,
        grid: u32,
        block: u32,
        smem: u32,
        params: &P,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe { self.launch_fn(name, self.k().get(name), chain, grid, block, smem, params) }
    }

    /// Launches `f` (kernel `name`, or a variant of it) on this rank's stream, behind the kernel
    /// before it as `chain` says (where the device and the environment allow a chained launch).
    ///
    /// # Safety
    /// As [`CudaComm::launch`], for `f`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn launch_fn<P: KernelParams>(
        &self,
        name: &'static str,
        f: &CudaFunction,
        chain: Chain,
        grid: u32,
        block: u32,
        smem: u32,
        params: &P,
    ) -> Result<()> {
        let chained = match chain {
            Chain::Plain => false,
            Chain::Prior => self.chained_launches(),
            Chain::First => self.chained_first(),
        };
        // SAFETY: the caller's contract.
        unsafe { launch_params(&self.stream, f, grid, block, smem, params, chained)? };
        self.mark(name)
    }

    /// Launches kernel `name` on the copy stream, beside what the rank's stream runs (`beside`;
    /// not probed: the breakdown times the rank's stream), or else on the rank's stream.
    ///
    /// # Safety
    /// As [`CudaComm::launch`].
    unsafe fn launch_on<P: KernelParams>(
        &self,
        beside: bool,
        name: &'static str,
        grid: u32,
        block: u32,
        smem: u32,
        params: &P,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe {
            if !beside {
                return self.launch(Chain::Plain, name, grid, block, smem, params);
            }
            launch_params(
                &self.copy_stream,
                self.k().get(name),
                grid,
                block,
                smem,
                params,
                false,
            )
        }
    }

    /// Lets the copy stream start on what the rank's stream has issued so far (a round's inputs).
    fn fork_copy_stream(&self) -> Result<()> {
        self.forked.record(&self.stream).map_err(cuda)?;
        self.copy_stream.wait(&self.forked).map_err(cuda)
    }

    /// Makes the rank's stream wait for everything issued on the copy stream.
    fn join_copy_stream(&self) -> Result<()> {
        self.joined.record(&self.copy_stream).map_err(cuda)?;
        self.stream.wait(&self.joined).map_err(cuda)
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

    /// Whether events are being recorded after every kernel (`set_probe`).
    #[cfg(feature = "bench")]
    pub(crate) fn probing(&self) -> bool {
        self.probe.borrow().is_some()
    }

    /// Starts (`true`) or stops probing; stopping returns the events recorded since the start.
    #[cfg(feature = "bench")]
    pub(crate) fn set_probe(&self, on: bool) -> Vec<(&'static str, CudaEvent)> {
        std::mem::replace(&mut *self.probe.borrow_mut(), on.then(Vec::new)).unwrap_or_default()
    }

    /// Whether the rank's stream is being captured into a graph.
    fn capturing(&self) -> Result<bool> {
        Ok(self.stream.capture_status().map_err(cuda)?
            != cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    }

    fn bind(&self) -> Result<()> {
        self.k().ctx.bind_to_thread().map_err(cuda)
    }

    fn fail(&mut self, err: EpError) -> EpError {
        self.tracker.poison(&err);
        err
    }

    /// A call that rejected its input (`err`): every peer that waits for this rank's counts of
    /// `phase` gets a poisoned count (`ep_core::poison`) where the count would go, copied from
    /// the host into the peer's count array before this returns (a peer of another node: in
    /// the phase's exchange, queued on the pair's stream, net.rs; not from inside a capture),
    /// so that its wait returns `PeerRejected` at once instead of at the deadline. This rank's
    /// own memory is untouched, and its next call of the phase publishes real counts over the
    /// poison (the same indices). If the poison cannot be written, the peers will time out: this
    /// rank is poisoned too.
    fn reject(&mut self, phase: Phase, err: EpError) -> EpError {
        let v = [ep_core::poison::encode(ep_core::RejectReason::of(&err))];
        let (rank, n, l) = (self.rank, self.cfg.n_ranks(), self.cfg.n_local_experts());
        let written = (|| -> Result<()> {
            for dst in (0..n).filter(|&d| d != rank) {
                let [d_counts, c_counts] = self.world.counts[dst];
                if d_counts == 0 {
                    // On another node, reached through NCCL only: it waits to its deadline.
                    continue;
                }
                // The peer's device context where this process drives it too (a plain copy in
                // it, on its null stream, which the ranks' non-blocking streams do not wait
                // for); else this rank's, where the peer's memory is mapped.
                let ctx = match self.world.local_ranks().find(|&(r, _)| r == dst) {
                    Some((_, peer)) => &peer.kernels.ctx,
                    None => &self.k().ctx,
                };
                ctx.bind_to_thread().map_err(cuda)?;
                for g in 0..l {
                    // Dispatch: count (g, rank) at the rank holding expert dst * l + g; combine:
                    // count (g, rank) at dst, for this rank's expert rank * l + g.
                    let (counts, routed) = match phase {
                        Phase::Dispatch => (d_counts, self.cfg.routes_to(rank, dst * l + g)),
                        _ => (c_counts, self.cfg.routes_to(dst, rank * l + g)),
                    };
                    if !routed {
                        continue;
                    }
                    let at = counts + ((g * n + rank) * 8) as u64;
                    // SAFETY: one aligned u64 inside the peer's count array; the call returns
                    // once it is written.
                    unsafe { cudarc::driver::result::memcpy_htod_sync(at, &v) }.map_err(cuda)?;
                }
            }
            self.bind()?;
            // To the other nodes' ranks in the phase's exchange (net.rs, `reject`); not from
            // inside a capture, whose every replay would send it again.
            if let Some(net) = self
                .world
                .net
                .as_ref()
                .filter(|_| self.cfg.skip_a2a.is_none())
            {
                if !self.capturing()? {
                    let recv = match phase {
                        Phase::Dispatch => self.bufs().d_recv.ptr,
                        _ => 0,
                    };
                    net.reject(phase, &self.stream, v[0], recv)?;
                }
            }
            Ok(())
        })();
        match written {
            Ok(()) => {
                self.poisoned[(phase == Phase::Combine) as usize] = true;
                err
            }
            Err(_) => self.fail(err),
        }
    }

    /// After a call of `phase` has issued its sends: if the last call was rejected, returns only
    /// once the real counts have replaced the poison at every peer (the stream has run the
    /// publish), so that a peer that waits again after this call returns no longer sees it.
    fn replaced_poison(&mut self, phase: Phase) -> Result<()> {
        if std::mem::take(&mut self.poisoned[(phase == Phase::Combine) as usize]) {
            if let Some(net) = &self.world.net {
                // Between nodes the stream goes on into the exchange, which the peers join only
                // when they call: the publish before it is what replaced the poison (the
                // poison reached this node's peers alone).
                return net.published(self.cfg.timeout).map_err(|e| self.fail(e));
            }
            self.sync()?;
            if let Err(e) = self.copy_stream.synchronize() {
                return Err(self.fail(cuda(e)));
            }
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        match self.wait_stream() {
            Ok(None) => {
                self.retired.clear();
                Ok(())
            }
            Ok(Some(aborted)) => {
                self.retired.clear();
                // The wait behind the aborted exchange, given up at once, names every count
                // that never came, the node's peers' included; without one, the exchange's own
                // timeout.
                let e = self.check_waits().err().unwrap_or(aborted);
                Err(self.fail(e))
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Waits for the rank's stream. Between nodes an exchange a peer never joins holds it: past
    /// the deadline the communicators of the peers that never joined are aborted (`Some`: the
    /// exchange's timeout), and the wait kernels behind it give up at once.
    fn wait_stream(&self) -> Result<Option<EpError>> {
        match &self.world.net {
            Some(net) => net.wait_stream(&self.stream, self.cfg.timeout, self.bufs().status.ptr),
            None => self.stream.synchronize().map_err(cuda).map(|()| None),
        }
    }

    /// Where the dispatch's round number is, on the device (`RankBuffers::rounds`).
    fn dispatch_round(&self) -> u64 {
        self.bufs().rounds.ptr
    }

    /// Where the combine's round number is, on the device.
    fn combine_round(&self) -> u64 {
        self.bufs().rounds.ptr + 4
    }

    fn shared_groups(&self) -> i32 {
        self.cfg.shared_groups() as i32
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

impl CudaComm {
    /// Copies of data between host and device this rank has made (`write`, `to_host`, a
    /// residual epilogue's rows), and their bytes: a test counts what a round moves through the
    /// host. The control words the host reads where it waits (a wait's status word, with host
    /// waits the row count) are not data and not counted.
    pub fn copies(&self) -> (u64, u64) {
        self.copies.get()
    }

    /// One u32 at `ptr` on this rank's GPU, once the stream has run.
    fn read_word(&mut self, ptr: u64) -> Result<u32> {
        let mut w = [0u32];
        // SAFETY: `ptr` is a u32 inside one of the rank's buffers; the stream is synchronised
        // before `w` is read.
        unsafe { cudarc::driver::result::memcpy_dtoh_async(&mut w, ptr, self.stream.cu_stream()) }
            .map_err(cuda)?;
        self.sync()?;
        Ok(w[0])
    }

    /// The round's input scales: the caller's, or 1.0 for every token.
    fn scales_ptr(&self) -> u64 {
        self.round
            .inputs
            .scales
            .as_ref()
            .map_or(self.ones.ptr, DeviceBuffer::device_ptr)
    }

    /// Starts a dispatch round of `n_tokens` tokens read from `inputs`.
    fn start_dispatch(&mut self, n_tokens: usize, inputs: RoundInputs) -> Result<()> {
        let shared = if self.cfg.fused_shared_expert {
            self.cfg.shared_token_range(self.rank, n_tokens)
        } else {
            0..0
        };
        let last = std::mem::replace(
            &mut self.round,
            RoundData {
                inputs,
                n_tokens,
                shared,
                ..Default::default()
            },
        );
        // Only inputs whose last handle this is need to wait for the stream: the rest free
        // nothing when dropped (a caller that keeps its buffers, the staging ones), so a loop
        // that never synchronises holds nothing.
        if last.inputs.last_handles() {
            self.retired.push(last.inputs);
        }
        // (A test hook: a kernel that writes them late, `TestHooks::late_inputs_ns`.)
        #[cfg(feature = "test-hooks")]
        {
            let i = &self.round.inputs;
            let (tokens, ids) = (i.tokens.clone(), i.ids.clone());
            if let (Some(tokens), Some(ids)) = (tokens, ids) {
                let (h, k) = (self.cfg.hidden, self.cfg.top_k);
                let bits = late_inputs::Words::Bits;
                self.late_inputs(tokens.device_ptr(), tokens.bytes(), n_tokens * h / 2, bits)?;
                let words = late_inputs::Words::ExpertIds;
                self.late_inputs(ids.device_ptr(), ids.bytes(), n_tokens * k, words)?;
            }
        }
        Ok(())
    }

    /// The round's expert ids in the rank's own ids buffer (the staging one), which its
    /// kernels, the combine's too, read: ids the caller vouched for (`checked`: `HostIo` checked
    /// them on the host) copied as they are, others checked on the device while copied
    /// (dispatch/ids.cu, `ep_take_ids`: a bad id refuses the batch, reported at the next wait for
    /// the stream, `check_refused`). Ids already there are not copied.
    fn take_ids(
        &mut self,
        ids: &DeviceBuffer<i32>,
        n_tokens: usize,
        checked: bool,
    ) -> Result<DeviceBuffer<i32>> {
        let staged = self.bufs().ids.ptr;
        let k = self.cfg.top_k;
        let own = self.view::<i32>(&self.bufs().ids, self.cfg.max_tokens_per_rank * k);
        if checked {
            if ids.device_ptr() != staged && n_tokens > 0 {
                // SAFETY: both hold `n_tokens * top_k` ids (dispatch_args checked the source).
                unsafe {
                    cudarc::driver::result::memcpy_dtod_async(
                        staged,
                        ids.device_ptr(),
                        n_tokens * k * 4,
                        self.stream.cu_stream(),
                    )
                }
                .map_err(cuda)?;
            }
            return Ok(own);
        }
        let params = EpTakeIdsParams {
            src: ids.device_ptr(),
            dst: staged,
            n_tokens: n_tokens as i32,
            top_k: k as i32,
            n_experts: self.cfg.n_experts as i32,
            refused: self.bufs().refused.ptr,
        };
        let threads = (n_tokens * k).next_multiple_of(32).clamp(32, 1024) as u32;
        // SAFETY: `ids` holds `n_tokens * top_k` ids (dispatch_args checked it), the staging
        // buffer `max_tokens_per_rank * top_k`, `refused` four words.
        unsafe { self.launch(Chain::First, "ep_take_ids", 1, threads, 0, &params)? };
        self.ids_on_device = true;
        Ok(own)
    }

    /// SwiGLU's buffer `i` with room for `bytes`, grown when it has less (the stream has run
    /// every earlier call: each ends in a download), and its address.
    fn swiglu_space(&mut self, i: usize, bytes: usize) -> Result<u64> {
        if self.swiglu_space[i].len < bytes {
            self.swiglu_space[i] = DevBuf::new(&self.k().ctx, bytes)?;
        }
        Ok(self.swiglu_space[i].ptr)
    }

    fn count_copy(&self, bytes: usize) {
        let (n, b) = self.copies.get();
        self.copies.set((n + 1, b + bytes as u64));
    }

    /// `buf` of a round's input, checked to be on this rank's GPU.
    fn on_device<T: Element>(&self, what: &'static str, buf: &DeviceBuffer<T>) -> Result<()> {
        if buf.device() == self.device() {
            return Ok(());
        }
        Err(EpError::Incompatible {
            rank: self.rank,
            what,
            why: "the buffer is on another GPU than the rank",
        })
    }

    /// A view of `buf`, which this rank's world owns, as a buffer of `len` elements of `T`.
    fn view<T: Element>(&self, buf: &DevBuf, len: usize) -> DeviceBuffer<T> {
        debug_assert!(len * std::mem::size_of::<T>() <= buf.len);
        let owner: Arc<dyn std::any::Any + Send + Sync> = self.world.clone();
        DeviceBuffer::owned(buf.ptr, len, self.device(), owner)
    }
}

impl EpComm for CudaComm {
    type Buffer<T: Element> = DeviceBuffer<T>;

    fn rank(&self) -> usize {
        self.rank
    }

    fn config(&self) -> &EpConfig {
        &self.cfg
    }

    /// Device memory of this rank's GPU, zeroed, freed when its last handle goes (a round
    /// holds its inputs' handles until the rank's stream has run it).
    fn alloc<T: Element>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        self.bind()?;
        let bytes =
            len.checked_mul(std::mem::size_of::<T>())
                .ok_or_else(|| EpError::OutOfMemory {
                    bytes: usize::MAX,
                    what: format!("{len} {}s on GPU {}", T::NAME, self.device()),
                })?;
        let buf = DevBuf::new(&self.k().ctx, bytes)?;
        buf.fill(0)?;
        let ptr = buf.ptr;
        Ok(DeviceBuffer::owned(ptr, len, self.device(), Arc::new(buf)))
    }

    fn write<T: Element>(&mut self, dst: &DeviceBuffer<T>, host: &[T]) -> Result<()> {
        self.on_device("a write's destination", dst)?;
        if host.len() > dst.len() {
            return Err(EpError::Shape {
                rank: self.rank,
                what: "a write's source",
                expected: vec![dst.len()],
                got: vec![host.len()],
            });
        }
        if host.is_empty() {
            return Ok(());
        }
        self.bind()?;
        let bytes = ep_core::memory::as_bytes(host);
        // SAFETY: `dst` holds `host.len()` elements (checked above) on this rank's GPU; the
        // driver stages pageable memory before returning, so `host` may go afterwards.
        unsafe {
            cudarc::driver::result::memcpy_htod_async(
                dst.device_ptr(),
                bytes,
                self.stream.cu_stream(),
            )
        }
        .map_err(cuda)?;
        self.count_copy(bytes.len());
        Ok(())
    }

    fn to_host<T: Element>(&mut self, src: &DeviceBuffer<T>) -> Result<Vec<T>> {
        self.on_device("a read's source", src)?;
        self.bind()?;
        // The waits' outcome first: a wait taken up again from the host rewrites the outputs.
        self.sync()?;
        self.check_waits()?;
        let mut host: Vec<T> = zeroed_vec(src.len(), "a buffer's host copy")?;
        if !host.is_empty() {
            let bytes = ep_core::memory::as_bytes_mut(&mut host);
            // SAFETY: `src` holds `bytes.len()` bytes on this rank's GPU; the stream is
            // synchronised before `host` is read.
            unsafe {
                cudarc::driver::result::memcpy_dtoh_async(
                    bytes,
                    src.device_ptr(),
                    self.stream.cu_stream(),
                )
            }
            .map_err(cuda)?;
            self.count_copy(bytes.len());
        }
        self.sync()?;
        Ok(host)
    }

    fn synchronize(&mut self) -> Result<()> {
        self.bind()?;
        self.sync()?;
        self.check_waits()
    }

    fn staging(&mut self) -> Result<Staging<Self>> {
        let (cfg, b) = (&self.cfg, self.bufs());
        let (t, h, k) = (cfg.max_tokens_per_rank, cfg.hidden, cfg.top_k);
        Ok(Staging {
            tokens: self.view(&b.tokens, t * h),
            topk_ids: self.view(&b.ids, t * k),
            input_scales: self.view(&b.scales_in, t),
            expert_out: self.view(&b.expert_out, cfg.max_recv_rows() * h),
            weights: self.view(&b.weights, t * k),
        })
    }

    /// Expert ids from a buffer other than the staging one are checked on the device while
    /// copied into the rank's own ids buffer (`take_ids`): a bad one refuses the batch and comes
    /// back from the next wait for the stream as `ExpertIdOutOfRange` (docs/contract.md).
    fn dispatch_async(&mut self, args: &DispatchArgs<'_, Self>) -> Result<PendingDispatch> {
        self.tracker.check_dispatch_async()?;
        let checked = validate::dispatch_args(&self.cfg, self.rank, args)
            .and_then(|()| self.on_device("tokens", args.tokens))
            .and_then(|()| self.on_device("topk_ids", args.topk_ids))
            .and_then(|()| match args.input_scales {
                Some(s) => self.on_device("input_scales", s),
                None => Ok(()),
            })
            .and_then(|()| self.bind());
        if let Err(e) = checked {
            return Err(self.reject(Phase::Dispatch, e));
        }
        self.clean_status()?;
        let ids = self.take_ids(args.topk_ids, args.n_tokens, args.ids_checked())?;
        let inputs = RoundInputs {
            tokens: Some(args.tokens.clone()),
            ids: Some(ids),
            scales: args.input_scales.cloned(),
            ..Default::default()
        };
        self.start_dispatch(args.n_tokens, inputs)?;
        self.issue_dispatch_send()?;
        if self.stream_waits && self.dispatch_wait_issued() {
            self.unchecked.get_or_insert(Phase::Dispatch);
        }
        self.round.resume = false;
        self.replaced_poison(Phase::Dispatch)?;
        Ok(self.tracker.dispatch_sent())
    }

    fn dispatch_wait(&mut self, pending: PendingDispatch) -> Result<Dispatched<Self>> {
        self.tracker.check_dispatch_wait(&pending)?;
        let issued = !std::mem::take(&mut self.round.resume) && self.dispatch_wait_issued();
        let issue: &mut dyn FnMut(&mut Self, u64) -> Result<()> =
            &mut |c, slice| c.issue_dispatch_wait(slice);
        if self.stream_waits {
            self.wait_on_stream(Phase::Dispatch, issued, issue)?;
        } else {
            self.wait_sliced(Phase::Dispatch, issued, issue)?;
        }
        let cfg = self.cfg.clone();
        let (g, hidden, cap) = (cfg.n_groups(), cfg.hidden, cfg.max_recv_rows());
        let fmt = cfg.format;
        let mut expert_ids = vec![-1; cfg.shared_groups()];
        expert_ids.extend(0..cfg.n_local_experts() as i32);
        // The row count sizes the combine's multi-kernel grid (its kernels stop at the count on
        // the device): read where the host waited anyway, else the most rows.
        self.round.rows = if self.stream_waits {
            None
        } else {
            let count_at = self.bufs().row_offsets.ptr + 4 * g as u64;
            Some(self.read_word(count_at)? as usize)
        };
        let handle = self.tracker.dispatched();
        let b = self.bufs();
        let out = Dispatched {
            handle,
            format: fmt,
            hidden,
            capacity: cap,
            n_tokens: self.round.n_tokens,
            recv_tokens: self.view(&b.recv_tokens, cap * self.world.msg.payload_bytes as usize),
            recv_scales: self.view(&b.recv_scales, b.recv_scales.len),
            row_offsets: self.view(&b.row_offsets, g + 1),
            src_info: self.view(&b.src_info, cap * 2),
            src_offsets: self.view(&b.src_offsets, g * (cfg.n_ranks() + 1)),
            expert_ids,
        };
        Ok(out)
    }

    fn combine_async(
        &mut self,
        handle: &RoutingHandle,
        args: &CombineArgs<'_, Self>,
    ) -> Result<PendingCombine> {
        // A handle from another round is bad input to this round's combine.
        if let Some(e) = self.tracker.stale_combine(handle)? {
            return Err(self.reject(Phase::Combine, e));
        }
        let cap = self.cfg.max_recv_rows();
        let checked =
            validate::combine_args(&self.cfg, self.rank, cap, self.round.n_tokens, args, false)
                .and_then(|()| self.on_device("expert_out", args.expert_out))
                .and_then(|()| match args.weights {
                    Some(w) => self.on_device("router weights", w),
                    None => Ok(()),
                })
                .and_then(|()| self.bind())
                .and_then(|()| match args.epilogue {
                    // Compile first, so a bad source fails with nothing sent.
                    Some(Epilogue::Device(d)) => {
                        self.k().reduce_with_epilogue(&d.name, &d.source).map(drop)
                    }
                    _ => Ok(()),
                })
                .and_then(|()| self.upload_residual(args.epilogue));
        if let Err(e) = checked {
            return Err(self.reject(Phase::Combine, e));
        }
        self.round.inputs.expert_out = Some(args.expert_out.clone());
        self.round.inputs.weights = args.weights.cloned();
        self.round.reduced = args.weights.is_some();
        self.round.epilogue = args.epilogue.cloned();
        #[cfg(feature = "test-hooks")]
        if let Some(w) = args.weights {
            let n = self.round.n_tokens * self.cfg.top_k;
            self.late_inputs(w.device_ptr(), w.bytes(), n, late_inputs::Words::Bits)?;
        }
        self.clean_status()?;
        self.issue_combine_send(self.round.rows)?;
        if self.stream_waits && self.combine_wait_issued() {
            self.unchecked.get_or_insert(Phase::Combine);
        }
        self.round.resume = false;
        self.replaced_poison(Phase::Combine)?;
        Ok(self.tracker.combine_sent())
    }

    fn pending_dispatch(&self) -> Result<PendingDispatch> {
        self.tracker.pending_dispatch()
    }

    fn pending_combine(&self) -> Result<PendingCombine> {
        self.tracker.pending_combine()
    }

    fn ready(&self, phase: Phase, handle: Option<&RoutingHandle>) -> Result<()> {
        self.tracker.ready(phase, handle)
    }

    fn refuse(&mut self, phase: Phase, err: EpError) -> EpError {
        self.reject(phase, err)
    }

    fn combine_wait(&mut self, pending: PendingCombine) -> Result<Combined<Self>> {
        self.tracker.check_combine_wait(&pending)?;
        let issued = !std::mem::take(&mut self.round.resume) && self.combine_wait_issued();
        let issue: &mut dyn FnMut(&mut Self, u64) -> Result<()> = &mut |c, slice| {
            c.issue_combine_wait(slice)?;
            c.issue_combine_output()
        };
        if self.stream_waits {
            self.wait_on_stream(Phase::Combine, issued, issue)?;
        } else {
            self.wait_sliced(Phase::Combine, issued, issue)?;
        }
        let (t, top_k, hidden) = (self.round.n_tokens, self.cfg.top_k, self.cfg.hidden);
        let b = self.bufs();
        let output = match (self.round.reduced, &self.round.epilogue) {
            (false, _) => Combined::Unreduced(self.view(&b.out, t * top_k * hidden)),
            (true, Some(Epilogue::QuantizeFp8)) => Combined::Fp8 {
                payload: self.view(&b.fp8_payload, t * hidden),
                scales: self.view(&b.fp8_scales, t * (hidden / 128)),
            },
            (true, Some(Epilogue::Device(_))) => Combined::Consumed,
            (true, _) => Combined::Reduced(self.view(&b.out, t * hidden)),
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
        // The layout it reads is the dispatch's: its wait's outcome first.
        self.sync()?;
        self.check_waits()?;
        let (rows, width) = (input.nrows(), input.ncols() / 2);
        let fmt = opts.format;
        let payload_bytes = fmt.payload_bytes(width);
        let scale_len = fmt.output_scales_bytes(width, rows);
        let x = self.swiglu_space(0, rows * 2 * width * 2)?;
        let payload = self.swiglu_space(1, rows * payload_bytes)?;
        let scales = self.swiglu_space(2, scale_len)?;
        let (s, spaces) = (&self.stream, &self.swiglu_space);
        let input = contiguous(&input);
        spaces[0].upload(input.as_ref(), s)?;
        spaces[2].fill_async(0, scale_len, s)?;
        self.count_copy(std::mem::size_of_val(input.as_ref()));
        let (clamp, alpha, limit) = match opts.clamp {
            Some(c) => (1, c.alpha, c.limit),
            None => (0, 0.0, 0.0),
        };
        let interleaved = (opts.layout == ep_core::GateUp::Interleaved) as i32;
        let smem = (width * 4 + fmt.scale_bytes(width) + 16) as u32;
        let b = self.bufs();
        let params = EpSwigluParams {
            x,
            rows: rows as u64,
            width: width as i32,
            src_offsets: b.src_offsets.ptr,
            n_groups: self.cfg.n_groups() as i32,
            n_ranks: self.cfg.n_ranks() as i32,
            interleaved,
            clamp,
            alpha,
            limit,
            fmt: format_id(fmt),
            input_scale: opts.input_scale,
            payload_bytes: payload_bytes as i32,
            payload,
            scales,
        };
        // SAFETY: `x`, `payload` and `scales` hold (at least) `rows` rows of `width`;
        // `src_offsets` is the round's layout, `n_groups + 1` entries.
        unsafe {
            self.launch(
                Chain::Plain,
                "ep_swiglu",
                rows as u32,
                THREADS,
                smem,
                &params,
            )?
        };
        let mut out = zeroed_vec(rows * payload_bytes, "SwiGLU's host copy")?;
        let mut sc = zeroed_vec(scale_len, "SwiGLU's scales' host copy")?;
        self.swiglu_space[1].download(&mut out, &self.stream)?;
        self.swiglu_space[2].download(&mut sc, &self.stream)?;
        self.count_copy(out.len() + sc.len());
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
        let mut h = ep_core::digest::EMPTY;
        for (buf, counts) in [
            (&b.d_recv, false),
            (&b.d_nmsg, false),
            (&b.d_counts, true),
            (&b.c_recv, false),
            (&b.c_counts, true),
            (&b.c_ll, false),
        ] {
            let mut host = vec![0u8; buf.len];
            buf.download(&mut host, &self.stream)?;
            if counts {
                let words = host.chunks_exact(8);
                let words = words.map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")));
                ep_core::digest::fold_counts(&mut h, words);
            } else {
                ep_core::digest::fold_bytes(&mut h, &host);
            }
        }
        Ok(h)
    }
}

impl Drop for CudaComm {
    fn drop(&mut self) {
        // Nothing of this rank may still run when its buffers are freed.
        let _ = self.wait_stream();
        // Under `CudaOptions::trace`, the records (`ep bench` collects them between rounds; whatever
        // else ran, up to the buffer's size, now), printed.
        let kernels = &self.world.rank(self.rank).kernels;
        if let Err(e) = kernels.collect_trace(&self.stream) {
            eprintln!("trace: {e}");
        }
        kernels.print_trace();
    }
}
