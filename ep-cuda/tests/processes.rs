//! Worlds of one process per GPU (`CudaBackend::init_rank`), as a launcher starts them: this
//! binary starts itself once per rank with the variables `torchrun` sets. Each child makes its
//! rank, runs rounds at sizes that take every path a multi-process world can take (decode,
//! multi-kernel, layout-first, overlapped inside a node; the chain with NCCL between nodes),
//! in several formats and call modes, and checks its outputs bit for bit against the oracle,
//! which it computes for the whole world. Worlds: one node of every GPU, two nodes (NCCL
//! between them; with `NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1` NCCL's network transport). Then
//! the kill test: rank 1 is killed with SIGKILL after a round, and every other rank's next
//! round must end in a timeout naming it alone, within its deadline (between nodes too, where
//! the NCCL communicator of each rank with it is aborted), and exit; nothing is left running. Without two GPUs it
//! says it did not run. `EP_PROC_GPUS=N` uses N GPUs (default: every visible one).

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use ep_conformance::rng::Rng;
use ep_conformance::routing::RoutingSpec;
use ep_conformance::{toy_experts, RoundInputs, WeightKind};
use ep_core::rendezvous::{RankSpec, Rendezvous};
use ep_core::{oracle, EpBackend, EpConfig, EpError, Format, HostIo};
use ep_cuda::CudaBackend;

const DEADLINE: Duration = Duration::from_secs(3);

/// The world's config: `ranks` over `nodes`, `tokens` a rank at most, in `format`.
fn config(ranks: usize, nodes: usize, tokens: usize, format: Format) -> EpConfig {
    EpConfig::builder()
        .hidden(1024)
        .top_k(8)
        .experts(16 * ranks)
        .max_tokens_per_rank(tokens)
        .gpus_per_node(ranks / nodes)
        .nodes(nodes)
        .format(format)
        .timeout(DEADLINE)
        .build()
        .expect("a valid config")
}

fn inputs(cfg: &EpConfig, tokens: usize, seed: u64) -> RoundInputs {
    let mut rng = Rng::new(seed);
    let spec = RoutingSpec {
        masked: 0.05,
        ..RoutingSpec::uniform()
    };
    let ids = (0..cfg.n_ranks())
        .map(|r| {
            // Uneven token counts: rank r sends fewer.
            let t = tokens - tokens * r / (4 * cfg.n_ranks());
            spec.generate(&mut rng, t, cfg.top_k, cfg.n_experts, cfg.n_ranks())
        })
        .collect();
    RoundInputs::with_random_values(cfg.hidden, ids, seed ^ 0x5eed)
}

/// One child: its rank of each world, every round checked. Returns a failure's description.
fn child_rounds(spec: RankSpec, rv: &mut Rendezvous, nodes: usize) -> Result<String, String> {
    let r = spec.rank;
    let backend = CudaBackend::new();
    let mut checked = 0;
    for format in [Format::Bf16, Format::Fp8, Format::Nvfp4] {
        for tokens in [1, 64, 300, 600, 2048] {
            if format != Format::Bf16 && tokens > 600 {
                continue;
            }
            let cfg = config(spec.world_size, nodes, tokens, format);
            let mut comm = backend.init_rank(&cfg, rv).map_err(|e| e.to_string())?;
            for (round, weights) in [WeightKind::F32, WeightKind::None, WeightKind::Bf16]
                .into_iter()
                .enumerate()
            {
                let seed = 1000 * tokens as u64 + 10 * round as u64 + format as u64;
                let inputs = inputs(&cfg, tokens, seed);
                let d_in = inputs.dispatch_inputs();
                let want_d = oracle::dispatch(&cfg, &d_in).map_err(|e| e.to_string())?;
                let ys: Vec<_> = want_d.iter().map(toy_experts).collect();
                let c_in: Vec<_> = (0..cfg.n_ranks())
                    .map(|q| inputs.combine_input(q, &ys[q], weights))
                    .collect();
                let want_c =
                    oracle::combine(&cfg, &d_in, &want_d, &c_in).map_err(|e| e.to_string())?;
                let what = format!("{format} {tokens} tokens, {nodes} node(s), round {round}");
                // Fused calls, then split ones.
                let d = match round % 2 {
                    0 => comm.host_dispatch(&d_in[r]),
                    _ => comm
                        .host_dispatch_async(&d_in[r])
                        .and_then(|p| comm.host_dispatch_wait(p)),
                }
                .map_err(|e| format!("{what}: {e}"))?;
                if let Some(diff) = d.bit_diff(&want_d[r]) {
                    return Err(format!("{what}: dispatch differs from the oracle: {diff}"));
                }
                let y = toy_experts(&d);
                let cin = inputs.combine_input(r, &y, weights);
                let c = match round % 2 {
                    0 => comm.host_combine(&d, &cin),
                    _ => comm
                        .host_combine_async(&d, &cin)
                        .and_then(|p| comm.host_combine_wait(p)),
                }
                .map_err(|e| format!("{what}: {e}"))?;
                if c != want_c[r] {
                    return Err(format!("{what}: combine differs from the oracle"));
                }
                checked += 1;
            }
        }
    }
    Ok(format!("{checked} rounds bit-exact"))
}

