//! `SimComm`: one rank of the simulator, running the buffer protocol of the contract.

use std::sync::Arc;
use std::time::Instant;

use ep_core::epilogue::EpilogueSink;
use ep_core::format::TokenFormat;
use ep_core::round::RoundTracker;
use ep_core::{
    bf16, poison, swiglu, validate, Buffer, CombineArgs, CombineInput, CombineOutput, Combined,
    DispatchArgs, DispatchInput, DispatchOutput, Dispatched, Element, EpComm, EpConfig, EpError,
    Epilogue, MissingSignal, PendingCombine, PendingDispatch, Phase, RejectReason, Result,
    RouterWeights, RoutingHandle, Staging, SwigluOptions, SwigluOutput,
};
use ndarray::{Array2, Array3, ArrayView1, ArrayView2};

use crate::buffer::HostBuffer;

use crate::memory::zeroed_vec;
use crate::transport::{GroupId, Transport, World};
use crate::wait::{wait_for, Unfinished};

/// Where a received row came from.
#[derive(Clone, Copy, Debug)]
struct RowSource {
    src_rank: usize,
    token: usize,
    slot: usize,
}

/// What a round keeps between its phases (a GPU backend keeps the same on the device).
struct RoundData {
    /// This rank's `topk_ids`, read again by combine_wait.
    topk_ids: Array2<i32>,
    /// Encoded messages of the shared-expert tokens (fused shared expert), in token order.
    shared_msgs: Vec<u8>,
    shared_range: std::ops::Range<usize>,
    /// Per received row, its source; `None` for padding and shared-expert rows (neither is
    /// sent back). Filled by dispatch_wait.
    rows: Vec<Option<RowSource>>,
    row_offsets: Vec<u32>,
    /// Stored by combine_async: router weights as f32, the shared expert's output rows, and
    /// the epilogue.
    weights: Option<Array2<f32>>,
    shared_out: Option<Array2<bf16>>,
    epilogue: Option<Epilogue>,
}

/// One rank of a simulated world. Drive it from its own thread (see `ep_core::on_every_rank`).
pub struct SimComm {
    cfg: EpConfig,
    net: Transport,
    tracker: RoundTracker,
    round: Option<RoundData>,
    /// Per group (dispatch, combine): this rank's last call of the phase was rejected, so its
    /// peers' counts hold its poison until its next call of the phase replaces it.
    poisoned: [bool; 2],
    /// Per phase (dispatch, combine): when this rank's wait first met a peer's poison in the open
    /// round. Waits taken up again after `PeerRejected` share the round's one deadline from then
    /// on, so a peer that never calls again ends in a timeout naming it, not in endless retries.
    rejected_since: [Option<Instant>; 2],
    /// Input buffers for host arrays (`EpComm::staging`), made on first use.
    staging: Option<Staging<SimComm>>,
}

impl SimComm {
    pub(crate) fn new(cfg: EpConfig, net: Transport) -> Self {
        let rank = net.rank;
        SimComm {
            cfg,
            net,
            tracker: RoundTracker::new(rank),
            round: None,
            poisoned: [false; 2],
            rejected_since: [None; 2],
            staging: None,
        }
    }

    fn world(&self) -> Arc<World> {
        Arc::clone(&self.net.world)
    }

    /// The counts this rank waits for, as `g * n_ranks + src` indices: every (local expert,
    /// source) pair, or under skip_a2a only the ones from itself.
    fn awaited(&self) -> Vec<usize> {
        let (n, l, rank) = (
            self.cfg.n_ranks(),
            self.cfg.n_local_experts(),
            self.net.rank,
        );
        (0..l)
            .flat_map(|g| (0..n).map(move |s| (g, s)))
            .filter(|&(_, s)| self.cfg.skip_a2a.is_none() || s == rank)
            .map(|(g, s)| g * n + s)
            .collect()
    }

    fn fail(&mut self, err: EpError) -> EpError {
        self.tracker.poison(&err);
        err
    }

