//! `ep bench`: dispatch and combine timed against the ceiling measured in the same run (a copy
//! kernel between the same GPUs, or a memcpy on the simulator) and, on GPUs, against an NCCL
//! all-to-all baseline. `--sweep` runs the scenarios EP kernels are compared on and writes a
//! JSON file per run under bench/results/ (plot it with scripts/plot_bench.py).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[cfg(feature = "cuda")]
use ep::EpComm;
use ep::{bf16, BackendKind, DispatchOutput, EpBackend, EpConfig, Format, TokenFormat};
use ep_conformance::rng::Rng;
use ep_conformance::round::{all_ok, run_round, Calls, RoundOptions};
use ep_conformance::routing::RoutingSpec;
use ep_conformance::{RoundInputs, WeightKind};
use ndarray::Array2;
use serde_json::{json, Value};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    target: crate::BackendArgs,
    /// Every scenario: tokens per rank 1, 32, 128, 512, 1024, 4096; BF16 and FP8 dispatch;
    /// uniform and skewed routing.
    #[arg(long)]
    sweep: bool,
    /// Tokens per rank (without --sweep).
    #[arg(long, default_value_t = 4096, value_parser = crate::at_least_one)]
    tokens: usize,
    /// Token format of dispatch (without --sweep).
    #[arg(long, default_value = "bf16", value_parser = crate::format_parser(), ignore_case = true)]
    format: Format,
    /// Skewed routing (without --sweep): half of the routed slots go to a sixteenth of the
    /// experts, as the sweep's skewed scenarios.
    #[arg(long, conflicts_with = "sweep")]
    skewed: bool,
    /// Elements per token.
    #[arg(long, default_value_t = 7168, value_parser = crate::at_least_one)]
    hidden: usize,
    /// Experts each token is routed to.
    #[arg(long, default_value_t = 8, value_parser = crate::at_least_one)]
    top_k: usize,
    /// Experts in the world (a multiple of the ranks).
    #[arg(long, default_value_t = 256, value_parser = crate::at_least_one)]
    experts: usize,
    /// Ranks (default: the GPUs visible; 8 on the simulator, 2 for its sweep).
    #[arg(long)]
    ranks: Option<usize>,
    /// Tokens per rank the world is built for (its `max_tokens_per_rank`; default: each
    /// scenario's own tokens). A serving world is built once for its largest batch and runs
    /// smaller ones in it: this times those rounds.
    #[arg(long, value_name = "TOKENS")]
    max_tokens: Option<usize>,
    /// Measured rounds per scenario after the warm-up (default: by size).
    #[arg(long, value_parser = crate::at_least_one)]
    rounds: Option<usize>,
    /// Where to write the JSON (default with --sweep: bench/results/<device>-<date>.json).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Passes over the scenario list; each scenario's samples are pooled over the passes, so
    /// the reported spread includes drift over the run, not only round-to-round noise.
    #[arg(long, default_value_t = 4, value_parser = crate::at_least_one)]
    passes: usize,
    /// CUDA: also time every kernel of a round (events between launches, rank 0, median of a
    /// few extra rounds per scenario): where the time goes.
    #[arg(long)]
    breakdown: bool,
    /// CUDA: how each phase (and NCCL's, and the floors) is timed behind its start gate.
    /// `events`: device events after the gate and after the phase (the committed sweeps'). `step`:
    /// from the gate's end to when a kernel chained after the phase finds it done, the phase's
    /// first kernel right behind the gate as it runs behind the kernel before it in a model's
    /// step (an event recorded between them holds that launch back; measured at 854abde).
    #[arg(long, value_enum, default_value_t = TimingArg::Events)]
    timing: TimingArg,
    /// Print a result file (the JSON a run writes) as the run printed it, and exit: for runs
    /// whose output stayed on a GPU host.
    #[arg(long, value_name = "JSON", conflicts_with = "sweep")]
    print: Option<PathBuf>,
    /// CUDA: instead of the phases, probe what the protocol's signals cost on GPU 0 (a word
    /// published by one block and polled by others, per flavour of publish and poll, number of
    /// pollers and nap; a load or fence right after a block's stores; instruction fetch; the step
    /// of %globaltimer), print it and exit.
    #[arg(long, conflicts_with_all = ["sweep", "print"])]
    probe_signals: bool,
    /// Nodes the world's ranks are split into (each scenario's config: ranks / nodes GPUs a
    /// node). With one process per rank (`ep launch`), NCCL carries the traffic between nodes.
    #[arg(long, default_value_t = 1, value_parser = crate::at_least_one)]
    nodes: usize,
    /// The sweep's tokens per rank (comma-separated), instead of all six: a slow transport's
    /// sweep, e.g. NCCL's sockets between nodes, over the sizes it finishes in time.
    #[arg(long, value_delimiter = ',', requires = "sweep", value_parser = crate::at_least_one)]
    sweep_tokens: Option<Vec<usize>>,
}

/// `--timing` (ep-cuda's `bench::Timing`).
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum TimingArg {
    Events,
    Step,
}

impl TimingArg {
    fn name(self) -> &'static str {
        match self {
            TimingArg::Events => "events",
            TimingArg::Step => "step",
        }
    }

    #[cfg(feature = "cuda")]
    fn cuda(self) -> ep::cuda::bench::Timing {
        match self {
            TimingArg::Events => ep::cuda::bench::Timing::Events,
            TimingArg::Step => ep::cuda::bench::Timing::Step,
        }
    }
}

#[derive(Clone, Copy)]
struct Scenario {
    tokens: usize,
    format: Format,
    skewed: bool,
}

impl Scenario {
    fn name(&self) -> String {
        format!(
            "t{}-{}-{}",
            self.tokens,
            self.format,
            if self.skewed { "skewed" } else { "uniform" }
        )
    }
}

/// Median, 5th and 95th percentile of a sample, in microseconds.
#[derive(Clone, Copy, Default)]
struct Stats {
    median: f64,
    p5: f64,
    p95: f64,
}

fn stats(mut v: Vec<f64>) -> Stats {
    v.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    Stats {
        median: at(0.5),
        p5: at(0.05),
        p95: at(0.95),
    }
}

/// Samples of one scenario, in microseconds per round (the slowest rank's).
#[derive(Default, Clone)]
struct Samples {
    dispatch: Vec<f64>,
    combine: Vec<f64>,
    dispatch_async: Vec<f64>,
    combine_async: Vec<f64>,
    split_dispatch: Vec<f64>,
    split_combine: Vec<f64>,
    nccl_dispatch: Vec<f64>,
    nccl_combine: Vec<f64>,
    /// Decode rounds (dispatch and combine) replayed from a CUDA graph, µs a round, per rank.
    graph: Vec<f64>,
    /// The host's time to launch one replay, µs (the slowest rank's).
    graph_launch: Vec<f64>,
}

