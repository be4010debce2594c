//! `ep conformance`: the suite from the binary, snapshots compared with the embedded copies. Under
//! a launcher (`RANK` set: `ep launch`, `torchrun`) each process runs the suite for its own ranks
//! and rank 0 prints every rank's verdicts (`ep_conformance::per_rank`).

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use ep::rendezvous::RankSpec;
use ep_conformance::per_rank::{PerRank, Processes};
use ep_conformance::runner;

/// How long a process waits at each meeting of the processes for the slowest one: longer than
/// the longest case takes on a loaded machine.
const PROCESSES_DEADLINE: Duration = Duration::from_secs(120);

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    target: crate::BackendArgs,
    /// Only cases whose name contains this (none matching is an error).
    #[arg(long)]
    filter: Option<String>,
    /// CUDA: run the suite once per path policy named (comma-separated, or `all`), each forcing
    /// one way through the phases at every size, in this one process. `--list-policies` names
    /// them.
    #[arg(long)]
    policy: Option<String>,
    /// Print the path policies' names, one a line, and exit.
    #[arg(long)]
    list_policies: bool,
    /// With one process per rank (under `ep launch` or torchrun's variables): run the fixtures
    /// with their ranks split into this many nodes, e.g. 2 for a world of 2 nodes x 2 GPUs on
    /// one 4-GPU host, whose traffic between nodes then takes NCCL.
    #[arg(long, value_parser = crate::at_least_one)]
    fixture_nodes: Option<usize>,
}