    /// A call that rejected its input: every peer that waits for this rank's counts of `group`
    /// gets a poisoned count where the count would go, so that its wait returns
    /// [`EpError::PeerRejected`] at once. This rank's own memory is untouched, and its next call
    /// of the phase publishes real counts over the poison (the same indices), which lets the
    /// peers' waits complete the round.
    fn reject(&mut self, group: GroupId, err: EpError) -> EpError {
        self.poisoned[group as usize] = true;
        let v = poison::encode(RejectReason::of(&err));
        let (rank, n, l) = (
            self.net.rank,
            self.cfg.n_ranks(),
            self.cfg.n_local_experts(),
        );
        let geo = &self.net.world.geo;
        for dst in (0..n).filter(|&d| d != rank) {
            for g in 0..l {
                let (at, to_dst) = match group {
                    // Counts (g, rank) at the rank holding expert dst * l + g.
                    GroupId::Dispatch => (geo.count_index(g, rank), dst * l + g),
                    // Counts (g, rank) at dst for this rank's expert rank * l + g.
                    GroupId::Combine => (geo.count_index(g, rank), rank * l + g),
                };
                let routed = match group {
                    GroupId::Dispatch => self.cfg.routes_to(rank, to_dst),
                    GroupId::Combine => self.cfg.routes_to(dst, to_dst),
                };
                if routed {
                    self.net.signal(group, dst, at, v);
                }
            }
        }
        err
    }

    /// After a call of `group`'s phase has published its counts: if the last call was rejected,
    /// returns only once the real counts have replaced the poison at every peer, so that a peer
    /// that waits (again) after this call returns can no longer see the poison.
    fn replaced_poison(&mut self, group: GroupId) {
        if std::mem::take(&mut self.poisoned[group as usize]) {
            self.net.flush();
        }
    }

    /// The error of a wait that ended without every count.
    fn unfinished(
        &mut self,
        phase: Phase,
        started: Instant,
        why: Unfinished,
        missing: impl Fn(usize) -> MissingSignal,
    ) -> EpError {
        match why {
            // Nothing was taken or reset: the caller may wait again, until the deadline counted
            // from the first time it met the poison.
            Unfinished::Poisoned { index, reason } => {
                let since = *self.rejected_since[phase_index(phase)].get_or_insert(started);
                if since.elapsed() >= self.cfg.timeout {
                    self.rejected_since[phase_index(phase)] = None;
                    return self.timeout(phase, since, vec![missing(index)]);
                }
                EpError::PeerRejected {
                    rank: self.net.rank,
                    peer: index % self.cfg.n_ranks(),
                    phase,
                    reason,
                }
            }
            Unfinished::Missing(m) => {
                let missing = m.into_iter().map(missing).collect();
                self.timeout(phase, started, missing)
            }
        }
    }

    fn timeout(&mut self, phase: Phase, started: Instant, missing: Vec<MissingSignal>) -> EpError {
        let err = EpError::Timeout {
            rank: self.net.rank,
            phase,
            waited_ms: started.elapsed().as_millis() as u64,
            missing,
        };
        self.fail(err)
    }
}

/// `rejected_since`'s slot of a phase that waits.
fn phase_index(phase: Phase) -> usize {
    usize::from(phase == Phase::Combine)
}

