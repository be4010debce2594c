//! Bad input: each call must return its typed error, write nothing, and leave the world usable.

use std::time::{Duration, Instant};

use ep_core::{
    bf16, CombineArgs, CombineInput, ConfigError, DispatchInput, EpBackend, EpComm, EpConfig,
    EpError, Format, HostIo, RejectReason, RouterWeights, TokenFormat,
};
use ndarray::Array2;

use super::*;
use crate::round::{run_and_check, Calls, RoundOptions};
use crate::scenario::WeightKind;

/// Runs a good round, lets `bad` make a call on rank 0 that must fail as `expect` says, checks
/// that no rank's symmetric memory changed (its peers' counts hold its poison, which digests read
/// as the sentinel it replaced), then rank 0 dispatches good
/// input, publishing real counts over the poison, and the round completes exactly.
fn rejected_dispatch<B: EpBackend, T>(
    b: &B,
    cx: &Ctx,
    cfg: &EpConfig,
    bad: impl FnOnce(&mut B::Comm) -> Result<T, EpError>,
    expect: impl Fn(&EpError) -> bool,
) -> CaseResult {
    let mut comms = b.init_uniform(cfg).map_err(err)?;
    let opts = RoundOptions::new(Calls::Fused, WeightKind::F32);
    run_and_check(&mut comms, &good_inputs(cfg, 1), &opts)?;
    super::refused_on_rank0(&mut comms, cx, "call", expect, bad)?;
    let inputs = good_inputs(cfg, 2);
    // Rank 0 sends first (its peers' counts hold its poison); its thread below takes the
    // dispatch up again.
    if let Some(c) = rank_mut(&mut comms, 0) {
        drop(
            c.host_dispatch_async(&inputs.dispatch_input(0))
                .map_err(err)?,
        );
    }
    cx.barrier("rank 0 dispatched again")?;
    finish_round(&mut comms, cfg, &inputs, |c| match c.rank() {
        0 => c.pending_dispatch(),
        r => c.host_dispatch_async(&inputs.dispatch_input(r)),
    })
}

/// Completes a round whose dispatch is in flight on some ranks: each rank takes its dispatch
/// from `pending` (issuing it, or taking up the one in flight again) and waits; the round is then
/// combined with the toy experts and held against the oracle.
fn finish_round<C: EpComm>(
    comms: &mut [C],
    cfg: &EpConfig,
    inputs: &crate::scenario::RoundInputs,
    pending: impl Fn(&mut C) -> Result<ep_core::PendingDispatch, EpError> + Sync,
) -> CaseResult {
    let dispatched = ep_core::on_every_rank(comms, |c| {
        let p = pending(c)?;
        c.host_dispatch_wait(p)
    })
    .into_iter()
    .collect::<Result<Vec<_>, _>>()
    .map_err(err)?;
    let outs: Vec<_> = dispatched
        .iter()
        .map(crate::scenario::toy_experts)
        .collect();
    super::combine_all_and_check(comms, cfg, inputs, dispatched, &outs)
}

/// An id equal to `n_experts` on rank 0's last token is `ExpertIdOutOfRange` naming the token
/// and slot; nothing is written and the round then completes.
pub fn expert_id_too_large<B: EpBackend>(b: &B, cx: &Ctx) -> CaseResult {
    let cfg = small_config();
    let mut inputs = good_inputs(&cfg, 3);
    let last = inputs.topk_ids[0].nrows() - 1;
    inputs.topk_ids[0][[last, 2]] = cfg.n_experts as i32;
    rejected_dispatch(
        b,
        cx,
        &cfg,
        |c| c.host_dispatch_async(&inputs.dispatch_input(0)),
        |e| {
            matches!(e, EpError::ExpertIdOutOfRange { rank: 0, token, slot: 2, id, .. }
                if *token == last && *id == 16)
        },
    )
}

/// An id of -2 (below the masked -1) is `ExpertIdOutOfRange`, through the fused `dispatch`.
pub fn expert_id_below_minus_one<B: EpBackend>(b: &B, cx: &Ctx) -> CaseResult {
    let cfg = small_config();
    let mut inputs = good_inputs(&cfg, 4);
    inputs.topk_ids[0][[3, 0]] = -2;
    rejected_dispatch(
        b,
        cx,
        &cfg,
        |c| c.host_dispatch(&inputs.dispatch_input(0)).map(|_| ()),
        |e| {
            matches!(
                e,
                EpError::ExpertIdOutOfRange {
                    token: 3,
                    slot: 0,
                    id: -2,
                    ..
                }
            )
        },
    )
}