/// One measurement of a scenario: its samples and how many rounds they cover.
#[derive(Default, Clone)]
struct Measured {
    s: Samples,
    rounds: usize,
    /// With --breakdown: per kernel of rank 0's round, in launch order, the median µs.
    breakdown: Vec<(String, f64)>,
}

/// Statistics of pooled samples.
struct Summary {
    dispatch: Stats,
    combine: Stats,
    dispatch_async: Option<Stats>,
    combine_async: Option<Stats>,
    split_dispatch: Option<Stats>,
    split_combine: Option<Stats>,
    nccl: Option<(Stats, Stats)>,
    graph: Option<Stats>,
    graph_launch: Option<Stats>,
}

impl Measured {
    fn pool(all: &[Measured]) -> Summary {
        let cat = |f: fn(&Samples) -> &Vec<f64>| -> Vec<f64> {
            all.iter().flat_map(|m| f(&m.s).iter().copied()).collect()
        };
        let opt = |v: Vec<f64>| (!v.is_empty()).then(|| stats(v));
        Summary {
            dispatch: stats(cat(|s| &s.dispatch)),
            combine: stats(cat(|s| &s.combine)),
            dispatch_async: opt(cat(|s| &s.dispatch_async)),
            combine_async: opt(cat(|s| &s.combine_async)),
            split_dispatch: opt(cat(|s| &s.split_dispatch)),
            split_combine: opt(cat(|s| &s.split_combine)),
            nccl: opt(cat(|s| &s.nccl_dispatch)).zip(opt(cat(|s| &s.nccl_combine))),
            graph: opt(cat(|s| &s.graph)),
            graph_launch: opt(cat(|s| &s.graph_launch)),
        }
    }
}

