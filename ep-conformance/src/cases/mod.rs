//! The conformance cases, each generic over the backend. A case returns `Err(description)` on the
//! first thing that breaks the contract.
//!
//! - this module: fixtures in every format and mode, and the helpers cases share;
//! - `rounds`: exact round trips and 1,000 consecutive rounds;
//! - `bad_input`: typed errors with nothing written; `timeouts`: ranks that never signal;
//! - `formats`: non-finite inputs; `modes`: shared expert, skip_a2a, epilogues, SwiGLU;
//! - `rules`: the contract's bit-level rules checked against the bits it names.
//!
//! A case runs the ranks its `init` returns: every rank of the world in one process, or, with one
//! process per rank ([`crate::per_rank`]), those this process holds (possibly none). So a case
//! finds a rank's results by its rank, never by position; a call one rank must make before
//! another's is followed by [`Ctx::barrier`]; and a count over the whole world is
//! [`Ctx::total`]. In one process both are immediate.

mod bad_input;
mod formats;
mod modes;
mod rounds;
mod rules;
mod timeouts;

pub use bad_input::*;
pub use formats::*;
pub use modes::*;
pub use rounds::*;
pub use rules::*;
pub use timeouts::*;

use ep_core::{EpBackend, EpComm, EpConfig, Format, HostIo};

use crate::fixture::Fixture;
use crate::per_rank::Processes;
use crate::rng::Rng;
use crate::round::{run_and_check, Calls, RankRound, RoundOptions};
use crate::routing::RoutingSpec;
use crate::scenario::{RoundInputs, WeightKind};
use crate::snapshot::{self, SnapshotMode};

/// What a case needs besides the backend.
#[derive(Clone, Copy, Debug)]
pub struct Ctx<'a> {
    /// How fixture cases check their routing snapshots.
    pub snapshots: SnapshotMode,
    /// The world's processes when each runs its own ranks; `None` when every rank of a case's
    /// world is in this process.
    pub processes: Option<&'a Processes>,
    /// The fixtures' worlds split into this many nodes (their ranks divided evenly), instead of
    /// the nodes each fixture names: a launch's processes then form such a world's nodes, and
    /// the traffic between them takes the backend's path between nodes.
    pub fixture_nodes: Option<usize>,
}

impl Ctx<'static> {
    /// Every rank in this process.
    pub fn in_process(snapshots: SnapshotMode) -> Self {
        Ctx {
            snapshots,
            processes: None,
            fixture_nodes: None,
        }
    }
}

impl Ctx<'_> {
    /// Returns once every process has reached this point (`what` names it): where a rank's
    /// call must come before another rank's, which may be in another process.
    pub fn barrier(&self, what: &str) -> CaseResult {
        self.processes.map_or(Ok(()), |p| p.barrier(what))
    }

    /// `n` summed over the world's processes (`what` names the count): for the checks that a
    /// case has teeth, which hold for the world, not for each rank.
    pub fn total(&self, what: &str, n: usize) -> Result<usize, String> {
        match self.processes {
            None => Ok(n),
            Some(p) => p.total(what, n as u64).map(|t| t as usize),
        }
    }
}

/// What a case returns: `Err` with a description of the first thing that breaks the contract.
pub type CaseResult = Result<(), String>;

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// The four ways each fixture is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FixtureMode {
    /// Fused calls, f32 router weights.
    FusedWeighted,
    /// Fused calls, no router weights.
    FusedUnreduced,
    /// Split calls, bf16 router weights.
    SplitWeighted,
    /// Split calls, no router weights.
    SplitUnreduced,
}

impl FixtureMode {
    /// Every mode, in the order cases are listed.
    pub const ALL: [FixtureMode; 4] = [
        FixtureMode::FusedWeighted,
        FixtureMode::FusedUnreduced,
        FixtureMode::SplitWeighted,
        FixtureMode::SplitUnreduced,
    ];

