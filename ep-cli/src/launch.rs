//! `ep launch`: one process per rank, as `torchrun` starts them. Each child is this binary with
//! the given subcommand and the variables a launcher sets (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`,
//! `LOCAL_WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`); its lines come out prefixed with its rank.
//! The launcher waits for every child (none is left behind) and says how each ended; where rank 0
//! printed a verdict line (`N passed, N failed`: `ep conformance` gathers every rank's there),
//! the launcher's last line repeats it.

use std::io::{BufRead, BufReader};
use std::process::{Command, ExitCode, Stdio};

#[derive(clap::Args)]
pub struct Args {
    /// Processes (ranks) on this node.
    #[arg(long, value_parser = crate::at_least_one)]
    nproc_per_node: usize,
    /// Nodes in the world.
    #[arg(long, default_value_t = 1, value_parser = crate::at_least_one)]
    nnodes: usize,
    /// This node's index, 0..nnodes.
    #[arg(long, default_value_t = 0)]
    node_rank: usize,
    /// Where rank 0 listens (its node's address).
    #[arg(long, default_value = "127.0.0.1")]
    master_addr: String,
    /// The port rank 0 listens on. Default with one node: a free one.
    #[arg(long)]
    master_port: Option<u16>,
    /// The `ep` subcommand each process runs, after `--`: `ep launch --nproc-per-node 4 -- run`.
    #[arg(last = true, required = true, value_name = "SUBCOMMAND")]
    command: Vec<String>,
}

pub fn main(args: Args) -> Result<ExitCode, String> {
    if args.node_rank >= args.nnodes {
        return Err(format!(
            "--node-rank {} is not below --nnodes {}",
            args.node_rank, args.nnodes
        ));
    }
    let port = match (args.master_port, args.nnodes) {
        (Some(p), _) => p,
        (None, 1) => std::net::TcpListener::bind((args.master_addr.as_str(), 0))
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port at {}: {e}", args.master_addr))?
            .port(),
        (None, _) => return Err("--master-port is needed with several nodes".into()),
    };
    let exe = std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?;
    let (n, world) = (args.nproc_per_node, args.nproc_per_node * args.nnodes);
    let mut children = Vec::new();
    let mut relays = Vec::new();
    for local in 0..n {
        let rank = args.node_rank * n + local;
        let mut child = Command::new(&exe)
            .args(&args.command)
            .env("RANK", rank.to_string())
            .env("WORLD_SIZE", world.to_string())
            .env("LOCAL_RANK", local.to_string())
            .env("LOCAL_WORLD_SIZE", n.to_string())
            .env("MASTER_ADDR", &args.master_addr)
            .env("MASTER_PORT", port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting rank {rank}: {e}"))?;
        println!("ep launch: rank {rank} is pid {}", child.id());
        let out = child.stdout.take().expect("piped");
        let err = child.stderr.take().expect("piped");
        relays.push(relay(rank, out, false));
        relays.push(relay(rank, err, true));
        children.push((rank, child));
    }
    let mut failed = Vec::new();
    let mut verdict = None;
    for (rank, mut child) in children {
        match child.wait() {
            Ok(s) if s.success() => {}
            Ok(s) => failed.push(format!("rank {rank} {}", ended(&s))),
            Err(e) => failed.push(format!("rank {rank}: {e}")),
        }
    }
    for r in relays {
        if let Ok(Some(line)) = r.join() {
            verdict = Some(line);
        }
    }
    let code = if failed.is_empty() {
        println!("ep launch: {n} of {n} ranks exited 0");
        ExitCode::SUCCESS
    } else {
        println!(
            "ep launch: {} of {n} ranks exited 0; {}",
            n - failed.len(),
            failed.join(", ")
        );
        ExitCode::FAILURE
    };
    if let Some(v) = verdict {
        println!("ep launch: {v} (rank 0's verdict, over every rank)");
    }
    Ok(code)
}

/// Whether `line` is a verdict: `N passed, N failed` (then `, N skipped (...)` where some were).
fn is_verdict(line: &str) -> bool {
    let counts = |s: &str, word: &str| {
        s.strip_suffix(word)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let mut parts = line.splitn(3, ", ");
    let (a, b) = (parts.next(), parts.next());
    let skipped = parts.next();
    a.is_some_and(|a| counts(a, " passed"))
        && b.is_some_and(|b| counts(b, " failed"))
        && skipped.is_none_or(|s| s.split_once(" skipped").is_some_and(|(n, _)| counts(n, "")))
}

/// How a child that did not succeed ended: its exit code or the signal that killed it.
fn ended(s: &std::process::ExitStatus) -> String {
    #[cfg(unix)]
    if let Some(sig) = std::os::unix::process::ExitStatusExt::signal(s) {
        return format!("was killed by signal {sig}");
    }
    match s.code() {
        Some(c) => format!("exited {c}"),
        None => "ended without a code".into(),
    }
}

/// Copies a child's lines to ours, each prefixed with its rank; rank 0's last verdict line on
/// stdout ([`is_verdict`]) is what the thread returns.
fn relay(
    rank: usize,
    from: impl std::io::Read + Send + 'static,
    to_stderr: bool,
) -> std::thread::JoinHandle<Option<String>> {
    std::thread::spawn(move || {
        let mut verdict = None;
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            match to_stderr {
                true => eprintln!("[rank {rank}] {line}"),
                false => println!("[rank {rank}] {line}"),
            }
            if rank == 0 && !to_stderr && is_verdict(&line) {
                verdict = Some(line);
            }
        }
        verdict
    })
}
