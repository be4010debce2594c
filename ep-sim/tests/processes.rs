//! A world made one rank at a time (`SimBackend::init_rank`), as processes under a launcher make
//! it: here threads, each with its own rendezvous and its own mapping of the world's shared file,
//! so nothing is shared but what a process would share. Each rank's dispatch and combine are
//! checked bit for bit against the oracle, on one node and on two (through the NIC thread).

use std::net::TcpListener;
use std::time::Duration;

use ep_conformance::rng::Rng;
use ep_core::rendezvous::{on_threads, Master, RankSpec, Rendezvous};
use ep_core::{
    bf16, oracle, CombineInput, DispatchInput, EpBackend, EpConfig, EpError, HostIo, RouterWeights,
};
use ep_sim::SimBackend;
use ndarray::Array2;

/// Every rank's inputs: tokens, distinct experts a token (some masked), weights.
fn inputs(cfg: &EpConfig, t: usize) -> Vec<(Array2<bf16>, Array2<i32>, Array2<f32>)> {
    let mut rng = Rng::new(7);
    (0..cfg.n_ranks())
        .map(|_| {
            let x = Array2::from_shape_simple_fn((t, cfg.hidden), || {
                bf16::from_f32(rng.range(-1.0, 1.0))
            });
            let mut ids = Array2::<i32>::zeros((t, cfg.top_k));
            for mut row in ids.rows_mut() {
                for (k, e) in rng
                    .distinct(cfg.top_k, cfg.n_experts)
                    .into_iter()
                    .enumerate()
                {
                    row[k] = if rng.chance(0.1) { -1 } else { e as i32 };
                }
            }
            let w = Array2::from_shape_simple_fn((t, cfg.top_k), || rng.unit());
            (x, ids, w)
        })
        .collect()
}

/// Runs `f` on every rank of `cfg`'s world, each rank made by `init_rank` on its own thread.
fn per_rank<R: Send>(
    cfg: &EpConfig,
    f: impl Fn(ep_core::Result<ep_sim::SimComm>) -> R + Sync,
) -> Vec<R> {
    let deadline = Duration::from_secs(20);
    on_threads(cfg.n_ranks(), cfg.n_gpus_per_node, deadline, |rv| {
        f(rv.and_then(|mut rv| SimBackend::new().init_rank(cfg, &mut rv)))
    })
}

fn round_matches_the_oracle(cfg: EpConfig, t: usize) {
    let ins = inputs(&cfg, t);
    let d_in: Vec<_> = ins
        .iter()
        .map(|(x, ids, _)| DispatchInput::new(x.view(), ids.view()))
        .collect();
    let want_d = oracle::dispatch(&cfg, &d_in).unwrap();
    let y: Vec<Array2<bf16>> = want_d
        .iter()
        .map(|d| d.decode_rows().mapv(bf16::from_f32))
        .collect();
    let c_in: Vec<_> = (0..cfg.n_ranks())
        .map(|r| CombineInput::weighted(y[r].view(), RouterWeights::F32(ins[r].2.view())))
        .collect();
    let want_c = oracle::combine(&cfg, &d_in, &want_d, &c_in).unwrap();
    let results = per_rank(&cfg, |comm| -> Result<(), String> {
        let mut c = comm.map_err(|e| e.to_string())?;
        let r = ep_core::EpComm::rank(&c);
        let d = c.host_dispatch(&d_in[r]).map_err(|e| e.to_string())?;
        if let Some(diff) = d.bit_diff(&want_d[r]) {
            return Err(format!("rank {r} dispatch: {diff}"));
        }
        let out = c.host_combine(&d, &c_in[r]).map_err(|e| e.to_string())?;
        if out != want_c[r] {
            return Err(format!("rank {r}: combine differs from the oracle"));
        }
        Ok(())
    });
    for r in results {
        r.unwrap();
    }
}

#[test]
fn one_node_of_four_processes_matches_the_oracle() {
    round_matches_the_oracle(EpConfig::new(64, 4, 16, 12, 4), 12);
}

#[test]
fn two_nodes_of_two_processes_match_the_oracle() {
    round_matches_the_oracle(EpConfig::new(64, 4, 16, 12, 2).with_nodes(2), 9);
}

#[test]
fn a_process_with_another_config_is_named() {
    // Rank 1's process was started with top-4, rank 0's with top-2: both hear of it.
    let cfg = EpConfig::new(32, 2, 8, 4, 2);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let master = Master {
        addr: "127.0.0.1".into(),
        port: listener.local_addr().unwrap().port(),
    };
    let spec = |rank| RankSpec {
        rank,
        world_size: 2,
        local_rank: rank,
        local_world_size: 2,
    };
    let deadline = Duration::from_secs(20);
    let (a, b) = std::thread::scope(|s| {
        let other = s.spawn(|| {
            let mut rv = Rendezvous::join(spec(1), &master, deadline).unwrap();
            SimBackend::new()
                .init_rank(&EpConfig::new(32, 4, 8, 4, 2), &mut rv)
                .err()
        });
        let mut rv = Rendezvous::accept(spec(0), listener, deadline).unwrap();
        let mine = SimBackend::new().init_rank(&cfg, &mut rv).err();
        (mine, other.join().unwrap())
    });
    for e in [a, b] {
        match e {
            Some(EpError::ConfigMismatch { rank: 1, field, .. }) => assert_eq!(field, "top_k"),
            other => panic!("{other:?}"),
        }
    }
}
