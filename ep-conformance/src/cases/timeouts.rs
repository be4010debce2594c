//! Ranks that never signal: the others get a timeout naming them, within the deadline.

use std::time::{Duration, Instant};

use ep_core::{on_every_rank, EpBackend, EpComm, EpConfig, EpError, HostIo};

use super::*;
use crate::round::{run_and_check, Calls, RoundOptions};
use crate::scenario::WeightKind;

const SHORT_TIMEOUT: Duration = Duration::from_millis(300);
/// Generous slack over the deadline for a loaded 2-core CI machine.
const TIMEOUT_SLACK: Duration = Duration::from_secs(5);

/// Each rank's call, by rank: `None` for the rank that stayed away.
type RankCalls = Vec<(usize, Option<Result<Duration, EpError>>)>;

/// Checks that every rank but `absent` failed with a timeout naming `absent`, within the
/// deadline, then that a fresh world works.
fn expect_timeouts<B: EpBackend>(
    b: &B,
    cfg: &EpConfig,
    absent: usize,
    results: RankCalls,
) -> CaseResult {
    for (r, res) in results {
        let Some(res) = res else { continue };
        match res {
            Err(e @ EpError::Timeout { .. }) => {
                if e.missing_ranks() != vec![absent] {
                    return Err(format!("rank {r}: the timeout names the wrong ranks: {e}"));
                }
            }
            Err(e) => return Err(format!("rank {r}: expected a timeout, got: {e}")),
            Ok(elapsed) => {
                return Err(format!(
                    "rank {r}: completed without rank {absent} ({elapsed:?})"
                ))
            }
        }
    }
    let mut comms = b.init_uniform(cfg).map_err(err)?;
    run_and_check(
        &mut comms,
        &good_inputs(cfg, 9),
        &RoundOptions::new(Calls::Fused, WeightKind::F32),
    )
    .map(|_| ())
}

/// One rank never joins a dispatch: the others time out within the deadline, naming it.
pub fn rank_never_dispatches<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let cfg = small_config().with_timeout(SHORT_TIMEOUT);
    let inputs = good_inputs(&cfg, 10);
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    let absent = 1;
    // Its process (when it has one of its own) does nothing in this world.
    let results = on_every_rank(&mut comms, |c| {
        if c.rank() == absent {
            return (absent, None);
        }
        let t0 = Instant::now();
        let r = c.host_dispatch(&inputs.dispatch_input(c.rank()));
        (c.rank(), Some(r.map(|_| t0.elapsed())))
    });
    check_elapsed(&results)?;
    expect_timeouts(b, &cfg, absent, results)
}

/// One rank dispatches but never combines: ranks whose tokens it holds time out naming it.
pub fn rank_never_combines<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let cfg = small_config().with_timeout(SHORT_TIMEOUT);
    let inputs = good_inputs(&cfg, 11);
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    let absent = 3;
    let results = on_every_rank(&mut comms, |c| {
        let r = c.rank();
        let d = match c.host_dispatch(&inputs.dispatch_input(r)) {
            Ok(d) => d,
            Err(e) => return (r, Some(Err(e))),
        };
        if r == absent {
            return (r, None);
        }
        let out = crate::scenario::toy_experts(&d);
        let t0 = Instant::now();
        let cin = inputs.combine_input(r, &out, WeightKind::F32);
        (r, Some(c.host_combine(&d, &cin).map(|_| t0.elapsed())))
    });
    check_elapsed(&results)?;
    expect_timeouts(b, &cfg, absent, results)
}

fn check_elapsed(results: &RankCalls) -> CaseResult {
    for (r, res) in results {
        if let Some(Err(EpError::Timeout { waited_ms, .. })) = res {
            let waited = Duration::from_millis(*waited_ms);
            if waited > SHORT_TIMEOUT + TIMEOUT_SLACK {
                return Err(format!("rank {r} waited {waited:?}, far past the deadline"));
            }
        }
    }
    Ok(())
}

/// A rank rejects its dispatch input and never calls again: its peers, taking their waits up
/// again after each `PeerRejected` as the error says, end in a timeout naming it once the
/// deadline has passed since they first met its poison, never in endless retries.
pub fn rejecting_rank_never_calls_again<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let cfg = small_config().with_timeout(SHORT_TIMEOUT);
    let inputs = good_inputs(&cfg, 12);
    let mut bad = inputs.clone();
    let absent = 2;
    bad.topk_ids[absent][[0, 0]] = -7;
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    let results = on_every_rank(&mut comms, |c| {
        let r = c.rank();
        if r == absent {
            return match c.host_dispatch_async(&bad.dispatch_input(r)) {
                Err(EpError::ExpertIdOutOfRange { .. }) => (r, None),
                other => (
                    r,
                    Some(Err(EpError::Backend(format!(
                        "the bad input was not refused: {other:?}"
                    )))),
                ),
            };
        }
        let t0 = Instant::now();
        let mut res = c
            .host_dispatch(&inputs.dispatch_input(r))
            .map(|_| t0.elapsed());
        // Retry as a caller following the error's advice would, bounded far past the deadline.
        while matches!(res, Err(EpError::PeerRejected { peer, .. }) if peer == absent)
            && t0.elapsed() < SHORT_TIMEOUT + TIMEOUT_SLACK
        {
            std::thread::sleep(Duration::from_millis(5));
            res = c
                .pending_dispatch()
                .and_then(|pending| c.host_dispatch_wait(pending))
                .map(|_| t0.elapsed());
        }
        (r, Some(res))
    });
    check_elapsed(&results)?;
    expect_timeouts(b, &cfg, absent, results)
}
