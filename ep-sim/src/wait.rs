//! Acquire-waits on receive counts, with a deadline.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam::utils::Backoff;
use ep_core::{poison, RejectReason};

use crate::memory::{Counts, SENTINEL};

/// Why a wait returned without every count.
pub enum Unfinished {
    /// The deadline passed; these indices never arrived.
    Missing(Vec<usize>),
    /// The count at `index` is poisoned: its sender rejected its input. Nothing is reset, so
    /// the wait can be taken up again once the sender publishes a real count over it.
    Poisoned { index: usize, reason: RejectReason },
}

/// Waits until none of the counts at `indices` is the sentinel and returns every count (the ones
/// not waited for read as 0); at the first poisoned count it sees, or at the deadline, returns why
/// not. Ranks outnumber cores in the simulator, so the wait spins briefly, then yields, then
/// sleeps: a spinning rank must not starve the rank it waits for.
pub fn wait_for(
    counts: &Counts,
    indices: &[usize],
    timeout: Duration,
) -> Result<Vec<u64>, Unfinished> {
    let counts = counts.as_slice();
    let start = Instant::now();
    let mut out = vec![0u64; counts.len()];
    let mut pending: Vec<usize> = indices.to_vec();
    let backoff = Backoff::new();
    let mut sleep = Duration::from_micros(1);
    loop {
        pending.retain(|&i| {
            let v = counts[i].load(Ordering::Acquire);
            out[i] = v;
            v == SENTINEL
        });
        if let Some((index, reason)) = indices
            .iter()
            .find_map(|&i| poison::decode(out[i]).map(|r| (i, r)))
        {
            return Err(Unfinished::Poisoned { index, reason });
        }
        if pending.is_empty() {
            return Ok(out);
        }
        if start.elapsed() >= timeout {
            return Err(Unfinished::Missing(pending));
        }
        if !backoff.is_completed() {
            backoff.snooze();
        } else {
            std::thread::sleep(sleep);
            sleep = (sleep * 2).min(Duration::from_micros(200));
        }
    }
}
