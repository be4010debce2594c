//! `ep launch`: a world of one process per rank on the simulator, each process checking its own
//! rank against the oracle; and a rank killed mid-round, whose peers time out naming it and exit,
//! with no process left behind.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A launch of `ep run --scenario uniform --rounds 2` in four processes that succeeded, every
/// rank saying its outputs matched the oracle: its stdout.
fn every_rank_matched(out: &std::process::Output) -> String {
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    for r in 0..4 {
        let line = format!("[rank {r}] rank {r} of 4: scenario uniform, 2 rounds, outputs match");
        assert!(stdout.contains(&line), "{stdout}");
    }
    stdout
}

/// `ep launch --nproc-per-node n -- args...`, run to its end.
fn launch(n: usize, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ep"))
        .args(["launch", "--nproc-per-node", &n.to_string(), "--"])
        .args(args)
        .output()
        .expect("ep runs")
}

#[test]
fn four_processes_each_match_the_oracle() {
    let out = launch(4, &["run", "--scenario", "uniform", "--rounds", "2"]);
    let stdout = every_rank_matched(&out);
    assert!(
        stdout.contains("ep launch: 4 of 4 ranks exited 0"),
        "{stdout}"
    );
}

#[test]
fn a_process_without_its_variables_is_told_which() {
    let out = Command::new(env!("CARGO_BIN_EXE_ep"))
        .args(["run", "--scenario", "uniform"])
        .env("RANK", "1")
        .env_remove("WORLD_SIZE")
        .output()
        .expect("ep runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("launcher variable WORLD_SIZE: not set"),
        "{}",
        text(&out.stderr)
    );
}

/// Rank 2 killed with SIGKILL mid-run: every other rank returns a timeout naming it within the
/// scenario's deadline (10 s) and exits; the launcher says how each ended and fails.
#[cfg(unix)]
#[test]
fn a_killed_rank_is_named_by_the_others_and_nothing_hangs() {
    let mut launcher = Command::new(env!("CARGO_BIN_EXE_ep"))
        .args(["launch", "--nproc-per-node", "4", "--"])
        .args(["run", "--scenario", "uniform", "--rounds", "1000000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ep runs");
    let mut lines = BufReader::new(launcher.stdout.take().expect("piped")).lines();
    let pid = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.strip_prefix("ep launch: rank 2 is pid ")
                .map(str::to_string)
        })
        .expect("the launcher names rank 2's pid");
    std::thread::sleep(Duration::from_millis(1500)); // well into the rounds
    let t0 = Instant::now();
    let killed = Command::new("kill")
        .args(["-9", &pid])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = launcher.wait().expect("the launcher ends");
    let waited = t0.elapsed();
    let stderr = {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut launcher.stderr.take().expect("piped"), &mut s).ok();
        s
    };
    let stdout = rest.join("\n");
    assert_eq!(status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("rank 2 was killed by signal 9"), "{stdout}");
    for r in [0, 1, 3] {
        assert!(
            stderr.contains(&format!("[rank {r}] error:")) && stderr.contains("waiting for rank 2"),
            "rank {r}: {stderr}"
        );
    }
    assert!(waited < Duration::from_secs(20), "{waited:?}");
}

/// How many cases `ep conformance --backend sim` runs with `filter`.
fn sim_cases(filter: Option<&str>) -> usize {
    ep_conformance::runner::cases_for(&ep::sim::SimBackend::new(), filter).len()
}

/// The lines of `stdout` that are a verdict (`N passed, N failed`), as printed.
fn verdicts(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| l.contains(" passed, ") && l.contains(" failed"))
        .collect()
}

