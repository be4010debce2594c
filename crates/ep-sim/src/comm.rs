//! `SimComm`: one rank of the simulator, running the buffer protocol of the contract.

use std::time::Instant;

use ep_core::format::TokenFormat;
use ep_core::round::RoundTracker;
use ep_core::{
    bf16, validate, CombineInput, CombineOutput, DispatchInput, DispatchOutput, EpComm, EpConfig,
    EpError, MissingSignal, Phase, Result, RoutingHandle,
};
use ndarray::{Array2, Array3};

use crate::memory::digest;
use crate::transport::{GroupId, Transport};
use crate::wait::wait_all;

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
    /// Per received row, its source; `None` for padding. Filled by dispatch_wait.
    rows: Vec<Option<RowSource>>,
    row_offsets: Vec<u32>,
    /// Router weights as f32, stored by combine_async when given.
    weights: Option<Array2<f32>>,
}

/// One rank of a simulated world. Drive it from its own thread (see `ep_core::on_every_rank`).
pub struct SimComm {
    cfg: EpConfig,
    net: Transport,
    tracker: RoundTracker,
    round: Option<RoundData>,
}

impl SimComm {
    pub(crate) fn new(cfg: EpConfig, net: Transport) -> Self {
        let rank = net.rank;
        SimComm {
            cfg,
            net,
            tracker: RoundTracker::new(rank),
            round: None,
        }
    }

    fn timeout(&mut self, phase: Phase, started: Instant, missing: Vec<MissingSignal>) -> EpError {
        let err = EpError::Timeout {
            rank: self.net.rank,
            phase,
            waited_ms: started.elapsed().as_millis() as u64,
            missing,
        };
        self.tracker.poison(&err);
        err
    }

    fn round_data(&self) -> &RoundData {
        self.round
            .as_ref()
            .expect("the tracker guarantees a round is in flight")
    }
}

impl EpComm for SimComm {
    fn rank(&self) -> usize {
        self.net.rank
    }

    fn config(&self) -> &EpConfig {
        &self.cfg
    }