/// `max_tokens_per_rank + 1` tokens are `TooManyTokens` naming the count and the maximum.
pub fn too_many_tokens<B: EpBackend>(b: &B, cx: &Ctx) -> CaseResult {
    let cfg = small_config();
    let t = cfg.max_tokens_per_rank + 1;
    let tokens = Array2::<bf16>::zeros((t, cfg.hidden));
    let ids = Array2::<i32>::zeros((t, cfg.top_k));
    rejected_dispatch(
        b,
        cx,
        &cfg,
        |c| c.host_dispatch_async(&DispatchInput::new(tokens.view(), ids.view())),
        |e| {
            matches!(
                e,
                EpError::TooManyTokens {
                    rank: 0,
                    tokens: 9,
                    max: 8
                }
            )
        },
    )
}

/// Token rows wider than `hidden` are a `Shape` error on `tokens`.
pub fn tokens_wrong_shape<B: EpBackend>(b: &B, cx: &Ctx) -> CaseResult {
    let cfg = small_config();
    let tokens = Array2::<bf16>::zeros((4, cfg.hidden + 8));
    let ids = Array2::<i32>::zeros((4, cfg.top_k));
    rejected_dispatch(
        b,
        cx,
        &cfg,
        |c| c.host_dispatch_async(&DispatchInput::new(tokens.view(), ids.view())),
        |e| matches!(e, EpError::Shape { what: "tokens", .. }),
    )
}

/// `topk_ids` with a column too many, or a row too few, is a `Shape` error on `topk_ids`.
pub fn topk_ids_wrong_shape<B: EpBackend>(b: &B, cx: &Ctx) -> CaseResult {
    let cfg = small_config();
    let tokens = Array2::<bf16>::zeros((4, cfg.hidden));
    for ids in [
        Array2::<i32>::zeros((4, cfg.top_k + 1)),
        Array2::<i32>::zeros((3, cfg.top_k)),
    ] {
        rejected_dispatch(
            b,
            cx,
            &cfg,
            |c| c.host_dispatch_async(&DispatchInput::new(tokens.view(), ids.view())),
            |e| {
                matches!(
                    e,
                    EpError::Shape {
                        what: "topk_ids",
                        ..
                    }
                )
            },
        )?;
    }
    Ok(())
}

/// Init refuses 18 experts on 4 ranks with `ConfigError::ExpertsNotDivisible`.
pub fn experts_not_divisible<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let cfg = EpConfig::new(32, 4, 18, 8, 4);
    match b.init_uniform(&cfg) {
        Err(EpError::Config(ConfigError::ExpertsNotDivisible {
            n_experts: 18,
            n_ranks: 4,
        })) => Ok(()),
        Err(e) => Err(format!("wrong error: {e}")),
        Ok(_) => Err("init accepted 18 experts on 4 ranks".into()),
    }
}

/// Each format refuses a hidden size that is not a multiple of its block, naming all three.
pub fn hidden_not_allowed<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    for &format in Format::ALL {
        let block = format.block();
        let hidden = 2 * block + block / 2;
        let cfg = EpConfig::new(hidden, 4, 16, 8, 4).with_format(format);
        match b.init_uniform(&cfg) {
            Err(EpError::Config(ConfigError::HiddenNotAllowed {
                format: f,
                hidden: h,
                block: k,
            })) if f == format.name() && h == hidden && k == block => {}
            Err(e) => return Err(format!("{format}: wrong error: {e}")),
            Ok(_) => return Err(format!("init accepted hidden = {hidden} for {format}")),
        }
    }
    Ok(())
}

/// A rank whose config differs is named at init; a good init afterwards works.
pub fn config_mismatch<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let cfg = small_config();
    let mut configs = vec![cfg.clone(); cfg.n_ranks()];
    configs[2].max_tokens_per_rank += 1;
    match b.init(&configs) {
        Err(EpError::ConfigMismatch {
            rank: 2,
            field: "max_tokens_per_rank",
            ..
        }) => {}
        Err(e) => return Err(format!("wrong error: {e}")),
        Ok(_) => return Err("init accepted differing configs".into()),
    }
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    run_and_check(
        &mut comms,
        &good_inputs(&cfg, 5),
        &RoundOptions::new(Calls::Split, WeightKind::F32),
    )
    .map(|_| ())
}

