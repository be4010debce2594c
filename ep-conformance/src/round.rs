//! Running one round on a backend (one thread per rank) and holding it against the oracle.
//! The ranks run are the communicators given: every rank of the world in one process, or the
//! ranks this process holds when each process runs its own (`crate::per_rank`); each rank's
//! outputs are checked against the whole world's oracle by its rank, not its position.

use std::time::{Duration, Instant};

use ep_core::{
    bf16, on_every_rank, oracle, CombineInput, CombineOutput, DispatchOutput, EpComm, EpConfig,
    EpError, Epilogue, HostIo,
};
use ndarray::Array2;

use crate::barrier::RankBarrier;
use crate::scenario::{toy_experts, RoundInputs, WeightKind};

/// Fused calls (`dispatch`, `combine`) or the split `*_async` / `*_wait` pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Calls {
    /// `dispatch` and `combine`.
    Fused,
    /// `dispatch_async` + `dispatch_wait`, then `combine_async` + `combine_wait`.
    Split,
}

/// How a round is driven: which calls, which router weights, which experts and epilogues.
#[derive(Clone, Debug)]
pub struct RoundOptions {
    /// Fused or split calls.
    pub calls: Calls,
    /// The router weights combine gets (none gives the unreduced output).
    pub weights: WeightKind,
    /// The experts between dispatch and combine.
    pub experts: fn(&DispatchOutput) -> Array2<bf16>,
    /// Empty, or one combine epilogue per rank.
    pub epilogues: Vec<Epilogue>,
}

impl RoundOptions {
    /// `calls` with `weights`, the toy experts ([`toy_experts`]) and no epilogue.
    pub fn new(calls: Calls, weights: WeightKind) -> Self {
        RoundOptions {
            calls,
            weights,
            experts: toy_experts,
            epilogues: Vec::new(),
        }
    }

    /// One combine epilogue per rank, in rank order.
    pub fn with_epilogues(mut self, epilogues: Vec<Epilogue>) -> Self {
        self.epilogues = epilogues;
        self
    }

    fn combine_input<'a>(
        &'a self,
        inputs: &'a RoundInputs,
        r: usize,
        out: &'a Array2<bf16>,
    ) -> CombineInput<'a> {
        let mut cin = inputs.combine_input(r, out, self.weights);
        cin.epilogue = self.epilogues.get(r);
        cin
    }
}

/// What one rank produced in a round, with the wall time of each phase on that rank.
#[derive(Clone, Debug)]
pub struct RankRound {
    /// The rank it ran on.
    pub rank: usize,
    /// The rank's dispatch output.
    pub dispatch: DispatchOutput,
    /// The rank's combine output.
    pub combine: CombineOutput,
    /// From leaving the barrier to the dispatch output in hand, on this rank.
    pub dispatch_time: Duration,
    /// From leaving the barrier to the combine output in hand, on this rank.
    pub combine_time: Duration,
}

/// Runs one round on every rank, each on its own thread. Returns each rank's result. Ranks meet
/// at a barrier before each phase, so a phase's time is the phase, not a wait for a rank that is
/// still computing its experts. A rank thread that panics releases the others from the barrier
/// (they return an error naming it) and its panic is passed on, so a broken case fails, never
/// hangs.
pub fn run_round<C: EpComm>(
    comms: &mut [C],
    inputs: &RoundInputs,
    opts: &RoundOptions,
) -> Vec<Result<RankRound, EpError>> {
    let barrier = RankBarrier::new(comms.len());
    let released = |r: usize, by: usize| {
        EpError::Backend(format!(
            "rank {r}: released from the round's barrier because rank {by}'s thread panicked"
        ))
    };
    on_every_rank(comms, |c| {
        let r = c.rank();
        let _guard = barrier.guard(r);
        let input = inputs.dispatch_input(r);
        barrier.wait().map_err(|by| released(r, by))?;
        let t0 = Instant::now();
        let dispatch = match opts.calls {
            Calls::Fused => c.host_dispatch(&input),
            Calls::Split => c
                .host_dispatch_async(&input)
                .and_then(|pending| c.host_dispatch_wait(pending)),
        };
        let dispatch_time = t0.elapsed();
        let expert_out = dispatch.as_ref().ok().map(opts.experts);
        // Every rank reaches this barrier, failed or not, so none waits forever.
        barrier.wait().map_err(|by| released(r, by))?;
        let (dispatch, expert_out) = (dispatch?, expert_out.expect("dispatch succeeded"));
        let cin = opts.combine_input(inputs, r, &expert_out);
        let t1 = Instant::now();
        let combine = match opts.calls {
            Calls::Fused => c.host_combine(&dispatch, &cin)?,
            Calls::Split => {
                let pending = c.host_combine_async(&dispatch, &cin)?;
                c.host_combine_wait(pending)?
            }
        };
        Ok(RankRound {
            rank: r,
            dispatch,
            combine,
            dispatch_time,
            combine_time: t1.elapsed(),
        })
    })
}

