//! `ep soak`: consecutive rounds on one initialised world, fresh random routing and token counts
//! every round, each held against the oracle. Stops at the first round that fails: a mismatch,
//! an error or a timeout, each called by its name, with the per-rank errors summarised
//! (crate::report). Under a launcher (`RANK` set) each process soaks its own rank of the world
//! the launch makes, checking it against the whole world's oracle every round.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use ep::rendezvous::{RankSpec, Rendezvous};
use ep::{EpBackend, EpComm, EpConfig, Format};
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
    /// tokens per rank. Default 2; under a launcher, its world (`WORLD_SIZE` ranks, as many
    /// nodes as it has).
    #[arg(long, value_parser = crate::at_least_one)]
    ranks: Option<usize>,
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

/// The soak's world: `ranks` ranks, `per_node` a node.
fn config(args: &Args, ranks: usize, per_node: usize) -> Result<EpConfig, String> {
    let max_ranks = (ep::config::MAX_EXPERTS - 1) / EXPERTS_PER_RANK;
    if ranks > max_ranks {
        return Err(format!(
            "--ranks {ranks}: at most {max_ranks} (each rank holds {EXPERTS_PER_RANK} experts, a \
             world at most {} experts)",
            ep::config::MAX_EXPERTS - 1
        ));
    }
    let cfg = EpConfig::new(args.hidden, 8, EXPERTS_PER_RANK * ranks, 64, per_node)
        .with_nodes(ranks / per_node)
        .with_format(args.format)
        .with_timeout(Duration::from_millis(args.timeout_ms as u64));
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}

pub fn main(args: Args) -> Result<ExitCode, String> {
    if std::env::var_os("RANK").is_some() {
        return main_rank(&args);
    }
    let ranks = args.ranks.unwrap_or(2);
    let cfg = config(&args, ranks, ranks)?;
    let backend = args.target.backend()?;
    let mut comms = backend.init_uniform(&cfg).map_err(|e| e.to_string())?;
    println!(
        "soak: {} rounds on {} ranks ({} backend), hidden {}, top-{}, {} experts, {}",
        args.rounds, ranks, args.target.backend, cfg.hidden, cfg.top_k, cfg.n_experts, cfg.format
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

/// `ep soak` as one rank of a world of one process per rank: this process's rank, made by the
/// backend's `init_rank`, soaked round after round, each round's outputs checked against the
/// oracle of the whole world (every process draws the same rounds from the seed). A failed round
/// ends this process (its peers then time out naming it); at the end every process says how many
/// rounds it passed and rank 0 prints the world's count.
fn main_rank(args: &Args) -> Result<ExitCode, String> {
    let (spec, master) =
        RankSpec::from_vars(|k| std::env::var(k).ok()).map_err(|e| e.to_string())?;
    if args.ranks.is_some_and(|n| n != spec.world_size) {
        return Err(format!(
            "--ranks {}: under a launcher the world has WORLD_SIZE = {} ranks",
            args.ranks.unwrap_or_default(),
            spec.world_size
        ));
    }
    let cfg = config(args, spec.world_size, spec.local_world_size)?;
    let backend = args.target.backend()?;
    let deadline = cfg.timeout.max(Duration::from_secs(30));
    let mut rv = Rendezvous::connect(spec, &master, deadline).map_err(|e| e.to_string())?;
    let mut comm = backend
        .init_rank(&cfg, &mut rv)
        .map_err(|e| e.to_string())?;
    let (r, rank0) = (comm.rank(), spec.rank == 0);
    if rank0 {
        println!(
            "soak: {} rounds on {} ranks, one process each ({} node(s), {} backend), hidden {}, \
             top-{}, {} experts, {}",
            args.rounds,
            cfg.n_ranks(),
            cfg.n_nodes,
            args.target.backend,
            cfg.hidden,
            cfg.top_k,
            cfg.n_experts,
            cfg.format
        );
    }
    let mut rng = Rng::new(args.seed);
    let t0 = Instant::now();
    for round in 0..args.rounds {
        let (inputs, opts) = random_round(&cfg, &mut rng, round);
        let got = run_round(std::slice::from_mut(&mut comm), &inputs, &opts);
        let failed = match got.into_iter().next().expect("one rank") {
            Err(e) => {
                let summary = crate::report::summarise(&[(r, e)], cfg.n_ranks());
                Some(format!("{}\n{summary}", summary.headline()))
            }
            Ok(got) => check_against_oracle(&cfg, &inputs, &opts, &[got])
                .err()
                .map(|e| format!("MISMATCH\n{e}")),
        };
        if let Some(why) = failed {
            println!("rank {r}: round {round}: {why}");
            println!("rank {r}: {round} rounds matched the oracle, then round {round} did not");
            return Ok(ExitCode::FAILURE);
        }
        if rank0 && ((round + 1) % 1000 == 0 || round + 1 == args.rounds) {
            println!(
                "  {} rounds, all bit-exact on rank 0 ({:.1} s)",
                round + 1,
                t0.elapsed().as_secs_f64()
            );
        }
    }
    // A process gets here only with every round passed; once all have, rank 0 says so.
    rv.barrier().map_err(|e| e.to_string())?;
    if rank0 {
        println!(
            "soak: {} of {} rounds matched the oracle bit for bit on each of the {} ranks",
            args.rounds,
            args.rounds,
            cfg.n_ranks()
        );
    }
    Ok(ExitCode::SUCCESS)
}
