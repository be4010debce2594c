//! Between nodes, in a world of one process per rank: NCCL carries what the kernels put for the
//! ranks of other nodes. The kernels run unchanged: in the pointer tables they take, a rank on
//! another node's receive buffer and counts are this rank's outboxes for it, where the puts and
//! the signal (`ep_dispatch_put`/`ep_dispatch_signal`, `ep_combine_put`/`ep_combine_signal`) write
//! what they would have written there. After them, each rank of another node gets an exchange
//! of its own: on a stream of the pair forked from the rank's, in the pair's own communicator,
//! the outbox goes to it and its region comes back (dispatch messages straight into the receive
//! buffer's region of their sender, combine rows into an inbox from which `ep_combine_net_rows`
//! moves the slots that sender filled), then its counts go to their column of the count array (a
//! 2D copy), and the rank's stream joins the pair's. A peer that never joins so holds its pair
//! alone: the others' counts arrive, and a timeout names it, not its node. Everything is
//! stream-ordered, so a round stays capturable in a CUDA graph, and the wait kernels find the
//! counts there.
//!
//! NCCL's send and receive take sizes the host knows, and the host does not know how many
//! messages or rows a peer sends (only the device does): each transfer is the region's
//! capacity, `max_tokens_per_rank` messages, or `max_tokens_per_rank x top_k` rows
//! (docs/perf.md says what that costs).

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

use cudarc::driver::sys as cu;
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use cudarc::nccl::{result as nccl, sys};
use ep_core::rendezvous::Rendezvous;
use ep_core::{EpConfig, EpError, MissingSignal, Phase, Result};

use crate::driver::cuda;
use crate::kernels::MsgLayout;
use crate::memory::DevBuf;

/// A phase's boxes: per rank of another node, what this rank sends it and what it receives.
struct Boxes {
    /// `[remote ranks, bytes]`: what the puts wrote for each.
    out: DevBuf,
    /// `[remote ranks, bytes]` (combine): each one's rows, before `ep_combine_net_rows`.
    inbox: Option<DevBuf>,
    /// `[remote ranks, n_local x n_ranks]` u64: the signal's count words for each (a whole count
    /// array, of which the column of this rank is written).
    counts_out: DevBuf,
    /// `[remote ranks, n_local x n_ranks]` u64: each one's count words for this rank.
    counts_in: DevBuf,
    /// Bytes of one remote rank's region.
    bytes: usize,
}

/// A rank of another node: a communicator of the two of them and a stream of its own, so that a
/// peer that never joins holds its own exchange alone, and the ranks that did join are told
/// apart from it.
struct Peer {
    rank: usize,
    comm: sys::ncclComm_t,
    stream: Arc<CudaStream>,
    /// Recorded on `stream` after each exchange with the peer.
    done: CudaEvent,
    aborted: AtomicBool,
}

impl Peer {
    fn abort(&self) {
        if !self.aborted.swap(true, Ordering::AcqRel) {
            // SAFETY: the communicator is live and aborted once.
            let _ = unsafe { nccl::comm_abort(self.comm) };
        }
    }
}

/// The NCCL transport of one rank.
pub struct Net {
    /// The ranks of other nodes, ascending; a rank's place here is its place in the boxes.
    peers: Vec<Peer>,
    ctx: Arc<CudaContext>,
    rank: usize,
    n_ranks: usize,
    n_local: usize,
    dispatch: Boxes,
    combine: Boxes,
    /// Where the dispatch's receive buffer holds each sender's messages: `max_tokens x wire`
    /// bytes a sender.
    d_recv_region: usize,
    /// The phase whose exchange was issued last (0 none, 1 dispatch, 2 combine).
    last: AtomicU8,
    /// Recorded on the stream before each exchange: the phase's puts and counts are out; the
    /// peers' streams start from it.
    before_exchange: CudaEvent,
    /// Recorded on the stream where a call rejected its input: the peers' streams start its
    /// exchange from it (`reject`).
    before_reject: CudaEvent,
    /// `[remote ranks, n_local x n_ranks]` u64: what a rejecting call sends each remote rank as
    /// its counts: the sentinel, but its own column, which holds the poison (`reject`).
    poison: DevBuf,
    /// Where the host writes to the device while the rank's stream is held (`wait_stream`).
    control: Arc<CudaStream>,
}

