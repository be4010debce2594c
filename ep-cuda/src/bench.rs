//! What `ep bench` measures on GPUs, on the device's clocks ([`Timing`]): device-resident rounds
//! of this backend (inputs loaded once, no host copies inside the timed region), the copy ceiling
//! between the same GPUs, and the baseline a user would otherwise pick: an all-to-all dispatcher
//! built on NCCL grouped send/recv with its local permute and unpermute.
//!
//! Cargo feature `bench`. The backend knows nothing of it: the benchmark owns its start gate
//! ([`StartGate`], made for a world's comms and passed to each round), its kernels (bench.cu,
//! compiled when a benchmark first needs them on a device) and its options ([`BenchOptions`]).

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use cudarc::driver::{sys, CudaContext, CudaEvent, CudaFunction, CudaStream};
use cudarc::nccl::result as nccl;
use ep_core::{
    validate, CombineArgs, DispatchArgs, DispatchInput, EpComm, EpConfig, EpError, Result, Staging,
};
use ndarray::{Array2, ArrayView2};

use crate::comm::CudaComm;
use crate::driver::cuda;
use crate::kernels::{launch, launch_ex, KernelArg, Kernels, Program, BENCH_PROGRAM};
use crate::memory::DevBuf;
use crate::world::{RankBuffers, World};
use crate::CudaOptions;

/// One device's kernels as the benchmark launches them: the backend's (its context, whether it
/// takes chained launches, its trace records) and bench.cu's, compiled with the same defines and
/// NVRTC options.
#[derive(Clone)]
struct BenchKernels {
    k: Arc<Kernels>,
    bench: Arc<Program>,
}

impl BenchKernels {
    /// bench.cu beside `k`, compiled as `k` was ([`Kernels::program`]).
    fn new(k: Arc<Kernels>) -> Result<BenchKernels> {
        Ok(BenchKernels {
            bench: k.program(BENCH_PROGRAM)?,
            k,
        })
    }

    /// Device `d`'s kernels as `options` compile them, with bench.cu's.
    fn of_device(d: usize, options: &CudaOptions) -> Result<BenchKernels> {
        BenchKernels::new(crate::world::device_kernels(d, options)?)
    }

    /// A kernel of bench.cu.
    fn get(&self, name: &str) -> &CudaFunction {
        self.bench.get(name)
    }
}

/// Device time of one round's phases on one rank, in milliseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct PhaseTimes {
    /// dispatch_async + dispatch_wait, one stretch of the stream.
    pub dispatch_ms: f32,
    /// The dispatch_async part alone (sends issued); probed rounds only (below).
    pub dispatch_async_ms: Option<f32>,
    /// combine_async + combine_wait, one stretch of the stream.
    pub combine_ms: f32,
    /// The combine_async part alone (sends issued); probed rounds only.
    pub combine_async_ms: Option<f32>,
}

/// How a phase is timed (each phase, the floors' kernels and the NCCL baseline's alike, starts
/// behind a start gate, `StartGate`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Timing {
    /// Device events: one recorded after the gate, one after the phase. The committed sweeps'
    /// convention. The event between the gate and the phase holds the phase's first launch back
    /// until it is written, so the phase starts later than with no event between, and later
    /// still than chained (measured at 854abde).
    #[default]
    Events,
    /// As a phase runs in a model's step, right behind the kernel before it: from the gate's end
    /// (%globaltimer, written by the gate) to the time at which a kernel chained after the phase
    /// (`ep_bench_stamp`) finds its work complete. The phase's first kernel goes chained where
    /// it would in a step (`CudaOptions::chained_first`); the baseline's own kernels go chained too.
    Step,
}

impl Timing {
    /// Whether a phase's first kernel (the baseline's, a floor's) and `ep_bench_stamp` go
    /// chained on a device of `k`: under step timing, where the device takes chained launches.
    fn chained(self, k: &Kernels) -> bool {
        self == Timing::Step && k.chained_launches
    }
}

fn timing_event(ctx: &Arc<CudaContext>) -> Result<CudaEvent> {
    ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(cuda)
}

/// One phase on one rank, timed as `timing` says, behind the rank's last [`StartGate`]: device
/// events around it, or from the gate's end to `ep_bench_stamp` after it. Every phase that
/// `ep bench` times (ours, NCCL's, the floors' kernels) is read through one.
struct PhaseClock {
    timing: Timing,
    rank: usize,
    /// The gate the phase runs behind (its words hold the step times).
    epoch: u64,
    start: CudaEvent,
    end: CudaEvent,
}

impl PhaseClock {
    /// Queued right after rank `rank`'s gate on `stream`, before the phase's first launch.
    fn start(
        timing: Timing,
        gate: &StartGate,
        rank: usize,
        stream: &CudaStream,
    ) -> Result<PhaseClock> {
        let ctx = stream.context();
        let clock = PhaseClock {
            timing,
            rank,
            epoch: gate.last_epoch(rank),
            start: timing_event(ctx)?,
            end: timing_event(ctx)?,
        };
        // Under step timing the gate stamps the start itself.
        if timing == Timing::Events {
            clock.start.record(stream).map_err(cuda)?;
        }
        Ok(clock)
    }

    /// Queued after the phase's last launch (again after each slice of a wait: the last counts).
    fn end(&self, gate: &StartGate, stream: &CudaStream) -> Result<()> {
        match self.timing {
            Timing::Events => self.end.record(stream).map_err(cuda),
            Timing::Step => gate.stamp_end(self.rank, stream),
        }
    }

    /// The phase's ms, once the rank's stream has finished and its gate words are read.
    fn ms(&self, words: &GateWords) -> Result<f32> {
        match self.timing {
            Timing::Events => self.start.elapsed_ms(&self.end).map_err(cuda),
            Timing::Step => words.step_ms(self.epoch),
        }
    }
}

/// A [`StartGate`]'s words per rank beyond its flags: the timeout word, two gate ends, two phase
/// ends.
const GATE_WORDS: usize = 5;

/// One rank's gate words, read after its stream finished ([`StartGate::check`]).
pub(crate) struct GateWords {
    flags: Vec<u64>,
    n: usize,
}

impl GateWords {
    /// Under [`Timing::Step`]: the phase behind gate `epoch` (one of the rank's last two), from
    /// the gate's end to its `ep_bench_stamp`, in ms.
    pub(crate) fn step_ms(&self, epoch: u64) -> Result<f32> {
        let at = |w: usize| self.flags[self.n + w + (epoch % 2) as usize];
        let (start, end) = (at(1), at(3));
        if end <= start {
            return Err(EpError::Backend(format!(
                "ep bench: gate {epoch}'s phase has no end stamp after its start ({end} <= {start} ns)"
            )));
        }
        Ok((end - start) as f32 * 1e-6)
    }
}

/// The mark a probed round records after each start gate.
const GATE_MARK: &str = "(start gate)";

/// How long a gate holds its stream after the last rank arrived: longer than a rank's host takes
/// to queue a phase's launches (a few µs each), so none of them is timed.
const GATE_HOLD: Duration = Duration::from_micros(300);

/// A gate waits this long for a peer before it gives up (and the round fails).
const GATE_TIMEOUT: Duration = Duration::from_secs(10);

/// The start of a timed phase on every rank (`ep_bench_gate` in bench.cu): each rank's stream
/// holds until every rank has reached the gate, then `GATE_HOLD` longer. Each rank owns
/// `n + 5` u64 words on its device (a flag per peer, a "peer never came" word, the %globaltimer
/// at which its last two gates let their phases go, then at which those phases ended under
/// [`Timing::Step`]; by the gate's number, odd or even), and a table of every rank's flags.
/// Each rank's gates are numbered 1, 2, ... here, so every rank's n-th gate meets every other
/// rank's n-th. Made for a world's comms ([`StartGate::for_world`]) and passed to each of their
/// rounds ([`CudaComm::bench_round`]); the NCCL baseline and the floors make their own.
pub struct StartGate {
    /// The first rank this process gates (0, or its own in a world of one process per rank):
    /// the vectors below hold the ranks from it on.
    first: usize,
    /// Ranks in the world.
    n_ranks: usize,
    flags: Vec<DevBuf>,
    tables: Vec<DevBuf>,
    kernels: Vec<BenchKernels>,
    /// The world whose comms it was made for, which a round checks (`None`: the bench's own
    /// ranks). Weak: the gate does not keep the world's buffers, only its address unused.
    world: Option<Weak<World>>,
    /// Gates queued so far, per rank (each rank queues its own from one thread).
    queued: Vec<std::sync::atomic::AtomicU64>,
    /// With an evict ([`BenchOptions::evict_l2`]), per rank a buffer of its size written or read
    /// before each gate.
    evict: Vec<Option<DevBuf>>,
    /// Whether the evict buffer is read (`rN`) rather than written.
    evict_reads: bool,
    /// [`BenchOptions::rewarm`] (with an evict): after the evict, buffers of the rank's phases
    /// read back into L2 ([`StartGate::launch`]'s `rewarm`). `1`: every one, which tells what a
    /// cold phase waits on, its data (the time comes back) or its code (it does not); `inputs`:
    /// what the model's kernel before the phase has just written (`PhaseBuffers::inputs`), so
    /// that the phase is as cold as in a model's step and no colder.
    rewarm: Rewarm,
    /// Under [`crate::CudaOptions::trace`]: each check prints when the rank's last gates ended.
    trace: bool,
    /// Other processes' flags mapped here (a world of one process per rank).
    _mapped: Vec<crate::ipc::Mapped>,
}

