//! Whole rounds: exact round trips, and many consecutive rounds on one world.

use ep_core::{bf16, EpBackend, EpConfig};

use super::*;
use crate::rng::Rng;
use crate::round::{run_and_check, Calls, RoundOptions};
use crate::routing::RoutingSpec;
use crate::scenario::{identity_experts, WeightKind};

/// Identity experts and router weights that sum to exactly 1 over each token's live slots give
/// back every input token bit for bit (tokens with every slot masked come back as zeros).
pub fn round_trip_identity<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    for nodes in [1, 2] {
        let cfg = EpConfig::new(64, 6, 16, 24, 2).with_nodes(nodes);
        let spec = RoutingSpec {
            masked: 0.2,
            duplicates: 0.2,
            ..Default::default()
        };
        let tokens = vec![24; cfg.n_ranks()];
        let mut inputs = routed_inputs(&cfg, &spec, &tokens, 7 + nodes as u64, 99);
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
        let got = run_and_check(&mut comms, &inputs, &opts)?;
        for round in &got {
            let r = round.rank;
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
        let (inputs, opts) = crate::round::random_round(&cfg, &mut rng, round);
        run_and_check(&mut comms, &inputs, &opts).map_err(|e| format!("round {round}: {e}"))?;
    }
    Ok(())
}

/// Prefill-sized rounds, each bit-exact against the oracle: more tokens than one block of a
/// backend's slot assignment may take (ep-cuda's chunked assign, from 4,096 tokens or forced by
/// `EP_CUDA_CHUNKED_ASSIGN_MIN_TOKENS`, takes chunks of 128 tokens and lays out the chunks' starts
/// 32 chunks at a time: 4,133 tokens are 33 chunks, the last one partial), and more experts than
/// one pass over a chunk counts (2,048 columns), on one node and two, with skewed, masked and
/// duplicate routing and a rank with no tokens.
pub fn rounds_many_tokens<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let spec = RoutingSpec {
        skew: Some((3, 0.5)),
        masked: 0.1,
        duplicates: 0.1,
        ..Default::default()
    };
    // (experts, top_k, nodes, tokens per rank, calls)
    let rounds = [
        (64, 8, 1, [4133, 129], Calls::Fused),
        (2048, 8, 1, [200, 257], Calls::Split),
        (64, 6, 2, [300, 0], Calls::Fused),
    ];
    for (i, (experts, top_k, nodes, tokens, calls)) in rounds.into_iter().enumerate() {
        let max = tokens.into_iter().max().unwrap_or(0);
        // Two ranks: both on one node, or one on each of two.
        let cfg = EpConfig::new(128, top_k, experts, max, 2 / nodes).with_nodes(nodes);
        let inputs = routed_inputs(&cfg, &spec, &tokens, 41 + i as u64, 17 + i as u64);
        let mut comms = b.init_uniform(&cfg).map_err(err)?;
        let opts = RoundOptions::new(calls, WeightKind::F32);
        run_and_check(&mut comms, &inputs, &opts).map_err(|e| {
            format!("{experts} experts, top-{top_k}, {nodes} node(s), tokens {tokens:?}: {e}")
        })?;
    }
    Ok(())
}