    /// The mode's part of a case name (`fused_weighted`, ...).
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
    let mut cfg = fx.config(format);
    if let Some(m) = cx
        .fixture_nodes
        .filter(|&m| cfg.n_ranks().is_multiple_of(m))
    {
        cfg.n_gpus_per_node = cfg.n_ranks() / m;
        cfg.n_nodes = m;
    }
    let inputs = fx.inputs();
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    let got = run_and_check(&mut comms, &inputs, &mode.options())?;
    if !got.iter().any(|g| g.rank == 0) {
        // The process holding rank 0 checks the world's routing.
        return Ok(());
    }
    let outputs = world_routing(&cfg, &inputs, got)?;
    snapshot::check(cx.snapshots, name, &snapshot::routing_text(&outputs))
}

/// Every rank's dispatch output: the ranks run here as they ran, the others (held by other
/// processes, and already held against the oracle there) as the oracle gives them.
fn world_routing(
    cfg: &EpConfig,
    inputs: &RoundInputs,
    got: Vec<RankRound>,
) -> Result<Vec<ep_core::DispatchOutput>, String> {
    if got.len() == cfg.n_ranks() {
        return Ok(got.into_iter().map(|r| r.dispatch).collect());
    }
    let mut all = ep_core::oracle::dispatch(cfg, &inputs.dispatch_inputs()).map_err(err)?;
    for g in got {
        all[g.rank] = g.dispatch;
    }
    Ok(all)
}

/// A fresh world for `cfg`, one fused round with f32 weights, held against the oracle: the round
/// of every rank this process holds.
pub(crate) fn fused_round<B: EpBackend>(
    b: &B,
    cfg: &EpConfig,
    inputs: &RoundInputs,
) -> Result<Vec<crate::round::RankRound>, String> {
    let mut comms = b.init_uniform(cfg).map_err(err)?;
    run_and_check(
        &mut comms,
        inputs,
        &RoundOptions::new(Calls::Fused, WeightKind::F32),
    )
}

/// Each rank's dispatch output and combine result as a round (untimed), or the first combine
/// error.
pub(crate) fn rank_rounds(
    dispatched: Vec<ep_core::DispatchOutput>,
    combined: Vec<Result<ep_core::CombineOutput, ep_core::EpError>>,
) -> Result<Vec<crate::round::RankRound>, String> {
    dispatched
        .into_iter()
        .zip(combined)
        .map(|(dispatch, combine)| {
            Ok(crate::round::RankRound {
                rank: dispatch.handle.rank,
                dispatch,
                combine: combine.map_err(err)?,
                dispatch_time: std::time::Duration::ZERO,
                combine_time: std::time::Duration::ZERO,
            })
        })
        .collect()
}

pub(crate) fn small_config() -> EpConfig {
    EpConfig::new(32, 4, 16, 8, 2).with_nodes(2)
}

pub(crate) fn good_inputs(cfg: &EpConfig, seed: u64) -> RoundInputs {
    let tokens = vec![cfg.max_tokens_per_rank; cfg.n_ranks()];
    routed_inputs(cfg, &RoutingSpec::uniform(), &tokens, seed, seed)
}

/// Inputs with `tokens[r]` tokens on rank r, routed by `spec` from `routing_seed`, their values
/// from `value_seed`.
pub(crate) fn routed_inputs(
    cfg: &EpConfig,
    spec: &RoutingSpec,
    tokens: &[usize],
    routing_seed: u64,
    value_seed: u64,
) -> RoundInputs {
    let mut rng = Rng::new(routing_seed);
    let ids = tokens
        .iter()
        .map(|&t| spec.generate(&mut rng, t, cfg.top_k, cfg.n_experts, cfg.n_ranks()))
        .collect();
    RoundInputs::with_random_values(cfg.hidden, ids, value_seed)
}