/// The device buffers of one rank's timed phases, which `EP_BENCH_REWARM` reads back: ep's
/// (`RankBuffers`) and the NCCL baseline's alike, so that both start equally cold.
pub(crate) trait PhaseBuffers {
    /// What the model's kernel before a phase has just written: the phases' inputs.
    fn inputs(&self) -> Vec<&DevBuf>;
    /// Every buffer.
    fn all(&self) -> Vec<&DevBuf>;
}

/// `buffers_of!(value, Struct { a, b, ... } except x, y)`: the fields a, b, ... of `value` (a
/// reference) in a Vec, by an exhaustive destructuring that names every other field after
/// `except`: a field added to the struct stops the build until it is listed on one side.
macro_rules! buffers_of {
    ($value:expr, $ty:ident { $($field:ident),* $(,)? } $(except $($skip:ident),*)?) => {{
        let $ty { $($field,)* $($($skip: _,)*)? } = $value;
        vec![$($field),*]
    }};
}

/// A rank of the backend's world.
impl PhaseBuffers for RankBuffers {
    /// What a model's kernel before each phase has just written, and so finds in L2: the
    /// dispatch's tokens, their scales, ids and router weights, the combine's expert outputs and
    /// residual ([`Rewarm::Inputs`]).
    fn inputs(&self) -> Vec<&DevBuf> {
        vec![
            &self.tokens,
            &self.scales_in,
            &self.ids,
            &self.weights,
            &self.expert_out,
            &self.residual,
        ]
    }

    /// Every buffer ([`Rewarm::All`] reads them all back), by [`buffers_of`]: a buffer added to
    /// RankBuffers is listed here too or the crate does not compile with this feature.
    fn all(&self) -> Vec<&DevBuf> {
        buffers_of!(
            self,
            RankBuffers {
                d_recv,
                d_nmsg,
                d_counts,
                c_recv,
                c_counts,
                c_ll,
                c_marks,
                d_staging,
                c_staging,
                shared_msgs,
                tokens,
                ids,
                scales_in,
                slots,
                rank_slots,
                chunk_base,
                msgs_to,
                sent,
                status,
                snapshot,
                d_ticket,
                c_ticket,
                row_offsets,
                src_offsets,
                recv_tokens,
                recv_scales,
                src_info,
                row_src,
                msg_rows,
                layout_seq,
                rounds,
                refused,
                expert_out,
                weights,
                residual,
                out,
                fp8_payload,
                fp8_scales,
                c_snapshot,
                d_recv_ptrs,
                d_count_ptrs,
                c_recv_ptrs,
                c_count_ptrs,
                c_ll_ptrs,
                c_mark_ptrs
            }
        )
    }
}

/// What is read back after the evict ([`BenchOptions::rewarm`], `EP_BENCH_REWARM`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Rewarm {
    /// Nothing read back.
    #[default]
    Nothing,
    /// Every buffer of the rank's phases.
    All,
    /// The phases' inputs.
    Inputs,
}

/// What the evict before each gate does ([`BenchOptions::evict_l2`], `EP_BENCH_EVICT_L2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvictL2 {
    /// The evict buffer's size in bytes.
    pub bytes: usize,
    /// Whether the buffer is read (`rN`) rather than written.
    pub reads: bool,
}

/// The benchmark's settings: what is done before each timed phase's start gate, untimed (ep's
/// phases, the NCCL baseline's and the floors' alike). The default does nothing there: each
/// phase finds the L2 as the phase before it left it. The `ep` command reads them from the
/// environment ([`BenchOptions::from_env_vars`]; docs/tuning.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BenchOptions {
    /// The L2 evicted as a model's weights would. `None` (default): nothing.
    /// `EP_BENCH_EVICT_L2`.
    pub evict_l2: Option<EvictL2>,
    /// With `evict_l2`: buffers read back after the evict. Default [`Rewarm::Nothing`].
    /// `EP_BENCH_REWARM`.
    pub rewarm: Rewarm,
}

impl BenchOptions {
    /// A typed error where the settings do not go together (a rewarm with no evict).
    pub fn validate(&self) -> Result<()> {
        if self.rewarm != Rewarm::Nothing && self.evict_l2.is_none() {
            return Err(EpError::Backend(
                "BenchOptions: rewarm reads back after an evict: set evict_l2 too".into(),
            ));
        }
        Ok(())
    }

    /// The settings `EP_BENCH_EVICT_L2` and `EP_BENCH_REWARM` ask for, read through `get` (a
    /// variable's value, `None` when unset), as `options_from_env_vars` reads the backend's; a
    /// value that does not parse is an error naming the variable.
    pub fn from_env_vars(
        get: impl Fn(&str) -> Option<String>,
    ) -> std::result::Result<BenchOptions, String> {
        let evict_l2 =
            evict_setting(get("EP_BENCH_EVICT_L2").as_deref()).map_err(|e| e.to_string())?;
        let rewarm = rewarm_setting(get("EP_BENCH_REWARM").as_deref(), evict_l2.is_some())
            .map_err(|e| e.to_string())?;
        Ok(BenchOptions { evict_l2, rewarm })
    }
}

/// `EP_BENCH_REWARM`'s value (`evicts`: whether EP_BENCH_EVICT_L2 asks for an evict, which it
/// needs): unset or `0`, nothing; `1`, every buffer; `inputs`, the phases' inputs.
fn rewarm_setting(value: Option<&str>, evicts: bool) -> Result<Rewarm> {
    match value.map(str::trim) {
        None | Some("0") => Ok(Rewarm::Nothing),
        Some("1" | "inputs") if !evicts => Err(EpError::Backend(
            "EP_BENCH_REWARM reads back after an evict: set EP_BENCH_EVICT_L2 too".into(),
        )),
        Some("1") => Ok(Rewarm::All),
        Some("inputs") => Ok(Rewarm::Inputs),
        Some(v) => Err(EpError::Backend(format!(
            "EP_BENCH_REWARM={v}: expected 0, 1 (every buffer) or inputs"
        ))),
    }
}

/// What `EP_BENCH_EVICT_L2=1` writes before each gate (untimed): several times an H100's or
/// H200's L2 (50 and 60 MB), so that a phase starts with none of the previous phase's data there,
/// as after a model's other work between two phases. Without it a phase finds the L2 as the
/// phase before it left it, which ep bench runs back to back.
const EVICT_BYTES: usize = 256 << 20;

/// The grid that reads the evict buffer: enough blocks to keep an H200's HBM busy.
const EVICT_READ_BLOCKS: u32 = 1056;

/// What `EP_BENCH_EVICT_L2` asks for: unset or `0`, nothing; `1`, `EVICT_BYTES` written; any
/// other number, that many MiB written (a model's weights between two phases touch gigabytes, and
/// with them the address translations' caches, which 256 MiB may leave warm); `rN`, N MiB read,
/// as a GEMM streams its weights: the L2 is then full of clean lines, where a write leaves it
/// dirty, so that each line the phase brings in first writes one back. Returns the bytes and
/// whether they are read.
fn evict_setting(value: Option<&str>) -> Result<Option<EvictL2>> {
    let Some(v) = value else { return Ok(None) };
    let (mib, reads) = match v.trim().strip_prefix('r') {
        Some(rest) => (rest, true),
        None => (v.trim(), false),
    };
    match mib.parse::<usize>() {
        Ok(0) if !reads => Ok(None),
        Ok(1) if !reads => Ok(Some(EvictL2 {
            bytes: EVICT_BYTES,
            reads: false,
        })),
        Ok(mib) if mib > 0 && mib <= 1 << 20 => Ok(Some(EvictL2 {
            bytes: mib << 20,
            reads,
        })),
        _ => Err(EpError::Backend(format!(
            "EP_BENCH_EVICT_L2={v}: expected 0, 1 (256 MiB written), a number of MiB to write \
             or r and a number of MiB to read, up to 1048576"
        ))),
    }
}