/// One child of the kill test: a round, then rank 1 is killed and the others' next round must
/// end in a timeout naming it.
fn child_kill(spec: RankSpec, rv: &mut Rendezvous, nodes: usize) -> Result<String, String> {
    let r = spec.rank;
    let cfg = config(spec.world_size, nodes, 64, Format::Bf16);
    let mut comm = CudaBackend::new()
        .init_rank(&cfg, rv)
        .map_err(|e| e.to_string())?;
    let inputs = inputs(&cfg, 64, 7);
    let d = comm
        .host_dispatch(&inputs.dispatch_input(r))
        .map_err(|e| e.to_string())?;
    let y = toy_experts(&d);
    comm.host_combine(&d, &inputs.combine_input(r, &y, WeightKind::F32))
        .map_err(|e| e.to_string())?;
    rv.barrier().map_err(|e| e.to_string())?;
    if r == 1 {
        let me = std::process::id().to_string();
        let _ = Command::new("kill").args(["-9", &me]).status();
        std::thread::sleep(Duration::from_secs(60));
        return Err("rank 1 outlived SIGKILL".into());
    }
    let start = Instant::now();
    let got = comm.host_dispatch(&inputs.dispatch_input(r)).and_then(|d| {
        let y = toy_experts(&d);
        comm.host_combine(&d, &inputs.combine_input(r, &y, WeightKind::F32))
    });
    let took = start.elapsed();
    let limit = DEADLINE + Duration::from_secs(2);
    match got {
        Err(e @ EpError::Timeout { .. }) if e.missing_ranks() == [1] && took <= limit => {
            Ok(format!("after {took:.1?}: {e}"))
        }
        Err(e) => Err(format!("after {took:.1?}: wrong error or too late: {e}")),
        Ok(_) => Err("the round completed without rank 1".into()),
    }
}

fn child(role: &str) -> ExitCode {
    let (spec, master) = RankSpec::from_vars(|k| std::env::var(k).ok()).expect("launcher vars");
    let nodes: usize = std::env::var("EP_PROC_NODES").map_or(1, |v| v.parse().unwrap());
    let mut rv = Rendezvous::connect(spec, &master, Duration::from_secs(120)).expect("rendezvous");
    let got = match role {
        "rounds" => child_rounds(spec, &mut rv, nodes),
        _ => child_kill(spec, &mut rv, nodes),
    };
    match got {
        Ok(m) => {
            println!("rank {}: {m}", spec.rank);
            ExitCode::SUCCESS
        }
        Err(m) => {
            println!("rank {}: FAILED: {m}", spec.rank);
            ExitCode::FAILURE
        }
    }
}

/// Starts `ranks` children in `role`, waits for them (at most `limit`, then kills them) and
/// returns each one's exit (`None`: killed by a signal) and its output.
fn launch(role: &str, ranks: usize, nodes: usize, limit: Duration) -> Vec<(Option<i32>, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let exe = std::env::current_exe().expect("this binary");
    // One launcher on this host: each rank's GPU is its rank's, whatever node the config puts
    // it on (the config's nodes decide what is mapped through CUDA IPC and what NCCL carries).
    let mut children: Vec<_> = (0..ranks)
        .map(|r| {
            Command::new(&exe)
                .env("EP_PROC_ROLE", role)
                .env("EP_PROC_NODES", nodes.to_string())
                .env("RANK", r.to_string())
                .env("WORLD_SIZE", ranks.to_string())
                .env("LOCAL_RANK", r.to_string())
                .env("LOCAL_WORLD_SIZE", ranks.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("spawn a rank")
        })
        .collect();
    let start = Instant::now();
    let mut done: Vec<Option<std::process::ExitStatus>> = vec![None; ranks];
    while done.iter().any(Option::is_none) && start.elapsed() < limit {
        for (c, d) in children.iter_mut().zip(done.iter_mut()) {
            if d.is_none() {
                *d = c.try_wait().expect("wait");
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    children
        .into_iter()
        .zip(done)
        .map(|(mut c, d)| {
            let status = d.unwrap_or_else(|| {
                let _ = c.kill();
                c.wait().expect("wait")
            });
            let mut out = String::new();
            if let Some(mut o) = c.stdout.take() {
                let _ = std::io::Read::read_to_string(&mut o, &mut out);
            }
            (status.code(), out)
        })
        .collect()
}

fn main() -> ExitCode {
    if let Ok(role) = std::env::var("EP_PROC_ROLE") {
        return child(&role);
    }
    let gpus = match CudaBackend::probe() {
        Ok(g) if g.len() >= 2 => g,
        Ok(g) => {
            println!(
                "ep-cuda processes: NOT RUN (not counted): {} GPU(s), two needed",
                g.len()
            );
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            println!("ep-cuda processes: NOT RUN (not counted): {e}");
            return ExitCode::SUCCESS;
        }
    };
    let n = std::env::var("EP_PROC_GPUS").map_or(gpus.len(), |v| v.parse().unwrap());
    println!(
        "ep-cuda processes on {} ({n} GPUs, a process each)",
        gpus[0]
    );
    let mut failed = 0;
    let mut worlds = vec![(n, 1), (n, 2)];
    if n >= 4 {
        worlds.push((2, 1));
    }
    for (ranks, nodes) in worlds {
        for role in ["rounds", "kill"] {
            let start = Instant::now();
            let got = launch(role, ranks, nodes, Duration::from_secs(300));
            let ok = got.iter().enumerate().all(|(r, (code, _))| match role {
                "kill" if r == 1 => code.is_none(),
                _ => *code == Some(0),
            });
            println!(
                "{} {role}: {ranks} processes, {nodes} node(s), {:.1} s",
                if ok { "ok    " } else { "FAILED" },
                start.elapsed().as_secs_f64()
            );
            for (r, (code, out)) in got.iter().enumerate() {
                for line in out.lines() {
                    println!("    [rank {r}] {line}");
                }
                if code.is_none() {
                    println!("    [rank {r}] ended by a signal");
                }
            }
            failed += usize::from(!ok);
        }
    }
    println!("{failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