/// After a good dispatch, rank 0 hands combine something bad; nothing is written on any rank (its
/// peers' combine counts hold its poison only), and the right combine afterwards, issued by rank 0
/// first, completes the round exactly.
fn rejected_combine<B: EpBackend, T>(
    b: &B,
    cx: &Ctx,
    bad: impl Fn(&mut B::Comm, &ep_core::DispatchOutput) -> Result<T, EpError> + Sync,
    expect: impl Fn(&EpError) -> bool + Sync,
) -> CaseResult {
    let cfg = small_config();
    let inputs = good_inputs(&cfg, 6);
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    let dispatched = super::dispatch_all(&mut comms, &inputs)?;
    let rank0 = position_of(&dispatched, 0);
    super::refused_on_rank0(&mut comms, cx, "combine", expect, |c| {
        bad(c, &dispatched[rank0.expect("called where rank 0 is held")])
    })?;
    let outs: Vec<_> = dispatched
        .iter()
        .map(crate::scenario::toy_experts)
        .collect();
    combine_resumed(&mut comms, cx, &cfg, &inputs, dispatched, &outs, 0, false)
}

/// Completes a round whose combine rank `first` must issue before the others (it rejected its
/// input, and its peers' counts hold its poison): `first` issues its combine, then every other
/// rank combines (or, with `peers_issued`, waits again for the combine it issued), and the round
/// is held against the oracle. `outs` are the expert outputs of `dispatched`, in its order.
#[allow(clippy::too_many_arguments)]
pub(crate) fn combine_resumed<C: EpComm>(
    comms: &mut [C],
    cx: &Ctx,
    cfg: &EpConfig,
    inputs: &crate::scenario::RoundInputs,
    dispatched: Vec<ep_core::DispatchOutput>,
    outs: &[Array2<bf16>],
    first: usize,
    peers_issued: bool,
) -> CaseResult {
    let held = |r: usize| position_of(&dispatched, r).expect("every rank held here dispatched");
    // Its thread below takes the combine up again.
    if let Some(c) = rank_mut(comms, first) {
        let i = held(first);
        let cin = inputs.combine_input(first, &outs[i], WeightKind::F32);
        drop(c.host_combine_async(&dispatched[i], &cin).map_err(err)?);
    }
    cx.barrier("the rejecting rank combined again")?;
    let combined = ep_core::on_every_rank(comms, |c| {
        let r = c.rank();
        let pending = if r != first && !peers_issued {
            let i = held(r);
            c.host_combine_async(
                &dispatched[i],
                &inputs.combine_input(r, &outs[i], WeightKind::F32),
            )?
        } else {
            c.pending_combine()?
        };
        c.host_combine_wait(pending)
    });
    let rounds = super::rank_rounds(dispatched, combined)?;
    crate::round::check_against_oracle(
        cfg,
        inputs,
        &RoundOptions::new(Calls::Fused, WeightKind::F32),
        &rounds,
    )
}

/// Each rank's call, by rank, with the time it took.
type TimedCalls = Vec<(usize, (Result<(), EpError>, Duration))>;

/// A call's result with the time it took, error or not.
fn timed(call: impl FnOnce() -> Result<(), EpError>) -> (Result<(), EpError>, Duration) {
    let start = Instant::now();
    let res = call();
    (res, start.elapsed())
}

/// Every rank's call of a round in which rank `bad` alone rejected its input: every call returned
/// within a second; rank `bad`'s own error is what `own` accepts; every other rank's names rank
/// `bad`, the phase and the reason.
fn lone_rejection(
    results: TimedCalls,
    bad: usize,
    phase: ep_core::Phase,
    reason: RejectReason,
    own: impl Fn(Result<(), EpError>) -> CaseResult,
) -> CaseResult {
    for (r, (res, t)) in results {
        within_a_second(r, t)?;
        if r == bad {
            own(res)?;
        } else {
            expect_peer_rejected(r, &res.map(|()| t), bad, phase, reason)?;
        }
    }
    Ok(())
}

/// What a peer of the rejecting rank must see: its wait returned within a second (the deadline is
/// 10 s), with the rejecting rank, the phase and the reason named.
fn expect_peer_rejected(
    rank: usize,
    res: &Result<Duration, EpError>,
    bad: usize,
    phase: ep_core::Phase,
    reason: RejectReason,
) -> CaseResult {
    match res {
        Err(EpError::PeerRejected {
            rank: r,
            peer,
            phase: p,
            reason: why,
        }) if (*r, *peer, *p, *why) == (rank, bad, phase, reason) => Ok(()),
        Err(e) => Err(format!("rank {rank}: wrong error: {e}")),
        Ok(t) => Err(format!(
            "rank {rank}: {phase} succeeded after {t:?} though rank {bad} rejected its input"
        )),
    }?;
    Ok(())
}