impl StartGate {
    /// The gate of `comms`' rounds: every rank of one world, in rank order (as `init` returns
    /// them), with `bench`'s evict and rewarm before each gate. Allocates the gate's words (and
    /// the evict buffers) on the ranks' devices.
    pub fn for_world(comms: &[CudaComm], bench: &BenchOptions) -> Result<StartGate> {
        let Some(first) = comms.first() else {
            return Err(EpError::Backend(
                "ep bench: a start gate for no ranks".into(),
            ));
        };
        let world = first.world();
        let whole = world.whole()
            && comms.len() == world.cfg.n_ranks()
            && comms
                .iter()
                .enumerate()
                .all(|(r, c)| c.rank() == r && Arc::ptr_eq(c.world(), world));
        if !whole {
            return Err(EpError::Backend(
                "ep bench: a start gate is made for every rank of one world, in rank order".into(),
            ));
        }
        let kernels = world
            .local_ranks()
            .map(|(_, r)| BenchKernels::new(Arc::clone(&r.kernels)))
            .collect::<Result<_>>()?;
        let n = world.cfg.n_ranks();
        let mut gate = StartGate::new(kernels, 0, n, &world.options, bench, None)?;
        gate.world = Some(Arc::downgrade(world));
        Ok(gate)
    }

    /// The gate of `comm`'s rounds in a world of one process per rank (`init_rank`): this
    /// process gates its rank, and the ranks' flags are mapped into each other's processes
    /// through CUDA IPC (`rv`, the world's rendezvous), so every rank of the world must be on
    /// one host, the world's nodes included.
    pub fn for_rank(
        comm: &CudaComm,
        rv: &mut ep_core::rendezvous::Rendezvous,
        bench: &BenchOptions,
    ) -> Result<StartGate> {
        let world = comm.world();
        let kernels = vec![BenchKernels::new(Arc::clone(
            &world.rank(comm.rank()).kernels,
        ))?];
        let n = world.cfg.n_ranks();
        let mut gate = StartGate::new(kernels, comm.rank(), n, &world.options, bench, Some(rv))?;
        gate.world = Some(Arc::downgrade(world));
        Ok(gate)
    }

    /// Index of rank `rank` in the gate's vectors.
    fn ix(&self, rank: usize) -> usize {
        rank - self.first
    }

    /// A gate for ranks whose devices' kernels are `kernels` (one entry per rank; the devices
    /// reach each other peer-to-peer), compiled as `options` ask; `bench`'s evict and rewarm
    /// apply before each gate.
    fn new(
        kernels: Vec<BenchKernels>,
        first: usize,
        n: usize,
        options: &CudaOptions,
        bench: &BenchOptions,
        rv: Option<&mut ep_core::rendezvous::Rendezvous>,
    ) -> Result<StartGate> {
        bench.validate()?;
        let flags: Vec<DevBuf> = kernels
            .iter()
            .map(|BenchKernels { k, .. }| {
                let b = DevBuf::new(&k.ctx, (n + GATE_WORDS) * 8)?;
                b.fill(0)?;
                Ok(b)
            })
            .collect::<Result<_>>()?;
        let (table, mapped) = match rv {
            None => (flags.iter().map(|b| b.ptr).collect(), Vec::new()),
            Some(rv) => {
                let (mut t, m) = crate::ipc::share(rv, &kernels[0].k.ctx, &[&flags[0]], |_| true)?;
                (t.remove(0), m)
            }
        };
        let tables = kernels
            .iter()
            .map(|BenchKernels { k, .. }| {
                let b = DevBuf::new(&k.ctx, n * 8)?;
                let stream = k.ctx.default_stream();
                b.upload(&table, &stream)?;
                stream.synchronize().map_err(cuda)?;
                Ok(b)
            })
            .collect::<Result<_>>()?;
        let setting = bench.evict_l2;
        let evict = kernels
            .iter()
            .map(|BenchKernels { k, .. }| {
                let Some(EvictL2 { bytes, .. }) = setting else {
                    return Ok(None);
                };
                let b = DevBuf::new(&k.ctx, bytes)?;
                b.fill(0)?;
                Ok(Some(b))
            })
            .collect::<Result<_>>()?;
        Ok(StartGate {
            first,
            n_ranks: n,
            _mapped: mapped,
            flags,
            tables,
            queued: (0..n).map(|_| Default::default()).collect(),
            kernels,
            world: None,
            evict,
            evict_reads: setting.is_some_and(|e| e.reads),
            rewarm: if setting.is_some() {
                bench.rewarm
            } else {
                Rewarm::Nothing
            },
            trace: options.trace != crate::options::Trace::Off,
        })
    }

    /// The next epoch of rank `rank`'s flags (1, 2, ...).
    fn next_epoch(&self, rank: usize) -> u64 {
        self.queued[self.ix(rank)].fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
    }

    /// The epoch of rank `rank`'s last gate queued.
    pub(crate) fn last_epoch(&self, rank: usize) -> u64 {
        self.queued[self.ix(rank)].load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Under [`Timing::Step`], after the phase behind rank `rank`'s last gate (its epoch
    /// [`Self::last_epoch`], for [`GateWords::step_ms`]): `ep_bench_stamp`, chained where the
    /// device takes it, writes when the phase's work is complete (a later stamp for the same gate
    /// overwrites it).
    pub(crate) fn stamp_end(&self, rank: usize, stream: &CudaStream) -> Result<()> {
        let n = self.n_ranks as u64;
        let at = self.flags[self.ix(rank)].ptr + (n + 3 + self.last_epoch(rank) % 2) * 8;
        let k = &self.kernels[self.ix(rank)];
        let f = k.get("ep_bench_stamp");
        unsafe {
            // SAFETY: the arguments are the bench.cu kernel's parameters in its order, each device
            // pointer a live buffer of the size the kernel indexes.
            launch_ex(stream, f, 1, 32, 0, &[&at], Timing::Step.chained(&k.k))
        }
    }

    /// Queues rank `rank`'s next gate on `stream`, after the evict and, under EP_BENCH_REWARM,
    /// `phase`'s buffers read back.
    pub(crate) fn launch(
        &self,
        rank: usize,
        stream: &CudaStream,
        phase: Option<&dyn PhaseBuffers>,
    ) -> Result<()> {
        let rewarm = match (self.rewarm, phase) {
            (Rewarm::All, Some(p)) => p.all(),
            (Rewarm::Inputs, Some(p)) => p.inputs(),
            _ => vec![],
        };
        let i = self.ix(rank);
        if let Some(b) = &self.evict[i] {
            // The evict buffer's last word is the reads' sink (ep_bench_read), left out of them.
            let sink = b.ptr + (b.len as u64 / 16 - 1) * 16;
            let read = |ptr: u64, n16: u64| {
                let k = self.kernels[i].get("ep_bench_read");
                unsafe {
                    // SAFETY: the arguments are the bench.cu kernel's parameters in its order, each device
                    // pointer a live buffer of the size the kernel indexes.
                    launch(stream, k, EVICT_READ_BLOCKS, 512, 0, &[&ptr, &n16, &sink])
                }
            };
            if self.evict_reads {
                read(b.ptr, b.len as u64 / 16 - 1)?;
            } else {
                b.fill_async(0, b.len, stream)?;
            }
            for r in rewarm {
                read(r.ptr, r.len as u64 / 16)?;
            }
        }
        let n = self.n_ranks as i32;
        let epoch = self.next_epoch(rank);
        let (hold, timeout) = (GATE_HOLD.as_nanos() as u64, GATE_TIMEOUT.as_nanos() as u64);
        unsafe {
            // SAFETY: the arguments are the bench.cu kernel's parameters in its order, each device
            // pointer a live buffer of the size the kernel indexes.
            launch(
                stream,
                self.kernels[i].get("ep_bench_gate"),
                1,
                32,
                0,
                &[
                    &self.tables[i].ptr,
                    &(rank as i32),
                    &n,
                    &epoch,
                    &hold,
                    &timeout,
                ],
            )
        }
    }

    /// After the stream finished: an error when one of rank `rank`'s gates timed out; else the
    /// rank's words, for the step times of its last two phases.
    pub(crate) fn check(&self, rank: usize, stream: &Arc<CudaStream>) -> Result<GateWords> {
        let n = self.n_ranks;
        let i = self.ix(rank);
        let mut flags = vec![0u64; n + GATE_WORDS];
        self.flags[i].download(&mut flags, stream)?;
        if self.trace {
            // For scripts/trace_summary.py: when this rank's last two gates ended.
            let last = self.queued[i].load(std::sync::atomic::Ordering::Relaxed);
            for epoch in last.saturating_sub(1).max(1)..=last {
                let end = flags[n + 1 + (epoch % 2) as usize];
                println!("trace gate rank {rank} epoch {epoch} end {end}");
            }
            self.kernels[i].k.collect_trace(stream)?;
        }
        if flags[n] != 0 {
            return Err(EpError::Backend(format!(
                "ep bench: rank {rank}'s start gate waited {GATE_TIMEOUT:?} for a peer"
            )));
        }
        Ok(GateWords { flags, n })
    }
}

/// A round replayed from a CUDA graph ([`CudaComm::bench_graph`]).
#[derive(Clone, Copy, Debug)]
pub struct GraphRound {
    /// Device time a round, µs: events around the replays on the stream.
    pub round_us: f64,
    /// Host time a replay's launch took, µs: a round is bound by the host where this is the
    /// larger.
    pub launch_us: f64,
}

impl CudaComm {
    /// Loads this rank's inputs for device-resident rounds: tokens, ids and router weights; the
    /// expert outputs are a constant pattern (values do not change the data movement).
    pub fn bench_load(
        &mut self,
        input: &DispatchInput<'_>,
        weights: ArrayView2<'_, f32>,
    ) -> Result<()> {
        validate::dispatch_input(self.config(), self.rank(), input)?;
        let st = self.staging()?;
        let tokens: Vec<_> = input.tokens.iter().copied().collect();
        let ids: Vec<_> = input.topk_ids.iter().copied().collect();
        self.write(&st.tokens, &tokens)?;
        self.write(&st.topk_ids, &ids)?;
        if let Some(s) = input.input_scales {
            self.write(&st.input_scales, &s.to_vec())?;
        }
        let w: Vec<f32> = weights.iter().copied().collect();
        self.write(&st.weights, &w)?;
        let b = self.bufs();
        b.expert_out
            .fill_async(0x3C, b.expert_out.len, self.stream())?;
        self.start_staged_round(input.n_tokens(), input.input_scales.is_some())?;
        self.set_reduced();
        self.stream().synchronize().map_err(cuda)
    }