// SAFETY: the communicators are used by the one thread that drives the rank at a time (the comm's
// `&mut self` calls), and NCCL allows a communicator to move between threads.
unsafe impl Send for Net {}
// SAFETY: as above; the shared state is atomics.
unsafe impl Sync for Net {}

fn nccl_err(what: &str, e: impl std::fmt::Debug) -> EpError {
    EpError::Backend(format!("NCCL {what}: {e:?}"))
}

impl Net {
    /// Forms a communicator with each rank of another node (the lower rank's unique id through
    /// the rendezvous), and runs each phase's exchange once with each; allocates the boxes and
    /// points `tables` (`[d_recv, d_counts, c_recv, c_counts, ...]`, every rank's
    /// address as seen here, 0 for a rank on another node) at this rank's outboxes for the ranks
    /// of other nodes.
    pub fn new(
        cfg: &EpConfig,
        msg: &MsgLayout,
        rank: usize,
        ctx: &Arc<CudaContext>,
        rv: &mut Rendezvous,
        tables: &mut [Vec<u64>],
    ) -> Result<Net> {
        // SAFETY: only tries to load the library.
        if !unsafe { sys::is_culib_present() } {
            return Err(EpError::BackendUnavailable {
                backend: "cuda".into(),
                reason: "libnccl could not be loaded: a world of several nodes needs NCCL".into(),
            });
        }
        let n = cfg.n_ranks();
        let (t, k, h, l) = (
            cfg.max_tokens_per_rank,
            cfg.top_k,
            cfg.hidden,
            cfg.n_local_experts(),
        );
        let node = cfg.node_of(rank);
        let remote: Vec<usize> = (0..n).filter(|&r| cfg.node_of(r) != node).collect();
        let wire = msg.bytes as usize;
        let counts = l * n * 8;
        let boxes = |bytes: usize, inbox: bool| -> Result<Boxes> {
            let m = remote.len();
            let b = Boxes {
                out: DevBuf::new(ctx, m * bytes)?,
                inbox: inbox.then(|| DevBuf::new(ctx, m * bytes)).transpose()?,
                counts_out: DevBuf::new(ctx, m * counts)?,
                counts_in: DevBuf::new(ctx, m * counts)?,
                bytes,
            };
            // Count words no signal writes stay "not arrived" (the sentinel).
            b.counts_out.fill(0xFF)?;
            b.counts_in.fill(0xFF)?;
            Ok(b)
        };
        let dispatch = boxes(t * wire, false)?;
        let combine = boxes(t * k * h * 2, true)?;
        for (j, &r) in remote.iter().enumerate() {
            // The dispatch's put writes sender `rank`'s message at `rank x max_tokens + slot`
            // messages from the table's address: this one lands it in slot `slot` of box j.
            tables[0][r] = dispatch
                .out
                .ptr
                .wrapping_add((j * t * wire) as u64)
                .wrapping_sub((rank * t * wire) as u64);
            tables[1][r] = dispatch.counts_out.ptr + (j * counts) as u64;
            tables[2][r] = combine.out.ptr + (j * combine.bytes) as u64;
            tables[3][r] = combine.counts_out.ptr + (j * counts) as u64;
        }

        // What could fail on this rank alone comes before the id's all_gather, so that a rank
        // that fails is `Unreachable` there, not a hang in the communicator's init (which waits
        // for every rank without a deadline).
        let before_exchange = ctx
            .new_event(Some(cu::CUevent_flags::CU_EVENT_DISABLE_TIMING))
            .map_err(cuda)?;
        let before_reject = ctx
            .new_event(Some(cu::CUevent_flags::CU_EVENT_DISABLE_TIMING))
            .map_err(cuda)?;
        let control = ctx.new_stream().map_err(cuda)?;
        let poison = DevBuf::new(ctx, remote.len() * counts)?;
        poison.fill(0xFF)?;
        let mut streams = Vec::new();
        let mut events = Vec::new();
        for _ in &remote {
            streams.push(ctx.new_stream().map_err(cuda)?);
            events.push(
                ctx.new_event(Some(cu::CUevent_flags::CU_EVENT_DISABLE_TIMING))
                    .map_err(cuda)?,
            );
        }
        // Each pair's id comes from its lower rank: (peer, id) for every peer above this rank.
        let mut mine = Vec::new();
        let mut own_ids = Vec::new();
        for &r in remote.iter().filter(|&&r| r > rank) {
            let id = nccl::get_uniqueid().map_err(|e| nccl_err("unique id", e))?;
            mine.extend((r as u32).to_le_bytes());
            mine.extend(id.internal.iter().map(|&c| c as u8));
            own_ids.push((r, id));
        }
        let all = rv.all_gather(&mine)?;
        let id_of = |r: usize| -> Result<sys::ncclUniqueId> {
            if r > rank {
                return Ok(own_ids.iter().find(|(p, _)| *p == r).expect("made above").1);
            }
            let entry = all[r]
                .chunks_exact(4 + 128)
                .find(|e| u32::from_le_bytes(e[..4].try_into().expect("4 bytes")) as usize == rank)
                .ok_or_else(|| {
                    EpError::Backend(format!("rank {r} sent no NCCL id for rank {rank}"))
                })?;
            let mut id = sys::ncclUniqueId { internal: [0; 128] };
            for (d, &s) in id.internal.iter_mut().zip(&entry[4..]) {
                *d = s as _;
            }
            Ok(id)
        };
        ctx.bind_to_thread().map_err(cuda)?;
        // Every pair's communicator in one group, so that no rank waits for one pair while its
        // partner waits for another.
        let mut comms = Vec::new();
        grouped("communicator init", || {
            for &r in &remote {
                let mut comm = std::ptr::null_mut();
                // SAFETY: the pair's two ranks call this with the pair's id, as ranks 0 (the
                // lower) and 1; `comm` receives the communicator.
                unsafe { nccl::comm_init_rank(&mut comm, 2, id_of(r)?, (rank > r) as i32) }
                    .map_err(|e| nccl_err("communicator init", e))?;
                comms.push(comm);
            }
            Ok(())
        })?;
        let peers = remote
            .iter()
            .zip(comms)
            .zip(streams.into_iter().zip(events))
            .map(|((&rank, comm), (stream, done))| Peer {
                rank,
                comm,
                stream,
                done,
                aborted: AtomicBool::new(false),
            })
            .collect();
        let net = Net {
            peers,
            ctx: Arc::clone(ctx),
            rank,
            n_ranks: n,
            n_local: l,
            dispatch,
            combine,
            d_recv_region: t * wire,
            last: AtomicU8::new(0),
            before_exchange,
            before_reject,
            poison,
            control,
        };
        // NCCL connects to a peer at the first send or receive with it, and the group that
        // connects holds the host until the peer joins: a round would then wait on the host,
        // past every deadline, for a peer that never calls. So each phase's exchange once now,
        // at its sizes, while every rank is in init (what it moves is not read), every pair in
        // one group.
        grouped("send/receive", || {
            for j in 0..net.peers.len() {
                net.post(
                    &net.dispatch,
                    j,
                    tables[0][rank],
                    net.dispatch.counts_out.ptr,
                )?;
                net.post(&net.combine, j, 0, net.combine.counts_out.ptr)?;
            }
            Ok(())
        })?;
        for p in &net.peers {
            p.stream.synchronize().map_err(cuda)?;
        }
        Ok(net)
    }