/// The rounds on host arrays: the contract's protocol, which the buffer calls below wrap.
impl SimComm {
    fn send_dispatch(&mut self, input: &DispatchInput<'_>) -> Result<PendingDispatch> {
        self.tracker.check_dispatch_async()?;
        if let Err(e) = validate::dispatch_input(&self.cfg, self.net.rank, input) {
            return Err(self.reject(GroupId::Dispatch, e));
        }
        let (rank, world) = (self.net.rank, self.world());
        let geo = &world.geo;
        let msg = &geo.msg;
        let n_local = geo.n_local;
        let staging = &world.group(rank, GroupId::Dispatch).send;

        let mut scratch = vec![0u8; msg.bytes];
        let mut row = vec![bf16::ZERO; self.cfg.hidden];
        let mut encode = |t: usize, ids: &[i32], scratch: &mut [u8]| {
            // The bf16 row itself: BF16 copies its bits (a NaN's payload included).
            for (w, x) in row.iter_mut().zip(input.tokens.row(t)) {
                *w = *x;
            }
            let scale = input.input_scales.map_or(1.0, |s| s[t]);
            msg.write(self.cfg.format, scratch, &row, scale, t as u32, ids);
        };

        // Slot of the next message for each expert: messages from one sender to one expert are
        // numbered in token order, which is what makes the receiver's row order deterministic.
        let mut sent = vec![0u64; self.cfg.n_experts];
        for t in 0..input.n_tokens() {
            let ids: Vec<i32> = input.topk_ids.row(t).to_vec();
            let (mut encoded, mut staged) = (false, false);
            for (k, &id) in ids.iter().enumerate() {
                // Masked, a duplicate (one row per (token, expert)), or off-device under skip_a2a.
                if id < 0 || ids[..k].contains(&id) || !self.cfg.routes_to(rank, id as usize) {
                    continue;
                }
                if !encoded {
                    encode(t, &ids, &mut scratch);
                    encoded = true;
                }
                let e = id as usize;
                let (dest, g) = (e / n_local, e % n_local);
                let offset = geo.dispatch_slot(g, rank, sent[e] as usize);
                sent[e] += 1;
                if self.net.same_node(dest) {
                    // SAFETY: slot (g, rank, pos) is written only by this rank this round and read
                    // only after the count published below.
                    unsafe { self.net.store(GroupId::Dispatch, dest, offset, &scratch) };
                } else {
                    if !staged {
                        // SAFETY: this rank's staging slot for token t; the NIC reads it before
                        // the round can complete.
                        unsafe { staging.write(t * msg.bytes, &scratch) };
                        staged = true;
                    }
                    self.net
                        .put(GroupId::Dispatch, t * msg.bytes, dest, offset, msg.bytes);
                }
            }
        }
        // One count per (expert, this rank) that may receive from us, zero included: receivers
        // wait for all of them.
        for (e, &n) in sent.iter().enumerate() {
            if self.cfg.routes_to(rank, e) {
                let (dest, g) = (e / n_local, e % n_local);
                self.net
                    .signal(GroupId::Dispatch, dest, geo.count_index(g, rank), n);
            }
        }
        // The shared expert's rows never leave the rank: keep them encoded for dispatch_wait.
        let shared_range = if self.cfg.fused_shared_expert {
            self.cfg.shared_token_range(rank, input.n_tokens())
        } else {
            0..0
        };
        let mut shared_msgs = Vec::new();
        if self.cfg.fused_shared_expert {
            shared_msgs = vec![0u8; shared_range.len() * msg.bytes];
            for (i, t) in shared_range.clone().enumerate() {
                let ids: Vec<i32> = input.topk_ids.row(t).to_vec();
                encode(
                    t,
                    &ids,
                    &mut shared_msgs[i * msg.bytes..(i + 1) * msg.bytes],
                );
            }
        }
        self.round = Some(RoundData {
            topk_ids: input.topk_ids.to_owned(),
            shared_msgs,
            shared_range,
            rows: Vec::new(),
            row_offsets: Vec::new(),
            weights: None,
            shared_out: None,
            epilogue: None,
        });
        self.replaced_poison(GroupId::Dispatch);
        Ok(self.tracker.dispatch_sent())
    }

