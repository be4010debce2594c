//! `ep soak`: consecutive rounds on one initialised world, fresh random routing and token counts
//! every round, each held against the oracle. Stops at the first mismatch.

use std::process::ExitCode;
use std::time::Instant;

use ep::conformance::rng::Rng;
use ep::conformance::round::{random_round, run_and_check};
use ep::{EpBackend, EpConfig, Format};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    target: crate::BackendArgs,
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
        if let Err(e) = run_and_check(&mut comms, &inputs, &opts) {
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
