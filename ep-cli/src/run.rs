//! `ep run`: one scenario end to end, checked against the oracle, with a per-rank table and the
//! time and bandwidth of each phase.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use ep::{EpBackend, EpComm, EpConfig, Epilogue, Format, SwigluOptions};
use ep_conformance::rng::Rng;
use ep_conformance::round::{check_against_oracle, run_round, Calls, RankRound, RoundOptions};
use ep_conformance::routing::RoutingSpec;
use ep_conformance::{Fixture, RoundInputs, WeightKind};

#[derive(clap::Args)]
pub struct Args {
    // The help lists the embedded fixtures' names (scenario_help).
    #[arg(long, value_name = "NAME|FILE", help = scenario_help())]
    scenario: Option<String>,
    #[command(flatten)]
    target: crate::BackendArgs,
    /// Token format of dispatch.
    #[arg(long, default_value = "bf16", value_parser = crate::format_parser(), ignore_case = true)]
    format: Format,
    /// Rounds to run on one initialised world; every round is checked, times are medians.
    #[arg(long, default_value_t = 3, value_parser = crate::at_least_one)]
    rounds: usize,
    /// Use the split calls (`*_async` then `*_wait`) instead of the fused ones.
    #[arg(long)]
    split: bool,
    /// Write the last round's inputs and outputs of every rank as .npy files and a
    /// manifest.json into this directory.
    #[arg(long, value_name = "DIR")]
    dump: Option<std::path::PathBuf>,
    /// Fuse the shared expert: each rank's own tokens become group 0, added back at combine.
    #[arg(long)]
    shared_expert: bool,
    /// Combine without router weights: the output is [T, top_k, hidden]. Not with
    /// --shared-expert (its output is added to the weighted sum) nor --epilogue.
    #[arg(long, conflicts_with = "epilogue")]
    unreduced: bool,
    /// Skip the all-to-all: tokens reach only their own device's experts; W is the all-reduce size.
    #[arg(long, value_name = "W", value_parser = crate::at_least_one)]
    skip_a2a: Option<usize>,
    /// A combine epilogue: add a residual, scale by 0.5, or quantize the output to FP8.
    #[arg(long, value_enum)]
    epilogue: Option<EpilogueArg>,
    /// After dispatch, run fused SwiGLU on a stand-in GEMM output and write it in this format.
    #[arg(long, value_name = "FORMAT", value_parser = crate::format_parser(), ignore_case = true)]
    swiglu: Option<Format>,
}