    fn wait_dispatch(&mut self, pending: PendingDispatch) -> Result<DispatchOutput> {
        self.tracker.check_dispatch_wait(&pending)?;
        let (rank, world) = (self.net.rank, self.world());
        let geo = &world.geo;
        let (n_ranks, n_local) = (geo.n_ranks, geo.n_local);
        let (fmt, hidden) = (self.cfg.format, self.cfg.hidden);
        let sg = self.cfg.shared_groups();
        let group = world.group(rank, GroupId::Dispatch);
        let awaited = self.awaited();

        let started = Instant::now();
        let counts = match wait_for(&group.counts, &awaited, self.cfg.timeout) {
            Ok(c) => {
                self.rejected_since[phase_index(Phase::Dispatch)] = None;
                c
            }
            Err(why) => {
                return Err(
                    self.unfinished(Phase::Dispatch, started, why, |i| MissingSignal {
                        src_rank: i % n_ranks,
                        expert: rank * n_local + i / n_ranks,
                    }),
                );
            }
        };
        if let Some(&bad) = counts.iter().find(|&&c| c > geo.max_tokens as u64) {
            return Err(self.fail(EpError::Backend(format!(
                "rank {rank}: a receive count of {bad} exceeds max_tokens_per_rank; the buffer protocol was violated"
            ))));
        }
        let data = self.round.as_ref().expect("dispatch in flight");
        let n_shared = data.shared_range.len();
        // Rows of group g from source s: the shared group holds this rank's own tokens.
        let count = |g: usize, s: usize| -> usize {
            if g < sg {
                if s == rank {
                    n_shared
                } else {
                    0
                }
            } else {
                counts[geo.count_index(g - sg, s)] as usize
            }
        };

        // Prefix sum: group by group, source by source, padding after each group.
        let multiple = fmt.group_row_multiple();
        let n_groups = n_local + sg;
        let mut row_offsets = Vec::with_capacity(n_groups + 1);
        let mut src_offsets = Array2::<u32>::zeros((n_groups, n_ranks + 1));
        let mut cursor = 0usize;
        for g in 0..n_groups {
            row_offsets.push(cursor as u32);
            for s in 0..n_ranks {
                src_offsets[[g, s]] = cursor as u32;
                cursor += count(g, s);
            }
            src_offsets[[g, n_ranks]] = cursor as u32;
            cursor = cursor.div_ceil(multiple) * multiple;
        }
        row_offsets.push(cursor as u32);
        let rows = cursor;

        let msg = &geo.msg;
        // Nothing is taken yet: a failed allocation leaves the wait to be called again.
        let tokens = zeroed_vec(
            rows * msg.payload.len(),
            &format!("rank {rank}'s received tokens"),
        )?;
        let mut recv_tokens =
            Array2::from_shape_vec((rows, msg.payload.len()), tokens).expect("rows x payload");
        let mut recv_scales = vec![0u8; fmt.output_scales_bytes(hidden, rows)];
        let mut src_info = Array2::<i32>::from_elem((rows, 2), -1);
        let mut sources = vec![None; rows];
        let mut place = |row: usize, m: &[u8]| {
            recv_tokens
                .row_mut(row)
                .as_slice_mut()
                .expect("standard layout")
                .copy_from_slice(&m[msg.payload.clone()]);
            fmt.place_scales(hidden, rows, row, &m[msg.scales.clone()], &mut recv_scales);
        };
        for (i, t) in data.shared_range.clone().enumerate() {
            let row = src_offsets[[0, rank]] as usize + i;
            place(row, &data.shared_msgs[i * msg.bytes..(i + 1) * msg.bytes]);
            src_info[[row, 0]] = t as i32;
        }
        for g in 0..n_local {
            let expert = rank * n_local + g;
            for s in 0..n_ranks {
                let base = src_offsets[[g + sg, s]] as usize;
                for j in 0..count(g + sg, s) {
                    // SAFETY: the acquired count orders the sender's writes of this slot before
                    // this read; nobody writes it again before this rank's next combine finishes.
                    let m = unsafe { group.recv.slice(geo.dispatch_slot(g, s, j), msg.bytes) };
                    let row = base + j;
                    place(row, m);
                    let token = msg.src_token(m);
                    let Some(slot) = msg.first_slot_of(m, expert) else {
                        return Err(self.fail(EpError::Backend(format!(
                            "rank {rank}: a message from rank {s} for expert {expert} does not name it"
                        ))));
                    };
                    src_info[[row, 0]] = token;
                    src_info[[row, 1]] = slot as i32;
                    sources[row] = Some(RowSource {
                        src_rank: s,
                        token: token as usize,
                        slot,
                    });
                }
            }
        }
        group.counts.reset(&awaited);

        let data = self.round.as_mut().expect("dispatch in flight");
        data.rows = sources;
        data.row_offsets = row_offsets.clone();
        data.shared_msgs = Vec::new();
        let mut expert_ids = vec![-1; sg];
        expert_ids.extend(0..n_local as i32);
        let handle = self.tracker.dispatched();
        Ok(DispatchOutput {
            handle,
            format: fmt,
            hidden,
            n_tokens: data.topk_ids.nrows(),
            recv_tokens,
            recv_scales,
            row_offsets,
            expert_ids,
            src_info,
            src_offsets,
        })
    }

