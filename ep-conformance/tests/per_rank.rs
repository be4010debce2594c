//! The suite with one process per rank, here a thread per process, each with its own rendezvous
//! (`rendezvous::on_threads`): cases whose worlds have fewer, as many and more ranks than there
//! are processes pass, and processes that run different lists get an error, not a hang. (`ep
//! launch -- conformance` runs the whole list in processes: ep-cli/tests/launch.rs.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use ep_conformance::per_rank::{PerRank, Processes};
use ep_conformance::runner::{self, Outcome};
use ep_core::rendezvous::on_threads;
use ep_sim::SimBackend;

/// Every process's outcomes of the cases each filter selects, in turn, in a world of `n`
/// processes; `filters(p)` are process `p`'s.
fn run(n: usize, filters: impl Fn(usize) -> Vec<&'static str> + Sync) -> Vec<Vec<Outcome>> {
    on_threads(n, n, Duration::from_secs(60), |rv| {
        let rv = rv.expect("the processes meet");
        let p = rv.spec().rank;
        let processes = Arc::new(Processes::new(rv, "127.0.0.1", Duration::from_secs(60)));
        let backend = PerRank::new(SimBackend::new(), processes);
        filters(p)
            .into_iter()
            .flat_map(|f| runner::run_all_per_rank(&backend, Some(f), None, |_| {}))
            .collect()
    })
}

fn failures(outcomes: &[Outcome]) -> Vec<String> {
    outcomes
        .iter()
        .filter_map(|o| Some(format!("{}: {}", o.name, o.result.as_ref().err()?)))
        .collect()
}

/// Three processes: a world of 2 ranks leaves one process out, one of 4 puts ranks 0 and 3 in
/// one process, one of 8 puts three ranks in some; each passes, rejections across processes
/// included.
#[test]
fn worlds_of_fewer_and_more_ranks_than_processes_pass() {
    let filters = [
        "cases::rounds_many_tokens",
        "cases::peer_rejects_dispatch",
        "cases::expert_out_wrong_rows",
        "fixtures::two_nodes_x4::nvfp4::split_weighted",
    ];
    for outcomes in run(3, |_| filters.to_vec()) {
        assert_eq!(outcomes.len(), filters.len());
        assert_eq!(failures(&outcomes), Vec::<String>::new());
    }
}

/// Processes whose lists differ fail every case, saying where each process is, within seconds.
#[test]
fn processes_out_of_step_fail_and_do_not_hang() {
    let t0 = Instant::now();
    let all = run(2, |p| match p {
        0 => vec!["cases::summation_order", "cases::too_many_tokens"],
        _ => vec!["cases::summation_order", "cases::"],
    });
    for outcomes in &all {
        assert_eq!(outcomes[0].result, Ok(()));
        let rest = &outcomes[1..];
        assert_eq!(
            failures(rest).len(),
            rest.len(),
            "every case after the lists part fails"
        );
        let first = rest[0].result.as_ref().unwrap_err();
        assert!(
            first.contains("processes out of step") && first.contains("a list of 1 cases"),
            "{first}"
        );
    }
    assert!(t0.elapsed() < Duration::from_secs(30));
}

/// The simulator, refusing (as a GPU backend that takes a GPU per process does) a world with
/// more ranks than there are processes.
#[derive(Clone)]
struct OneRankAProcess {
    processes: usize,
}

impl ep_core::EpBackend for OneRankAProcess {
    type Comm = <SimBackend as ep_core::EpBackend>::Comm;

    fn name(&self) -> &str {
        "sim, a rank a process"
    }

    fn init(&self, configs: &[ep_core::EpConfig]) -> ep_core::Result<Vec<Self::Comm>> {
        SimBackend::new().init(configs)
    }

    fn init_rank(
        &self,
        config: &ep_core::EpConfig,
        rv: &mut ep_core::rendezvous::Rendezvous,
    ) -> ep_core::Result<Self::Comm> {
        if config.n_ranks() > self.processes {
            return Err(ep_core::EpError::BackendUnavailable {
                backend: "sim".into(),
                reason: format!("{} ranks in {} processes", config.n_ranks(), self.processes),
            });
        }
        SimBackend::new().init_rank(config, rv)
    }
}

/// A world the backend cannot place in the launch's processes is skipped on every process, with
/// the backend's reason, and is neither passed nor failed; the next case runs as usual.
#[test]
fn a_world_the_backend_cannot_place_is_skipped_not_passed() {
    let filters = [
        "fixtures::two_nodes_x4::bf16::fused_weighted",
        "fixtures::uniform::bf16::fused_weighted",
    ];
    let all = on_threads(4, 4, Duration::from_secs(60), |rv| {
        let rv = rv.expect("the processes meet");
        let processes = Arc::new(Processes::new(rv, "127.0.0.1", Duration::from_secs(60)));
        let backend = PerRank::new(OneRankAProcess { processes: 4 }, processes);
        filters
            .iter()
            .flat_map(|f| runner::run_all_per_rank(&backend, Some(f), None, |_| {}))
            .collect::<Vec<_>>()
    });
    for outcomes in all {
        assert_eq!(outcomes.len(), 2);
        assert_eq!(outcomes[0].skipped(), Some("8 ranks in 4 processes"));
        assert!(!outcomes[0].failed());
        assert_eq!(outcomes[1].result, Ok(()));
        assert!(runner::print_summary(&outcomes));
    }
}