fn within_a_second(rank: usize, t: Duration) -> CaseResult {
    if t > Duration::from_secs(1) {
        return Err(format!(
            "rank {rank} took {t:?} to learn that a peer rejected its input"
        ));
    }
    Ok(())
}

/// Rank 1 of a world gets an expert id of 999 while every other rank dispatches good input at
/// the same time: rank 1 returns its own typed error, and every other rank's dispatch returns
/// within a second (not at the 10 s deadline) naming rank 1 and the reason. Then rank 1 dispatches
/// good input, the others wait again, and the round completes exactly; so does the next one.
pub fn peer_rejects_dispatch<B: EpBackend>(b: &B, cx: &Ctx) -> CaseResult {
    let cfg = small_config().with_timeout(Duration::from_secs(10));
    assert!(cfg.n_ranks() > 2, "needs peers on both nodes");
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    let opts = RoundOptions::new(Calls::Fused, WeightKind::F32);
    run_and_check(&mut comms, &good_inputs(&cfg, 11), &opts)?;
    let inputs = good_inputs(&cfg, 12);
    let mut bad = inputs.clone();
    bad.topk_ids[1][[0, 1]] = 999;
    // Every rank's clock starts together, in whichever process it is.
    cx.barrier("ready for the rejected dispatch")?;
    let results = ep_core::on_every_rank(&mut comms, |c| {
        let r = c.rank();
        let res = timed(|| {
            if r == 1 {
                c.host_dispatch_async(&bad.dispatch_input(r)).map(drop)
            } else {
                c.host_dispatch(&inputs.dispatch_input(r)).map(|_| ())
            }
        });
        (r, res)
    });
    lone_rejection(
        results,
        1,
        ep_core::Phase::Dispatch,
        RejectReason::ExpertIdOutOfRange,
        |own| match own {
            Err(EpError::ExpertIdOutOfRange {
                rank: 1,
                token: 0,
                slot: 1,
                id: 999,
                ..
            }) => Ok(()),
            other => Err(format!("rank 1: {other:?}")),
        },
    )?;
    // The peers may ask again before rank 1 has sent: the same answer, at once.
    if let Some(c) = rank_mut(&mut comms, 0) {
        let start = Instant::now();
        // The wait met the rejection; the dispatch is still in flight, and waiting again needs it.
        let again = c
            .pending_dispatch()
            .and_then(|pending| c.host_dispatch_wait(pending))
            .map(|_| start.elapsed());
        expect_peer_rejected(
            0,
            &again,
            1,
            ep_core::Phase::Dispatch,
            RejectReason::ExpertIdOutOfRange,
        )?;
        within_a_second(0, start.elapsed())?;
    }
    cx.barrier("rank 0 asked again")?;
    // Rank 1 sends good input; the others take up their waits.
    if let Some(c) = rank_mut(&mut comms, 1) {
        drop(
            c.host_dispatch_async(&inputs.dispatch_input(1))
                .map_err(err)?,
        );
    }
    cx.barrier("rank 1 dispatched again")?;
    finish_round(&mut comms, &cfg, &inputs, |c| c.pending_dispatch())?;
    run_and_check(&mut comms, &good_inputs(&cfg, 13), &opts).map(|_| ())
}