/// Round `round` of a soak: fresh random token counts (0 to the maximum) and routing, cycling
/// through skewed and uniform routing, masked-slot rates, fused and split calls, and f32, bf16
/// and no router weights, so consecutive rounds exercise every combination.
pub fn random_round(
    cfg: &EpConfig,
    rng: &mut crate::rng::Rng,
    round: usize,
) -> (RoundInputs, RoundOptions) {
    let spec = crate::routing::RoutingSpec {
        skew: round.is_multiple_of(3).then_some((3, 0.7)),
        masked: [0.0, 0.1, 0.5][round % 3],
        duplicates: 0.1,
        ..Default::default()
    };
    let ids = (0..cfg.n_ranks())
        .map(|_| {
            let t = rng.below(cfg.max_tokens_per_rank + 1);
            spec.generate(rng, t, cfg.top_k, cfg.n_experts, cfg.n_ranks())
        })
        .collect();
    let inputs = RoundInputs::with_random_values(cfg.hidden, ids, rng.next_u64());
    let calls = if round.is_multiple_of(2) {
        Calls::Fused
    } else {
        Calls::Split
    };
    let weights = [WeightKind::F32, WeightKind::None, WeightKind::Bf16][round % 3];
    (inputs, RoundOptions::new(calls, weights))
}

/// Every rank's result, or one message listing every rank that failed.
pub fn all_ok(results: Vec<Result<RankRound, EpError>>) -> Result<Vec<RankRound>, String> {
    let errors: Vec<String> = results
        .iter()
        .filter_map(|r| r.as_ref().err().map(|e| e.to_string()))
        .collect();
    if errors.is_empty() {
        Ok(results.into_iter().map(|r| r.unwrap()).collect())
    } else {
        Err(errors.join("\n"))
    }
}

/// Compares a backend's round with the oracle, byte for byte: each rank of `got` (every rank of
/// the world, or some of them) with the oracle's output for that rank. The oracle's combine runs
/// on the same experts applied to the oracle's own dispatch output.
pub fn check_against_oracle(
    cfg: &EpConfig,
    inputs: &RoundInputs,
    opts: &RoundOptions,
    got: &[RankRound],
) -> Result<(), String> {
    if got.is_empty() {
        return Ok(());
    }
    let dispatch_inputs = inputs.dispatch_inputs();
    let want = oracle::dispatch(cfg, &dispatch_inputs).map_err(|e| format!("oracle: {e}"))?;
    for g in got {
        let w = want
            .get(g.rank)
            .ok_or(format!("no rank {} in the oracle's world", g.rank))?;
        if let Some(d) = g.dispatch.bit_diff(w) {
            return Err(format!(
                "rank {} dispatch differs from the oracle (backend vs oracle): {d}",
                g.rank
            ));
        }
    }
    let expert_out: Vec<_> = want.iter().map(opts.experts).collect();
    let combine_inputs: Vec<_> = (0..inputs.n_ranks())
        .map(|r| opts.combine_input(inputs, r, &expert_out[r]))
        .collect();
    let want = oracle::combine(cfg, &dispatch_inputs, &want, &combine_inputs)
        .map_err(|e| format!("oracle: {e}"))?;
    for g in got {
        if let Some(d) = g.combine.bit_diff(&want[g.rank]) {
            return Err(format!(
                "rank {} combine differs from the oracle (backend vs oracle): {d}",
                g.rank
            ));
        }
    }
    Ok(())
}

/// [`run_round`], then [`check_against_oracle`]. With no communicators (this process holds none
/// of the world's ranks) there is nothing to run.
pub fn run_and_check<C: EpComm>(
    comms: &mut [C],
    inputs: &RoundInputs,
    opts: &RoundOptions,
) -> Result<Vec<RankRound>, String> {
    let Some(first) = comms.first() else {
        return Ok(Vec::new());
    };
    let cfg = first.config().clone();
    let got = all_ok(run_round(comms, inputs, opts))?;
    check_against_oracle(&cfg, inputs, opts, &got)?;
    Ok(got)
}