#[test]
fn four_processes_pass_the_whole_suite_and_one_verdict_is_printed() {
    let out = launch(4, &["conformance", "--backend", "sim"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let n = sim_cases(None);
    assert!(
        stdout.contains(&format!(
            "[rank 0] running {n} conformance cases on backend `sim`, one process per rank"
        )),
        "{stdout}"
    );
    // Rank 0's count over every rank, and the launcher's repeat of it, last.
    let verdict = format!("{n} passed, 0 failed");
    assert_eq!(
        verdicts(&stdout),
        [
            format!("[rank 0] {verdict}"),
            format!("ep launch: {verdict} (rank 0's verdict, over every rank)")
        ],
        "{stdout}"
    );
    assert!(stdout.trim_end().ends_with("over every rank)"), "{stdout}");
}

/// A free TCP port on localhost (free when asked; the launchers bind it right after).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a local port")
        .port()
}

/// Two launchers on one machine, each a "node" of two processes, meet at one master port: the
/// suite's plain cases (the fixtures run in the one-node test above) pass in the 2 x 2 world.
#[test]
fn two_launchers_make_a_two_node_world_that_passes() {
    let port = free_port().to_string();
    let filter = "cases::";
    let node = |r: &str| {
        Command::new(env!("CARGO_BIN_EXE_ep"))
            .args([
                "launch",
                "--nnodes",
                "2",
                "--node-rank",
                r,
                "--nproc-per-node",
                "2",
            ])
            .args(["--master-port", &port, "--"])
            .args(["conformance", "--backend", "sim", "--filter", filter])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ep runs")
    };
    let second = node("1");
    let first = node("0").wait_with_output().expect("node 0 ends");
    let second = second.wait_with_output().expect("node 1 ends");
    let (out0, out1) = (text(&first.stdout), text(&second.stdout));
    let why = format!(
        "{out0}\n{}\n{out1}\n{}",
        text(&first.stderr),
        text(&second.stderr)
    );
    assert!(first.status.success() && second.status.success(), "{why}");
    let n = sim_cases(Some(filter));
    assert!(
        out0.contains(&format!("[rank 0] {n} passed, 0 failed")),
        "{why}"
    );
    assert!(
        out0.contains("[rank 1] rank 1 of 4: ran its ranks"),
        "{why}"
    );
    for r in [2, 3] {
        let line =
            format!("[rank {r}] rank {r} of 4: ran its ranks of {n} cases (0 failed in the world)");
        assert!(out1.contains(&line), "{why}");
    }
}

/// Four processes started by hand with the launcher's variables, rank 2's with another token
/// format: every process's init fails with the mismatch naming rank 2 and the field.
#[test]
fn a_process_started_with_another_config_is_named_by_every_rank() {
    let port = free_port().to_string();
    let children: Vec<_> = (0..4)
        .map(|r| {
            let format = if r == 2 { "fp8" } else { "bf16" };
            Command::new(env!("CARGO_BIN_EXE_ep"))
                .args(["run", "--scenario", "uniform", "--format", format])
                .env("RANK", r.to_string())
                .env("WORLD_SIZE", "4")
                .env("LOCAL_RANK", r.to_string())
                .env("LOCAL_WORLD_SIZE", "4")
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", &port)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("ep runs")
        })
        .collect();
    for (r, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("ep ends");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "rank {r}: {stderr}");
        assert!(
            stderr.contains("rank 2's config differs from rank 0's in `format`"),
            "rank {r}: {stderr}"
        );
    }
}

/// `ep run`'s modes in four processes: split calls, the fused shared expert, an FP8 epilogue and
/// fused SwiGLU, every rank bit-exact against the oracle.
#[test]
fn run_modes_per_rank_match_the_oracle() {
    let out = launch(
        4,
        &[
            "run",
            "--scenario",
            "uniform",
            "--format",
            "fp8",
            "--rounds",
            "2",
            "--split",
            "--shared-expert",
            "--epilogue",
            "fp8",
            "--swiglu",
            "fp8",
        ],
    );
    let stdout = every_rank_matched(&out);
    assert!(
        stdout.contains(
            "split calls, fused shared expert, epilogue: quantize to FP8, fused SwiGLU into fp8"
        ),
        "{stdout}"
    );
}

/// `ep soak` in two processes: every round of each rank checked, rank 0 reports the world.
#[test]
fn soak_per_rank_checks_every_round() {
    let out = launch(2, &["soak", "--rounds", "60", "--format", "nvfp4"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.contains(
            "[rank 0] soak: 60 of 60 rounds matched the oracle bit for bit on each of the 2 ranks"
        ),
        "{stdout}"
    );
}
