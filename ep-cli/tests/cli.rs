//! The `ep` command as a user meets it: each case runs the built binary on small sizes and checks
//! what it prints and how it exits.

use std::process::{Command, Output, Stdio};

fn ep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ep"))
        .args(args)
        .output()
        .expect("the ep binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `ep run | head -2`: the reader goes away; `ep` ends at its next write without a panic or a
/// backtrace. The read end is closed before `ep` can have written past its first line (its
/// later lines wait for a world and three rounds), so a write always meets the closed pipe.
#[test]
fn a_closed_stdout_ends_the_run_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ep"))
        .args(["run", "--rounds", "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the ep binary runs");
    // The pipe's only read end is dropped here.
    drop(child.stdout.take().expect("piped"));
    let out = child.wait_with_output().expect("ep ends");
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains("Broken pipe"), "{err}");
    assert!(err.is_empty(), "{err}");
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        // Ended by SIGPIPE at a write to the closed pipe, as `head`'s other writers are.
        assert_eq!(out.status.signal(), Some(13), "{:?}", out.status);
    }
}

/// A count of zero is refused by clap, naming the flag (not a config field).
#[test]
fn zero_counts_name_their_flag() {
    for (args, flag) in [
        (&["soak", "--ranks", "0", "--rounds", "1"][..], "--ranks"),
        (&["soak", "--rounds", "0"][..], "--rounds"),
        (&["soak", "--hidden", "0", "--rounds", "1"][..], "--hidden"),
        (&["run", "--rounds", "0"][..], "--rounds"),
        (&["run", "--skip-a2a", "0"][..], "--skip-a2a"),
        (&["bench", "--tokens", "0"][..], "--tokens"),
    ] {
        let out = ep(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("invalid value '0' for '{flag} <"))
                && err.contains("must be at least 1"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("n_experts"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: ran anyway");
    }
}

/// More ranks than the soak's world can hold experts for is refused naming `--ranks`.
#[test]
fn too_many_soak_ranks_name_the_flag() {
    let out = ep(&["soak", "--ranks", "5000", "--rounds", "1"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--ranks 5000: at most 4095"), "{err}");
}

#[test]
fn a_filter_that_matches_no_case_fails() {
    let out = ep(&["conformance", "--filter", "zzz"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no conformance case name contains `zzz`"),
        "{err}"
    );
}

/// Refused once, before any world is built (no per-rank lines, no scenario line).
#[test]
fn shared_expert_with_unreduced_is_refused_once_up_front() {
    let out = ep(&["run", "--shared-expert", "--unreduced", "--rounds", "1"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("cannot be combined").count(), 1, "{err}");
    assert!(
        err.contains("--shared-expert and --unreduced cannot be combined"),
        "{err}"
    );
    assert!(!err.contains("rank "), "{err}");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
}

#[test]
fn a_missing_scenario_file_is_named_as_a_file() {
    let out = ep(&["run", "--scenario", "/missing/file.json"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--scenario /missing/file.json: no such file"),
        "{err}"
    );
    assert!(!err.contains("no fixture named"), "{err}");
    // A bare name that is no fixture still lists the fixtures.
    let out = ep(&["run", "--scenario", "nosuch"]);
    let err = text(&out.stderr);
    assert!(err.contains("no fixture named `nosuch`; known: "), "{err}");
}

/// `--help` lists the backends, the formats and the fixtures; every flag of every subcommand has
/// a help text.
#[test]
fn help_lists_values_and_every_flag_has_help() {
    let run = text(&ep(&["run", "--help"]).stdout);
    assert!(run.contains("[possible values: sim, cuda]"), "{run}");
    assert!(
        run.contains("[possible values: bf16, fp8, mxfp4, nvfp4]"),
        "{run}"
    );
    for name in ep_conformance::Fixture::names() {
        assert!(run.contains(name), "fixture {name} missing from:\n{run}");
    }
    for sub in ["run", "soak", "conformance", "bench"] {
        let help = text(&ep(&[sub, "--help"]).stdout);
        let flags: Vec<&str> = help
            .lines()
            .filter(|l| l.trim_start().starts_with("--"))
            .collect();
        assert!(!flags.is_empty(), "{help}");
        for line in flags {
            // `--flag <VALUE>   [default: 1]` alone is a flag without help.
            let rest = line.trim_start().split_once("  ").map(|(_, r)| r.trim());
            assert!(
                rest.is_some_and(|r| !r.is_empty() && !r.starts_with('[')),
                "`ep {sub}`: no help for {line:?}"
            );
        }
    }
    let soak = text(&ep(&["soak", "--help"]).stdout);
    assert!(
        soak.contains("[possible values: bf16, fp8, mxfp4, nvfp4]"),
        "{soak}"
    );
}

/// Case-insensitive names still work after the lists moved into clap.
#[test]
fn backend_and_format_names_ignore_case() {
    let out = ep(&[
        "run",
        "--backend",
        "SIM",
        "--format",
        "NVFP4",
        "--scenario",
        "uniform",
        "--rounds",
        "1",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("oracle: bit-exact on all 1 rounds"));
}

/// A world that times out prints a few lines that call it a timeout, not one line per rank and
/// not a mismatch.
#[test]
fn a_soak_timeout_is_a_short_timeout_report() {
    let out = ep(&[
        "soak",
        "--ranks",
        "200",
        "--rounds",
        "1",
        "--hidden",
        "128",
        "--timeout-ms",
        "1",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("round 0: TIMEOUT"), "{stdout}");
    assert!(stdout.contains("timed out after"), "{stdout}");
    assert!(
        stdout.contains("after a timeout the world must be initialised again"),
        "{stdout}"
    );
    assert!(!stdout.contains("MISMATCH"), "{stdout}");
    assert!(stdout.lines().count() <= 8, "{stdout}");
    assert!(stdout.len() < 2048, "{} bytes:\n{stdout}", stdout.len());
}

/// The simulator's bench says how much memory it needs before it starts, and refuses a run
/// larger than the machine (here ~3.8 EB) before it allocates anything.
#[test]
fn bench_on_the_simulator_says_its_memory_first() {
    // The memory available is read from /proc/meminfo; elsewhere the run is only announced.
    if std::path::Path::new("/proc/meminfo").exists() {
        let out = ep(&["bench", "--tokens", "1000000000", "--ranks", "8"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("this simulator run needs about"), "{err}");
        assert!(
            err.contains("pass smaller --tokens, --ranks or --hidden"),
            "{err}"
        );
    }
    let dir = std::env::temp_dir().join(format!("ep-cli-bench-{}", std::process::id()));
    let json = dir.join("b.json");
    let out = ep(&[
        "bench",
        "--ranks",
        "2",
        "--tokens",
        "8",
        "--hidden",
        "128",
        "--experts",
        "16",
        "--passes",
        "1",
        "--rounds",
        "1",
        "--out",
        json.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let first = stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("memory: the simulator holds every rank's rows in this process, about"),
        "{stdout}"
    );
}

/// The CUDA backend's options come from the environment (ep-cli/src/options.rs), read before the
/// backend looks for a GPU: a bad value, or a test hook in a build without `test-hooks`, is an
/// error naming the variable, on any machine.
#[cfg(feature = "cuda")]
#[test]
fn a_bad_cuda_option_variable_is_named() {
    let run = |var: &str, value: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_ep"))
            .args(["conformance", "--backend", "cuda"])
            .env(var, value)
            .output()
            .expect("the ep binary runs");
        assert!(!out.status.success(), "{var}={value}");
        text(&out.stderr)
    };
    let err = run("EP_CUDA_SEND_THREADS", "100");
    assert!(err.contains("EP_CUDA_SEND_THREADS=100"), "{err}");
    let err = run("EP_CUDA_OVERLAP_MIN_TOKENS", "many");
    assert!(err.contains("EP_CUDA_OVERLAP_MIN_TOKENS"), "{err}");
    #[cfg(not(feature = "test-hooks"))]
    {
        let err = run("EP_CUDA_LATE_INPUTS", "1000");
        assert!(err.contains("--features test-hooks"), "{err}");
    }
}
