//! Bad input: each call must return its typed error, write nothing, and leave the world usable.

use ep_core::{
    bf16, CombineInput, ConfigError, DispatchInput, EpBackend, EpComm, EpConfig, EpError, Format,
    RouterWeights, TokenFormat,
};
use ndarray::Array2;

use super::*;
use crate::round::{run_and_check, Calls, RoundOptions};
use crate::scenario::WeightKind;

/// Runs a good round, lets `bad` make a call on rank 0 that must fail as `expect` says, checks
/// that no rank's symmetric memory changed, then runs another good round.
fn rejected_dispatch<B: EpBackend>(
    b: &B,
    cfg: &EpConfig,
    bad: impl FnOnce(&mut B::Comm) -> Result<(), EpError>,
    expect: impl Fn(&EpError) -> bool,
) -> CaseResult {
    let mut comms = b.init_uniform(cfg).map_err(err)?;
    let opts = RoundOptions::new(Calls::Fused, WeightKind::F32);
    run_and_check(&mut comms, &good_inputs(cfg, 1), &opts)?;
    let before = digests(&comms)?;
    match bad(&mut comms[0]) {
        Ok(()) => return Err("the bad call succeeded".into()),
        Err(e) if expect(&e) => {}
        Err(e) => return Err(format!("wrong error: {e}")),
    }
    if digests(&comms)? != before {
        return Err("the rejected call changed symmetric memory".into());
    }
    run_and_check(&mut comms, &good_inputs(cfg, 2), &opts).map(|_| ())
}

pub fn expert_id_too_large<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let cfg = small_config();
    let mut inputs = good_inputs(&cfg, 3);
    let last = inputs.topk_ids[0].nrows() - 1;
    inputs.topk_ids[0][[last, 2]] = cfg.n_experts as i32;
    rejected_dispatch(
        b,
        &cfg,
        |c| c.dispatch_async(&inputs.dispatch_input(0)),
        |e| {
            matches!(e, EpError::ExpertIdOutOfRange { rank: 0, token, slot: 2, id, .. }
                if *token == last && *id == 16)
        },
    )
}