    fn send_combine(&mut self, input: &CombineInput<'_>) -> Result<PendingCombine> {
        // (combine_async checked the call and its handle.)
        let data = self
            .round
            .as_ref()
            .expect("the tracker guarantees a round is in flight");
        let n_tokens = data.topk_ids.nrows();
        if let Err(e) = validate::combine_input(
            &self.cfg,
            self.net.rank,
            data.rows.len(),
            n_tokens,
            input,
            true,
        ) {
            return Err(self.reject(GroupId::Combine, e));
        }
        let (rank, world) = (self.net.rank, self.world());
        let geo = &world.geo;
        let (n_ranks, sg) = (geo.n_ranks, self.cfg.shared_groups());
        let staging = &world.group(rank, GroupId::Combine).send;
        let out = input
            .expert_out
            .to_slice()
            .expect("validated standard layout");
        let out: &[u8] = bytemuck::cast_slice(out);

        let mut sent = vec![0u64; geo.n_local * n_ranks];
        for g in 0..geo.n_local {
            let rows = data.row_offsets[g + sg] as usize..data.row_offsets[g + sg + 1] as usize;
            for row in rows {
                let Some(src) = data.rows[row] else { continue };
                let bytes = &out[row * geo.row_bytes..(row + 1) * geo.row_bytes];
                let offset = geo.combine_slot(src.token, src.slot);
                if self.net.same_node(src.src_rank) {
                    // SAFETY: slot (token, slot) of src_rank is owed by this rank alone: one
                    // expert holds one (token, first slot) pair.
                    unsafe {
                        self.net
                            .store(GroupId::Combine, src.src_rank, offset, bytes)
                    };
                } else {
                    // SAFETY: staging row `row` is this rank's own, unread until the put runs.
                    unsafe { staging.write(row * geo.row_bytes, bytes) };
                    self.net.put(
                        GroupId::Combine,
                        row * geo.row_bytes,
                        src.src_rank,
                        offset,
                        geo.row_bytes,
                    );
                }
                sent[g * n_ranks + src.src_rank] += 1;
            }
        }
        for g in 0..geo.n_local {
            for dst in 0..n_ranks {
                if self.cfg.routes_to(dst, rank * geo.n_local + g) {
                    let n = sent[g * n_ranks + dst];
                    self.net
                        .signal(GroupId::Combine, dst, geo.count_index(g, rank), n);
                }
            }
        }
        let shared_out = self.cfg.fused_shared_expert.then(|| {
            let start = data.row_offsets[0] as usize;
            input
                .expert_out
                .slice(ndarray::s![start..start + data.shared_range.len(), ..])
                .to_owned()
        });
        let weights = input
            .weights
            .map(|w| Array2::from_shape_fn(w.dim(), |(t, k)| w.get(t, k)));
        let data = self.round.as_mut().expect("round in flight");
        data.weights = weights;
        data.shared_out = shared_out;
        data.epilogue = input.epilogue.cloned();
        self.replaced_poison(GroupId::Combine);
        Ok(self.tracker.combine_sent())
    }