/// After a good dispatch, rank 2 hands combine an `expert_out` with a row too many while the
/// others combine: rank 2 gets its shape error, every other rank's combine returns within a
/// second naming rank 2; rank 2 then combines the right rows, the others wait again, and the round
/// completes exactly; so does the next one.
pub fn peer_rejects_combine<B: EpBackend>(b: &B, cx: &Ctx) -> CaseResult {
    let cfg = small_config().with_timeout(Duration::from_secs(10));
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    let inputs = good_inputs(&cfg, 14);
    let dispatched = super::dispatch_all(&mut comms, &inputs)?;
    let outs: Vec<_> = dispatched
        .iter()
        .map(crate::scenario::toy_experts)
        .collect();
    cx.barrier("ready for the rejected combine")?;
    let results = ep_core::on_every_rank(&mut comms, |c| {
        let r = c.rank();
        let i = position_of(&dispatched, r).expect("every rank held here dispatched");
        let too_many = Array2::<bf16>::zeros((dispatched[i].rows() + 1, cfg.hidden));
        let res = timed(|| {
            if r == 2 {
                c.host_combine_async(
                    &dispatched[i],
                    &inputs.combine_input(r, &too_many, WeightKind::F32),
                )
                .map(drop)
            } else {
                c.host_combine(
                    &dispatched[i],
                    &inputs.combine_input(r, &outs[i], WeightKind::F32),
                )
                .map(|_| ())
            }
        });
        (r, res)
    });
    lone_rejection(
        results,
        2,
        ep_core::Phase::Combine,
        RejectReason::Shape,
        |own| match own {
            Err(EpError::Shape {
                rank: 2,
                what: "expert_out",
                ..
            }) => Ok(()),
            other => Err(format!("rank 2: {other:?}")),
        },
    )?;
    // Rank 2's good combine must not replace the poison before every peer has met it.
    cx.barrier("every rank met the rejection")?;
    combine_resumed(&mut comms, cx, &cfg, &inputs, dispatched, &outs, 2, true)?;
    let opts = RoundOptions::new(Calls::Split, WeightKind::F32);
    run_and_check(&mut comms, &good_inputs(&cfg, 15), &opts).map(|_| ())
}

/// Router weights with a row too many are a `Shape` error on `router weights` in combine.
pub fn weights_wrong_shape<B: EpBackend>(b: &B, cx: &Ctx) -> CaseResult {
    rejected_combine(
        b,
        cx,
        |c, d| {
            let out = Array2::<bf16>::zeros((d.rows(), c.config().hidden));
            let w = Array2::<f32>::zeros((d.rows() + 1, c.config().top_k));
            let cin = CombineInput::weighted(out.view(), RouterWeights::F32(w.view()));
            c.host_combine_async(d, &cin)
        },
        |e| {
            matches!(
                e,
                EpError::Shape {
                    what: "router weights",
                    ..
                }
            )
        },
    )
}

/// `expert_out` with a row more than the dispatch delivered is a `Shape` error on `expert_out`.
pub fn expert_out_wrong_rows<B: EpBackend>(b: &B, cx: &Ctx) -> CaseResult {
    rejected_combine(
        b,
        cx,
        |c, d| {
            let out = Array2::<bf16>::zeros((d.rows() + 1, c.config().hidden));
            let cin = CombineInput::unreduced(out.view());
            c.host_combine(d, &cin).map(|_| ())
        },
        |e| {
            matches!(
                e,
                EpError::Shape {
                    what: "expert_out",
                    ..
                }
            )
        },
    )
}

/// Combine with a handle from a round that never happened is `StaleHandle` on rank 0.
pub fn stale_routing_handle<B: EpBackend>(b: &B, cx: &Ctx) -> CaseResult {
    rejected_combine(
        b,
        cx,
        |c, d| {
            let mut stale = d.clone();
            stale.handle.round += 1;
            let out = Array2::<bf16>::zeros((d.rows(), c.config().hidden));
            c.host_combine_async(&stale, &CombineInput::unreduced(out.view()))
        },
        |e| matches!(e, EpError::StaleHandle { rank: 0, .. }),
    )
}

/// SwiGLU takes only the latest dispatch's output: an earlier round's routing is refused.
pub fn stale_swiglu_routing<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let cfg = small_config();
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    let opts = RoundOptions::new(Calls::Fused, WeightKind::F32);
    let first = run_and_check(&mut comms, &good_inputs(&cfg, 7), &opts)?;
    run_and_check(&mut comms, &good_inputs(&cfg, 8), &opts)?;
    let (Some(old), Some(c)) = (first.iter().find(|g| g.rank == 0), rank_mut(&mut comms, 0)) else {
        return Ok(()); // rank 0 is another process's
    };
    let old = &old.dispatch;
    let x = Array2::<bf16>::zeros((old.rows(), 2 * cfg.hidden));
    match c.swiglu(old, x.view(), &ep_core::SwigluOptions::new(Format::Bf16)) {
        Err(EpError::StaleHandle { rank: 0, .. }) => Ok(()),
        Err(e) => Err(format!("wrong error: {e}")),
        Ok(_) => Err("SwiGLU on an earlier round's routing succeeded".into()),
    }
}

