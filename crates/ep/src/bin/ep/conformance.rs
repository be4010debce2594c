//! `ep conformance`: the suite from the binary, snapshots compared with the embedded copies.

use std::io::Write;
use std::process::ExitCode;

use ep::conformance::runner;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    target: crate::BackendArgs,
    /// Only cases whose name contains this.
    #[arg(long)]
    filter: Option<String>,
}

pub fn main(args: Args) -> Result<ExitCode, String> {
    let backend = args.target.backend()?;
    let total = runner::all_cases::<ep::Backend>()
        .iter()
        .filter(|c| args.filter.as_deref().is_none_or(|f| c.name.contains(f)))
        .count();
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
    Ok(if runner::print_summary(&outcomes) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