    fn wait_combine(&mut self, pending: PendingCombine) -> Result<CombineOutput> {
        self.tracker.check_combine_wait(&pending)?;
        let (rank, world) = (self.net.rank, self.world());
        let geo = &world.geo;
        let (n_ranks, n_local, top_k) = (geo.n_ranks, geo.n_local, geo.top_k);
        let group = world.group(rank, GroupId::Combine);
        let awaited = self.awaited();

        let started = Instant::now();
        let counts = match wait_for(&group.counts, &awaited, self.cfg.timeout) {
            Ok(c) => {
                self.rejected_since[phase_index(Phase::Combine)] = None;
                c
            }
            Err(why) => {
                return Err(self.unfinished(Phase::Combine, started, why, |i| {
                    let (g, s) = (i / n_ranks, i % n_ranks);
                    MissingSignal {
                        src_rank: s,
                        expert: s * n_local + g,
                    }
                }));
            }
        };
        let n_tokens = self
            .round
            .as_ref()
            .expect("combine in flight")
            .topk_ids
            .nrows();
        // Before the counts are taken: a failed allocation leaves the wait to be called again.
        let unreduced = match self.round.as_ref().expect("combine in flight").weights {
            Some(_) => Vec::new(),
            None => zeroed_vec(
                n_tokens * top_k * self.cfg.hidden,
                &format!("rank {rank}'s unreduced combine output"),
            )?,
        };
        group.counts.reset(&awaited);
        let data = self.round.take().expect("combine in flight");
        let ids = &data.topk_ids;
        let cfg = &self.cfg;
        // The first slot of token t naming id, if the id is live and routed from this rank.
        let routed_slot = |t: usize, k: usize| -> Option<usize> {
            let id = ids[[t, k]];
            if id < 0 || !cfg.routes_to(rank, id as usize) {
                return None;
            }
            Some((0..k).find(|&j| ids[[t, j]] == id).unwrap_or(k))
        };

        // Each expert must have returned exactly the rows this rank sent it.
        let mut expected = vec![0u64; n_local * n_ranks];
        for t in 0..n_tokens {
            for k in 0..top_k {
                if routed_slot(t, k) == Some(k) {
                    let e = ids[[t, k]] as usize;
                    expected[geo.count_index(e % n_local, e / n_local)] += 1;
                }
            }
        }
        if counts != expected {
            return Err(self.fail(EpError::Backend(format!(
                "rank {rank}: combine received {counts:?} rows per expert, expected {expected:?}"
            ))));
        }

        let hidden = cfg.hidden;
        let returned = |t: usize, k: usize| -> Option<&[bf16]> {
            let k0 = routed_slot(t, k)?;
            // SAFETY: the acquired counts order every expert's write of these slots before this
            // read; none writes again before this rank's next dispatch.
            let bytes = unsafe { group.recv.slice(geo.combine_slot(t, k0), geo.row_bytes) };
            Some(bytemuck::cast_slice(bytes))
        };
        let output = match &data.weights {
            Some(w) => {
                let mut sink = EpilogueSink::new(data.epilogue.as_ref(), n_tokens, hidden);
                let mut acc = vec![0.0f32; hidden];
                let mut row = vec![bf16::ZERO; hidden];
                for t in 0..n_tokens {
                    acc.fill(0.0);
                    for k in 0..top_k {
                        if let Some(y) = returned(t, k) {
                            let wk = w[[t, k]];
                            for (a, y) in acc.iter_mut().zip(y) {
                                *a += wk * y.to_f32();
                            }
                        }
                    }
                    if let Some(shared) = &data.shared_out {
                        if data.shared_range.contains(&t) {
                            let r = t - data.shared_range.start;
                            for (a, y) in acc.iter_mut().zip(shared.row(r)) {
                                *a += y.to_f32();
                            }
                        }
                    }
                    for (o, a) in row.iter_mut().zip(&acc) {
                        *o = ep_core::numerics::round_bf16(*a);
                    }
                    sink.row(t, &row);
                }
                sink.finish()
            }
            None => {
                let mut out = Array3::<bf16>::from_shape_vec((n_tokens, top_k, hidden), unreduced)
                    .expect("tokens x top_k x hidden");
                for t in 0..n_tokens {
                    for k in 0..top_k {
                        if let Some(y) = returned(t, k) {
                            out.slice_mut(ndarray::s![t, k, ..])
                                .as_slice_mut()
                                .expect("standard layout")
                                .copy_from_slice(y);
                        }
                    }
                }
                CombineOutput::Unreduced(out)
            }
        };
        self.tracker.combined();
        Ok(output)
    }
}

impl EpComm for SimComm {
    type Buffer<T: Element> = HostBuffer<T>;