pub fn main(args: Args) -> Result<ExitCode, String> {
    if args.list_policies {
        for name in policy_names() {
            println!("{name}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if std::env::var_os("RANK").is_some() {
        return main_rank(&args);
    }
    if args.fixture_nodes.is_some() {
        return Err("--fixture-nodes splits the fixtures' worlds over a launch's processes: run under `ep launch` (or torchrun's variables)".into());
    }
    let runs = policy_backends(&args)?;
    let device_ok = device_checks(args.target.backend)?;
    let backend = &runs[0].1;
    let epilogue_case = applies_device_epilogue(backend, args.filter.as_deref());
    let total = runs.len()
        * (runner::cases_for(backend, args.filter.as_deref()).len() + usize::from(epilogue_case));
    let skipped = runner::skipped_for(backend, args.filter.as_deref());
    check_selection(&args, total, &skipped)?;
    println!(
        "running {total} conformance cases on backend `{}`{}",
        args.target.backend,
        skipped_note(&skipped)
    );
    for (name, why) in &skipped {
        println!("skipped {name}: {why}");
    }
    let mut done = 0;
    let mut report = |policy: Option<&str>, o: &runner::Outcome| {
        done += 1;
        progress(done, total, policy, o);
    };
    let mut outcomes = Vec::new();
    for (policy, backend) in &runs {
        let policy = policy.as_deref();
        let mut done = runner::run_all(backend, args.filter.as_deref(), |o| report(policy, o));
        if let Some(o) = epilogue_case.then(|| device_epilogue(backend)).flatten() {
            report(policy, &o);
            done.push(o);
        }
        if let Some(p) = policy {
            for o in &mut done {
                o.name = format!("{p}::{}", o.name);
            }
        }
        outcomes.extend(done);
    }
    let cases_ok = runner::print_summary(&outcomes);
    if !device_ok {
        println!("device self-check FAILED (above): the CUDA backend's FP8 encode is not exact on this GPU");
    }
    Ok(if cases_ok && device_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `ep conformance` in one process of a world of one process per rank: this process's ranks of
/// every case's world, on the backend `--backend` names (through its `init_rank`), the verdicts
/// of every process gathered; rank 0 prints the cases and the closing `N passed, N failed`,
/// every process exits as the world's verdict says.
fn main_rank(args: &Args) -> Result<ExitCode, String> {
    if args.policy.is_some() {
        return Err(
            "--policy is not taken with one process per rank yet: each process runs the \
                    suite once, with the backend's options from the environment"
                .into(),
        );
    }
    let (spec, master) =
        RankSpec::from_vars(|k| std::env::var(k).ok()).map_err(|e| e.to_string())?;
    let inner = args.target.backend()?;
    let filter = args.filter.as_deref();
    let mut skipped = runner::skipped_for(&inner, filter);
    if applies_device_epilogue(&inner, filter) {
        skipped.push((
            DEVICE_EPILOGUE.into(),
            "builds a world of its own in one process, so not with one process per rank",
        ));
    }
    let total = runner::cases_for(&inner, filter).len();
    check_selection(args, total, &skipped)?;
    let processes =
        Processes::connect(spec, &master, PROCESSES_DEADLINE).map_err(|e| e.to_string())?;
    let backend = PerRank::new(inner, Arc::new(processes));
    // Each node's GPUs are checked once, by its first process.
    let device_ok = spec.local_rank != 0 || device_checks(args.target.backend)?;
    let failed_checks = backend
        .processes()
        .total("device self-checks", u64::from(!device_ok))?;
    let rank0 = spec.rank == 0;
    if rank0 {
        println!(
            "running {total} conformance cases on backend `{}`, one process per rank ({} \
             processes; each runs its own ranks, rank 0 reports every verdict){}",
            args.target.backend,
            spec.world_size,
            skipped_note(&skipped)
        );
        for (name, why) in &skipped {
            println!("skipped {name}: {why}");
        }
    }
    let mut done = 0;
    let outcomes = runner::run_all_per_rank(&backend, filter, args.fixture_nodes, |o| {
        done += 1;
        if rank0 {
            progress(done, total, None, o);
        }
    });
    let cases_ok = if rank0 {
        runner::print_summary(&outcomes)
    } else {
        let failed = outcomes.iter().filter(|o| o.failed()).count();
        println!(
            "rank {} of {}: ran its ranks of {total} cases ({failed} failed in the world); rank 0 \
             reports the verdicts",
            spec.rank, spec.world_size
        );
        failed == 0
    };
    if failed_checks > 0 && rank0 {
        println!("device self-check FAILED on {failed_checks} node(s): the CUDA backend's FP8 encode is not exact there");
    }
    Ok(if cases_ok && failed_checks == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// An error when the filter selects no case this backend runs.
fn check_selection(
    args: &Args,
    total: usize,
    skipped: &[(String, &'static str)],
) -> Result<(), String> {
    let filter = args.filter.as_deref().unwrap_or_default();
    if total + skipped.len() == 0 {
        return Err(format!("no conformance case name contains `{filter}`"));
    }
    if total == 0 {
        let names: Vec<_> = skipped
            .iter()
            .map(|(n, why)| format!("{n} ({why})"))
            .collect();
        return Err(format!(
            "every case whose name contains `{filter}` is skipped on backend `{}`: {}",
            args.target.backend,
            names.join("; ")
        ));
    }
    Ok(())
}

fn skipped_note(skipped: &[(String, &'static str)]) -> String {
    match skipped.len() {
        0 => String::new(),
        n => format!(" ({n} skipped, below)"),
    }
}

/// One case's line: `[  7/278] ok     NAME (12 ms)`.
fn progress(done: usize, total: usize, policy: Option<&str>, o: &runner::Outcome) {
    let status = match (&o.result, o.skipped()) {
        (Ok(()), _) => "ok",
        (_, Some(_)) => "skipped",
        _ => "FAILED",
    };
    let prefix = policy.map(|p| format!("{p}::")).unwrap_or_default();
    println!(
        "[{done:>3}/{total}] {status:<6} {prefix}{} ({:.0} ms)",
        o.name,
        o.time.as_secs_f64() * 1e3
    );
    let _ = std::io::stdout().flush();
}

/// The path policies' names (`--policy`); none without the CUDA backend compiled in.
fn policy_names() -> Vec<&'static str> {
    #[cfg(feature = "cuda")]
    return ep::cuda::PathPolicy::ALL.map(|p| p.name()).to_vec();
    #[cfg(not(feature = "cuda"))]
    return Vec::new();
}

/// The backends to run the suite on: the one the command line names, or under `--policy` one
/// per policy (CUDA only), each with the policy's options over the environment's.
fn policy_backends(args: &Args) -> Result<Vec<(Option<String>, ep::Backend)>, String> {
    let Some(list) = &args.policy else {
        return Ok(vec![(None, args.target.backend()?)]);
    };
    if args.target.backend != ep::BackendKind::Cuda {
        return Err("--policy applies to the cuda backend".into());
    }
    let names: Vec<&str> = match list.trim() {
        "all" => policy_names(),
        l => l.split(',').map(str::trim).collect(),
    };
    #[cfg(feature = "cuda")]
    {
        let options = crate::options::cuda_options_from_env()?;
        names
            .into_iter()
            .map(|name| {
                let policy: ep::cuda::PathPolicy = name.parse()?;
                let backend = ep::Backend::cuda_with(
                    args.target.ranks_per_gpu,
                    policy.apply(options.clone()),
                )
                .map_err(|e| e.to_string())?;
                Ok((Some(policy.name().to_string()), backend))
            })
            .collect()
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = names;
        Err("--policy: this `ep` was built without the cuda backend".into())
    }
}

/// CUDA: the arithmetic the kernels take to be exact, checked on every visible GPU before the
/// cases (ep_cuda::selfcheck); true where it holds. Nothing to check on the simulator.
fn device_checks(kind: ep::BackendKind) -> Result<bool, String> {
    match kind {
        #[cfg(feature = "cuda")]
        ep::BackendKind::Cuda => {
            let checks = ep::cuda::selfcheck::check_every_gpu().map_err(|e| e.to_string())?;
            for (gpu, c) in checks.iter().enumerate() {
                println!("GPU {gpu}: {c}");
            }
            Ok(checks.iter().all(|c| c.passed()))
        }
        _ => Ok(true),
    }
}

const DEVICE_EPILOGUE: &str = "cuda::device_epilogue";

/// Whether the run includes the device-code epilogue check: on CUDA, unless the filter leaves it
/// out.
fn applies_device_epilogue(backend: &ep::Backend, filter: Option<&str>) -> bool {
    backend.kind() == ep::BackendKind::Cuda && filter.is_none_or(|f| DEVICE_EPILOGUE.contains(f))
}

/// CUDA: a device-code epilogue through each combine path against the oracle, as one more case
/// (ep_cuda::epilogue_check; the generic cases cannot see what such an epilogue leaves). `None`
/// on other backends.
fn device_epilogue(backend: &ep::Backend) -> Option<runner::Outcome> {
    match backend {
        #[cfg(feature = "cuda")]
        ep::Backend::Cuda(cuda) => {
            let t0 = std::time::Instant::now();
            let result = match ep::cuda::epilogue_check::check(cuda) {
                Ok(rounds) => rounds
                    .iter()
                    .find(|r| !r.passed())
                    .map_or(Ok(()), |r| Err(r.to_string())),
                Err(e) => Err(e.to_string()),
            };
            Some(runner::Outcome {
                name: DEVICE_EPILOGUE.into(),
                result,
                time: t0.elapsed(),
            })
        }
        _ => None,
    }
}