pub fn main(args: Args) -> Result<ExitCode, String> {
    if args.probe_signals {
        return probe_signals(args.target.backend);
    }
    if let Some(path) = &args.print {
        let bad = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        let text = std::fs::read_to_string(path).map_err(|e| bad(&e))?;
        let r: Value = serde_json::from_str(&text).map_err(|e| bad(&e))?;
        let rows = r["scenarios"]
            .as_array()
            .ok_or_else(|| bad(&"no \"scenarios\" list"))?;
        println!(
            "{}",
            header(
                r["device"].as_str().unwrap_or("?"),
                r["backend"].as_str().unwrap_or("?"),
                &r,
                rows.len()
            )
        );
        println!("ceiling: {}", ceiling_text(&r["ceiling"]));
        print_results(rows);
        return Ok(ExitCode::SUCCESS);
    }
    if args.timing == TimingArg::Step && args.target.backend == BackendKind::Sim {
        return Err("--timing step times device kernels: it needs --backend cuda".into());
    }
    // Under a launcher (`RANK` set): this process times its own rank of a world of one process
    // per GPU; rank 0 also measures the ceiling and NCCL's baseline, gathers and reports.
    let mut procs = per_process(&args)?;
    let lead = procs.as_ref().is_none_or(|rv| rv.spec().rank == 0);
    let gpus = gpu_names(args.target.backend)?;
    let ranks = match &procs {
        Some(rv) => rv.spec().world_size,
        None => args.ranks.unwrap_or(match args.target.backend {
            BackendKind::Cuda => gpus.len(),
            BackendKind::Sim if args.sweep => 2,
            BackendKind::Sim => 8,
        }),
    };
    let scenarios: Vec<Scenario> = if args.sweep {
        let mut v = Vec::new();
        let all = [1, 32, 128, 512, 1024, 4096];
        for &tokens in args.sweep_tokens.as_deref().unwrap_or(&all) {
            for format in [Format::Bf16, Format::Fp8] {
                for skewed in [false, true] {
                    v.push(Scenario {
                        tokens,
                        format,
                        skewed,
                    });
                }
            }
        }
        v
    } else {
        vec![Scenario {
            tokens: args.tokens,
            format: args.format,
            skewed: args.skewed,
        }]
    };
    // Every scenario's config, checked before anything is measured (the world's size, a hidden
    // size the format cannot take, --max-tokens below a scenario's tokens).
    let configs = scenarios
        .iter()
        .map(|sc| scenario_config(&args, sc, ranks))
        .collect::<Result<Vec<_>, _>>()?;
    if args.target.backend == BackendKind::Sim && lead {
        // The simulator holds every rank's rows in this process: say what that costs before it
        // starts, and refuse a run the machine cannot hold.
        let need = scenarios
            .iter()
            .zip(&configs)
            .map(|(sc, cfg)| sim_bytes(cfg, sc.tokens))
            .fold(sim_ceiling_bytes(ranks), f64::max);
        println!("{}", memory_line(need, available_memory())?);
    }
    let device = match args.target.backend {
        BackendKind::Cuda => format!(
            "{}-x{}{}",
            gpus[0]
                .to_lowercase()
                .replace("nvidia ", "")
                .replace(' ', "-"),
            gpus.len(),
            match (&procs, args.nodes) {
                (None, _) => String::new(),
                (Some(_), 1) => "-procs".into(),
                (Some(_), n) => format!("-procs-{n}nodes"),
            }
        ),
        BackendKind::Sim => format!(
            "sim-{}cores",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        ),
    };
    let shape = json!({ "ranks": ranks, "hidden": args.hidden, "top_k": args.top_k, "experts": args.experts, "max_tokens_per_rank": args.max_tokens, "timing_mode": args.timing.name() });
    let ceiling = match lead {
        true => {
            println!(
                "{}",
                header(&device, args.target.backend.name(), &shape, scenarios.len())
            );
            // With one process per rank, rank 0's process alone, over every GPU it sees, while
            // the others wait.
            let c = measure_ceiling(
                args.target.backend,
                ranks,
                args.target.ranks_per_gpu,
                gpus.len(),
                args.hidden,
                args.timing,
            )?;
            println!("ceiling: {}", ceiling_text(&c));
            c
        }
        false => Value::Null,
    };
    if let Some(rv) = procs.as_mut() {
        rv.barrier().map_err(|e| e.to_string())?;
    }
    let passes = args.passes.max(1);
    let bar = match lead {
        true => indicatif::ProgressBar::new((scenarios.len() * passes) as u64),
        false => indicatif::ProgressBar::hidden(),
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} [{elapsed} < {eta}]")
            .expect("template"),
    );
    let mut samples: Vec<Vec<Measured>> = (0..scenarios.len()).map(|_| Vec::new()).collect();
    let mut inputs_of = Vec::new();
    for pass in 0..passes {
        for (i, sc) in scenarios.iter().enumerate() {
            bar.set_message(format!("pass {} {}", pass + 1, sc.name()));
            let cfg = &configs[i];
            let inputs = scenario_inputs(cfg, sc);
            let rounds = rounds_for(&args, sc).div_ceil(passes);
            samples[i].push(match args.target.backend {
                BackendKind::Sim => measure_sim(cfg, &inputs, rounds)?,
                #[cfg(feature = "cuda")]
                BackendKind::Cuda if procs.is_some() => measure_cuda_rank(
                    cfg,
                    &inputs,
                    rounds,
                    procs.as_mut().expect("checked"),
                    gpus.len(),
                    args.timing,
                )?,
                BackendKind::Cuda => {
                    let probe = args.breakdown && pass == 0;
                    measure_cuda(
                        cfg,
                        &inputs,
                        rounds,
                        args.target.ranks_per_gpu,
                        gpus.len(),
                        probe,
                        args.timing,
                    )?
                }
            });
            if pass == 0 {
                inputs_of.push(inputs);
            }
            bar.inc(1);
        }
    }
    if !lead {
        // Rank 0 reports the world's rounds.
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<Value> = scenarios
        .iter()
        .zip(&configs)
        .zip(&samples)
        .zip(&inputs_of)
        .map(|(((sc, cfg), m), inputs)| {
            let rounds = m.iter().map(|x| x.rounds).sum();
            let mut r = row(cfg, sc, inputs, &Measured::pool(m), &ceiling, rounds);
            if !m[0].breakdown.is_empty() {
                r["breakdown_us"] = json!(m[0]
                    .breakdown
                    .iter()
                    .map(|(k, us)| json!({ "step": k, "median_us": us }))
                    .collect::<Vec<_>>());
            }
            r
        })
        .collect();
    bar.finish_and_clear();
    print_results(&rows);

    let result = json!({
        "device": device,
        "backend": args.target.backend.name(),
        "gpus": gpus,
        "date": today(),
        "commit": env!("EP_COMMIT"),
        "ranks": ranks,
        "nodes": args.nodes,
        "processes": if procs.is_some() { "one per rank (ep launch or torchrun's variables)" } else { "one" },
        "hidden": args.hidden,
        "top_k": args.top_k,
        "experts": args.experts,
        "max_tokens_per_rank": args.max_tokens,
        "bandwidth_convention": "DeepEP: each token row once per destination rank it reaches (own rank included); *_remote leaves the own rank out; GB/s = mean bytes per rank / median time",
        "timing": timing_convention(args.target.backend, args.timing),
        "timing_mode": args.timing.name(),
        "ceiling": ceiling,
        "scenarios": rows,
    });
    let out = args.out.clone().or_else(|| {
        // Step-timed sweeps beside the event-timed ones, not over them.
        let step = if args.timing == TimingArg::Step {
            "-step"
        } else {
            ""
        };
        args.sweep
            .then(|| PathBuf::from(format!("bench/results/{device}-{}{step}.json", today())))
    });
    if let Some(path) = out {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        std::fs::write(&path, serde_json::to_string_pretty(&result).unwrap() + "\n")
            .map_err(|e| e.to_string())?;
        println!(
            "\nwrote {} (plot: python3 scripts/plot_bench.py {})",
            path.display(),
            path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn probe_signals(kind: BackendKind) -> Result<ExitCode, String> {
    match kind {
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => {
            let probes = ep::cuda::probe::probe_signals(0, None).map_err(|e| e.to_string())?;
            print!("{probes}");
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(not(feature = "cuda"))]
        BackendKind::Cuda => Err("this build has no cuda backend".into()),
        BackendKind::Sim => {
            Err("--probe-signals probes GPU signals: it needs --backend cuda".into())
        }
    }
}

fn scenario_config(args: &Args, sc: &Scenario, ranks: usize) -> Result<EpConfig, String> {
    let max_tokens = args.max_tokens.unwrap_or(sc.tokens).max(1);
    if sc.tokens > max_tokens {
        return Err(format!(
            "--max-tokens {max_tokens} is below the {} tokens per rank of scenario {}",
            sc.tokens,
            sc.name()
        ));
    }
    if !ranks.is_multiple_of(args.nodes) {
        return Err(format!(
            "--nodes {}: {ranks} ranks do not split into that many nodes",
            args.nodes
        ));
    }
    let cfg = EpConfig::new(
        args.hidden,
        args.top_k,
        args.experts,
        max_tokens,
        ranks / args.nodes,
    )
    .with_nodes(args.nodes)
    .with_format(sc.format)
    .with_timeout(Duration::from_secs(60));
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}

/// The simulator's memcpy ceiling: two 256 MiB buffers per rank (measure_ceiling).
fn sim_ceiling_bytes(ranks: usize) -> f64 {
    ranks as f64 * 512.0 * (1u64 << 20) as f64
}

/// About the peak memory of a simulator scenario of `tokens` per rank: each routed (token, expert)
/// row is held about four times over (the receive buffer, the dispatch output, the expert output,
/// combine's messages) as BF16, plus the tokens themselves: the buffers that scale with the
/// routed rows; the rest of a round is small beside them.
fn sim_bytes(cfg: &EpConfig, tokens: usize) -> f64 {
    let rows = cfg.n_ranks() as f64 * tokens as f64 * (4 * cfg.top_k + 1) as f64;
    rows * cfg.hidden as f64 * 2.0
}

/// The memory the system can still give (Linux's MemAvailable), if known.
fn available_memory() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024.0)
}

/// The line that says what a simulator run needs, or the error when it exceeds what is available.
fn memory_line(need: f64, available: Option<f64>) -> Result<String, String> {
    let gb = |b: f64| b / 1e9;
    match available {
        Some(a) if need > a => Err(format!(
            "this simulator run needs about {:.1} GB of memory and {:.1} GB is available: pass \
             smaller --tokens, --ranks or --hidden",
            gb(need),
            gb(a)
        )),
        Some(a) => Ok(format!(
            "memory: the simulator holds every rank's rows in this process, about {:.1} GB at \
             peak ({:.1} GB available)",
            gb(need),
            gb(a)
        )),
        None => Ok(format!(
            "memory: the simulator holds every rank's rows in this process, about {:.1} GB at peak",
            gb(need)
        )),
    }
}

fn rounds_for(args: &Args, sc: &Scenario) -> usize {
    args.rounds
        .unwrap_or(match (args.target.backend, sc.tokens) {
            (BackendKind::Sim, _) => 4,
            (_, t) if t <= 128 => 60,
            (_, t) if t <= 1024 => 24,
            _ => 12,
        })
}

fn gpu_names(kind: BackendKind) -> Result<Vec<String>, String> {
    match kind {
        BackendKind::Sim => Ok(Vec::new()),
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => ep::cuda::CudaBackend::probe().map_err(|e| e.to_string()),
        #[cfg(not(feature = "cuda"))]
        BackendKind::Cuda => Err("this build has no cuda backend".into()),
    }
}

fn scenario_inputs(cfg: &EpConfig, sc: &Scenario) -> RoundInputs {
    let mut rng = Rng::new(7 + sc.tokens as u64);
    let spec = RoutingSpec {
        skew: sc.skewed.then_some((cfg.n_experts / 16, 0.5)),
        ..Default::default()
    };
    let ids = (0..cfg.n_ranks())
        .map(|_| spec.generate(&mut rng, sc.tokens, cfg.top_k, cfg.n_experts, cfg.n_ranks()))
        .collect();
    RoundInputs::with_random_values(cfg.hidden, ids, 7)
}

/// Mean (token, destination rank) pairs per rank, with and without the rank itself.
fn pairs(cfg: &EpConfig, inputs: &RoundInputs) -> (f64, f64) {
    let p = inputs.rank_pairs(cfg);
    let n = p.len() as f64;
    (
        p.iter().map(|x| x.0).sum::<usize>() as f64 / n,
        p.iter().map(|x| x.1).sum::<usize>() as f64 / n,
    )
}

/// The copy ceiling, and on CUDA with two ranks or more the latency floors among the ranks, placed
/// on the GPUs as `measure_cuda` places the run's worlds.
fn measure_ceiling(
    kind: BackendKind,
    ranks: usize,
    ranks_per_gpu: Option<usize>,
    n_gpus: usize,
    hidden: usize,
    timing: TimingArg,
) -> Result<Value, String> {
    #[cfg(not(feature = "cuda"))]
    let _ = (ranks_per_gpu, n_gpus, hidden, timing);
    match kind {
        BackendKind::Sim => {
            // One thread per rank copying its own 256 MiB, as the ranks would.
            let bytes = 256usize << 20;
            let mut bufs: Vec<(Vec<u8>, Vec<u8>)> = (0..ranks)
                .map(|_| (vec![1u8; bytes], vec![0u8; bytes]))
                .collect();
            let mut times = Vec::new();
            for i in 0..6 {
                let t0 = Instant::now();
                std::thread::scope(|s| {
                    for (src, dst) in bufs.iter_mut() {
                        s.spawn(move || dst.copy_from_slice(src));
                    }
                });
                if i > 0 {
                    times.push(t0.elapsed().as_secs_f64());
                }
            }
            std::hint::black_box(&bufs);
            let t = stats(times).median;
            Ok(
                json!({ "kind": "memcpy, one thread per rank", "memcpy_gbps": bytes as f64 / t / 1e9 }),
            )
        }
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => {
            let backend = world_backend(ranks, ranks_per_gpu, n_gpus)?;
            let placement = backend.placement(ranks, n_gpus);
            // A 1-token BF16 row for the row exchange floor.
            let c = ep::cuda::bench::measure_ceilings(
                1 << 30,
                20,
                &placement,
                hidden * 2,
                timing.cuda(),
                &backend.options,
                &crate::options::bench_options_from_env()?,
            )
            .map_err(|e| e.to_string())?;
            let mut v = json!({
                "kind": "16-byte copy kernels, 1 GiB: every GPU of the run pushing an equal share to each other GPU at once (all_to_all, GB/s each GPU sends; the ceiling), GPU0 pushing to GPU1 (p2p, one way) and inside GPU0 (local)",
                "all_to_all_gbps": c.all_to_all_gbps,
                "p2p_gbps": c.p2p_gbps,
                "local_gbps": c.local_gbps,
            });
            if let Some(f) = c.floors {
                v["floors"] = json!({
                    "timing": timing.name(),
                    "kind": "one block per rank, the ranks placed on the GPUs as the run's worlds are, timed as a phase (behind the start gate, slowest rank, median): an empty kernel; every rank raising a flag at every rank and waiting for all (flag exchange); the same after copying a BF16 row of hidden to every peer and fencing (row exchange: the least a 1-token dispatch takes)",
                    "ranks": f.ranks,
                    "gpus": f.gpus,
                    "empty_kernel_us": f.empty_kernel_us,
                    "flag_exchange_us": f.flag_exchange_us,
                    "row_exchange_us": f.row_exchange_us,
                    "row_bytes": f.row_bytes,
                });
            }
            Ok(v)
        }
        #[cfg(not(feature = "cuda"))]
        BackendKind::Cuda => Err("this build has no cuda backend".into()),
    }
}

/// The all-to-all copy where measured (the traffic pattern of a phase); older files and one GPU
/// fall back to the one-way pair copy, then the local copy.
fn ceiling_gbps(c: &Value) -> f64 {
    c["all_to_all_gbps"]
        .as_f64()
        .or(c["p2p_gbps"].as_f64())
        .or(c["local_gbps"].as_f64())
        .or(c["memcpy_gbps"].as_f64())
        .unwrap_or(f64::NAN)
}

fn ceiling_text(c: &Value) -> String {
    let copies = match (
        c["p2p_gbps"].as_f64(),
        c["local_gbps"].as_f64(),
        c["memcpy_gbps"].as_f64(),
    ) {
        (Some(p), Some(l), _) => {
            let a = c["all_to_all_gbps"].as_f64().map_or(String::new(), |a| {
                format!("all-to-all copy {a:.0} GB/s sent per GPU (the ceiling), ")
            });
            format!("{a}peer-to-peer copy {p:.0} GB/s one way, local copy {l:.0} GB/s")
        }
        (None, Some(l), _) => format!("local copy {l:.0} GB/s (one GPU)"),
        (_, _, Some(m)) => return format!("memcpy {m:.1} GB/s"),
        _ => return "unknown".into(),
    };
    let f = &c["floors"];
    let floors = match (
        f["empty_kernel_us"].as_f64(),
        f["flag_exchange_us"].as_f64(),
        f["row_exchange_us"].as_f64(),
    ) {
        (Some(e), Some(x), Some(r)) => {
            // Floors among ranks that share GPUs say so (older files have no counts).
            let shared = match (f["ranks"].as_u64(), f["gpus"].as_u64()) {
                (Some(n), Some(g)) if n > g => {
                    format!(", {n} ranks on {g} GPU{}", if g > 1 { "s" } else { "" })
                }
                _ => String::new(),
            };
            format!(
                "\nfloor: empty kernel {e:.1} us, flag exchange {x:.1} us, row + flag exchange {r:.1} us (the least a 1-token phase takes{shared})"
            )
        }
        _ => String::new(),
    };
    format!("{copies}{floors}")
}

/// Constant expert outputs: the values do not change the data movement being timed.
fn bench_experts(d: &DispatchOutput) -> Array2<bf16> {
    Array2::from_elem((d.rows(), d.hidden), bf16::from_f32(0.5))
}

fn measure_sim(cfg: &EpConfig, inputs: &RoundInputs, rounds: usize) -> Result<Measured, String> {
    let backend = ep::Backend::new(BackendKind::Sim).map_err(|e| e.to_string())?;
    let mut comms = backend.init_uniform(cfg).map_err(|e| e.to_string())?;
    let mut m = Measured {
        rounds,
        ..Default::default()
    };
    for calls in [Calls::Fused, Calls::Split] {
        let opts = RoundOptions {
            experts: bench_experts,
            ..RoundOptions::new(calls, WeightKind::F32)
        };
        let (mut d, mut c) = (Vec::new(), Vec::new());
        for i in 0..rounds + 1 {
            let got = all_ok(run_round(&mut comms, inputs, &opts))?;
            if i > 0 {
                d.push(
                    got.iter()
                        .map(|r| r.dispatch_time)
                        .max()
                        .unwrap()
                        .as_secs_f64()
                        * 1e6,
                );
                c.push(
                    got.iter()
                        .map(|r| r.combine_time)
                        .max()
                        .unwrap()
                        .as_secs_f64()
                        * 1e6,
                );
            }
        }
        match calls {
            Calls::Fused => (m.s.dispatch, m.s.combine) = (d, c),
            Calls::Split => (m.s.split_dispatch, m.s.split_combine) = (d, c),
        }
    }
    Ok(m)
}

/// The CUDA backend a run's worlds of `ranks` are built with: `--ranks-per-gpu`, or the ranks spread
/// evenly over the GPUs, with the options the environment sets (crate::options).
#[cfg(feature = "cuda")]
fn world_backend(
    ranks: usize,
    ranks_per_gpu: Option<usize>,
    n_gpus: usize,
) -> Result<ep::cuda::CudaBackend, String> {
    Ok(ep::cuda::CudaBackend::new()
        .with_ranks_per_gpu_opt(ranks_per_gpu.or(Some(ranks.div_ceil(n_gpus.max(1)))))
        .with_options(crate::options::cuda_options_from_env()?))
}

#[cfg(feature = "cuda")]
fn measure_cuda(
    cfg: &EpConfig,
    inputs: &RoundInputs,
    rounds: usize,
    ranks_per_gpu: Option<usize>,
    n_gpus: usize,
    probe: bool,
    timing: TimingArg,
) -> Result<Measured, String> {
    let warm = 3;
    let backend = world_backend(cfg.n_ranks(), ranks_per_gpu, n_gpus)?;
    let bench_options = crate::options::bench_options_from_env()?;
    let mut comms = backend.init_uniform(cfg).map_err(|e| e.to_string())?;
    // Each round's phases start behind the device-side gate across ranks (ep-cuda's bench.rs),
    // which is the only synchronisation between the rank threads.
    let gate =
        ep::cuda::bench::StartGate::for_world(&comms, &bench_options).map_err(|e| e.to_string())?;
    let ready = std::sync::Barrier::new(cfg.n_ranks());
    let per_rank = ep::on_every_rank(&mut comms, |c| {
        let r = c.rank();
        let fail = |e: ep::EpError| -> ! {
            // A rank that fails would leave the others at their next gate: stop the process.
            eprintln!("ep bench: rank {r}: {e}");
            std::process::exit(1)
        };
        let wait = || {
            ready.wait();
            Ok(())
        };
        let (times, graph) =
            time_rank(c, &gate, inputs, warm, rounds, timing, wait).unwrap_or_else(|e| fail(e));
        // The probed rounds, with an event after every kernel, also time the async parts.
        let mut probed = Vec::new();
        for _ in 0..if probe { PROBED_ROUNDS } else { 0 } {
            probed.push(c.bench_round_probed(&gate).unwrap_or_else(|e| fail(e)));
        }
        (times, (probed, graph))
    });
    let (per_rank, probed): (Vec<_>, Vec<_>) = per_rank.into_iter().unzip();
    type Graph = Option<ep::cuda::bench::GraphRound>;
    let (probed, graph): (Vec<_>, Vec<Graph>) = probed.into_iter().unzip();
    drop(gate);
    drop(comms);
    type Times = ep::cuda::bench::PhaseTimes;
    let probed_times: Vec<Vec<Times>> = probed
        .iter()
        .map(|p| p.iter().map(|(t, _)| *t).collect())
        .collect();
    let steps: Vec<_> = probed[0].iter().map(|(_, s)| s.clone()).collect();
    let mut m = Measured {
        s: Samples {
            dispatch_async: slowest_per_round(&probed_times, |t| t.dispatch_async_ms),
            combine_async: slowest_per_round(&probed_times, |t| t.combine_async_ms),
            ..world_samples(&per_rank, &graph)
        },
        rounds,
        breakdown: median_steps(&steps),
    };
    if cfg.n_ranks() == n_gpus {
        (m.s.nccl_dispatch, m.s.nccl_combine) =
            nccl_baseline(cfg, inputs, warm, rounds, &backend.options, timing)?;
    }
    Ok(m)
}

/// The rendezvous of this process's rank when a launcher started it (`RANK` set), else `None`.
fn per_process(args: &Args) -> Result<Option<ep::rendezvous::Rendezvous>, String> {
    use ep::rendezvous::{RankSpec, Rendezvous};
    if std::env::var_os("RANK").is_none() {
        return Ok(None);
    }
    if args.target.backend != BackendKind::Cuda {
        return Err("ep bench with one process per rank times GPUs: it needs --backend cuda (the simulator's bench runs its ranks in one process)".into());
    }
    if args.breakdown || args.ranks.is_some() || args.target.ranks_per_gpu.is_some() {
        return Err("with one process per rank the world is the launcher's (a GPU a process): no --ranks, --ranks-per-gpu or --breakdown".into());
    }
    let (spec, master) =
        RankSpec::from_vars(|k| std::env::var(k).ok()).map_err(|e| e.to_string())?;
    // Long enough for rank 0's ceiling and NCCL baseline, which the others wait for.
    Rendezvous::connect(spec, &master, Duration::from_secs(600))
        .map(Some)
        .map_err(|e| e.to_string())
}

/// `measure_cuda` for this process's rank of a world of one process per GPU: the rank is made by
/// `init_rank`, its rounds start behind a gate whose flags every rank maps, and every rank's
/// times reach rank 0, which returns the world's (the slowest rank's per round) with NCCL's
/// baseline measured in its process over every GPU it sees; the other ranks return nothing.
#[cfg(feature = "cuda")]
fn measure_cuda_rank(
    cfg: &EpConfig,
    inputs: &RoundInputs,
    rounds: usize,
    rv: &mut ep::rendezvous::Rendezvous,
    n_gpus: usize,
    timing: TimingArg,
) -> Result<Measured, String> {
    let warm = 3;
    let s = |e: ep::EpError| e.to_string();
    let backend =
        ep::cuda::CudaBackend::new().with_options(crate::options::cuda_options_from_env()?);
    let bench_options = crate::options::bench_options_from_env()?;
    let mut c = backend.init_rank(cfg, rv).map_err(s)?;
    let gate = ep::cuda::bench::StartGate::for_rank(&c, rv, &bench_options).map_err(s)?;
    let r = c.rank();
    let (times, graph) =
        time_rank(&mut c, &gate, inputs, warm, rounds, timing, || rv.barrier()).map_err(s)?;
    drop(gate);
    drop(c);
    // Every round's two phases, then the graph round and its launch (NaN: none).
    let mut mine: Vec<f64> = times
        .iter()
        .flat_map(|t| [t.dispatch_ms as f64, t.combine_ms as f64])
        .collect();
    mine.push(graph.map_or(f64::NAN, |g| g.round_us));
    mine.push(graph.map_or(f64::NAN, |g| g.launch_us));
    let bytes: Vec<u8> = mine.iter().flat_map(|v| v.to_le_bytes()).collect();
    let all = rv.all_gather(&bytes).map_err(s)?;
    if r != 0 {
        // Rank 0's NCCL baseline uses every GPU.
        rv.barrier().map_err(s)?;
        return Ok(Measured::default());
    }
    // Each rank's rounds and graph round back as they were timed.
    let (mut per_rank, mut graphs) = (Vec::new(), Vec::new());
    for b in &all {
        let v: Vec<f64> = b
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let (phases, graph) = v.split_at(v.len() - 2);
        per_rank.push(
            phases
                .chunks_exact(2)
                .map(|p| ep::cuda::bench::PhaseTimes {
                    dispatch_ms: p[0] as f32,
                    combine_ms: p[1] as f32,
                    ..Default::default()
                })
                .collect::<Vec<_>>(),
        );
        graphs.push((!graph[0].is_nan()).then_some(ep::cuda::bench::GraphRound {
            round_us: graph[0],
            launch_us: graph[1],
        }));
    }
    let mut m = Measured {
        s: world_samples(&per_rank, &graphs),
        rounds,
        breakdown: Vec::new(),
    };
    if cfg.n_ranks() == n_gpus {
        (m.s.nccl_dispatch, m.s.nccl_combine) =
            nccl_baseline(cfg, inputs, warm, rounds, &backend.options, timing)?;
    }
    rv.barrier().map_err(s)?;
    Ok(m)
}

/// NCCL's grouped send/receive of the scenario's rows between every GPU this process sees,
/// behind its own start gate: per measured round the slowest rank's dispatch and combine, µs.
#[cfg(feature = "cuda")]
fn nccl_baseline(
    cfg: &EpConfig,
    inputs: &RoundInputs,
    warm: usize,
    rounds: usize,
    options: &ep::cuda::CudaOptions,
    timing: TimingArg,
) -> Result<(Vec<f64>, Vec<f64>), String> {
    let bench_options = crate::options::bench_options_from_env()?;
    let mut nccl = ep::cuda::bench::NcclBaseline::new(
        cfg,
        &inputs.topk_ids,
        &inputs.weights,
        options,
        &bench_options,
    )
    .map_err(|e| e.to_string())?;
    let (mut d, mut c) = (Vec::new(), Vec::new());
    for i in 0..warm + rounds {
        let t = nccl.round(timing.cuda()).map_err(|e| e.to_string())?;
        if i >= warm {
            d.push(t.iter().map(|x| x.0 as f64 * 1e3).fold(0.0, f64::max));
            c.push(t.iter().map(|x| x.1 as f64 * 1e3).fold(0.0, f64::max));
        }
    }
    Ok((d, c))
}

/// One rank's measured rounds through the public API behind `gate` (after `warm` unmeasured
/// ones) and, at decode sizes, its round replayed from a CUDA graph (`ready` lines the ranks up).
#[cfg(feature = "cuda")]
fn time_rank(
    c: &mut ep::cuda::CudaComm,
    gate: &ep::cuda::bench::StartGate,
    inputs: &RoundInputs,
    warm: usize,
    rounds: usize,
    timing: TimingArg,
    ready: impl FnMut() -> ep::Result<()>,
) -> ep::Result<(
    Vec<ep::cuda::bench::PhaseTimes>,
    Option<ep::cuda::bench::GraphRound>,
)> {
    let input = inputs.dispatch_input(c.rank());
    c.bench_load(&input, inputs.weights[c.rank()].view())?;
    let mut times = Vec::new();
    for i in 0..warm + rounds {
        let t = c.bench_round(gate, timing.cuda())?;
        if i >= warm {
            times.push(t);
        }
    }
    let graph = match input.n_tokens() <= GRAPH_MAX_TOKENS {
        true => c.bench_graph(GRAPH_REPLAYS, ready)?,
        false => None,
    };
    Ok((times, graph))
}

/// The world's samples from every rank's rounds and graph round: per round the slowest rank's.
#[cfg(feature = "cuda")]
fn world_samples(
    per_rank: &[Vec<ep::cuda::bench::PhaseTimes>],
    graph: &[Option<ep::cuda::bench::GraphRound>],
) -> Samples {
    Samples {
        dispatch: slowest_per_round(per_rank, |t| Some(t.dispatch_ms)),
        combine: slowest_per_round(per_rank, |t| Some(t.combine_ms)),
        graph: slowest(graph.iter().map(|g| g.map(|g| g.round_us))),
        graph_launch: slowest(graph.iter().map(|g| g.map(|g| g.launch_us))),
        ..Default::default()
    }
}

/// Per round, the slowest rank's time (ms → µs); rounds where a rank has none are left out.
#[cfg(feature = "cuda")]
fn slowest_per_round<T>(per_rank: &[Vec<T>], f: fn(&T) -> Option<f32>) -> Vec<f64> {
    let n = per_rank.iter().map(Vec::len).min().unwrap_or(0);
    (0..n)
        .filter_map(|i| {
            per_rank
                .iter()
                .map(|t| f(&t[i]).map(|ms| ms as f64 * 1e3))
                .try_fold(0.0, |a: f64, v| v.map(|v| a.max(v)))
        })
        .collect()
}

/// The largest of every rank's value, or nothing when a rank has none.
#[cfg(feature = "cuda")]
fn slowest(per_rank: impl Iterator<Item = Option<f64>>) -> Vec<f64> {
    let mut per_rank = per_rank.peekable();
    if per_rank.peek().is_none() {
        return Vec::new();
    }
    per_rank
        .try_fold(0.0, |a: f64, g| g.map(|g| a.max(g)))
        .into_iter()
        .collect()
}

/// Decode sizes, up to this many tokens a rank, are also timed replayed from a CUDA graph.
#[cfg(feature = "cuda")]
const GRAPH_MAX_TOKENS: usize = 128;
/// Replays timed per scenario.
#[cfg(feature = "cuda")]
const GRAPH_REPLAYS: usize = 200;

/// Rounds timed kernel by kernel per scenario with --breakdown.
#[cfg(feature = "cuda")]
const PROBED_ROUNDS: usize = 15;

/// Per step, the median over rounds; rounds whose steps differ from the first round's (a wait
/// that needed another slice) are left out.
#[cfg(feature = "cuda")]
fn median_steps(rounds: &[Vec<(&'static str, f32)>]) -> Vec<(String, f64)> {
    let Some(first) = rounds.first() else {
        return Vec::new();
    };
    let same: Vec<_> = rounds
        .iter()
        .filter(|r| r.iter().map(|x| x.0).eq(first.iter().map(|x| x.0)))
        .collect();
    (0..first.len())
        .map(|i| {
            let mut v: Vec<f64> = same.iter().map(|r| r[i].1 as f64).collect();
            v.sort_by(f64::total_cmp);
            (first[i].0.to_string(), v[v.len() / 2])
        })
        .collect()
}

#[cfg(not(feature = "cuda"))]
fn measure_cuda(
    _: &EpConfig,
    _: &RoundInputs,
    _: usize,
    _: Option<usize>,
    _: usize,
    _: bool,
    _: TimingArg,
) -> Result<Measured, String> {
    Err("this build has no cuda backend".into())
}

fn row(
    cfg: &EpConfig,
    sc: &Scenario,
    inputs: &RoundInputs,
    m: &Summary,
    ceiling: &Value,
    rounds: usize,
) -> Value {
    let (all, remote) = pairs(cfg, inputs);
    let dispatch_row = cfg.format.token_bytes(cfg.hidden) as f64;
    let combine_row = (cfg.hidden * 2) as f64;
    let gbps = |bytes: f64, us: f64| bytes / (us * 1e-6) / 1e9;
    let ceil = ceiling_gbps(ceiling);
    let d_remote = gbps(remote * dispatch_row, m.dispatch.median);
    let c_remote = gbps(remote * combine_row, m.combine.median);
    let st = |s: &Stats| json!({ "median": s.median, "p5": s.p5, "p95": s.p95 });
    json!({
        "name": sc.name(),
        "tokens_per_rank": sc.tokens,
        "format": cfg.format.name(),
        "routing": if sc.skewed { "skewed" } else { "uniform" },
        "rounds": rounds,
        "dispatch_us": m.dispatch.median,
        "combine_us": m.combine.median,
        "dispatch_p95_us": m.dispatch.p95,
        "combine_p95_us": m.combine.p95,
        "dispatch_stats_us": st(&m.dispatch),
        "combine_stats_us": st(&m.combine),
        "dispatch_async_us": m.dispatch_async.map(|s| s.median),
        "combine_async_us": m.combine_async.map(|s| s.median),
        "split_dispatch_us": m.split_dispatch.map(|s| s.median),
        "split_combine_us": m.split_combine.map(|s| s.median),
        "bytes_per_rank_dispatch": all * dispatch_row,
        "bytes_per_rank_combine": all * combine_row,
        "dispatch_gbps": gbps(all * dispatch_row, m.dispatch.median),
        "combine_gbps": gbps(all * combine_row, m.combine.median),
        "dispatch_gbps_remote": d_remote,
        "combine_gbps_remote": c_remote,
        "ceiling_gbps": ceil,
        "dispatch_vs_ceiling": d_remote / ceil,
        "combine_vs_ceiling": c_remote / ceil,
        "nccl_dispatch_us": m.nccl.map(|n| n.0.median),
        "nccl_combine_us": m.nccl.map(|n| n.1.median),
        "nccl_dispatch_stats_us": m.nccl.map(|n| st(&n.0)),
        "nccl_combine_stats_us": m.nccl.map(|n| st(&n.1)),
        "nccl_over_ours_dispatch": m.nccl.map(|n| n.0.median / m.dispatch.median),
        "nccl_over_ours_combine": m.nccl.map(|n| n.1.median / m.combine.median),
        "graph_round_us": m.graph.map(|g| g.median),
        "graph_launch_us": m.graph_launch.map(|g| g.median),
    })
}

/// The results table, then each scenario's per-kernel breakdown where one was recorded.
fn print_results(rows: &[Value]) {
    println!(
        "\n{:<22} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>8} {:>8} {:>10} {:>10} {:>7} {:>7}",
        "scenario",
        "disp us",
        "p95",
        "comb us",
        "p95",
        "disp GB/s",
        "comb GB/s",
        "d/ceil",
        "c/ceil",
        "nccl d us",
        "nccl c us",
        "nccl/d",
        "nccl/c"
    );
    let f = |v: &Value, d: usize| v.as_f64().map_or("-".to_string(), |x| format!("{x:.d$}"));
    for r in rows {
        println!(
            "{:<22} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>8} {:>8} {:>10} {:>10} {:>7} {:>7}",
            r["name"].as_str().unwrap_or(""),
            f(&r["dispatch_us"], 1),
            f(&r["dispatch_p95_us"], 1),
            f(&r["combine_us"], 1),
            f(&r["combine_p95_us"], 1),
            f(&r["dispatch_gbps_remote"], 1),
            f(&r["combine_gbps_remote"], 1),
            f(&r["dispatch_vs_ceiling"], 2),
            f(&r["combine_vs_ceiling"], 2),
            f(&r["nccl_dispatch_us"], 1),
            f(&r["nccl_combine_us"], 1),
            f(&r["nccl_over_ours_dispatch"], 2),
            f(&r["nccl_over_ours_combine"], 2),
        );
    }
    println!("(times: slowest rank per round, median and p95 over the measured rounds; GB/s: remote share, DeepEP convention; ceil: measured in this run)");
    let graphs: Vec<_> = rows
        .iter()
        .filter_map(|r| {
            let launch = r["graph_launch_us"].as_f64();
            Some((r["name"].as_str()?, r["graph_round_us"].as_f64()?, launch))
        })
        .collect();
    if !graphs.is_empty() {
        println!(
            "\na decode round (dispatch and combine) replayed from a CUDA graph, back to back:"
        );
        for (name, us, launch) in graphs {
            match launch {
                Some(l) => {
                    println!("{name:<22} {us:>8.1} us a round (the host launches one in {l:.1} us)")
                }
                None => println!("{name:<22} {us:>8.1} us a round"),
            }
        }
    }
    for r in rows {
        if let Some(steps) = r["breakdown_us"].as_array() {
            let steps: Vec<String> = steps
                .iter()
                .map(|b| {
                    let us = b["median_us"].as_f64().unwrap_or(f64::NAN);
                    format!("{} {us:.1}", b["step"].as_str().unwrap_or("?"))
                })
                .collect();
            println!(
                "{:<22} {}",
                r["name"].as_str().unwrap_or(""),
                steps.join(" | ")
            );
        }
    }
}

/// The run's first line, from its device, backend and `shape` (ranks, hidden, top_k, experts,
/// and where given the world's tokens and the timing).
fn header(device: &str, backend: &str, shape: &Value, scenarios: usize) -> String {
    let n = |k: &str| shape[k].as_u64().unwrap_or(0);
    let built_for = match shape["max_tokens_per_rank"].as_u64() {
        Some(t) => format!(" in a world built for {t} tokens per rank"),
        None => String::new(),
    };
    let step = match shape["timing_mode"].as_str() {
        Some("step") => ", step timing (--timing step)",
        _ => "",
    };
    format!(
        "ep bench on {device} ({backend} backend): {} ranks, hidden {}, top-{}, {} experts, {scenarios} scenario(s){built_for}{step}",
        n("ranks"),
        n("hidden"),
        n("top_k"),
        n("experts")
    )
}

/// What the times in a result mean, written into it.
fn timing_convention(kind: BackendKind, timing: TimingArg) -> &'static str {
    match (kind, timing) {
        (BackendKind::Sim, _) => "host wall clock of each phase on every rank (slowest rank per round)",
        (_, TimingArg::Events) => "device events around each phase on every rank (slowest rank per round); each phase (NCCL's too) starts behind a device-side gate across ranks with its launches already queued, as in a CUDA-graph-captured step, so host launch cadence and host thread skew are not timed",
        (_, TimingArg::Step) => "step timing (--timing step): on every rank (slowest rank per round), from the end of the device-side gate across ranks (%globaltimer, written by the gate) to when a kernel chained after the phase finds the phase's work complete; the phase's first kernel queued right behind the gate (chained, as ep-cuda launches it behind the kernel before it in a model's step), the NCCL baseline's own kernels chained too; no event between the gate and the phase",
    }
}

/// Today's UTC date, YYYY-MM-DD.
fn today() -> String {
    let days = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 86_400) as i64;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn args(given: &[&str]) -> Args {
        Cli::parse_from(std::iter::once("bench").chain(given.iter().copied())).args
    }

    /// `--max-tokens` builds each scenario's world for that many tokens per rank, is said in the
    /// run's first line, and is refused below a scenario's tokens.
    #[test]
    fn max_tokens_sizes_the_world() {
        let sc = Scenario {
            tokens: 32,
            format: Format::Bf16,
            skewed: false,
        };
        let built = |given: &[&str]| scenario_config(&args(given), &sc, 2);
        assert_eq!(built(&[]).unwrap().max_tokens_per_rank, 32);
        assert_eq!(
            built(&["--max-tokens", "256"]).unwrap().max_tokens_per_rank,
            256
        );
        let err = built(&["--max-tokens", "16"]).unwrap_err();
        assert!(
            err.contains("--max-tokens 16 is below the 32 tokens per rank"),
            "{err}"
        );
        let shape = json!({ "ranks": 2, "hidden": 7168, "top_k": 8, "experts": 256, "max_tokens_per_rank": 256 });
        assert!(header("d", "sim", &shape, 1)
            .ends_with("1 scenario(s) in a world built for 256 tokens per rank"));
        let shape = json!({ "ranks": 2, "hidden": 7168, "top_k": 8, "experts": 256, "max_tokens_per_rank": null });
        assert!(header("d", "sim", &shape, 1).ends_with("1 scenario(s)"));
        let shape = json!({ "ranks": 2, "hidden": 7168, "top_k": 8, "experts": 256, "timing_mode": "step" });
        assert!(
            header("d", "cuda", &shape, 1).ends_with("1 scenario(s), step timing (--timing step)")
        );
    }

    /// The ceiling line: floors among ranks that share a GPU say so; a committed two-GPU file
    /// (no rank count in its floors) prints as it always did.
    #[test]
    fn ceiling_line_names_shared_gpu_floors() {
        let floors = |extra: Value| {
            let mut f =
                json!({ "empty_kernel_us": 4.44, "flag_exchange_us": 7.5, "row_exchange_us": 8.1 });
            f.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            f
        };
        let two = json!({ "all_to_all_gbps": 365.0, "p2p_gbps": 368.0, "local_gbps": 1952.0, "floors": floors(json!({})) });
        assert_eq!(
            ceiling_text(&two),
            "all-to-all copy 365 GB/s sent per GPU (the ceiling), peer-to-peer copy 368 GB/s one way, \
             local copy 1952 GB/s\nfloor: empty kernel 4.4 us, flag exchange 7.5 us, row + flag exchange \
             8.1 us (the least a 1-token phase takes)"
        );
        let one =
            json!({ "local_gbps": 1947.2, "floors": floors(json!({ "ranks": 2, "gpus": 1 })) });
        assert_eq!(
            ceiling_text(&one),
            "local copy 1947 GB/s (one GPU)\nfloor: empty kernel 4.4 us, flag exchange 7.5 us, row + \
             flag exchange 8.1 us (the least a 1-token phase takes, 2 ranks on 1 GPU)"
        );
        let alone = json!({ "local_gbps": 1947.2 });
        assert_eq!(ceiling_text(&alone), "local copy 1947 GB/s (one GPU)");
    }

    /// The simulator's memory: the default run's ~16 GB peak is said before it starts, and a run
    /// larger than the memory available is refused.
    #[test]
    fn simulator_memory_is_said_and_bounded() {
        let sc = Scenario {
            tokens: 4096,
            format: Format::Bf16,
            skewed: false,
        };
        let cfg = scenario_config(&args(&["--ranks", "8"]), &sc, 8).unwrap();
        let need = sim_bytes(&cfg, sc.tokens);
        // The default sweep's largest scenario on 8 ranks: about 16 GB, the figure the README gives.
        assert!((15e9..17e9).contains(&need), "{need}");
        assert!(need > sim_ceiling_bytes(8));
        let line = memory_line(need, Some(64e9)).unwrap();
        assert!(
            line.contains("about 15.5 GB at peak (64.0 GB available)"),
            "{line}"
        );
        let err = memory_line(need, Some(8e9)).unwrap_err();
        assert!(
            err.contains("needs about 15.5 GB of memory and 8.0 GB is available"),
            "{err}"
        );
        assert!(memory_line(need, None).unwrap().contains("about 15.5 GB"));
    }

    /// Step timing reads the device's clocks: on the simulator it is refused before anything
    /// runs.
    #[test]
    fn step_timing_needs_a_gpu() {
        let err = main(args(&["--timing", "step", "--tokens", "1"])).unwrap_err();
        assert!(err.contains("--timing step times device kernels"), "{err}");
    }
}
