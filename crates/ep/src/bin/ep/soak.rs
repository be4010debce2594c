//! `ep soak`: consecutive rounds on one initialised world, fresh random routing and token counts
//! every round, each held against the oracle. Stops at the first mismatch.

use std::process::ExitCode;
use std::time::Instant;

use ep::conformance::rng::Rng;
use ep::conformance::round::{run_and_check, Calls, RoundOptions};
use ep::conformance::routing::RoutingSpec;
use ep::conformance::{RoundInputs, WeightKind};
use ep::{BackendKind, EpBackend, EpConfig, Format};

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, default_value = "sim")]
    backend: BackendKind,
    /// CUDA: ranks per GPU (default: spread over the visible GPUs).
    #[arg(long)]
    ranks_per_gpu: Option<usize>,
    #[arg(long, default_value_t = 1000)]
    rounds: usize,
    #[arg(long, default_value_t = 2)]
    ranks: usize,
    #[arg(long, default_value = "bf16")]
    format: Format,
    /// Elements per token (the oracle check on the host dominates the time of a round).
    #[arg(long, default_value_t = 512)]
    hidden: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn main(args: Args) -> Result<ExitCode, String> {
    let cfg =
        EpConfig::new(args.hidden, 8, 16 * args.ranks, 64, args.ranks).with_format(args.format);
    let backend = crate::backend(args.backend, args.ranks_per_gpu)?;
    let mut comms = backend.init_uniform(&cfg).map_err(|e| e.to_string())?;
    println!(
        "soak: {} rounds on {} ranks ({} backend), hidden {}, top-{}, {} experts, {}",
        args.rounds, args.ranks, args.backend, cfg.hidden, cfg.top_k, cfg.n_experts, cfg.format
    );
    let mut rng = Rng::new(args.seed);
    let t0 = Instant::now();
    for round in 0..args.rounds {
        let spec = RoutingSpec {
            skew: (round % 4 == 0).then_some((4, 0.6)),
            masked: [0.0, 0.05, 0.3][round % 3],
            duplicates: 0.1,
            ..Default::default()
        };
        let ids = (0..cfg.n_ranks())
            .map(|_| {
                let t = rng.below(cfg.max_tokens_per_rank + 1);
                spec.generate(&mut rng, t, cfg.top_k, cfg.n_experts, cfg.n_ranks())
            })
            .collect();
        let inputs = RoundInputs::with_random_values(cfg.hidden, ids, rng.next_u64());
        let calls = if round % 2 == 0 {
            Calls::Fused
        } else {
            Calls::Split
        };
        let weights = [WeightKind::F32, WeightKind::Bf16, WeightKind::None][round % 3];
        if let Err(e) = run_and_check(&mut comms, &inputs, &RoundOptions::new(calls, weights)) {
            println!("round {round}: MISMATCH\n{e}");
            println!("{round} rounds matched the oracle, then round {round} did not");
            return Ok(ExitCode::FAILURE);
        }
        if (round + 1) % 1000 == 0 || round + 1 == args.rounds {
            println!(
                "  {} rounds, all bit-exact ({:.1} s)",
                round + 1,
                t0.elapsed().as_secs_f64()
            );
        }
    }
    println!(
        "soak: {} of {} rounds matched the oracle bit for bit",
        args.rounds, args.rounds
    );
    Ok(ExitCode::SUCCESS)
}
