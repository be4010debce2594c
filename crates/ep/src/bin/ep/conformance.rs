//! `ep conformance`: the suite from the binary, snapshots compared with the embedded copies.

use std::io::Write;
use std::process::ExitCode;

use ep::conformance::runner;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    target: crate::BackendArgs,
    /// Only cases whose name contains this (none matching is an error).
    #[arg(long)]
    filter: Option<String>,
}

pub fn main(args: Args) -> Result<ExitCode, String> {
    let backend = args.target.backend()?;
    let device_ok = device_checks(args.target.backend)?;
    let total = runner::all_cases::<ep::Backend>()
        .iter()
        .filter(|c| args.filter.as_deref().is_none_or(|f| c.name.contains(f)))
        .count();
    if total == 0 {
        return Err(format!(
            "no conformance case name contains `{}`",
            args.filter.as_deref().unwrap_or_default()
        ));
    }
    println!(
        "running {total} conformance cases on backend `{}`",
        args.target.backend
    );
    let mut done = 0;
    let outcomes = runner::run_all(&backend, args.filter.as_deref(), |o| {
        done += 1;
        let status = if o.result.is_ok() { "ok" } else { "FAILED" };
        println!(
            "[{done:>3}/{total}] {status:<6} {} ({:.0} ms)",
            o.name,
            o.time.as_secs_f64() * 1e3
        );
        let _ = std::io::stdout().flush();
    });
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