    fn rank(&self) -> usize {
        self.net.rank
    }

    fn config(&self) -> &EpConfig {
        &self.cfg
    }

    fn alloc<T: Element>(&self, len: usize) -> Result<HostBuffer<T>> {
        HostBuffer::zeroed(len)
    }

    fn write<T: Element>(&mut self, dst: &HostBuffer<T>, host: &[T]) -> Result<()> {
        dst.write(host)
    }

    fn to_host<T: Element>(&mut self, src: &HostBuffer<T>) -> Result<Vec<T>> {
        Ok(src.to_vec())
    }

    fn synchronize(&mut self) -> Result<()> {
        Ok(())
    }

    /// Host memory grows: the expert outputs' buffer is sized for the latest dispatch's rows
    /// rather than `max_recv_rows`, which at model sizes is gigabytes a rank.
    fn staging(&mut self) -> Result<Staging<Self>> {
        let (t, cfg) = (self.cfg.max_tokens_per_rank, &self.cfg);
        let rows = self.round.as_ref().map_or(0, |r| r.rows.len());
        if self
            .staging
            .as_ref()
            .is_none_or(|s| s.expert_out.len() < rows * cfg.hidden)
        {
            let expert_out = HostBuffer::zeroed(rows * cfg.hidden)?;
            self.staging = Some(match self.staging.take() {
                Some(s) => Staging { expert_out, ..s },
                None => Staging {
                    tokens: HostBuffer::zeroed(t * cfg.hidden)?,
                    topk_ids: HostBuffer::zeroed(t * cfg.top_k)?,
                    input_scales: HostBuffer::zeroed(t)?,
                    expert_out,
                    weights: HostBuffer::zeroed(t * cfg.top_k)?,
                },
            });
        }
        let s = self.staging.as_ref().expect("made above");
        Ok(Staging {
            tokens: s.tokens.clone(),
            topk_ids: s.topk_ids.clone(),
            input_scales: s.input_scales.clone(),
            expert_out: s.expert_out.clone(),
            weights: s.weights.clone(),
        })
    }

    fn dispatch_async(&mut self, args: &DispatchArgs<'_, Self>) -> Result<PendingDispatch> {
        self.tracker.check_dispatch_async()?;
        let (cfg, rank, t) = (&self.cfg, self.net.rank, args.n_tokens);
        let read = || -> Result<_> {
            validate::dispatch_args(cfg, rank, args)?;
            let tokens = args.tokens.prefix(t * cfg.hidden, "tokens")?;
            let ids = args.topk_ids.prefix(t * cfg.top_k, "topk_ids")?;
            let scales = args.input_scales.map(|s| s.prefix(t, "input_scales"));
            Ok((tokens, ids, scales.transpose()?))
        };
        let (tokens, ids, scales) = match read() {
            Ok(v) => v,
            Err(e) => return Err(self.reject(GroupId::Dispatch, e)),
        };
        let input = DispatchInput {
            tokens: ArrayView2::from_shape((t, self.cfg.hidden), &tokens).expect("t x hidden"),
            topk_ids: ArrayView2::from_shape((t, self.cfg.top_k), &ids).expect("t x top_k"),
            input_scales: scales.as_deref().map(ArrayView1::from),
        };
        self.send_dispatch(&input)
    }

    /// The simulator's outputs are fresh host memory every round, exactly the round's rows.
    fn dispatch_wait(&mut self, pending: PendingDispatch) -> Result<Dispatched<Self>> {
        let out = self.wait_dispatch(pending)?;
        let rows = out.rows();
        Ok(Dispatched {
            handle: out.handle,
            format: out.format,
            hidden: out.hidden,
            capacity: rows,
            n_tokens: out.n_tokens,
            recv_tokens: HostBuffer::from_vec(out.recv_tokens.into_raw_vec_and_offset().0),
            recv_scales: HostBuffer::from_vec(out.recv_scales),
            row_offsets: HostBuffer::from_vec(out.row_offsets),
            src_info: HostBuffer::from_vec(out.src_info.into_raw_vec_and_offset().0),
            src_offsets: HostBuffer::from_vec(out.src_offsets.into_raw_vec_and_offset().0),
            expert_ids: out.expert_ids,
        })
    }

