//! The rendezvous of a round's rank threads, which a panicking rank breaks.
//!
//! `std::sync::Barrier` waits for every thread forever: a rank thread that panics before it
//! arrives (a case that builds inputs for fewer ranks than the world has, a bug in a backend)
//! would leave the others waiting and the test hung instead of failed. Here the panicking thread
//! breaks the barrier as it unwinds, the others return from `wait` with the rank that broke it,
//! and `on_every_rank` passes the original panic on.

use std::sync::{Condvar, Mutex, MutexGuard};

/// A barrier for `n` rank threads that returns an error naming the rank whose thread panicked,
/// instead of waiting forever.
#[derive(Debug)]
pub struct RankBarrier {
    n: usize,
    state: Mutex<State>,
    turned: Condvar,
}

#[derive(Debug, Default)]
struct State {
    arrived: usize,
    /// Counts completed rendezvous, so a thread woken late still sees its own one complete.
    generation: u64,
    broken_by: Option<usize>,
}

/// Breaks the barrier if its rank's thread unwinds while holding it.
#[must_use = "the guard breaks the barrier only while it is alive"]
pub struct PanicGuard<'a> {
    barrier: &'a RankBarrier,
    rank: usize,
}

impl RankBarrier {
    /// A barrier for `n` threads, unbroken.
    pub fn new(n: usize) -> Self {
        RankBarrier {
            n,
            state: Mutex::new(State::default()),
            turned: Condvar::new(),
        }
    }

    /// Call first on each rank's thread; keep the guard for the thread's whole round.
    pub fn guard(&self, rank: usize) -> PanicGuard<'_> {
        PanicGuard {
            barrier: self,
            rank,
        }
    }

    /// Waits until all `n` ranks arrive. `Err(rank)`: that rank's thread panicked, so the others
    /// will not all arrive.
    pub fn wait(&self) -> Result<(), usize> {
        let mut s = self.lock();
        if let Some(r) = s.broken_by {
            return Err(r);
        }
        s.arrived += 1;
        if s.arrived == self.n {
            s.arrived = 0;
            s.generation += 1;
            self.turned.notify_all();
            return Ok(());
        }
        let generation = s.generation;
        while s.generation == generation && s.broken_by.is_none() {
            s = self.turned.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        match s.broken_by {
            Some(r) if s.generation == generation => Err(r),
            _ => Ok(()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means a thread panicked while holding it; the counts stay valid.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut s = self.barrier.lock();
            s.broken_by.get_or_insert(self.rank);
            self.barrier.turned.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rank_passes_each_rendezvous() {
        let b = RankBarrier::new(4);
        std::thread::scope(|s| {
            for r in 0..4 {
                let b = &b;
                s.spawn(move || {
                    let _g = b.guard(r);
                    for _ in 0..100 {
                        assert_eq!(b.wait(), Ok(()));
                    }
                });
            }
        });
    }

    #[test]
    fn a_panicking_rank_releases_the_others() {
        let b = RankBarrier::new(3);
        let got: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3)
                .map(|r| {
                    let b = &b;
                    s.spawn(move || {
                        let _g = b.guard(r);
                        assert_eq!(b.wait(), Ok(()));
                        if r == 1 {
                            panic!("rank 1 fails between the rendezvous");
                        }
                        b.wait()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().ok()).collect()
        });
        assert_eq!(got, vec![Some(Err(1)), None, Some(Err(1))]);
    }
}
