//! The `ep` command: run a scenario end to end, run the conformance suite, benchmark.

mod bench;
mod conformance;
mod run;

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
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// The backend named on the command line, or a clear error.
fn backend(kind: BackendKind) -> Result<ep::Backend, String> {
    ep::Backend::new(kind).map_err(|e| e.to_string())
}
