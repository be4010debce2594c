//! The `ep` command: run a scenario end to end, run the conformance suite, benchmark.

mod bench;
mod conformance;
mod dump;
mod launch;
mod npy;
mod options;
mod report;
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
    /// One process per rank, as torchrun starts them: `ep launch --nproc-per-node 4 -- run`.
    Launch(launch::Args),
}

fn main() -> ExitCode {
    restore_sigpipe();
    options::prepare_cuda_driver();
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
        Command::Launch(a) => launch::main(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Rust ignores SIGPIPE before `main`, so a write to a closed pipe (`ep run | head -2`) returns
/// an error and `println!` panics with a backtrace. With the default action restored, the process
/// ends quietly at that write, as other Unix tools do.
#[cfg(unix)]
fn restore_sigpipe() {
    extern "C" {
        fn signal(signum: i32, handler: usize) -> usize;
    }
    // SIGPIPE is 13 and SIG_DFL is 0 on Linux, macOS and the BSDs.
    const SIGPIPE: i32 = 13;
    const SIG_DFL: usize = 0;
    // SAFETY: `signal` with SIG_DFL only resets a disposition; called before any other thread
    // starts.
    unsafe {
        signal(SIGPIPE, SIG_DFL);
    }
}

#[cfg(not(unix))]
fn restore_sigpipe() {}

/// `--backend`: the known backends, listed by `--help` and in the error for an unknown one.
pub fn backend_parser() -> impl clap::builder::TypedValueParser<Value = BackendKind> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(BackendKind::ALL.map(BackendKind::name))
        .map(|s| s.parse::<BackendKind>().expect("a listed name"))
}

/// `--format` and the other options that take a token format: the four formats, listed by
/// `--help` and in the error for an unknown one.
pub fn format_parser() -> impl clap::builder::TypedValueParser<Value = ep::Format> {
    use clap::builder::TypedValueParser;
    use ep::TokenFormat;
    clap::builder::PossibleValuesParser::new(ep::Format::ALL.iter().map(|f| f.name()))
        .map(|s| s.parse::<ep::Format>().expect("a listed name"))
}

/// A count that must be at least 1 (`--rounds`, `--ranks`, `--hidden`, ...): clap names the
/// flag in the error.
pub fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// The backend options every subcommand takes.
#[derive(clap::Args, Clone, Copy)]
pub struct BackendArgs {
    /// The backend: `sim` (the CPU simulator) or `cuda` (NVIDIA GPUs).
    #[arg(long, default_value = "sim", value_parser = backend_parser(), ignore_case = true)]
    pub backend: BackendKind,
    /// CUDA: ranks per GPU (default: spread over the visible GPUs).
    #[arg(long, value_parser = at_least_one)]
    pub ranks_per_gpu: Option<usize>,
}

impl BackendArgs {
    /// The backend named on the command line, or a clear error.
    pub fn backend(&self) -> Result<ep::Backend, String> {
        match (self.backend, self.ranks_per_gpu) {
            #[cfg(feature = "cuda")]
            (BackendKind::Cuda, n) => ep::Backend::cuda_with(n, options::cuda_options_from_env()?),
            (kind, None) => ep::Backend::new(kind),
            (_, Some(_)) => return Err("--ranks-per-gpu applies to the cuda backend".into()),
        }
        .map_err(|e| e.to_string())
    }
}