    fn combine_async(
        &mut self,
        handle: &RoutingHandle,
        args: &CombineArgs<'_, Self>,
    ) -> Result<PendingCombine> {
        // A handle from another round is bad input to this round's combine.
        if let Some(e) = self.tracker.stale_combine(handle)? {
            return Err(self.reject(GroupId::Combine, e));
        }
        let (cfg, rank) = (&self.cfg, self.net.rank);
        let round = self.round.as_ref().expect("a dispatch finished");
        let (rows, t) = (round.rows.len(), round.topk_ids.nrows());
        let read = || -> Result<_> {
            validate::combine_args(cfg, rank, rows, t, args, true)?;
            let out = args.expert_out.prefix(rows * cfg.hidden, "expert_out")?;
            let w = args
                .weights
                .map(|w| w.prefix(t * cfg.top_k, "router weights"));
            Ok((out, w.transpose()?))
        };
        let (out, weights) = match read() {
            Ok(v) => v,
            Err(e) => return Err(self.reject(GroupId::Combine, e)),
        };
        let input = CombineInput {
            expert_out: ArrayView2::from_shape((rows, self.cfg.hidden), &out).expect("rows x H"),
            weights: weights.as_deref().map(|w| {
                RouterWeights::F32(ArrayView2::from_shape((t, self.cfg.top_k), w).expect("t x k"))
            }),
            epilogue: args.epilogue,
        };
        self.send_combine(&input)
    }

    fn combine_wait(&mut self, pending: PendingCombine) -> Result<Combined<Self>> {
        Ok(match self.wait_combine(pending)? {
            CombineOutput::Reduced(a) => {
                Combined::Reduced(HostBuffer::from_vec(a.into_raw_vec_and_offset().0))
            }
            CombineOutput::Unreduced(a) => {
                Combined::Unreduced(HostBuffer::from_vec(a.into_raw_vec_and_offset().0))
            }
            CombineOutput::Fp8 { payload, scales } => Combined::Fp8 {
                payload: HostBuffer::from_vec(payload.into_raw_vec_and_offset().0),
                scales: HostBuffer::from_vec(scales.into_raw_vec_and_offset().0),
            },
            CombineOutput::Consumed => Combined::Consumed,
        })
    }

    fn ready(&self, phase: Phase, handle: Option<&RoutingHandle>) -> Result<()> {
        self.tracker.ready(phase, handle)
    }

    fn refuse(&mut self, phase: Phase, err: EpError) -> EpError {
        let group = match phase {
            Phase::Combine => GroupId::Combine,
            _ => GroupId::Dispatch,
        };
        self.reject(group, err)
    }

    fn host_closures(&self) -> bool {
        true
    }

    fn pending_dispatch(&self) -> Result<PendingDispatch> {
        self.tracker.pending_dispatch()
    }

    fn pending_combine(&self) -> Result<PendingCombine> {
        self.tracker.pending_combine()
    }

    fn swiglu(
        &mut self,
        routing: &DispatchOutput,
        input: ArrayView2<'_, bf16>,
        opts: &SwigluOptions,
    ) -> Result<SwigluOutput> {
        self.tracker.check_routing(&routing.handle)?;
        swiglu::swiglu(self.net.rank, routing, input, opts)
    }

    fn memory_digest(&self) -> Result<u64> {
        let world = &self.net.world;
        let mut h = ep_core::digest::EMPTY;
        for id in [GroupId::Dispatch, GroupId::Combine] {
            let g = world.group(self.net.rank, id);
            // SAFETY: tests call this while no round is in flight, so nothing writes these bytes.
            ep_core::digest::fold_bytes(&mut h, unsafe { g.recv.slice(0, g.recv.len()) });
            let counts = g.counts.as_slice().iter();
            ep_core::digest::fold_counts(
                &mut h,
                counts.map(|c| c.load(std::sync::atomic::Ordering::Acquire)),
            );
        }
        Ok(h)
    }
}