    /// The combine inbox (`[remote ranks, max_tokens, top_k, hidden]` bf16), for
    /// `ep_combine_net_rows`.
    pub fn combine_inbox(&self) -> u64 {
        self.combine.inbox.as_ref().map_or(0, |b| b.ptr)
    }

    /// On `stream`, after the phase's puts and signal: every outbox to its rank, every remote
    /// rank's messages or rows and counts in (`recv`: the dispatch's receive buffer; `counts`:
    /// the phase's count array).
    pub fn exchange(
        &self,
        phase: Phase,
        stream: &CudaStream,
        recv: u64,
        counts: u64,
    ) -> Result<()> {
        self.exchange_with(phase, stream, recv, counts, None)
    }

    /// `exchange` with the remote ranks in `only` alone (every one with `None`): where this
    /// rank met a peer's rejection, it exchanges again with that peer, whose next call does
    /// (`reject`).
    pub fn exchange_with(
        &self,
        phase: Phase,
        stream: &CudaStream,
        recv: u64,
        counts: u64,
        only: Option<&[usize]>,
    ) -> Result<()> {
        let b = self.boxes(phase);
        let cb = self.count_bytes();
        self.usable()?;
        self.before_exchange.record(stream).map_err(cuda)?;
        // Each peer on its stream, in a group of its own, its counts to their column there.
        let chosen = |p: &&Peer| only.is_none_or(|o| o.contains(&p.rank));
        for (j, p) in self.peers.iter().enumerate().filter(|(_, p)| chosen(p)) {
            let r = p.rank;
            p.stream.wait(&self.before_exchange).map_err(cuda)?;
            self.reset_counts_in(b, j)?;
            grouped("send/receive", || {
                self.post(b, j, recv, b.counts_out.ptr + (j * cb) as u64)
            })?;
            let copy = cu::CUDA_MEMCPY2D {
                srcXInBytes: r * 8,
                srcY: 0,
                srcMemoryType: cu::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                srcHost: std::ptr::null(),
                srcDevice: b.counts_in.ptr + (j * cb) as u64,
                srcArray: std::ptr::null_mut(),
                srcPitch: self.n_ranks * 8,
                dstXInBytes: r * 8,
                dstY: 0,
                dstMemoryType: cu::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                dstHost: std::ptr::null_mut(),
                dstDevice: counts,
                dstArray: std::ptr::null_mut(),
                dstPitch: self.n_ranks * 8,
                WidthInBytes: 8,
                Height: self.n_local,
            };
            // SAFETY: `n_local` words of stride `n_ranks` inside the inbox and the count array.
            unsafe { cu::cuMemcpy2DAsync_v2(&copy, p.stream.cu_stream()).result() }
                .map_err(cuda)?;
            p.done.record(&p.stream).map_err(cuda)?;
            stream.wait(&p.done).map_err(cuda)?;
        }
        self.last.store(
            if phase == Phase::Dispatch { 1 } else { 2 },
            Ordering::Relaxed,
        );
        Ok(())
    }

