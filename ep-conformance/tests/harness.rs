//! The harness itself: a case that breaks a rank's thread must fail, not hang.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::time::Duration;

use ep_conformance::routing::RoutingSpec;
use ep_conformance::{run_round, Calls, RoundInputs, RoundOptions, WeightKind};
use ep_core::{EpBackend, EpConfig};

/// Inputs for two ranks on a world of four: ranks 2 and 3 panic building their inputs, before
/// the round's first barrier. Ranks 0 and 1 must be released and the panic passed on.
#[test]
fn a_rank_that_panics_before_the_barrier_fails_the_round() {
    let cfg = EpConfig::new(64, 4, 16, 8, 4);
    let mut rng = ep_conformance::rng::Rng::new(1);
    let ids = (0..2)
        .map(|_| RoutingSpec::default().generate(&mut rng, 8, cfg.top_k, cfg.n_experts, 4))
        .collect();
    let inputs = RoundInputs::with_random_values(cfg.hidden, ids, 2);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut comms = ep_sim::SimBackend::new().init_uniform(&cfg).unwrap();
        let opts = RoundOptions::new(Calls::Fused, WeightKind::F32);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            run_round(&mut comms, &inputs, &opts);
        }));
        tx.send(outcome.is_err()).unwrap();
    });
    let panicked = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("run_round hung: the ranks that did not panic were never released");
    assert!(
        panicked,
        "run_round returned although two ranks had no inputs"
    );
}
