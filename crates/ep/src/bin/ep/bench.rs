//! `ep bench`: dispatch and combine of one large round, next to a plain memcpy of the same bytes
//! measured in the same run (the simulator's ceiling).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use ep::conformance::rng::Rng;
use ep::conformance::routing::RoutingSpec;
use ep::conformance::RoundInputs;
use ep::{on_every_rank, BackendKind, CombineInput, EpBackend, EpComm, EpConfig, RouterWeights};

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, default_value = "sim")]
    backend: BackendKind,
    /// CUDA: ranks per GPU (default: spread over the visible GPUs).
    #[arg(long)]
    ranks_per_gpu: Option<usize>,
    #[arg(long, default_value_t = 4096)]
    tokens: usize,
    #[arg(long, default_value_t = 7168)]
    hidden: usize,
    #[arg(long, default_value_t = 8)]
    top_k: usize,
    #[arg(long, default_value_t = 256)]
    experts: usize,
    /// Ranks (all on one node).
    #[arg(long, default_value_t = 8)]
    ranks: usize,
    /// Measured rounds after one warm-up round.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

pub fn main(args: Args) -> Result<ExitCode, String> {
    let cfg = EpConfig::new(
        args.hidden,
        args.top_k,
        args.experts,
        args.tokens,
        args.ranks,
    )
    .with_timeout(Duration::from_secs(600));
    cfg.validate().map_err(|e| e.to_string())?;
    println!(
        "bench: {} ranks, {} tokens/rank, hidden {}, top-{}, {} experts, bf16, backend {}",
        args.ranks, args.tokens, args.hidden, args.top_k, args.experts, args.backend
    );
    let mut rng = Rng::new(7);
    let ids = (0..cfg.n_ranks())
        .map(|_| {
            RoutingSpec::uniform().generate(
                &mut rng,
                args.tokens,
                cfg.top_k,
                cfg.n_experts,
                cfg.n_ranks(),
            )
        })
        .collect();
    let inputs = RoundInputs::with_random_values(cfg.hidden, ids, 7);

    // Rows each rank receives = the bytes one pass over the dispatch payload must move.
    let row_bytes = cfg.hidden * 2;
    let rows_per_rank: Vec<usize> = received_rows(&cfg, &inputs);
    let memcpy = memcpy_ceiling(&rows_per_rank, row_bytes, args.rounds.max(1));

    let backend = crate::backend(args.backend, args.ranks_per_gpu)?;
    let mut comms = backend.init_uniform(&cfg).map_err(|e| e.to_string())?;
    let (mut dispatch, mut combine) = (Vec::new(), Vec::new());
    for round in 0..=args.rounds.max(1) {
        let times = on_every_rank(&mut comms, |c| -> Result<(Duration, Duration), String> {
            let r = c.rank();
            let t0 = Instant::now();
            let d = c
                .dispatch(&inputs.dispatch_input(r))
                .map_err(|e| e.to_string())?;
            let td = t0.elapsed();
            // Identity experts; free the dispatch copy before combine to keep the peak small.
            let handle = d.handle;
            let out = d.tokens_bf16().expect("bf16");
            drop(d);
            let cin = CombineInput::new(out.view())
                .weighted(RouterWeights::F32(inputs.weights[r].view()));
            let t1 = Instant::now();
            c.combine(&handle, &cin).map_err(|e| e.to_string())?;
            Ok((td, t1.elapsed()))
        });
        let times: Vec<(Duration, Duration)> = times.into_iter().collect::<Result<_, _>>()?;
        if round > 0 {
            dispatch.push(times.iter().map(|t| t.0).max().unwrap());
            combine.push(times.iter().map(|t| t.1).max().unwrap());
        }
        eprint!("\r  round {round}/{} done", args.rounds.max(1));
    }
    eprintln!();

    let total_rows: usize = rows_per_rank.iter().sum();
    let bytes = (total_rows * row_bytes) as f64;
    let (d, c) = (median(&mut dispatch), median(&mut combine));
    println!(
        "\n{total_rows} rows of {row_bytes} B move each way ({:.2} GB)",
        bytes / 1e9
    );
    println!("what                 median ms    GB/s   x memcpy");
    for (what, t) in [
        ("memcpy (ceiling)", memcpy),
        ("dispatch", d),
        ("combine", c),
    ] {
        println!(
            "{what:<18} {:>11.1} {:>7.2} {:>9.2}",
            t.as_secs_f64() * 1e3,
            bytes / t.as_secs_f64() / 1e9,
            t.as_secs_f64() / memcpy.as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Rows each rank receives: one per (token, distinct expert) whose expert it holds.
fn received_rows(cfg: &EpConfig, inputs: &RoundInputs) -> Vec<usize> {
    let mut rows = vec![0usize; cfg.n_ranks()];
    for ids in &inputs.topk_ids {
        for row in ids.outer_iter() {
            let mut e: Vec<i32> = row.iter().copied().filter(|&x| x >= 0).collect();
            e.sort_unstable();
            e.dedup();
            for x in e {
                rows[cfg.expert_rank(x as usize)] += 1;
            }
        }
    }
    rows
}

/// One thread per rank copies that rank's received bytes from one buffer to another, all at
/// once; median over `rounds` after a warm-up.
fn memcpy_ceiling(rows_per_rank: &[usize], row_bytes: usize, rounds: usize) -> Duration {
    let mut bufs: Vec<(Vec<u8>, Vec<u8>)> = rows_per_rank
        .iter()
        .map(|&r| (vec![1u8; r * row_bytes], vec![0u8; r * row_bytes]))
        .collect();
    let mut times = Vec::new();
    for round in 0..=rounds {
        let t0 = Instant::now();
        std::thread::scope(|s| {
            for (src, dst) in bufs.iter_mut() {
                s.spawn(move || dst.copy_from_slice(src));
            }
        });
        if round > 0 {
            times.push(t0.elapsed());
        }
    }
    std::hint::black_box(&bufs);
    median(&mut times)
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}