    /// The exchange of a call that rejected its input, with every remote rank: what it
    /// receives is what their exchange of the phase sends (it lands where it would, and comes
    /// again with this rank's next call), and what it sends is the poison (`poison`, an
    /// `ep_core::poison` word) as its counts, so that their waits meet the rejection as this
    /// node's peers do, at once. A peer that meets it exchanges with this rank again before it
    /// waits again (`exchange_with`), which this rank's next call of the phase does with every
    /// peer: each pair's exchanges stay matched, one for one. `stream` does not wait for it:
    /// the next call's puts and signal, which replace the poison in this node, must not wait
    /// for the other nodes' ranks to call. What it sends (the outbox, which that call may be
    /// rewriting, and the poison words) is read where the counts say nothing arrived.
    pub fn reject(&self, phase: Phase, stream: &CudaStream, poison: u64, recv: u64) -> Result<()> {
        let b = self.boxes(phase);
        let cb = self.count_bytes();
        self.usable()?;
        self.before_reject.record(stream).map_err(cuda)?;
        for (j, p) in self.peers.iter().enumerate() {
            p.stream.wait(&self.before_reject).map_err(cuda)?;
            // This rank's column of the peer's words: the low and the high half of each.
            let at = self.poison.ptr + (j * cb + self.rank * 8) as u64;
            for (half, word) in [(0, poison as u32), (4, (poison >> 32) as u32)] {
                // SAFETY: `n_local` words of stride `n_ranks` inside the peer's poison words.
                unsafe {
                    cu::cuMemsetD2D32Async(
                        at + half,
                        self.n_ranks * 8,
                        word,
                        1,
                        self.n_local,
                        p.stream.cu_stream(),
                    )
                    .result()
                }
                .map_err(cuda)?;
            }
            self.reset_counts_in(b, j)?;
            grouped("send/receive", || {
                self.post(b, j, recv, self.poison.ptr + (j * cb) as u64)
            })?;
        }
        Ok(())
    }