/// `--scenario`'s help, with the names of the embedded fixtures.
fn scenario_help() -> String {
    format!(
        "A fixture name or the path of a fixture file (JSON, as in `fixtures/`). Default: the \
         built-in demo. Fixtures: {}",
        Fixture::names().join(", ")
    )
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum EpilogueArg {
    Residual,
    Scale,
    Fp8,
}

/// The demo: two nodes of four ranks, a DeepSeek-like top-8 over 64 experts, mild skew.
fn demo() -> (String, EpConfig, RoundInputs) {
    let cfg = EpConfig::new(1024, 8, 64, 256, 4).with_nodes(2);
    let spec = RoutingSpec {
        skew: Some((8, 0.15)),
        masked: 0.02,
        ..Default::default()
    };
    let mut rng = Rng::new(42);
    let ids = (0..cfg.n_ranks())
        .map(|r| {
            spec.generate(
                &mut rng,
                256 - 16 * r,
                cfg.top_k,
                cfg.n_experts,
                cfg.n_ranks(),
            )
        })
        .collect();
    let inputs = RoundInputs::with_random_values(cfg.hidden, ids, 42);
    ("demo".into(), cfg, inputs)
}

/// A fixture file when `scenario` names a file or looks like a path, else an embedded fixture.
fn load(scenario: &str, format: Format) -> Result<(String, EpConfig, RoundInputs), String> {
    let path = Path::new(scenario);
    let looks_like_path = scenario.contains(std::path::is_separator) || scenario.ends_with(".json");
    let fx = if path.is_file() {
        Fixture::read(path)?
    } else if path.exists() {
        return Err(format!("--scenario {scenario}: not a file"));
    } else if looks_like_path {
        return Err(format!(
            "--scenario {scenario}: no such file (fixtures by name: {})",
            Fixture::names().join(", ")
        ));
    } else {
        Fixture::load(scenario)?
    };
    Ok((fx.name.clone(), fx.config(format), fx.inputs()))
}

/// `ep run` as one rank of a world of one process per rank (started by `ep launch` or a
/// `torchrun`-style launcher: `RANK` is set): this process makes its own rank with the backend's
/// `init_rank`, runs the scenario's rounds for it in the modes the flags ask for, and checks its
/// outputs against the oracle, which it computes for the whole world from the scenario.
fn main_rank(args: &Args) -> Result<ExitCode, String> {
    use ep::rendezvous::{RankSpec, Rendezvous};
    let (spec, master) =
        RankSpec::from_vars(|k| std::env::var(k).ok()).map_err(|e| e.to_string())?;
    if args.dump.is_some() {
        return Err("--dump is not taken with one process per rank yet".into());
    }
    let (name, cfg, inputs) = scenario(args)?;
    let (calls, opts) = round_options(args, &cfg, &inputs);
    let deadline = cfg.timeout.max(Duration::from_secs(30));
    let mut rv = Rendezvous::connect(spec, &master, deadline).map_err(|e| e.to_string())?;
    let mut comm = args
        .target
        .backend()?
        .init_rank(&cfg, &mut rv)
        .map_err(|e| e.to_string())?;
    let r = comm.rank();
    let mut last = Vec::new();
    for round in 0..args.rounds {
        let got = run_round(std::slice::from_mut(&mut comm), &inputs, &opts)
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("round {round}: {e}"))?;
        if let Err(e) = check_against_oracle(&cfg, &inputs, &opts, &got) {
            println!("rank {r}: round {round}: {e}");
            return Ok(ExitCode::FAILURE);
        }
        last = got;
    }
    if let Some(format) = args.swiglu {
        if let Err(e) = run_swiglu(std::slice::from_mut(&mut comm), &last, format) {
            println!("rank {r}: {e}");
            return Ok(ExitCode::FAILURE);
        }
    }
    let modes = mode_names(args, calls);
    println!(
        "rank {r} of {}: scenario {name}, {} rounds, outputs match the oracle bit for bit ({} rows received){}",
        cfg.n_ranks(),
        args.rounds,
        last.first().map_or(0, |g| g.dispatch.rows()),
        match modes.is_empty() {
            true => String::new(),
            false => format!("; {}", modes.join(", ")),
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// The scenario `--scenario` names (or the demo) in `--format`, with the modes the flags set on
/// its config.
fn scenario(args: &Args) -> Result<(String, EpConfig, RoundInputs), String> {
    let (name, mut cfg, inputs) = match &args.scenario {
        Some(s) => load(s, args.format)?,
        None => {
            let (n, c, i) = demo();
            (n, c.with_format(args.format), i)
        }
    };
    cfg.fused_shared_expert = args.shared_expert;
    cfg.skip_a2a = args.skip_a2a;
    Ok((name, cfg, inputs))
}

/// How each round is driven: fused or split calls, weighted or unreduced, the epilogue.
fn round_options(args: &Args, cfg: &EpConfig, inputs: &RoundInputs) -> (Calls, RoundOptions) {
    let calls = if args.split {
        Calls::Split
    } else {
        Calls::Fused
    };
    let weights = if args.unreduced {
        WeightKind::None
    } else {
        WeightKind::F32
    };
    let epilogues = match args.epilogue {
        None => Vec::new(),
        Some(e) => (0..cfg.n_ranks()).map(|r| epilogue(e, inputs, r)).collect(),
    };
    (
        calls,
        RoundOptions::new(calls, weights).with_epilogues(epilogues),
    )
}

/// The modes the flags ask for, in words.
fn mode_names(args: &Args, calls: Calls) -> Vec<String> {
    [
        (calls == Calls::Split).then(|| "split calls".to_string()),
        args.shared_expert
            .then(|| "fused shared expert".to_string()),
        args.unreduced.then(|| "unreduced combine".to_string()),
        args.skip_a2a
            .map(|w| format!("skip_a2a (all-reduce over {w})")),
        args.epilogue
            .map(|e| format!("epilogue: {}", epilogue_name(e))),
        args.swiglu.map(|f| format!("fused SwiGLU into {f}")),
    ]
    .into_iter()
    .flatten()
    .collect()
}

pub fn main(args: Args) -> Result<ExitCode, String> {
    if args.shared_expert && args.unreduced {
        // The contract rejects it per rank at combine; said once, before any world is built.
        return Err("--shared-expert and --unreduced cannot be combined: the shared expert's \
                    output is added to the weighted sum, and an unreduced output has nowhere to put it"
            .into());
    }
    if std::env::var_os("RANK").is_some() {
        return main_rank(&args);
    }
    let (name, cfg, inputs) = scenario(&args)?;
    let backend = args.target.backend()?;
    let mut comms = backend.init_uniform(&cfg).map_err(|e| e.to_string())?;
    println!(
        "scenario {name}: {} node(s) x {} GPUs, {} experts ({} per rank), top-{}, hidden {}, {}, backend {}",
        cfg.n_nodes,
        cfg.n_gpus_per_node,
        cfg.n_experts,
        cfg.n_local_experts(),
        cfg.top_k,
        cfg.hidden,
        cfg.format,
        backend.name()
    );

    let (calls, opts) = round_options(&args, &cfg, &inputs);
    let modes: Vec<String> = mode_names(&args, calls)
        .into_iter()
        .filter(|m| m != "split calls")
        .collect();
    if !modes.is_empty() {
        println!("modes: {}", modes.join(", "));
    }
    let rounds = args.rounds;
    let mut last: Vec<RankRound> = Vec::new();
    let (mut dispatch_times, mut combine_times) = (Vec::new(), Vec::new());
    let mut mismatch = None;
    for round in 0..rounds {
        let got = crate::report::all_ok(run_round(&mut comms, &inputs, &opts))
            .map_err(|s| format!("round {round}: {}\n{s}", s.headline()))?;
        if let Err(e) = check_against_oracle(&cfg, &inputs, &opts, &got) {
            mismatch.get_or_insert(format!("round {round}: {e}"));
        }
        dispatch_times.push(
            got.iter()
                .map(|r| r.dispatch_time)
                .max()
                .unwrap_or_default(),
        );
        combine_times.push(got.iter().map(|r| r.combine_time).max().unwrap_or_default());
        last = got;
    }

    print_rank_table(&cfg, &inputs, &last);
    if let Some(format) = args.swiglu {
        if let Err(e) = run_swiglu(&mut comms, &last, format) {
            mismatch.get_or_insert(e);
        }
    }
    if let Some(dir) = &args.dump {
        // The expert outputs combine was fed: the round's stand-in experts, recomputed from its
        // dispatch output (a pure function of it).
        let expert_out: Vec<_> = last.iter().map(|r| (opts.experts)(&r.dispatch)).collect();
        let ranks: Vec<_> = last
            .iter()
            .enumerate()
            .map(|(r, round)| crate::dump::RankDump {
                tokens: &inputs.tokens[r],
                topk_ids: &inputs.topk_ids[r],
                weights: &inputs.weights[r],
                input_scales: &inputs.input_scales[r],
                dispatch: &round.dispatch,
                expert_out: &expert_out[r],
                epilogue: opts.epilogues.get(r),
                combine: &round.combine,
            })
            .collect();
        let modes = crate::dump::DumpModes {
            unreduced: args.unreduced,
            swiglu: args.swiglu,
        };
        crate::dump::write_round(dir, &name, &cfg, &modes, &ranks)
            .map_err(|e| format!("--dump {}: {e}", dir.display()))?;
        println!(
            "
wrote {} ranks' inputs and outputs to {} (see manifest.json)",
            ranks.len(),
            dir.display()
        );
    }
    let dispatch_bytes = mean(&inputs.deepep_bytes(&cfg, cfg.format.token_bytes(cfg.hidden)));
    let combine_bytes = mean(&inputs.deepep_bytes(&cfg, cfg.hidden * 2));
    println!("\nphase     median time   per-rank bytes (DeepEP)   per-rank GB/s");
    for (phase, times, bytes) in [
        ("dispatch", &mut dispatch_times, dispatch_bytes),
        ("combine", &mut combine_times, combine_bytes),
    ] {
        let t = median(times);
        println!(
            "{phase:<9} {:>9.3} ms   {:>21.0}   {:>13.2}",
            t.as_secs_f64() * 1e3,
            bytes,
            bytes / t.as_secs_f64() / 1e9
        );
    }
    println!("(times: slowest rank's wall time per phase, median over {rounds} rounds; bytes: each token row once per destination rank, own rank included)");
    match mismatch {
        None => {
            println!("\noracle: bit-exact on all {rounds} rounds");
            Ok(ExitCode::SUCCESS)
        }
        Some(e) => {
            println!("\noracle: MISMATCH\n{e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn print_rank_table(cfg: &EpConfig, inputs: &RoundInputs, rounds: &[RankRound]) {
    let reached = inputs.deepep_bytes(cfg, 1);
    println!("\nrank  tokens  rows sent  token x dest-rank  rows recv  rows per local expert");
    for (r, round) in rounds.iter().enumerate() {
        let ids = &inputs.topk_ids[r];
        let sent: usize = ids
            .outer_iter()
            .map(|row| {
                let mut e: Vec<i32> = row.iter().copied().filter(|&x| x >= 0).collect();
                e.sort_unstable();
                e.dedup();
                e.len()
            })
            .sum();
        let d = &round.dispatch;
        let per_expert: Vec<u32> = d.row_offsets.windows(2).map(|w| w[1] - w[0]).collect();
        let per_expert = if per_expert.len() <= 16 {
            format!("{per_expert:?}")
        } else {
            let (min, max) = (
                per_expert.iter().min().unwrap(),
                per_expert.iter().max().unwrap(),
            );
            format!("{} experts, min {min}, max {max}", per_expert.len())
        };
        println!(
            "{r:>4}  {:>6}  {sent:>9}  {:>16}  {:>9}  {per_expert}",
            ids.nrows(),
            reached[r],
            d.real_rows()
        );
    }
}

fn epilogue_name(e: EpilogueArg) -> &'static str {
    match e {
        EpilogueArg::Residual => "add residual",
        EpilogueArg::Scale => "scale by 0.5",
        EpilogueArg::Fp8 => "quantize to FP8",
    }
}

/// Rank `r`'s epilogue; the residual is the rank's own input tokens (a transformer's skip
/// connection).
fn epilogue(e: EpilogueArg, inputs: &RoundInputs, r: usize) -> Epilogue {
    match e {
        EpilogueArg::Residual => {
            Epilogue::AddResidual(std::sync::Arc::new(inputs.tokens[r].clone()))
        }
        EpilogueArg::Scale => Epilogue::Scale(0.5),
        EpilogueArg::Fp8 => Epilogue::QuantizeFp8,
    }
}

/// SwiGLU on every rank's dispatch output, on a stand-in first GEMM (gate = the decoded row,
/// up = half of it), compared with the oracle.
fn run_swiglu<C: EpComm>(
    comms: &mut [C],
    rounds: &[RankRound],
    format: Format,
) -> Result<(), String> {
    let mut rows = 0;
    for (c, round) in comms.iter_mut().zip(rounds) {
        let d = &round.dispatch;
        let x = d.decode_rows_with(ep_conformance::scenario::GLOBAL_INPUT_SCALE);
        let h = x.ncols();
        let gemm = ndarray::Array2::from_shape_fn((d.rows(), 2 * h), |(r, c)| {
            ep::bf16::from_f32(if c < h {
                x[[r, c]]
            } else {
                0.5 * x[[r, c - h]]
            })
        });
        let opts = SwigluOptions::new(format);
        let got = c.swiglu(d, gemm.view(), &opts).map_err(|e| e.to_string())?;
        let want =
            ep::oracle::swiglu(c.rank(), d, gemm.view(), &opts).map_err(|e| e.to_string())?;
        if let Some(diff) = got.bit_diff(&want) {
            return Err(format!(
                "rank {}: swiglu differs from the oracle: {diff}",
                c.rank()
            ));
        }
        rows += d.real_rows();
    }
    println!(
        "
swiglu: {rows} rows into {format}, bit-exact with the oracle"
    );
    Ok(())
}

fn mean(v: &[usize]) -> f64 {
    v.iter().sum::<usize>() as f64 / v.len().max(1) as f64
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}
