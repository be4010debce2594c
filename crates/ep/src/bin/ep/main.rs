//! The `ep` command: run a scenario end to end, run the conformance suite, benchmark.

mod bench;
mod conformance;
mod run;
mod soak;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ep::BackendKind;

#[derive(Parser)]
#[command(
    name = "ep",
    version,
    about = "Expert-parallel dispatch/combine: run, check, measure"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run one scenario end to end (dispatch, stand-in experts, combine) and check it against
    /// the oracle. With no scenario, runs the built-in demo.
    Run(run::Args),
    /// Run the whole conformance suite and print `N passed, N failed`.
    Conformance(conformance::Args),
    /// Time dispatch and combine on a large round next to a memcpy of the same bytes.
    Bench(bench::Args),
    /// Many consecutive rounds with fresh random routing on one world, each checked against the
    /// oracle.
    Soak(soak::Args),
}

fn main() -> ExitCode {
    let mut cli = Cli::parse();
    if cli.command.is_none() {
        // `ep` alone is `ep run` with every default.
        cli = Cli::parse_from(["ep", "run"]);
    }
    let result = match cli.command.expect("set above") {
        Command::Run(a) => run::main(a),
        Command::Conformance(a) => conformance::main(a),
        Command::Bench(a) => bench::main(a),
        Command::Soak(a) => soak::main(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// The backend options every subcommand takes.
#[derive(clap::Args, Clone, Copy)]
pub struct BackendArgs {
    #[arg(long, default_value = "sim")]
    pub backend: BackendKind,
    /// CUDA: ranks per GPU (default: spread over the visible GPUs).
    #[arg(long)]
    pub ranks_per_gpu: Option<usize>,
}

impl BackendArgs {
    /// The backend named on the command line, or a clear error.
    pub fn backend(&self) -> Result<ep::Backend, String> {
        match (self.backend, self.ranks_per_gpu) {
            (kind, None) => ep::Backend::new(kind),
            #[cfg(feature = "cuda")]
            (BackendKind::Cuda, Some(n)) => ep::Backend::cuda(Some(n)),
            (_, Some(_)) => return Err("--ranks-per-gpu applies to the cuda backend".into()),
        }
        .map_err(|e| e.to_string())
    }
}
