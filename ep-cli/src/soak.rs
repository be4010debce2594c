//! `ep soak`: consecutive rounds on one initialised world, fresh random routing and token counts
//! every round, each held against the oracle. Stops at the first round that fails: a mismatch,
//! an error or a timeout, each called by its name, with the per-rank errors summarised
//! (crate::report).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use ep::{EpBackend, EpConfig, Format};
use ep_conformance::rng::Rng;
use ep_conformance::round::{check_against_oracle, random_round, run_round};

/// Experts per rank of the soak's world.
const EXPERTS_PER_RANK: usize = 16;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    target: crate::BackendArgs,
    /// Rounds to run on the one world.
    #[arg(long, default_value_t = 1000, value_parser = crate::at_least_one)]
    rounds: usize,
    /// Ranks of the world (one node); each holds 16 experts, every token picks 8, at most 64
    /// tokens per rank.
    #[arg(long, default_value_t = 2, value_parser = crate::at_least_one)]
    ranks: usize,
    /// Token format of dispatch.
    #[arg(long, default_value = "bf16", value_parser = crate::format_parser(), ignore_case = true)]
    format: Format,
    /// Elements per token (the oracle check on the host dominates the time of a round).
    #[arg(long, default_value_t = 512, value_parser = crate::at_least_one)]
    hidden: usize,
    /// Seed of the routing, token counts and values of every round.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How long a rank waits for its peers in each call before it times out, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 10_000, value_parser = crate::at_least_one)]
    timeout_ms: usize,
}

pub fn main(args: Args) -> Result<ExitCode, String> {
    let max_ranks = (ep::config::MAX_EXPERTS - 1) / EXPERTS_PER_RANK;
    if args.ranks > max_ranks {
        return Err(format!(
            "--ranks {}: at most {max_ranks} (each rank holds {EXPERTS_PER_RANK} experts, a \
             world at most {} experts)",
            args.ranks,
            ep::config::MAX_EXPERTS - 1
        ));
    }
    let cfg = EpConfig::new(
        args.hidden,
        8,
        EXPERTS_PER_RANK * args.ranks,
        64,
        args.ranks,
    )
    .with_format(args.format)
    .with_timeout(Duration::from_millis(args.timeout_ms as u64));
    cfg.validate().map_err(|e| e.to_string())?;
    let backend = args.target.backend()?;
    let mut comms = backend.init_uniform(&cfg).map_err(|e| e.to_string())?;
    println!(
        "soak: {} rounds on {} ranks ({} backend), hidden {}, top-{}, {} experts, {}",
        args.rounds,
        args.ranks,
        args.target.backend,
        cfg.hidden,
        cfg.top_k,
        cfg.n_experts,
        cfg.format
    );
    let mut rng = Rng::new(args.seed);
    let t0 = Instant::now();
    for round in 0..args.rounds {
        let (inputs, opts) = random_round(&cfg, &mut rng, round);
        let failed = match crate::report::all_ok(run_round(&mut comms, &inputs, &opts)) {
            Err(summary) => Some(format!("{}\n{summary}", summary.headline())),
            Ok(got) => check_against_oracle(&cfg, &inputs, &opts, &got)
                .err()
                .map(|e| format!("MISMATCH\n{e}")),
        };
        if let Some(why) = failed {
            println!("round {round}: {why}");
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