    /// One round on the loaded inputs through the public API, as a model's step makes it: the
    /// loaded buffers handed to `dispatch_async`, `dispatch_wait`, `combine_async` and
    /// `combine_wait` as a caller's own, each phase started behind `gate` (the world's
    /// [`StartGate`], which every rank's round passes) and its end queued after its wait
    /// returns (on the stream where the waits are stream-ordered), then `synchronize`. While
    /// probing, also the end of each phase's async half.
    pub fn bench_round(&mut self, gate: &StartGate, timing: Timing) -> Result<PhaseTimes> {
        let own = |w: &Weak<World>| std::ptr::eq(w.as_ptr(), Arc::as_ptr(self.world()));
        if !gate.world.as_ref().is_some_and(own) {
            return Err(EpError::Backend(
                "ep bench: the start gate was made for another world's comms".into(),
            ));
        }
        let s = Arc::clone(self.stream());
        let st = self.staging()?;
        let args = self.loaded_args(&st);
        // The async halves' ends only in probed rounds: an event between two of a phase's
        // kernels lengthens the gap between them (7954f26), which a caller's round never has.
        let time_async = self.probing() && timing == Timing::Events;
        let sent = [timing_event(s.context())?, timing_event(s.context())?];
        self.start_gate(gate)?;
        let dispatch = PhaseClock::start(timing, gate, self.rank(), &s)?;
        let pending = self.dispatch_async(&args)?;
        if time_async {
            sent[0].record(&s).map_err(cuda)?;
        }
        let d = self.dispatch_wait(pending)?;
        dispatch.end(gate, &s)?;
        self.start_gate(gate)?;
        let combine = PhaseClock::start(timing, gate, self.rank(), &s)?;
        let weighted = CombineArgs::weighted(&st.expert_out, &st.weights);
        let pending = self.combine_async(&d.handle, &weighted)?;
        if time_async {
            sent[1].record(&s).map_err(cuda)?;
        }
        self.combine_wait(pending)?;
        combine.end(gate, &s)?;
        self.synchronize()?;
        let words = gate.check(self.rank(), &s)?;
        let sent_ms = |clock: &PhaseClock, i: usize| -> Result<Option<f32>> {
            time_async
                .then(|| clock.start.elapsed_ms(&sent[i]).map_err(cuda))
                .transpose()
        };
        Ok(PhaseTimes {
            dispatch_ms: dispatch.ms(&words)?,
            dispatch_async_ms: sent_ms(&dispatch, 0)?,
            combine_ms: combine.ms(&words)?,
            combine_async_ms: sent_ms(&combine, 1)?,
        })
    }

    /// Graph-replayed rounds: the public round on the loaded buffers (dispatch, combine) captured
    /// once on the rank's stream, replayed `replays` times back to back after a few unmeasured
    /// ones; µs a round, from events around the replays on the stream. `ready` lines the ranks up
    /// before each part. Needs stream-ordered waits (a GPU a rank): `None` otherwise.
    pub fn bench_graph(
        &mut self,
        replays: usize,
        mut ready: impl FnMut() -> Result<()>,
    ) -> Result<Option<GraphRound>> {
        use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
        if !self.stream_ordered_waits() {
            return Ok(None);
        }
        let s = Arc::clone(self.stream());
        let st = self.staging()?;
        let args = self.loaded_args(&st);
        s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(cuda)?;
        let captured = (|| -> Result<()> {
            let pending = self.dispatch_async(&args)?;
            let d = self.dispatch_wait(pending)?;
            let weighted = CombineArgs::weighted(&st.expert_out, &st.weights);
            let pending = self.combine_async(&d.handle, &weighted)?;
            self.combine_wait(pending).map(drop)
        })();
        let graph = s.end_capture(CUgraphInstantiate_flags(0)).map_err(cuda);
        captured?;
        let graph = graph?.ok_or_else(|| EpError::Backend("ep bench: nothing captured".into()))?;
        let launch = |n: usize| -> Result<()> {
            for _ in 0..n {
                graph.launch().map_err(cuda)?;
            }
            Ok(())
        };
        ready()?;
        launch(3)?;
        self.synchronize()?;
        ready()?;
        let (start, end) = (timing_event(s.context())?, timing_event(s.context())?);
        start.record(&s).map_err(cuda)?;
        let host = std::time::Instant::now();
        launch(replays)?;
        let launched = host.elapsed();
        end.record(&s).map_err(cuda)?;
        self.synchronize()?;
        let ms = start.elapsed_ms(&end).map_err(cuda)?;
        let per = replays.max(1) as f64;
        Ok(Some(GraphRound {
            round_us: ms as f64 * 1e3 / per,
            launch_us: launched.as_secs_f64() * 1e6 / per,
        }))
    }

    /// The loaded round's dispatch, on the staging buffers `st` it was loaded into.
    fn loaded_args<'a>(&self, st: &'a Staging<CudaComm>) -> DispatchArgs<'a, CudaComm> {
        let (t, scales) = self.loaded_round();
        // SAFETY: `bench_load` checked every id (`validate::dispatch_input`).
        let args = unsafe { DispatchArgs::new(&st.tokens, &st.topk_ids, t).with_checked_ids() };
        match scales {
            true => args.with_input_scales(&st.input_scales),
            false => args,
        }
    }

    /// Queues this rank's gate of `gate` for the next phase.
    fn start_gate(&self, gate: &StartGate) -> Result<()> {
        gate.launch(self.rank(), self.stream(), Some(self.bufs()))?;
        self.mark(GATE_MARK)
    }

    /// [`CudaComm::bench_round`] with an event after every kernel: the round's times and, per
    /// kernel in launch order, the µs from the previous event to its end (the probe's own event
    /// records lengthen host-bound rounds a little).
    pub fn bench_round_probed(
        &mut self,
        gate: &StartGate,
    ) -> Result<(PhaseTimes, Vec<(&'static str, f32)>)> {
        self.set_probe(true);
        let times = self.bench_round(gate, Timing::Events);
        let events = self.set_probe(false);
        let times = times?;
        // The gate's own span is not a step of the round.
        let steps = events
            .windows(2)
            .filter(|w| w[1].0 != GATE_MARK)
            .map(|w| Ok((w[1].0, w[0].1.elapsed_ms(&w[1].1).map_err(cuda)? * 1e3)))
            .collect::<Result<_>>()?;
        Ok((times, steps))
    }
}

