//! The conformance cases, each generic over the backend. A case returns `Err(description)` on the
//! first thing that breaks the contract.

use std::time::{Duration, Instant};

use ep_core::{
    bf16, on_every_rank, CombineInput, ConfigError, DispatchInput, EpBackend, EpComm, EpConfig,
    EpError, Format, RouterWeights, TokenFormat,
};
use ndarray::Array2;

use crate::fixture::Fixture;
use crate::rng::Rng;
use crate::round::{run_and_check, Calls, RoundOptions};
use crate::routing::RoutingSpec;
use crate::scenario::{identity_experts, RoundInputs, WeightKind};
use crate::snapshot::{self, SnapshotMode};

/// What a case needs besides the backend.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    pub snapshots: SnapshotMode,
}

pub type CaseResult = Result<(), String>;

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// The four ways each fixture is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FixtureMode {
    FusedWeighted,
    FusedUnreduced,
    SplitWeighted,
    SplitUnreduced,
}

impl FixtureMode {
    pub const ALL: [FixtureMode; 4] = [
        FixtureMode::FusedWeighted,
        FixtureMode::FusedUnreduced,
        FixtureMode::SplitWeighted,
        FixtureMode::SplitUnreduced,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FixtureMode::FusedWeighted => "fused_weighted",
            FixtureMode::FusedUnreduced => "fused_unreduced",
            FixtureMode::SplitWeighted => "split_weighted",
            FixtureMode::SplitUnreduced => "split_unreduced",
        }
    }

    /// Fused rounds take f32 weights and split rounds bf16 ones, so both weight types are covered.
    pub fn options(self) -> RoundOptions {
        match self {
            FixtureMode::FusedWeighted => RoundOptions::new(Calls::Fused, WeightKind::F32),
            FixtureMode::FusedUnreduced => RoundOptions::new(Calls::Fused, WeightKind::None),
            FixtureMode::SplitWeighted => RoundOptions::new(Calls::Split, WeightKind::Bf16),
            FixtureMode::SplitUnreduced => RoundOptions::new(Calls::Split, WeightKind::None),
        }
    }
}

/// A fixture's round in one format: bit-exact against the oracle, routing equal to the fixture's
/// snapshot (the same for every format: padding is not part of it).
pub fn fixture<B: EpBackend>(
    b: &B,
    cx: &Ctx,
    name: &str,
    format: Format,
    mode: FixtureMode,
) -> CaseResult {
    let fx = Fixture::load(name)?;
    let cfg = fx.config(format);
    let inputs = fx.inputs();
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    let got = run_and_check(&mut comms, &inputs, mode.options())?;
    let outputs: Vec<_> = got.into_iter().map(|r| r.dispatch).collect();
    snapshot::check(cx.snapshots, name, &snapshot::routing_text(&outputs))
}