    /// Whether `stream` has run what is on it within `grace`, waiting no longer.
    pub fn settled(&self, stream: &CudaStream, grace: std::time::Duration) -> Result<bool> {
        // SAFETY: a query of a live stream.
        poll(grace, || unsafe { cu::cuStreamQuery(stream.cu_stream()) })
    }

    fn boxes(&self, phase: Phase) -> &Boxes {
        match phase {
            Phase::Dispatch => &self.dispatch,
            _ => &self.combine,
        }
    }

    /// Bytes of one remote rank's count words.
    fn count_bytes(&self) -> usize {
        self.n_local * self.n_ranks * 8
    }

    /// The context bound, and no communicator aborted.
    fn usable(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(cuda)?;
        match self
            .peers
            .iter()
            .find(|p| p.aborted.load(Ordering::Acquire))
        {
            Some(p) => Err(EpError::Backend(format!(
                "the NCCL communicator with rank {} was aborted after a timeout",
                p.rank
            ))),
            None => Ok(()),
        }
    }

    /// Peer `j`'s count inbox to "not arrived", on its stream: what an aborted exchange leaves
    /// must read so, not the last round's counts.
    fn reset_counts_in(&self, b: &Boxes, j: usize) -> Result<()> {
        let cb = self.count_bytes();
        // SAFETY: peer j's words inside the inbox, on a live stream of its GPU.
        unsafe {
            cu::cuMemsetD8Async(
                b.counts_in.ptr + (j * cb) as u64,
                0xFF,
                cb,
                self.peers[j].stream.cu_stream(),
            )
            .result()
        }
        .map_err(cuda)
    }

    /// Waits for `stream` up to `deadline`. An exchange that a peer on another node never joins
    /// holds the stream: past the deadline the communicators of the peers whose exchange has not
    /// ended are aborted (NCCL's kernels give up, so the stream drains), and what comes back is a
    /// timeout naming those peers. The rank's wait kernels behind the exchange would then spin a
    /// whole deadline more for the counts it never brought: first `status` (the rank's wait
    /// status word) is set to "ran out", so that they give up at once (`ep_failed_before`) and
    /// the counts still "not arrived" name who never came. Where every exchange ended, what
    /// holds the stream is the rank's own waits, which have their deadline and leave their
    /// verdict in the status word: `None` once they are done (past one more deadline every pair
    /// is aborted and named).
    pub fn wait_stream(
        &self,
        stream: &CudaStream,
        deadline: std::time::Duration,
        status: u64,
    ) -> Result<Option<EpError>> {
        let start = std::time::Instant::now();
        if self.settled(stream, deadline)? {
            return Ok(None);
        }
        // SAFETY: queries of live events.
        let mut stalled: Vec<&Peer> = self
            .peers
            .iter()
            .filter(
                |p| unsafe { cu::cuEventQuery(p.done.cu_event()) } != cu::CUresult::CUDA_SUCCESS,
            )
            .collect();
        if stalled.is_empty() {
            if self.settled(stream, deadline)? {
                return Ok(None);
            }
            // Still held a deadline later, by what the events do not tell (replays of a
            // captured round, whose records the host cannot read): never a wait without end.
            stalled = self.peers.iter().collect();
        }
        // On a stream of its own, done before the exchange can end (the abort below ends it).
        // SAFETY: one word of the rank's status buffer, on a live stream of its GPU.
        unsafe {
            cu::cuMemsetD32Async(
                status,
                crate::kernels::constants::STATUS_PENDING,
                1,
                self.control.cu_stream(),
            )
            .result()
        }
        .map_err(cuda)?;
        self.control.synchronize().map_err(cuda)?;
        for p in &stalled {
            p.abort();
        }
        // The aborted kernels return and the waits behind give up: the stream drains.
        let _ = self.settled(stream, deadline);
        let phase = match self.last.load(Ordering::Relaxed) {
            1 => Phase::Dispatch,
            _ => Phase::Combine,
        };
        let missing = stalled
            .iter()
            .flat_map(|p| {
                (0..self.n_local).map(move |g| MissingSignal {
                    src_rank: p.rank,
                    expert: match phase {
                        Phase::Dispatch => self.rank * self.n_local + g,
                        _ => p.rank * self.n_local + g,
                    },
                })
            })
            .collect();
        Ok(Some(EpError::Timeout {
            rank: self.rank,
            phase,
            waited_ms: start.elapsed().as_millis() as u64,
            missing,
        }))
    }