/// The least time a phase can take, in µs, timed as the phases are (behind a start gate, the
/// slowest rank's time, median): the decode sizes' ceiling, as the copies are the prefill sizes'.
/// A kernel per rank, the ranks placed on the GPUs as the run's world places them, so that ranks
/// sharing a GPU (one-GPU runs) have floors measured the way their phases are.
#[derive(Clone, Copy, Debug)]
pub struct Floors {
    /// One kernel that does nothing.
    pub empty_kernel_us: f64,
    /// One kernel in which every GPU raises a flag at every GPU and waits for all of them: the
    /// least a phase that hears from its peers takes.
    pub flag_exchange_us: f64,
    /// The same after each GPU copied `row_bytes` to every peer and fenced: the least a 1-token
    /// dispatch takes (its row to the peer, made visible, then known to have landed).
    pub row_exchange_us: f64,
    /// Bytes of the row `row_exchange_us` copies to each peer.
    pub row_bytes: usize,
    /// The ranks that took part.
    pub ranks: usize,
    /// The GPUs the ranks were placed on.
    pub gpus: usize,
}

/// The copy ceilings, GB/s, and with two ranks or more the latency floors among them.
#[derive(Clone, Copy, Debug)]
pub struct Ceilings {
    /// GPU 0 pushing to GPU 1 with 16-byte stores, one way (`None` with one GPU).
    pub p2p_gbps: Option<f64>,
    /// Every GPU of the run pushing an equal share to each of the others at once, as a dispatch
    /// does: bytes each GPU sends over the time the slowest took (`None` with one GPU).
    pub all_to_all_gbps: Option<f64>,
    /// A copy inside GPU 0.
    pub local_gbps: f64,
    /// The latency floors (`None` with one rank).
    pub floors: Option<Floors>,
}

/// The middle of `v` once sorted (timings: no NaN). Every median of the backend's timings.
pub(crate) fn median<T: Copy + PartialOrd>(mut v: Vec<T>) -> T {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

/// Times 16-byte copy kernels of `bytes`: from GPU 0 to GPU 1, inside GPU 0, and an all-to-all
/// among the GPUs of `placement` (median of `iters` after a warm-up); and with two ranks or more
/// the latency floors ([`Floors`]) among the ranks of `placement` (rank `r` on GPU
/// `placement[r]`, as [`crate::CudaBackend::placement`] places a world), with a row of
/// `row_bytes` (rounded up to 16), timed as `timing` times the phases, with the kernels that
/// `options` ask for and the L2 evict that `bench` asks for (as the backend's own rounds).
pub fn measure_ceilings(
    bytes: usize,
    iters: usize,
    placement: &[usize],
    row_bytes: usize,
    timing: Timing,
    options: &CudaOptions,
    bench: &BenchOptions,
) -> Result<Ceilings> {
    let n = placement.iter().max().map_or(1, |&g| g + 1);
    let visible = crate::driver::device_count()?;
    if n > visible {
        return Err(EpError::Backend(format!(
            "ep bench: the ceilings' placement names GPU {} of {visible}",
            n - 1
        )));
    }
    let ks: Vec<BenchKernels> = (0..n)
        .map(|d| BenchKernels::of_device(d, options))
        .collect::<Result<_>>()?;
    let ctxs: Vec<&Arc<CudaContext>> = ks.iter().map(|k| &k.k.ctx).collect();
    let peers: HashMap<usize, Arc<CudaContext>> =
        ctxs.iter().map(|&c| Arc::clone(c)).enumerate().collect();
    crate::world::enable_peer_access(&peers)?;
    let k = &ks[0];
    let sms = ctxs[0]
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(cuda)? as u32;
    let stream = ctxs[0].new_stream().map_err(cuda)?;
    let src = DevBuf::new(ctxs[0], bytes)?;
    src.fill(0x3C)?;
    let time = |dst: &DevBuf| -> Result<f64> {
        let n16 = (bytes / 16) as u64;
        let mut times = Vec::new();
        for i in 0..=iters {
            let (a, b) = (timing_event(ctxs[0])?, timing_event(ctxs[0])?);
            a.record(&stream).map_err(cuda)?;
            unsafe {
                // SAFETY: the arguments are the bench.cu kernel's parameters in its order, each device
                // pointer a live buffer of the size the kernel indexes.
                launch(
                    &stream,
                    k.get("ep_copy"),
                    sms * 4,
                    512,
                    0,
                    &[&src.ptr, &dst.ptr, &n16],
                )
            }?;
            b.record(&stream).map_err(cuda)?;
            stream.synchronize().map_err(cuda)?;
            if i > 0 {
                times.push(a.elapsed_ms(&b).map_err(cuda)?);
            }
        }
        Ok(bytes as f64 / (median(times) as f64 * 1e-3) / 1e9)
    };
    let local = time(&DevBuf::new(ctxs[0], bytes)?)?;
    let p2p = match ctxs.get(1) {
        Some(c1) => Some(time(&DevBuf::new(c1, bytes)?)?),
        None => None,
    };
    let all_to_all = if n > 1 {
        Some(AllToAll::new(&ks, bytes, options, bench)?.gbps(iters, sms)?)
    } else {
        None
    };
    let floors = if placement.len() > 1 {
        let ranks: Vec<BenchKernels> = placement.iter().map(|&g| ks[g].clone()).collect();
        let row_bytes = row_bytes.div_ceil(16) * 16;
        let a = AllToAll::new(
            &ranks,
            row_bytes.max(16) * (ranks.len() - 1),
            options,
            bench,
        )?;
        let floor = |kernel: FloorKernel| -> Result<f64> {
            // Short and noisy next to the copies: more samples.
            let n = iters * 5;
            Ok(a.time(n, timing, |r, stream| {
                a.floor_kernel(r, stream, kernel, timing)
            })? * 1e3)
        };
        Some(Floors {
            empty_kernel_us: floor(FloorKernel::Nothing)?,
            flag_exchange_us: floor(FloorKernel::Exchange { row_bytes: 0 })?,
            row_exchange_us: floor(FloorKernel::Exchange { row_bytes })?,
            row_bytes,
            ranks: placement.len(),
            gpus: n,
        })
    } else {
        None
    };
    Ok(Ceilings {
        p2p_gbps: p2p,
        all_to_all_gbps: all_to_all,
        local_gbps: local,
        floors,
    })
}

/// The kernels of the latency floors (bench.cu).
#[derive(Clone, Copy)]
enum FloorKernel {
    /// `ep_bench_nothing`.
    Nothing,
    /// `ep_bench_exchange` with `row_bytes` to each peer (0: the flag exchange alone).
    Exchange { row_bytes: usize },
}

/// Every GPU of a run (or, for the floors, every rank, several of which may share a GPU) sending a
/// slice of its buffer to each of the others, each one's slot at a receiver laid out in sender
/// order.
struct AllToAll<'a> {
    ks: &'a [BenchKernels],
    streams: Vec<Arc<CudaStream>>,
    srcs: Vec<DevBuf>,
    /// Kept alive for the tables' pointers into them.
    _recvs: Vec<DevBuf>,
    dst_tables: Vec<DevBuf>,
    slice: usize,
    gate: StartGate,
    /// The flags of `ep_bench_exchange`, a [`StartGate`]'s without its hold.
    flags: StartGate,
}