/// Identity experts and router weights that sum to exactly 1 over each token's live slots give
/// back every input token bit for bit (tokens with every slot masked come back as zeros).
pub fn round_trip_identity<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    for nodes in [1, 2] {
        let cfg = EpConfig::new(64, 6, 16, 24, 2).with_nodes(nodes);
        let mut rng = Rng::new(7 + nodes as u64);
        let spec = RoutingSpec {
            masked: 0.2,
            duplicates: 0.2,
            ..Default::default()
        };
        let ids = (0..cfg.n_ranks())
            .map(|_| spec.generate(&mut rng, 24, cfg.top_k, cfg.n_experts, cfg.n_ranks()))
            .collect();
        let mut inputs = RoundInputs::with_random_values(cfg.hidden, ids, 99);
        // Dyadic weights 1/2, 1/4, ..., with the last live slot repeating the smallest: exact in
        // f32 for any bf16 value in the normal range.
        for (w, ids) in inputs.weights.iter_mut().zip(&inputs.topk_ids) {
            for t in 0..ids.nrows() {
                let live: Vec<usize> = (0..cfg.top_k).filter(|&k| ids[[t, k]] >= 0).collect();
                for (i, &k) in live.iter().enumerate() {
                    let p = (i + 1).min(live.len().saturating_sub(1).max(1)) as i32;
                    w[[t, k]] = if live.len() == 1 { 1.0 } else { 0.5f32.powi(p) };
                }
            }
        }
        let mut comms = b.init_uniform(&cfg).map_err(err)?;
        let opts = RoundOptions {
            experts: identity_experts,
            ..RoundOptions::new(Calls::Fused, WeightKind::F32)
        };
        let got = run_and_check(&mut comms, &inputs, opts)?;
        for (r, round) in got.iter().enumerate() {
            let out = round.combine.reduced().ok_or("expected a reduced output")?;
            for t in 0..inputs.tokens[r].nrows() {
                let any_live = inputs.topk_ids[r].row(t).iter().any(|&e| e >= 0);
                for (c, (o, x)) in out.row(t).iter().zip(inputs.tokens[r].row(t)).enumerate() {
                    let want = if any_live { x.to_bits() } else { 0 };
                    if o.to_bits() != want {
                        return Err(format!(
                            "{nodes} node(s): rank {r} token {t} column {c}: got {o} expected {}",
                            bf16::from_bits(want)
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// 1,000 consecutive rounds on one initialised world (two nodes, so both transports are used),
/// fresh random routing and token counts each round, every round bit-exact against the oracle.
pub fn rounds_1000<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let cfg = EpConfig::new(32, 4, 16, 16, 2).with_nodes(2);
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    let mut rng = Rng::new(2024);
    for round in 0..1000 {
        let spec = RoutingSpec {
            skew: (round % 3 == 0).then_some((3, 0.7)),
            masked: [0.0, 0.1, 0.5][round % 3],
            duplicates: 0.1,
            ..Default::default()
        };
        let ids = (0..cfg.n_ranks())
            .map(|_| {
                let t = rng.below(cfg.max_tokens_per_rank + 1);
                spec.generate(&mut rng, t, cfg.top_k, cfg.n_experts, cfg.n_ranks())
            })
            .collect();
        let inputs = RoundInputs::with_random_values(cfg.hidden, ids, round as u64);
        let calls = if round % 2 == 0 {
            Calls::Fused
        } else {
            Calls::Split
        };
        let weights = [WeightKind::F32, WeightKind::None, WeightKind::Bf16][round % 3];
        run_and_check(&mut comms, &inputs, RoundOptions::new(calls, weights))
            .map_err(|e| format!("round {round}: {e}"))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Bad input: each must return its typed error, write nothing, and leave the world usable.

fn small_config() -> EpConfig {
    EpConfig::new(32, 4, 16, 8, 2).with_nodes(2)
}

fn good_inputs(cfg: &EpConfig, seed: u64) -> RoundInputs {
    let mut rng = Rng::new(seed);
    let ids = (0..cfg.n_ranks())
        .map(|_| {
            RoutingSpec::uniform().generate(
                &mut rng,
                cfg.max_tokens_per_rank,
                cfg.top_k,
                cfg.n_experts,
                cfg.n_ranks(),
            )
        })
        .collect();
    RoundInputs::with_random_values(cfg.hidden, ids, seed)
}

fn digests<C: EpComm>(comms: &[C]) -> Result<Vec<u64>, String> {
    comms
        .iter()
        .map(|c| c.memory_digest().map_err(err))
        .collect()
}

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
    run_and_check(&mut comms, &good_inputs(cfg, 1), opts)?;
    let before = digests(&comms)?;
    match bad(&mut comms[0]) {
        Ok(()) => return Err("the bad call succeeded".into()),
        Err(e) if expect(&e) => {}
        Err(e) => return Err(format!("wrong error: {e}")),
    }
    if digests(&comms)? != before {
        return Err("the rejected call changed symmetric memory".into());
    }
    run_and_check(&mut comms, &good_inputs(cfg, 2), opts).map(|_| ())
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

/// NaN and infinities in token rows: identical on backend and oracle in every format, confined
/// to the blocks (quantized formats) or elements (BF16) that hold them, never touching other
/// tokens; the combine of an affected token carries them, the others stay finite.
pub fn nonfinite_inputs<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    for &format in Format::ALL {
        let cfg = EpConfig::new(256, 3, 8, 6, 2).with_format(format);
        let mut inputs = good_inputs(&cfg, 12);
        // Token 1 of rank 0: a NaN at column 5, an infinity at column 200.
        inputs.tokens[0][[1, 5]] = bf16::NAN;
        inputs.tokens[0][[1, 200]] = bf16::NEG_INFINITY;
        let mut comms = b.init_uniform(&cfg).map_err(err)?;
        let got = run_and_check(
            &mut comms,
            &inputs,
            RoundOptions::new(Calls::Fused, WeightKind::F32),
        )
        .map_err(|e| format!("{format}: {e}"))?;
        let block = format.block();
        for (r, round) in got.iter().enumerate() {
            let d = &round.dispatch;
            let x = d.decode_rows_with(crate::scenario::GLOBAL_INPUT_SCALE);
            for row in 0..d.rows() {
                let poisoned = d.source_rank(row) == Some(0) && d.src_info[[row, 0]] == 1;
                for (c, v) in x.row(row).iter().enumerate() {
                    let hit = poisoned
                        && if format == Format::Bf16 {
                            c == 5 || c == 200
                        } else {
                            c / block == 5 / block || c / block == 200 / block
                        };
                    if hit == v.is_finite() {
                        return Err(format!(
                            "{format}: rank {r} row {row} column {c} decoded to {v} (poisoned token: {poisoned})"
                        ));
                    }
                }
            }
            let out = round.combine.reduced().ok_or("reduced output expected")?;
            for t in 0..out.nrows() {
                let affected =
                    r == 0 && t == 1 && inputs.topk_ids[0].row(1).iter().any(|&e| e >= 0);
                let finite = out.row(t).iter().all(|v| v.is_finite());
                if finite == affected {
                    return Err(format!(
                        "{format}: rank {r} token {t} combined finite = {finite}"
                    ));
                }
            }
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
        RoundOptions::new(Calls::Split, WeightKind::F32),
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
    let dispatched = all_ok_plain(on_every_rank(&mut comms, |c| {
        c.dispatch(&inputs.dispatch_input(c.rank()))
    }))?;
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
    let combined = all_ok_plain(on_every_rank(&mut comms, |c| {
        let r = c.rank();
        let cin = inputs.combine_input(r, &outs[r], WeightKind::F32);
        c.combine(&dispatched[r].handle, &cin)
    }))?;
    let rounds: Vec<_> = dispatched
        .into_iter()
        .zip(combined)
        .map(|(d, c)| crate::round::RankRound {
            dispatch: d,
            combine: c,
            dispatch_time: Duration::ZERO,
            combine_time: Duration::ZERO,
        })
        .collect();
    crate::round::check_against_oracle(
        &cfg,
        &inputs,
        RoundOptions::new(Calls::Fused, WeightKind::F32),
        &rounds,
    )
}

fn all_ok_plain<T>(v: Vec<Result<T, EpError>>) -> Result<Vec<T>, String> {
    v.into_iter().map(|r| r.map_err(err)).collect()
}

pub fn weights_wrong_shape<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    rejected_combine(
        b,
        |c, d| {
            let out = Array2::<bf16>::zeros((d.rows(), c.config().hidden));
            let w = Array2::<f32>::zeros((d.rows() + 1, c.config().top_k));
            let cin = CombineInput {
                expert_out: out.view(),
                weights: Some(RouterWeights::F32(w.view())),
            };
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
            let cin = CombineInput {
                expert_out: out.view(),
                weights: None,
            };
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
            c.combine_async(
                &stale,
                &CombineInput {
                    expert_out: out.view(),
                    weights: None,
                },
            )
        },
        |e| matches!(e, EpError::StaleHandle { rank: 0, .. }),
    )
}

/// combine before any dispatch, and dispatch_wait before dispatch_async, are refused.
pub fn calls_out_of_order<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let cfg = small_config();
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    let before = digests(&comms)?;
    let out = Array2::<bf16>::zeros((0, cfg.hidden));
    let handle = ep_core::RoutingHandle { rank: 0, round: 0 };
    let c = &mut comms[0];
    let cin = CombineInput {
        expert_out: out.view(),
        weights: None,
    };
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
        RoundOptions::new(Calls::Fused, WeightKind::None),
    )
    .map(|_| ())
}

const SHORT_TIMEOUT: Duration = Duration::from_millis(300);
/// Generous slack over the deadline for a loaded 2-core CI machine.
const TIMEOUT_SLACK: Duration = Duration::from_secs(5);

/// Checks that every rank but `absent` failed with a timeout naming `absent`, within the
/// deadline, then that a fresh world works.
fn expect_timeouts<B: EpBackend>(
    b: &B,
    cfg: &EpConfig,
    absent: usize,
    results: Vec<Option<Result<Duration, EpError>>>,
) -> CaseResult {
    for (r, res) in results.into_iter().enumerate() {
        let Some(res) = res else { continue };
        match res {
            Err(e @ EpError::Timeout { .. }) => {
                if e.missing_ranks() != vec![absent] {
                    return Err(format!("rank {r}: the timeout names the wrong ranks: {e}"));
                }
            }
            Err(e) => return Err(format!("rank {r}: expected a timeout, got: {e}")),
            Ok(elapsed) => {
                return Err(format!(
                    "rank {r}: completed without rank {absent} ({elapsed:?})"
                ))
            }
        }
    }
    let mut comms = b.init_uniform(cfg).map_err(err)?;
    run_and_check(
        &mut comms,
        &good_inputs(cfg, 9),
        RoundOptions::new(Calls::Fused, WeightKind::F32),
    )
    .map(|_| ())
}

/// One rank never joins a dispatch: the others time out within the deadline, naming it.
pub fn rank_never_dispatches<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let cfg = small_config().with_timeout(SHORT_TIMEOUT);
    let inputs = good_inputs(&cfg, 10);
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    let absent = 1;
    let results = on_every_rank(&mut comms, |c| {
        if c.rank() == absent {
            return None;
        }
        let t0 = Instant::now();
        let r = c.dispatch(&inputs.dispatch_input(c.rank()));
        Some(r.map(|_| t0.elapsed()))
    });
    check_elapsed(&results)?;
    expect_timeouts(b, &cfg, absent, results)
}

/// One rank dispatches but never combines: ranks whose tokens it holds time out naming it.
pub fn rank_never_combines<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let cfg = small_config().with_timeout(SHORT_TIMEOUT);
    let inputs = good_inputs(&cfg, 11);
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    let absent = 3;
    let results = on_every_rank(&mut comms, |c| {
        let r = c.rank();
        let d = match c.dispatch(&inputs.dispatch_input(r)) {
            Ok(d) => d,
            Err(e) => return Some(Err(e)),
        };
        if r == absent {
            return None;
        }
        let out = crate::scenario::toy_experts(&d);
        let t0 = Instant::now();
        let cin = inputs.combine_input(r, &out, WeightKind::F32);
        Some(c.combine(&d.handle, &cin).map(|_| t0.elapsed()))
    });
    check_elapsed(&results)?;
    expect_timeouts(b, &cfg, absent, results)
}

fn check_elapsed(results: &[Option<Result<Duration, EpError>>]) -> CaseResult {
    for (r, res) in results.iter().enumerate() {
        if let Some(Err(EpError::Timeout { waited_ms, .. })) = res {
            let waited = Duration::from_millis(*waited_ms);
            if waited > SHORT_TIMEOUT + TIMEOUT_SLACK {
                return Err(format!("rank {r} waited {waited:?}, far past the deadline"));
            }
        }
    }
    Ok(())
}