    /// Peer `j`'s sends and receives of one exchange of `b`, on its stream and communicator
    /// (`recv`: the dispatch's receive buffer; `counts_out`: the count words it sends); the
    /// caller groups them.
    fn post(&self, b: &Boxes, j: usize, recv: u64, counts_out: u64) -> Result<()> {
        let p = &self.peers[j];
        let cb = self.count_bytes();
        let s = p.stream.cu_stream() as sys::cudaStream_t;
        let u8t = sys::ncclDataType_t::ncclUint8;
        let err = |e| nccl_err("send/receive", e);
        // In the pair's communicator the peer is rank 1 if it is the higher, else 0.
        let peer = (p.rank > self.rank) as i32;
        let into = match &b.inbox {
            Some(inbox) => inbox.ptr + (j * b.bytes) as u64,
            None => recv + (p.rank * self.d_recv_region) as u64,
        };
        // SAFETY: each range lies inside its allocation (the boxes and the receive buffer are
        // sized for `max_tokens` messages or rows of every remote rank); the stream is of the
        // communicator's GPU.
        unsafe {
            let out = (b.out.ptr + (j * b.bytes) as u64) as *const _;
            nccl::send(out, b.bytes, u8t, peer, p.comm, s).map_err(err)?;
            nccl::send(counts_out as *const _, cb, u8t, peer, p.comm, s).map_err(err)?;
            nccl::recv(into as *mut _, b.bytes, u8t, peer, p.comm, s).map_err(err)?;
            let c_in = (b.counts_in.ptr + (j * cb) as u64) as *mut _;
            nccl::recv(c_in, cb, u8t, peer, p.comm, s).map_err(err)?;
        }
        Ok(())
    }

    /// Returns once the stream has run what came before the last exchange: the phase's puts and
    /// its counts to this node's peers.
    pub fn published(&self, deadline: std::time::Duration) -> Result<()> {
        // SAFETY: a query of a live event.
        if poll(deadline, || unsafe {
            cu::cuEventQuery(self.before_exchange.cu_event())
        })? {
            return Ok(());
        }
        // An earlier exchange holds the stream: nothing after it will run.
        self.abort();
        Err(EpError::Backend(format!(
            "rank {}: an exchange between nodes did not end within {deadline:?}; the NCCL \
             communicator is aborted",
            self.rank
        )))
    }

    /// Aborts every peer's communicator: its pending operations end, and every later exchange
    /// fails.
    pub fn abort(&self) {
        for p in &self.peers {
            p.abort();
        }
    }
}

/// `post`'s NCCL calls in one group, which is closed whatever `post` returns.
fn grouped(what: &str, post: impl FnOnce() -> Result<()>) -> Result<()> {
    nccl::group_start().map_err(|e| nccl_err(what, e))?;
    let posted = post();
    let ended = nccl::group_end().map_err(|e| nccl_err(what, e));
    posted.and(ended.map(drop))
}

/// Polls `query` (a stream's or an event's) until it is done (`true`) or `deadline` has passed
/// (`false`): a spin for the first 200 µs (a phase ends within them at decode sizes), then naps
/// of 50 µs.
fn poll(deadline: std::time::Duration, query: impl Fn() -> cu::CUresult) -> Result<bool> {
    let start = std::time::Instant::now();
    loop {
        match query() {
            cu::CUresult::CUDA_SUCCESS => return Ok(true),
            cu::CUresult::CUDA_ERROR_NOT_READY => {}
            e => return Err(cuda(e.result().unwrap_err())),
        }
        if start.elapsed() >= deadline {
            return Ok(false);
        }
        if start.elapsed() < std::time::Duration::from_micros(200) {
            std::hint::spin_loop();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Abort rather than destroy: destroying waits for operations that a peer gone
        // mid-round never completes, and the world is going anyway.
        self.abort();
    }
}