impl<'a> AllToAll<'a> {
    /// Buffers for `bytes` sent by each GPU of `ks`, split evenly over the others; its gates
    /// evict as `bench` asks.
    fn new(
        ks: &'a [BenchKernels],
        bytes: usize,
        options: &CudaOptions,
        bench: &BenchOptions,
    ) -> Result<Self> {
        let n = ks.len();
        let peers = n - 1;
        let slice = bytes / peers / 16 * 16;
        let streams: Vec<Arc<CudaStream>> = ks
            .iter()
            .map(|k| k.k.ctx.new_stream().map_err(cuda))
            .collect::<Result<_>>()?;
        let srcs: Vec<DevBuf> = ks
            .iter()
            .map(|k| {
                let b = DevBuf::new(&k.k.ctx, slice * peers)?;
                b.fill(0x3C)?;
                Ok(b)
            })
            .collect::<Result<_>>()?;
        let recvs: Vec<DevBuf> = ks
            .iter()
            .map(|k| DevBuf::new(&k.k.ctx, slice * peers))
            .collect::<Result<_>>()?;
        // GPU g's slot in receiver r: the senders of r in order, r itself left out.
        let dst_tables: Vec<DevBuf> = (0..n)
            .map(|g| {
                let table: Vec<u64> = (0..n)
                    .filter(|&r| r != g)
                    .map(|r| recvs[r].ptr + ((if g < r { g } else { g - 1 }) * slice) as u64)
                    .collect();
                let b = DevBuf::new(&ks[g].k.ctx, peers * 8)?;
                b.upload(&table, &streams[g])?;
                streams[g].synchronize().map_err(cuda)?;
                Ok(b)
            })
            .collect::<Result<_>>()?;
        Ok(AllToAll {
            ks,
            streams,
            srcs,
            _recvs: recvs,
            dst_tables,
            slice,
            gate: StartGate::new(ks.to_vec(), 0, ks.len(), options, bench, None)?,
            flags: StartGate::new(ks.to_vec(), 0, ks.len(), options, bench, None)?,
        })
    }

    /// `work` on every GPU's stream behind a shared start gate, timed as `timing` says: the
    /// slowest GPU's ms, median of `iters` after a warm-up.
    fn time(
        &self,
        iters: usize,
        timing: Timing,
        work: impl Fn(usize, &CudaStream) -> Result<()>,
    ) -> Result<f64> {
        let n = self.ks.len();
        let mut slowest = Vec::new();
        for i in 0..=iters {
            let mut clocks = Vec::new();
            for g in 0..n {
                let stream = &self.streams[g];
                self.gate.launch(g, stream, None)?;
                let clock = PhaseClock::start(timing, &self.gate, g, stream)?;
                work(g, stream)?;
                clock.end(&self.gate, stream)?;
                clocks.push(clock);
            }
            let mut worst = 0f32;
            for (g, clock) in clocks.iter().enumerate() {
                self.streams[g].synchronize().map_err(cuda)?;
                let words = self.gate.check(g, &self.streams[g])?;
                self.flags.check(g, &self.streams[g])?;
                worst = worst.max(clock.ms(&words)?);
            }
            if i > 0 {
                slowest.push(worst);
            }
        }
        Ok(median(slowest) as f64)
    }

    /// The whole buffer, GB/s each GPU sends (the slowest GPU's time).
    fn gbps(&self, iters: usize, sms: u32) -> Result<f64> {
        let peers = self.ks.len() - 1;
        let (slice16, n_peers) = ((self.slice / 16) as u64, peers as i32);
        let grid = (sms * 4).div_ceil(peers as u32) * peers as u32;
        let ms = self.time(iters, Timing::Events, |g, stream| {
            unsafe {
                // SAFETY: the arguments are the bench.cu kernel's parameters in its order, each device
                // pointer a live buffer of the size the kernel indexes.
                launch(
                    stream,
                    self.ks[g].get("ep_copy_to_peers"),
                    grid,
                    512,
                    0,
                    &[
                        &self.srcs[g].ptr,
                        &self.dst_tables[g].ptr,
                        &n_peers,
                        &slice16,
                    ],
                )
            }
        })?;
        Ok((self.slice * peers) as f64 / (ms * 1e-3) / 1e9)
    }

    /// One block of a floor kernel (bench.cu) on GPU `g`, chained as a phase's first kernel
    /// under `timing` ([`Timing::chained`]).
    fn floor_kernel(
        &self,
        g: usize,
        stream: &CudaStream,
        kernel: FloorKernel,
        timing: Timing,
    ) -> Result<()> {
        let chained = timing.chained(&self.ks[g].k);
        let row_bytes = match kernel {
            FloorKernel::Nothing => {
                let f = self.ks[g].get("ep_bench_nothing");
                return unsafe {
                    // SAFETY: the arguments are the bench.cu kernel's parameters in its order, each device
                    // pointer a live buffer of the size the kernel indexes.
                    launch_ex(stream, f, 1, 32, 0, &[], chained)
                };
            }
            FloorKernel::Exchange { row_bytes } => row_bytes,
        };
        let f = self.ks[g].get("ep_bench_exchange");
        let (n, n16) = (
            self.ks.len() as i32,
            (row_bytes.min(self.slice) / 16) as u64,
        );
        let (epoch, timeout) = (self.flags.next_epoch(g), GATE_TIMEOUT.as_nanos() as u64);
        unsafe {
            // SAFETY: the arguments are the bench.cu kernel's parameters in its order, each device
            // pointer a live buffer of the size the kernel indexes.
            launch_ex(
                stream,
                f,
                1,
                512,
                0,
                &[
                    &self.srcs[g].ptr,
                    &self.dst_tables[g].ptr,
                    &n16,
                    &self.flags.tables[g].ptr,
                    &(g as i32),
                    &n,
                    &epoch,
                    &timeout,
                ],
                chained,
            )
        }
    }
}

/// One rank of the NCCL baseline: its buffers and the index arrays of its permutes.
struct NcclRank {
    stream: Arc<CudaStream>,
    k: BenchKernels,
    tokens: DevBuf,
    send: DevBuf,
    recv: DevBuf,
    /// The expert GEMM's input rows (dispatch format) and output rows (bf16).
    expert_in: DevBuf,
    expert_out: DevBuf,
    back_send: DevBuf,
    back_recv: DevBuf,
    weights: DevBuf,
    out: DevBuf,
    send_index: DevBuf,
    expand_index: DevBuf,
    back_index: DevBuf,
    reduce_index: DevBuf,
    n_send: usize,
    n_expand: usize,
    n_back: usize,
    n_tokens: usize,
    /// Rows to and from each peer, in the order of the send/recv buffers.
    to: Vec<usize>,
    from: Vec<usize>,
    back_to: Vec<usize>,
    back_from: Vec<usize>,
}

impl PhaseBuffers for NcclRank {
    fn inputs(&self) -> Vec<&DevBuf> {
        vec![&self.tokens, &self.weights, &self.expert_out]
    }
    fn all(&self) -> Vec<&DevBuf> {
        buffers_of!(
            self,
            NcclRank {
                tokens, send, recv, expert_in, expert_out, back_send, back_recv, weights, out,
                send_index, expand_index, back_index, reduce_index
            } except stream, k, n_send, n_expand, n_back, n_tokens, to, from, back_to, back_from
        )
    }
}

/// Where each of consecutive chunks of `counts` rows starts (exclusive prefix sum).
fn starts(counts: &[usize]) -> Vec<usize> {
    counts
        .iter()
        .scan(0, |a, &c| Some(std::mem::replace(a, *a + c)))
        .collect()
}

/// An all-to-all dispatcher as frameworks build one on NCCL: each token row goes once to each
/// rank holding one of its experts (permute, grouped send/recv, unpermute into per-expert rows),
/// and back the same way before the weighted sum. Index arrays are computed on the host before
/// timing, which favours the baseline. One rank per GPU.
pub struct NcclBaseline {
    comms: Vec<cudarc::nccl::sys::ncclComm_t>,
    /// Timed alike: each phase starts behind the same kind of gate as this backend's.
    gate: StartGate,
    ranks: Vec<NcclRank>,
    row_bytes: usize,
    hidden: usize,
    top_k: usize,
}