    fn dispatch_async(&mut self, input: &DispatchInput<'_>) -> Result<()> {
        self.tracker.check_dispatch_async()?;
        validate::dispatch_input(&self.cfg, self.net.rank, input)?;
        let (rank, world) = (self.net.rank, &self.net.world);
        let geo = &world.geo;
        let msg = &geo.msg;
        let n_local = geo.n_local;
        let staging = &world.group(rank, GroupId::Dispatch).send;

        // Slot of the next message for each expert: messages from one sender to one expert are
        // numbered in token order, which is what makes the receiver's row order deterministic.
        let mut sent = vec![0u64; self.cfg.n_experts];
        let mut scratch = vec![0u8; msg.bytes];
        for t in 0..input.n_tokens() {
            let ids: Vec<i32> = input.topk_ids.row(t).to_vec();
            let mut encoded = false;
            let mut staged = false;
            for (k, &id) in ids.iter().enumerate() {
                if id < 0 || ids[..k].contains(&id) {
                    continue; // masked, or a duplicate: one row per (token, expert)
                }
                if !encoded {
                    let row = input.tokens.row(t);
                    let scale = input.input_scales.map_or(1.0, |s| s[t]);
                    msg.write(
                        self.cfg.format,
                        &mut scratch,
                        row.as_slice().expect("validated standard layout"),
                        scale,
                        t as u32,
                        &ids,
                    );
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
        // One count per (expert, this rank), zero included: receivers wait for all of them.
        for (e, &n) in sent.iter().enumerate() {
            let (dest, g) = (e / n_local, e % n_local);
            self.net
                .signal(GroupId::Dispatch, dest, geo.count_index(g, rank), n);
        }
        self.round = Some(RoundData {
            topk_ids: input.topk_ids.to_owned(),
            rows: Vec::new(),
            row_offsets: Vec::new(),
            weights: None,
        });
        self.tracker.dispatch_sent();
        Ok(())
    }

    fn dispatch_wait(&mut self) -> Result<DispatchOutput> {
        self.tracker.check_dispatch_wait()?;
        let rank = self.net.rank;
        let world = std::sync::Arc::clone(&self.net.world);
        let geo = &world.geo;
        let (n_ranks, n_local) = (geo.n_ranks, geo.n_local);
        let fmt = self.cfg.format;
        let hidden = self.cfg.hidden;
        let group = world.group(rank, GroupId::Dispatch);

        let started = Instant::now();
        let counts = match wait_all(&group.counts, self.cfg.timeout) {
            Ok(c) => c,
            Err(missing) => {
                let missing = missing
                    .into_iter()
                    .map(|i| MissingSignal {
                        src_rank: i % n_ranks,
                        expert: rank * n_local + i / n_ranks,
                    })
                    .collect();
                return Err(self.timeout(Phase::Dispatch, started, missing));
            }
        };
        if let Some(&bad) = counts.iter().find(|&&c| c > geo.max_tokens as u64) {
            let err = EpError::Backend(format!(
                "rank {rank}: a receive count of {bad} exceeds max_tokens_per_rank; the buffer protocol was violated"
            ));
            self.tracker.poison(&err);
            return Err(err);
        }

        // Prefix sum: group by group, source by source, padding after each group.
        let multiple = fmt.group_row_multiple() as u32;
        let mut row_offsets = Vec::with_capacity(n_local + 1);
        let mut src_offsets = Array2::<u32>::zeros((n_local, n_ranks + 1));
        let mut cursor = 0u32;
        for g in 0..n_local {
            row_offsets.push(cursor);
            for s in 0..n_ranks {
                src_offsets[[g, s]] = cursor;
                cursor += counts[geo.count_index(g, s)] as u32;
            }
            src_offsets[[g, n_ranks]] = cursor;
            cursor = cursor.div_ceil(multiple) * multiple;
        }
        row_offsets.push(cursor);
        let rows = cursor as usize;

        let msg = &geo.msg;
        let mut recv_tokens = Array2::<u8>::zeros((rows, msg.payload.len()));
        let mut recv_scales = vec![0u8; fmt.output_scales_bytes(hidden, rows)];
        let mut src_info = Array2::<i32>::from_elem((rows, 2), -1);
        let mut sources = vec![None; rows];
        for g in 0..n_local {
            let expert = rank * n_local + g;
            for s in 0..n_ranks {
                let base = src_offsets[[g, s]] as usize;
                for j in 0..counts[geo.count_index(g, s)] as usize {
                    // SAFETY: the acquired count orders the sender's writes of this slot before
                    // this read; nobody writes it again before this rank's next combine finishes.
                    let m = unsafe { group.recv.slice(geo.dispatch_slot(g, s, j), msg.bytes) };
                    let row = base + j;
                    recv_tokens
                        .row_mut(row)
                        .as_slice_mut()
                        .expect("standard layout")
                        .copy_from_slice(&m[msg.payload.clone()]);
                    fmt.place_scales(hidden, rows, row, &m[msg.scales.clone()], &mut recv_scales);
                    let token = msg.src_token(m);
                    let Some(slot) = msg.first_slot_of(m, expert) else {
                        let err = EpError::Backend(format!(
                            "rank {rank}: a message from rank {s} for expert {expert} does not name it"
                        ));
                        self.tracker.poison(&err);
                        return Err(err);
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
        group.counts.reset();

        let data = self.round.as_mut().expect("dispatch in flight");
        data.rows = sources;
        data.row_offsets = row_offsets.clone();
        let handle = self.tracker.dispatched();
        Ok(DispatchOutput {
            handle,
            format: fmt,
            hidden,
            recv_tokens,
            recv_scales,
            row_offsets,
            expert_ids: (0..n_local as i32).collect(),
            src_info,
            src_offsets,
        })
    }

    fn combine_async(&mut self, handle: &RoutingHandle, input: &CombineInput<'_>) -> Result<()> {
        self.tracker.check_combine_async(handle)?;
        let data = self.round_data();
        validate::combine_input(
            &self.cfg,
            self.net.rank,
            data.rows.len(),
            data.topk_ids.nrows(),
            input,
        )?;
        let (rank, world) = (self.net.rank, &self.net.world);
        let geo = &world.geo;
        let n_ranks = geo.n_ranks;
        let staging = &world.group(rank, GroupId::Combine).send;
        let out = input
            .expert_out
            .to_slice()
            .expect("validated standard layout");
        let out: &[u8] = bytemuck::cast_slice(out);

        let mut sent = vec![0u64; geo.n_local * n_ranks];
        for g in 0..geo.n_local {
            let rows = data.row_offsets[g] as usize..data.row_offsets[g + 1] as usize;
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
                self.net.signal(
                    GroupId::Combine,
                    dst,
                    geo.count_index(g, rank),
                    sent[g * n_ranks + dst],
                );
            }
        }
        let weights = input
            .weights
            .map(|w| Array2::from_shape_fn(w.dim(), |(t, k)| w.get(t, k)));
        self.round.as_mut().expect("round in flight").weights = weights;
        self.tracker.combine_sent();
        Ok(())
    }

    fn combine_wait(&mut self) -> Result<CombineOutput> {
        self.tracker.check_combine_wait()?;
        let rank = self.net.rank;
        let world = std::sync::Arc::clone(&self.net.world);
        let geo = &world.geo;
        let (n_ranks, n_local, top_k) = (geo.n_ranks, geo.n_local, geo.top_k);
        let group = world.group(rank, GroupId::Combine);

        let started = Instant::now();
        let counts = match wait_all(&group.counts, self.cfg.timeout) {
            Ok(c) => c,
            Err(missing) => {
                let missing = missing
                    .into_iter()
                    .map(|i| {
                        let (g, s) = (i / n_ranks, i % n_ranks);
                        MissingSignal {
                            src_rank: s,
                            expert: s * n_local + g,
                        }
                    })
                    .collect();
                return Err(self.timeout(Phase::Combine, started, missing));
            }
        };
        let data = self.round.take().expect("combine in flight");
        let ids = &data.topk_ids;
        let n_tokens = ids.nrows();

        // Each expert must have returned exactly the rows this rank sent it.
        let mut expected = vec![0u64; n_local * n_ranks];
        for t in 0..n_tokens {
            for k in 0..top_k {
                let id = ids[[t, k]];
                if id >= 0 && !(0..k).any(|j| ids[[t, j]] == id) {
                    let e = id as usize;
                    expected[geo.count_index(e % n_local, e / n_local)] += 1;
                }
            }
        }
        group.counts.reset();
        if counts != expected {
            let err = EpError::Backend(format!(
                "rank {rank}: combine received {counts:?} rows per expert, expected {expected:?}"
            ));
            self.tracker.poison(&err);
            return Err(err);
        }

        let hidden = self.cfg.hidden;
        // The returned row for token t's slot k: a duplicated expert's output sits at the first
        // slot naming it.
        let returned = |t: usize, k: usize| -> Option<&[bf16]> {
            let id = ids[[t, k]];
            if id < 0 {
                return None;
            }
            let k0 = (0..k).find(|&j| ids[[t, j]] == id).unwrap_or(k);
            // SAFETY: the acquired counts order every expert's write of these slots before this
            // read; none writes again before this rank's next dispatch.
            let bytes = unsafe { group.recv.slice(geo.combine_slot(t, k0), geo.row_bytes) };
            Some(bytemuck::cast_slice(bytes))
        };
        let output = match &data.weights {
            Some(w) => {
                let mut out = Array2::<bf16>::zeros((n_tokens, hidden));
                let mut acc = vec![0.0f32; hidden];
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
                    for (o, a) in out.row_mut(t).iter_mut().zip(&acc) {
                        *o = bf16::from_f32(*a);
                    }
                }
                CombineOutput::Reduced(out)
            }
            None => {
                let mut out = Array3::<bf16>::zeros((n_tokens, top_k, hidden));
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

    fn memory_digest(&self) -> Result<u64> {
        let world = &self.net.world;
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for id in [GroupId::Dispatch, GroupId::Combine] {
            let g = world.group(self.net.rank, id);
            // SAFETY: tests call this while no round is in flight, so nothing writes these bytes.
            digest(&mut h, unsafe { g.recv.slice(0, g.recv.len()) });
            for c in g.counts.as_slice() {
                digest(
                    &mut h,
                    &c.load(std::sync::atomic::Ordering::Acquire).to_le_bytes(),
                );
            }
        }
        Ok(h)
    }
}