pub fn expert_id_below_minus_one<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let cfg = small_config();
    let mut inputs = good_inputs(&cfg, 4);
    inputs.topk_ids[0][[3, 0]] = -2;
    rejected_dispatch(
        b,
        &cfg,
        |c| c.dispatch(&inputs.dispatch_input(0)).map(|_| ()),
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

pub fn too_many_tokens<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let cfg = small_config();
    let t = cfg.max_tokens_per_rank + 1;
    let tokens = Array2::<bf16>::zeros((t, cfg.hidden));
    let ids = Array2::<i32>::zeros((t, cfg.top_k));
    rejected_dispatch(
        b,
        &cfg,
        |c| c.dispatch_async(&DispatchInput::new(tokens.view(), ids.view())),
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

pub fn tokens_wrong_shape<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let cfg = small_config();
    let tokens = Array2::<bf16>::zeros((4, cfg.hidden + 8));
    let ids = Array2::<i32>::zeros((4, cfg.top_k));
    rejected_dispatch(
        b,
        &cfg,
        |c| c.dispatch_async(&DispatchInput::new(tokens.view(), ids.view())),
        |e| matches!(e, EpError::Shape { what: "tokens", .. }),
    )
}

pub fn topk_ids_wrong_shape<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let cfg = small_config();
    let tokens = Array2::<bf16>::zeros((4, cfg.hidden));
    for ids in [
        Array2::<i32>::zeros((4, cfg.top_k + 1)),
        Array2::<i32>::zeros((3, cfg.top_k)),
    ] {
        rejected_dispatch(
            b,
            &cfg,
            |c| c.dispatch_async(&DispatchInput::new(tokens.view(), ids.view())),
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

/// After a good dispatch, rank 0 hands combine something bad; nothing is written, and the right
/// combine afterwards completes the round exactly.
fn rejected_combine<B: EpBackend>(
    b: &B,
    bad: impl Fn(&mut B::Comm, &ep_core::DispatchOutput) -> Result<(), EpError> + Sync,
    expect: impl Fn(&EpError) -> bool + Sync,
) -> CaseResult {
    let cfg = small_config();
    let inputs = good_inputs(&cfg, 6);
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    let dispatched = super::dispatch_all(&mut comms, &inputs)?;
    let before = digests(&comms)?;
    match bad(&mut comms[0], &dispatched[0]) {
        Ok(()) => return Err("the bad combine succeeded".into()),
        Err(e) if expect(&e) => {}
        Err(e) => return Err(format!("wrong error: {e}")),
    }
    if digests(&comms)? != before {
        return Err("the rejected combine changed symmetric memory".into());
    }
    let outs: Vec<_> = dispatched
        .iter()
        .map(crate::scenario::toy_experts)
        .collect();
    super::combine_all_and_check(&mut comms, &cfg, &inputs, dispatched, &outs)
}

pub fn weights_wrong_shape<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    rejected_combine(
        b,
        |c, d| {
            let out = Array2::<bf16>::zeros((d.rows(), c.config().hidden));
            let w = Array2::<f32>::zeros((d.rows() + 1, c.config().top_k));
            let cin = CombineInput::new(out.view()).weighted(RouterWeights::F32(w.view()));
            c.combine_async(&d.handle, &cin)
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

pub fn expert_out_wrong_rows<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    rejected_combine(
        b,
        |c, d| {
            let out = Array2::<bf16>::zeros((d.rows() + 1, c.config().hidden));
            let cin = CombineInput::new(out.view());
            c.combine(&d.handle, &cin).map(|_| ())
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

pub fn stale_routing_handle<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    rejected_combine(
        b,
        |c, d| {
            let mut stale = d.handle;
            stale.round += 1;
            let out = Array2::<bf16>::zeros((d.rows(), c.config().hidden));
            c.combine_async(&stale, &CombineInput::new(out.view()))
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
    let old = &first[0].dispatch;
    let x = Array2::<bf16>::zeros((old.rows(), 2 * cfg.hidden));
    match comms[0].swiglu(old, x.view(), &ep_core::SwigluOptions::new(Format::Bf16)) {
        Err(EpError::StaleHandle { rank: 0, .. }) => Ok(()),
        Err(e) => Err(format!("wrong error: {e}")),
        Ok(_) => Err("SwiGLU on an earlier round's routing succeeded".into()),
    }
}

/// combine before any dispatch, and dispatch_wait before dispatch_async, are refused.
pub fn calls_out_of_order<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let cfg = small_config();
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    let before = digests(&comms)?;
    let out = Array2::<bf16>::zeros((0, cfg.hidden));
    let handle = ep_core::RoutingHandle { rank: 0, round: 0 };
    let c = &mut comms[0];
    let cin = CombineInput::new(out.view());
    if !matches!(
        c.combine_async(&handle, &cin),
        Err(EpError::OutOfOrder {
            call: "combine_async",
            ..
        })
    ) {
        return Err("combine without a dispatch was not refused".into());
    }
    if !matches!(
        c.dispatch_wait(),
        Err(EpError::OutOfOrder {
            call: "dispatch_wait",
            ..
        })
    ) {
        return Err("dispatch_wait without dispatch_async was not refused".into());
    }
    if !matches!(
        c.combine_wait(),
        Err(EpError::OutOfOrder {
            call: "combine_wait",
            ..
        })
    ) {
        return Err("combine_wait without combine_async was not refused".into());
    }
    if digests(&comms)? != before {
        return Err("a refused call changed symmetric memory".into());
    }
    run_and_check(
        &mut comms,
        &good_inputs(&cfg, 8),
        &RoundOptions::new(Calls::Fused, WeightKind::None),
    )
    .map(|_| ())
}
