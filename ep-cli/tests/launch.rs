//! `ep launch`: a world of one process per rank on the simulator, each process checking its own
//! rank against the oracle; and a rank killed mid-round, whose peers time out naming it and exit,
//! with no process left behind.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn four_processes_each_match_the_oracle() {
    let out = Command::new(env!("CARGO_BIN_EXE_ep"))
        .args(["launch", "--nproc-per-node", "4", "--"])
        .args(["run", "--scenario", "uniform", "--rounds", "2"])
        .output()
        .expect("ep runs");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    for r in 0..4 {
        let line = format!("[rank {r}] rank {r} of 4: scenario uniform, 2 rounds, outputs match");
        assert!(stdout.contains(&line), "{stdout}");
    }
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