impl NcclBaseline {
    /// `options` and `bench`: the kernels and the L2 evict of the ep rounds it is compared with,
    /// so that both start equally cold.
    pub fn new(
        cfg: &EpConfig,
        topk_ids: &[Array2<i32>],
        weights: &[Array2<f32>],
        options: &CudaOptions,
        bench: &BenchOptions,
    ) -> Result<NcclBaseline> {
        let n = cfg.n_ranks();
        let n_dev = crate::driver::device_count()?;
        if n != n_dev {
            return Err(EpError::BackendUnavailable {
                backend: "nccl".into(),
                reason: format!("the NCCL baseline runs one rank per GPU: {n} ranks, {n_dev} GPUs"),
            });
        }
        // SAFETY: only tries to load the library.
        if !unsafe { cudarc::nccl::sys::is_culib_present() } {
            return Err(EpError::BackendUnavailable {
                backend: "nccl".into(),
                reason: "libnccl could not be loaded".into(),
            });
        }
        let l = cfg.n_local_experts();
        let row_bytes = cfg.format.token_bytes(cfg.hidden);
        let hidden = cfg.hidden;
        let dests = |ids: &Array2<i32>, t: usize| cfg.ranks_reached(ids.row(t).iter().copied());
        let chunk: Vec<Vec<Vec<usize>>> = (0..n) // chunk[r][p] = tokens of r sent to p
            .map(|r| {
                (0..n)
                    .map(|p| {
                        (0..topk_ids[r].nrows())
                            .filter(|&t| dests(&topk_ids[r], t).contains(&p))
                            .collect()
                    })
                    .collect()
            })
            .collect();
        // The (token, local expert) rows each p returns to r, in token then expert order.
        let back: Vec<Vec<Vec<(usize, usize)>>> = (0..n)
            .map(|p| {
                (0..n)
                    .map(|r| {
                        let mut v = Vec::new();
                        for &t in &chunk[r][p] {
                            let mut gs: Vec<usize> = topk_ids[r]
                                .row(t)
                                .iter()
                                .filter(|&&e| e >= 0 && e as usize / l == p)
                                .map(|&e| e as usize % l)
                                .collect();
                            gs.sort_unstable();
                            gs.dedup();
                            v.extend(gs.into_iter().map(|g| (t, g)));
                        }
                        v
                    })
                    .collect()
            })
            .collect();

        let mut comms = vec![std::ptr::null_mut(); n];
        let devs: Vec<i32> = (0..n as i32).collect();
        // SAFETY: n communicators for devices 0..n.
        unsafe { nccl::comm_init_all(comms.as_mut_ptr(), n as i32, devs.as_ptr()) }
            .map_err(|e| EpError::Backend(format!("NCCL init: {e:?}")))?;

        let mut ranks = Vec::new();
        for r in 0..n {
            let k = BenchKernels::of_device(r, options)?;
            let ctx = Arc::clone(&k.k.ctx);
            let t_r = topk_ids[r].nrows();
            // Permute: tokens to per-destination chunks.
            let send_index: Vec<i32> = (0..n)
                .flat_map(|p| chunk[r][p].iter().map(|&t| t as i32))
                .collect();
            let from: Vec<usize> = (0..n).map(|s| chunk[s][r].len()).collect();
            let recv_start: Vec<usize> = starts(&from);
            // Unpermute: received rows to expert-major rows (expert, then source, then token).
            let mut expand_index = Vec::new();
            let mut expert_row: HashMap<(usize, usize, usize), usize> = HashMap::new(); // (src, token, g) -> row
            for g in 0..l {
                for s in 0..n {
                    for (i, &t) in chunk[s][r].iter().enumerate() {
                        if topk_ids[s].row(t).iter().any(|&e| e == (r * l + g) as i32) {
                            expert_row.insert((s, t, g), expand_index.len());
                            expand_index.push((recv_start[s] + i) as i32);
                        }
                    }
                }
            }
            // Back: expert rows to per-source chunks.
            let back_index: Vec<i32> = (0..n)
                .flat_map(|s| {
                    back[r][s]
                        .iter()
                        .map(|&(t, g)| expert_row[&(s, t, g)] as i32)
                        .collect::<Vec<_>>()
                })
                .collect();
            let back_from: Vec<usize> = (0..n).map(|p| back[p][r].len()).collect();
            let back_start: Vec<usize> = starts(&back_from);
            // Reduce: for each (token, slot), its returned row (duplicates share the first slot's).
            let back_row: HashMap<(usize, usize, usize), usize> = (0..n)
                .flat_map(|p| {
                    let start = back_start[p];
                    back[p][r]
                        .iter()
                        .enumerate()
                        .map(move |(i, &(t, g))| ((p, t, g), start + i))
                })
                .collect();
            let mut reduce_index = vec![-1i32; t_r * cfg.top_k];
            for t in 0..t_r {
                for k in 0..cfg.top_k {
                    let e = topk_ids[r][[t, k]];
                    if e < 0 || topk_ids[r].row(t).iter().take(k).any(|&x| x == e) {
                        continue;
                    }
                    let (p, g) = (e as usize / l, e as usize % l);
                    reduce_index[t * cfg.top_k + k] = back_row[&(p, t, g)] as i32;
                }
            }
            let b = |len: usize| DevBuf::new(&ctx, len);
            let stream = ctx.new_stream().map_err(cuda)?;
            let n_send = send_index.len();
            let n_recv: usize = from.iter().sum();
            let n_back_recv: usize = back_from.iter().sum();
            let rank = NcclRank {
                k,
                tokens: b(t_r * row_bytes)?,
                send: b(n_send * row_bytes)?,
                recv: b(n_recv * row_bytes)?,
                expert_in: b(expand_index.len() * row_bytes)?,
                expert_out: b(expand_index.len() * hidden * 2)?,
                back_send: b(back_index.len() * hidden * 2)?,
                back_recv: b(n_back_recv * hidden * 2)?,
                weights: b(t_r * cfg.top_k * 4)?,
                out: b(t_r * hidden * 2)?,
                send_index: b(n_send * 4)?,
                expand_index: b(expand_index.len() * 4)?,
                back_index: b(back_index.len() * 4)?,
                reduce_index: b(reduce_index.len() * 4)?,
                n_send,
                n_expand: expand_index.len(),
                n_back: back_index.len(),
                n_tokens: t_r,
                to: (0..n).map(|p| chunk[r][p].len()).collect(),
                from,
                back_to: (0..n).map(|s| back[r][s].len()).collect(),
                back_from,
                stream,
            };
            rank.tokens.fill(0x3C)?;
            rank.expert_out.fill(0x3C)?;
            let w: Vec<f32> = weights[r].iter().copied().collect();
            for (buf, data) in [
                (&rank.send_index, &send_index),
                (&rank.expand_index, &expand_index),
                (&rank.back_index, &back_index),
                (&rank.reduce_index, &reduce_index),
            ] {
                buf.upload(data, &rank.stream)?;
            }
            rank.weights.upload(&w, &rank.stream)?;
            rank.stream.synchronize().map_err(cuda)?;
            ranks.push(rank);
        }
        let kernels: Vec<BenchKernels> = ranks.iter().map(|r| r.k.clone()).collect();
        let ctxs = kernels
            .iter()
            .map(|k| Arc::clone(&k.k.ctx))
            .enumerate()
            .collect();
        crate::world::enable_peer_access(&ctxs)?;
        Ok(NcclBaseline {
            comms,
            gate: {
                let n = kernels.len();
                StartGate::new(kernels, 0, n, options, bench, None)?
            },
            ranks,
            row_bytes,
            hidden,
            top_k: cfg.top_k,
        })
    }

    /// Grouped send/recv of per-peer chunks of `row_bytes` rows, issued for every rank.
    fn all_to_all(
        &self,
        bufs: impl Fn(&NcclRank) -> (u64, u64, Vec<usize>, Vec<usize>),
        row_bytes: usize,
    ) -> Result<()> {
        let err = |e| EpError::Backend(format!("NCCL: {e:?}"));
        nccl::group_start().map_err(err)?;
        for (r, rank) in self.ranks.iter().enumerate() {
            let (send, recv, to, from) = bufs(rank);
            let (mut so, mut ro) = (0usize, 0usize);
            for p in 0..self.ranks.len() {
                let stream = rank.stream.cu_stream() as cudarc::nccl::sys::cudaStream_t;
                // SAFETY: offsets and counts stay inside buffers sized from the same counts.
                unsafe {
                    if to[p] > 0 {
                        nccl::send(
                            (send + (so * row_bytes) as u64) as *const _,
                            to[p] * row_bytes,
                            cudarc::nccl::sys::ncclDataType_t::ncclUint8,
                            p as i32,
                            self.comms[r],
                            stream,
                        )
                        .map_err(err)?;
                    }
                    if from[p] > 0 {
                        nccl::recv(
                            (recv + (ro * row_bytes) as u64) as *mut _,
                            from[p] * row_bytes,
                            cudarc::nccl::sys::ncclDataType_t::ncclUint8,
                            p as i32,
                            self.comms[r],
                            stream,
                        )
                        .map_err(err)?;
                    }
                }
                so += to[p];
                ro += from[p];
            }
        }
        nccl::group_end().map_err(err)?;
        Ok(())
    }