/// combine before any dispatch, and a wait with nothing in flight, are refused; a wait takes only
/// its own rank's pending phase (checked where one process holds ranks 0 and 1: a pending phase
/// never leaves its process, so across processes there is no other rank's to hand over).
pub fn calls_out_of_order<B: EpBackend>(b: &B, cx: &Ctx) -> CaseResult {
    let cfg = small_config();
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    super::rank0_writes_nothing(
        &mut comms,
        cx,
        "a refused call changed symmetric memory",
        refused_out_of_order,
    )?;
    // Rank 0 handed rank 1's pending dispatch: refused, nothing taken; rank 1 takes its
    // dispatch up again and the round completes.
    let inputs = good_inputs(&cfg, 9);
    let mut pending: Vec<_> = ep_core::on_every_rank(&mut comms, |c| {
        let r = c.rank();
        c.host_dispatch_async(&inputs.dispatch_input(r))
            .map(|p| (r, p))
    })
    .into_iter()
    .collect::<Result<_, _>>()
    .map_err(err)?;
    let rank1 = pending.iter().position(|(r, _)| *r == 1);
    if let (Some(i), Some(c)) = (rank1, rank_mut(&mut comms, 0)) {
        match c.host_dispatch_wait(pending.remove(i).1) {
            Err(EpError::StaleHandle { rank: 0, .. }) => {}
            Err(e) => return Err(format!("another rank's pending dispatch: wrong error: {e}")),
            Ok(_) => return Err("rank 0 waited with rank 1's pending dispatch".into()),
        }
    }
    drop(pending);
    finish_round(&mut comms, &cfg, &inputs, |c| c.pending_dispatch())?;
    run_and_check(
        &mut comms,
        &good_inputs(&cfg, 8),
        &RoundOptions::new(Calls::Fused, WeightKind::None),
    )
    .map(|_| ())
}

/// Rank 0 (`c`, nothing dispatched yet): combine, and taking a pending dispatch or combine, are
/// refused as out of order.
fn refused_out_of_order<C: EpComm>(c: &mut C) -> CaseResult {
    let handle = ep_core::RoutingHandle { rank: 0, round: 0 };
    let staging = c.staging().map_err(err)?;
    if !matches!(
        c.combine_async(&handle, &CombineArgs::unreduced(&staging.expert_out)),
        Err(EpError::OutOfOrder {
            call: "combine_async",
            ..
        })
    ) {
        return Err("combine without a dispatch was not refused".into());
    }
    if !matches!(
        c.pending_dispatch(),
        Err(EpError::OutOfOrder {
            call: "pending_dispatch",
            ..
        })
    ) {
        return Err("a pending dispatch with none in flight was given".into());
    }
    if !matches!(
        c.pending_combine(),
        Err(EpError::OutOfOrder {
            call: "pending_combine",
            ..
        })
    ) {
        return Err("a pending combine with none in flight was given".into());
    }
    Ok(())
}

/// Sizes no host or GPU can give are typed errors, and the process goes on: hidden 2^60 wraps a
/// usize (a config error naming `hidden`, at init); hidden 2^28 with 4096 tokens asks for
/// terabytes per buffer, which every size check lets through (32-bit kernel sizes included), so
/// the allocation itself must fail as `OutOfMemory` naming the bytes. A small world works after.
pub fn sizes_beyond_memory<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let wraps = EpConfig::new(1 << 60, 4, 16, 8, 2).with_nodes(2);
    match b.init_uniform(&wraps) {
        Err(EpError::Config(ConfigError::SizeOverflow {
            field: "hidden", ..
        })) => {}
        Err(e) => return Err(format!("hidden 2^60: wrong error: {e}")),
        Ok(_) => return Err("hidden 2^60: init succeeded".into()),
    }
    let huge = EpConfig::new(1 << 28, 4, 16, 4096, 2).with_nodes(2);
    match b.init_uniform(&huge) {
        Err(EpError::OutOfMemory { bytes, what }) if bytes >= 1 << 40 && !what.is_empty() => {}
        Err(e) => return Err(format!("hidden 2^28 x 4096 tokens: wrong error: {e}")),
        Ok(_) => return Err("hidden 2^28 x 4096 tokens: init succeeded".into()),
    }
    let cfg = small_config();
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    run_and_check(
        &mut comms,
        &good_inputs(&cfg, 16),
        &RoundOptions::new(Calls::Fused, WeightKind::F32),
    )
    .map(|_| ())
}