/// Rank 0's `call` must fail with an error `expect` accepts, and leave every rank's symmetric
/// memory as it was (a peer's poisoned count reads as the sentinel it replaced).
pub(crate) fn refused_on_rank0<C: EpComm, T>(
    comms: &mut [C],
    cx: &Ctx,
    what: &str,
    expect: impl Fn(&ep_core::EpError) -> bool,
    call: impl FnOnce(&mut C) -> Result<T, ep_core::EpError>,
) -> CaseResult {
    let changed = format!("the rejected {what} changed symmetric memory");
    rank0_writes_nothing(comms, cx, &changed, |c| match call(c) {
        Ok(_) => Err(format!("the bad {what} succeeded")),
        Err(e) if expect(&e) => Ok(()),
        Err(e) => Err(format!("{what}: wrong error: {e}")),
    })
}

/// Runs `calls` on rank 0 (in the process that holds it) and requires that no rank's symmetric
/// memory changed (`changed` says so otherwise). Each process digests its ranks before and after,
/// the calls between two barriers, and a third barrier keeps every rank's next call (which writes
/// into its peers' memory) until every process has digested.
pub(crate) fn rank0_writes_nothing<C: EpComm>(
    comms: &mut [C],
    cx: &Ctx,
    changed: &str,
    calls: impl FnOnce(&mut C) -> CaseResult,
) -> CaseResult {
    let before = digests(comms)?;
    cx.barrier("memory digested before rank 0's calls")?;
    if let Some(c) = rank_mut(comms, 0) {
        calls(c)?;
    }
    cx.barrier("rank 0's calls made")?;
    let after = digests(comms)?;
    cx.barrier("memory digested after rank 0's calls")?;
    if after != before {
        return Err(changed.into());
    }
    Ok(())
}

/// This process's communicator of rank `r`, if it holds that rank.
pub(crate) fn rank_mut<C: EpComm>(comms: &mut [C], r: usize) -> Option<&mut C> {
    comms.iter_mut().find(|c| c.rank() == r)
}

/// Where rank `r`'s dispatch output is among this process's (which come in the order of its
/// communicators); `None` when this process does not hold rank `r`.
pub(crate) fn position_of(dispatched: &[ep_core::DispatchOutput], r: usize) -> Option<usize> {
    dispatched.iter().position(|d| d.handle.rank == r)
}

pub(crate) fn digests<C: EpComm>(comms: &[C]) -> Result<Vec<u64>, String> {
    comms
        .iter()
        .map(|c| c.memory_digest().map_err(err))
        .collect()
}

/// Dispatch on every rank this process holds (each on its thread) with `inputs`; their outputs,
/// in the order of the communicators, or the first error.
pub(crate) fn dispatch_all<C: EpComm>(
    comms: &mut [C],
    inputs: &RoundInputs,
) -> Result<Vec<ep_core::DispatchOutput>, String> {
    ep_core::on_every_rank(comms, |c| c.host_dispatch(&inputs.dispatch_input(c.rank())))
        .into_iter()
        .collect::<Result<_, _>>()
        .map_err(err)
}

/// Completes a round whose dispatch ran separately: combine `outs` (one per dispatch output, in
/// the same order) with f32 weights on every rank held here, then hold dispatch and combine
/// against the oracle.
pub(crate) fn combine_all_and_check<C: EpComm>(
    comms: &mut [C],
    cfg: &EpConfig,
    inputs: &RoundInputs,
    dispatched: Vec<ep_core::DispatchOutput>,
    outs: &[ndarray::Array2<ep_core::bf16>],
) -> CaseResult {
    let combined = ep_core::on_every_rank(comms, |c| {
        let r = c.rank();
        let i = position_of(&dispatched, r).expect("every rank held here dispatched");
        c.host_combine(
            &dispatched[i],
            &inputs.combine_input(r, &outs[i], WeightKind::F32),
        )
    });
    let rounds = rank_rounds(dispatched, combined)?;
    crate::round::check_against_oracle(
        cfg,
        inputs,
        &RoundOptions::new(Calls::Fused, WeightKind::F32),
        &rounds,
    )
}