    /// `dst` row i = `src` row `index[i]`, for `n` rows of `row_bytes`, on `r`'s stream.
    /// Chained as `timing` launches the baseline's kernels ([`Timing::chained`]).
    fn gather(
        r: &NcclRank,
        src: &DevBuf,
        dst: &DevBuf,
        index: &DevBuf,
        n: usize,
        row_bytes: usize,
        timing: Timing,
    ) -> Result<()> {
        let rb = row_bytes as u64;
        unsafe {
            // SAFETY: the arguments are the bench.cu kernel's parameters in its order, each device
            // pointer a live buffer of the size the kernel indexes.
            launch_ex(
                &r.stream,
                r.k.get("ep_gather_rows"),
                n as u32,
                128,
                0,
                &[&src.ptr, &dst.ptr, &index.ptr, &rb],
                timing.chained(&r.k.k),
            )
        }
    }

    /// Every rank's gate for the next phase.
    fn start_gates(&self) -> Result<()> {
        for (i, r) in self.ranks.iter().enumerate() {
            self.gate.launch(i, &r.stream, Some(r))?;
        }
        Ok(())
    }

    /// One dispatch and one combine, timed as `timing` says; per rank (dispatch ms, combine
    /// ms).
    pub fn round(&mut self, timing: Timing) -> Result<Vec<(f32, f32)>> {
        // Each phase timed as `CudaComm::bench_round` times ours.
        let (rb, hb) = (self.row_bytes, self.hidden * 2);
        self.start_gates()?;
        let mut dispatch = Vec::new();
        for (i, r) in self.ranks.iter().enumerate() {
            dispatch.push(PhaseClock::start(timing, &self.gate, i, &r.stream)?);
            Self::gather(r, &r.tokens, &r.send, &r.send_index, r.n_send, rb, timing)?;
        }
        self.all_to_all(
            |r| (r.send.ptr, r.recv.ptr, r.to.clone(), r.from.clone()),
            rb,
        )?;
        for (r, clock) in self.ranks.iter().zip(&dispatch) {
            // Unpermute into per-expert rows: the expert GEMM's input.
            Self::gather(
                r,
                &r.recv,
                &r.expert_in,
                &r.expand_index,
                r.n_expand,
                rb,
                timing,
            )?;
            clock.end(&self.gate, &r.stream)?;
        }
        for r in &self.ranks {
            r.stream.synchronize().map_err(cuda)?;
        }
        self.start_gates()?;
        let mut combine = Vec::new();
        for (i, r) in self.ranks.iter().enumerate() {
            // The expert GEMM's bf16 output rows, permuted back per source rank.
            combine.push(PhaseClock::start(timing, &self.gate, i, &r.stream)?);
            Self::gather(
                r,
                &r.expert_out,
                &r.back_send,
                &r.back_index,
                r.n_back,
                hb,
                timing,
            )?;
        }
        self.all_to_all(
            |r| {
                (
                    r.back_send.ptr,
                    r.back_recv.ptr,
                    r.back_to.clone(),
                    r.back_from.clone(),
                )
            },
            self.hidden * 2,
        )?;
        let (top_k, hidden) = (self.top_k as i32, self.hidden as i32);
        for (r, clock) in self.ranks.iter().zip(&combine) {
            let args: [&dyn KernelArg; 6] = [
                &r.back_recv.ptr,
                &r.reduce_index.ptr,
                &r.weights.ptr,
                &top_k,
                &hidden,
                &r.out.ptr,
            ];
            unsafe {
                // SAFETY: the arguments are the bench.cu kernel's parameters in its order, each device
                // pointer a live buffer of the size the kernel indexes.
                launch_ex(
                    &r.stream,
                    r.k.get("ep_weighted_rows"),
                    r.n_tokens as u32,
                    128,
                    0,
                    &args,
                    timing.chained(&r.k.k),
                )
            }?;
            clock.end(&self.gate, &r.stream)?;
        }
        let mut out = Vec::new();
        for (i, r) in self.ranks.iter().enumerate() {
            r.stream.synchronize().map_err(cuda)?;
            let words = self.gate.check(i, &r.stream)?;
            out.push((dispatch[i].ms(&words)?, combine[i].ms(&words)?));
        }
        Ok(out)
    }
}

impl Drop for NcclBaseline {
    fn drop(&mut self) {
        for r in &self.ranks {
            let _ = r.stream.synchronize();
        }
        for &c in &self.comms {
            // SAFETY: created by comm_init_all, no work pending.
            let _ = unsafe { nccl::comm_destroy(c) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step time is the phase's end stamp less its gate's end, both picked by the gate's
    /// number (odd or even) from the words after the n flags and the timeout word; a phase
    /// whose end is not after its gate's (no stamp this round) is an error, not a time.
    #[test]
    fn step_ms_reads_the_gate_and_the_phase_end() {
        let n = 2;
        // flags, timeout, gate ends (even, odd epochs), phase ends (even, odd).
        let words = GateWords {
            flags: vec![9, 9, 0, 1_000_000, 2_000_000, 1_007_700, 2_005_400],
            n,
        };
        assert!((words.step_ms(4).unwrap() - 0.0077).abs() < 1e-7);
        assert!((words.step_ms(5).unwrap() - 0.0054).abs() < 1e-7);
        let stale = GateWords {
            flags: vec![9, 9, 0, 3_000_000, 2_000_000, 1_007_700, 2_005_400],
            n,
        };
        let e = stale.step_ms(2).unwrap_err().to_string();
        assert!(e.contains("gate 2's phase has no end stamp"), "{e}");
        assert!(stale.step_ms(3).is_ok());
    }

    #[test]
    fn evict_setting_reads_the_setting() {
        assert_eq!(evict_setting(None).unwrap(), None);
        assert_eq!(evict_setting(Some("0")).unwrap(), None);
        assert_eq!(
            evict_setting(Some("1")).unwrap(),
            Some(EvictL2 {
                bytes: EVICT_BYTES,
                reads: false
            })
        );
        assert_eq!(
            evict_setting(Some("4096")).unwrap(),
            Some(EvictL2 {
                bytes: 4096 << 20,
                reads: false
            })
        );
        assert_eq!(
            evict_setting(Some("r1")).unwrap(),
            Some(EvictL2 {
                bytes: 1 << 20,
                reads: true
            })
        );
        assert_eq!(
            evict_setting(Some("r256")).unwrap(),
            Some(EvictL2 {
                bytes: 256 << 20,
                reads: true
            })
        );
        for bad in ["", "yes", "-1", "2097152", "r", "r0", "rr1", "w4"] {
            let e = evict_setting(Some(bad)).unwrap_err().to_string();
            assert!(e.contains("EP_BENCH_EVICT_L2"), "{bad}: {e}");
        }
    }

    /// The variables map to the fields, unset is the default, and a bad value (or a rewarm with
    /// no evict) is an error naming its variable.
    #[test]
    fn bench_options_from_env_vars() {
        let from = |vars: &[(&str, &str)]| {
            BenchOptions::from_env_vars(|k| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            })
        };
        assert_eq!(from(&[]).unwrap(), BenchOptions::default());
        let o = from(&[("EP_BENCH_EVICT_L2", "r64"), ("EP_BENCH_REWARM", "inputs")]).unwrap();
        let want = BenchOptions {
            evict_l2: Some(EvictL2 {
                bytes: 64 << 20,
                reads: true,
            }),
            rewarm: Rewarm::Inputs,
        };
        assert_eq!(o, want);
        o.validate().unwrap();
        let e = from(&[("EP_BENCH_EVICT_L2", "2x")]).unwrap_err();
        assert!(e.contains("EP_BENCH_EVICT_L2"), "{e}");
        let e = from(&[("EP_BENCH_REWARM", "1")]).unwrap_err();
        assert!(e.contains("EP_BENCH_EVICT_L2"), "{e}");
        let unmatched = BenchOptions {
            rewarm: Rewarm::All,
            ..Default::default()
        };
        let e = unmatched.validate().unwrap_err().to_string();
        assert!(e.contains("evict_l2"), "{e}");
    }

    #[test]
    fn rewarm_setting_reads_the_setting() {
        assert_eq!(rewarm_setting(None, false).unwrap(), Rewarm::Nothing);
        assert_eq!(rewarm_setting(Some("0"), true).unwrap(), Rewarm::Nothing);
        assert_eq!(rewarm_setting(Some("1"), true).unwrap(), Rewarm::All);
        assert_eq!(
            rewarm_setting(Some("inputs"), true).unwrap(),
            Rewarm::Inputs
        );
        let e = rewarm_setting(Some("1"), false).unwrap_err().to_string();
        assert!(e.contains("EP_BENCH_EVICT_L2"), "{e}");
        for bad in ["", "yes", "2", "input"] {
            let e = rewarm_setting(Some(bad), true).unwrap_err().to_string();
            assert!(e.contains("EP_BENCH_REWARM"), "{bad}: {e}");
        }
    }
}
