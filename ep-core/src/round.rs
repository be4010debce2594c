//! The order of calls in a round, enforced the same way by every backend:
//! `dispatch_async -> dispatch_wait -> combine_async -> combine_wait -> (next round)`.
//! Finishing combine is what proves the dispatch buffers are free again, so a second dispatch
//! before combine is refused rather than allowed to race.

use crate::error::{EpError, Phase, Result};
use crate::io::RoutingHandle;

/// A dispatch in flight on one rank: what [`crate::EpComm::dispatch_async`] returns and
/// [`crate::EpComm::dispatch_wait`] consumes, so a dispatch is waited for once. Not `Clone`:
/// after a wait that returned [`EpError::PeerRejected`] the dispatch is still in flight, and
/// [`crate::EpComm::pending_dispatch`] gives it back to wait again.
#[must_use = "a dispatch in flight must be waited for with dispatch_wait"]
#[derive(Debug, PartialEq, Eq)]
pub struct PendingDispatch(RoutingHandle);

/// A combine in flight on one rank: what [`crate::EpComm::combine_async`] returns and
/// [`crate::EpComm::combine_wait`] consumes (as [`PendingDispatch`];
/// [`crate::EpComm::pending_combine`] gives it back after `PeerRejected`).
#[must_use = "a combine in flight must be waited for with combine_wait"]
#[derive(Debug, PartialEq, Eq)]
pub struct PendingCombine(RoutingHandle);

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    Idle,
    DispatchSent,
    Dispatched,
    CombineSent,
    Poisoned(String),
}

/// Per-rank call-order state. Backends call `check_*` before validating input (no state change),
/// then the matching transition once the call has succeeded.
#[derive(Clone, Debug)]
pub struct RoundTracker {
    rank: usize,
    /// Dispatches started since init; the handle of the current round is `round - 1`.
    round: u64,
    state: State,
}

impl RoundTracker {
    /// A fresh rank `rank`: no dispatch yet, the next call must be `dispatch_async`.
    pub fn new(rank: usize) -> Self {
        RoundTracker {
            rank,
            round: 0,
            state: State::Idle,
        }
    }

    fn expect(&self, call: &'static str, want: State) -> Result<()> {
        match &self.state {
            State::Poisoned(cause) => Err(EpError::Poisoned {
                rank: self.rank,
                cause: cause.clone(),
            }),
            s if *s == want => Ok(()),
            s => Err(EpError::OutOfOrder {
                rank: self.rank,
                call,
                state: match s {
                    State::Idle => "no dispatch is in flight".into(),
                    State::DispatchSent => "dispatch_async was issued; call dispatch_wait".into(),
                    State::Dispatched => "the last dispatch has not been combined yet".into(),
                    State::CombineSent => "combine_async was issued; call combine_wait".into(),
                    State::Poisoned(_) => unreachable!(),
                },
            }),
        }
    }

    /// `dispatch_async` may be called: no round in flight.
    pub fn check_dispatch_async(&self) -> Result<()> {
        self.expect("dispatch_async", State::Idle)
    }
    /// `dispatch_async` succeeded: a new round starts; its pending dispatch.
    pub fn dispatch_sent(&mut self) -> PendingDispatch {
        self.round += 1;
        self.state = State::DispatchSent;
        self.pending_dispatch().expect("just sent")
    }
    /// `dispatch_wait` may be called with `pending`: it is this rank's outstanding dispatch.
    pub fn check_dispatch_wait(&self, pending: &PendingDispatch) -> Result<()> {
        self.expect("dispatch_wait", State::DispatchSent)?;
        self.check_pending("dispatch", &pending.0)
    }
    /// The outstanding dispatch again (a wait that met a peer's rejection left it in flight).
    pub fn pending_dispatch(&self) -> Result<PendingDispatch> {
        self.expect("pending_dispatch", State::DispatchSent)?;
        Ok(PendingDispatch(self.handle()))
    }
    /// Dispatch finished; returns the handle combine must present.
    pub fn dispatched(&mut self) -> RoutingHandle {
        self.state = State::Dispatched;
        self.handle()
    }
    /// `combine_async` may be called: dispatch finished and `handle` is its handle.
    pub fn check_combine_async(&self, handle: &RoutingHandle) -> Result<()> {
        self.expect("combine_async", State::Dispatched)?;
        self.check_routing(handle)
    }
    /// [`RoundTracker::check_combine_async`], sorted by what the call does with it: `Ok(None)`
    /// it goes on; `Ok(Some(e))` a stale handle, bad input the call refuses as it refuses any
    /// (its peers told); `Err(e)` the call is out of order (nothing to tell).
    pub fn stale_combine(&self, handle: &RoutingHandle) -> Result<Option<EpError>> {
        match self.check_combine_async(handle) {
            Ok(()) => Ok(None),
            Err(e @ EpError::StaleHandle { .. }) => Ok(Some(e)),
            Err(e) => Err(e),
        }
    }
    /// `handle` is this rank's latest finished dispatch (before or after its combine): what
    /// combine and operations on a dispatch output (SwiGLU) take, since a backend may keep that
    /// routing (on a GPU: on the device) only until the next dispatch.
    pub fn check_routing(&self, handle: &RoutingHandle) -> Result<()> {
        let latest = (self.round > 0 && self.state != State::DispatchSent).then(|| self.handle());
        match latest {
            Some(h) if h == *handle => Ok(()),
            _ => Err(EpError::StaleHandle {
                rank: self.rank,
                handle: format!("rank {} round {}", handle.rank, handle.round),
                current: latest
                    .map_or(format!("no finished dispatch on rank {}", self.rank), |h| {
                        format!("rank {} round {}", h.rank, h.round)
                    }),
            }),
        }
    }
    /// A call of `phase`'s async half may be made now (`handle`: a combine's routing).
    pub fn ready(&self, phase: Phase, handle: Option<&RoutingHandle>) -> Result<()> {
        match (phase, handle) {
            (Phase::Combine, Some(h)) => self.check_combine_async(h),
            (Phase::Combine, None) => self.expect("combine_async", State::Dispatched),
            _ => self.check_dispatch_async(),
        }
    }
    /// Whether [`RoundTracker::reopen`] would reopen `phase`: no call came after its wait.
    pub fn can_reopen(&self, phase: Phase) -> bool {
        matches!(
            (phase, &self.state),
            (Phase::Dispatch, State::Dispatched) | (Phase::Combine, State::Idle)
        )
    }
    /// A wait of `phase` that returned before the device ran it (a stream-ordered wait) met a
    /// peer's rejection: the phase is in flight again, so that the caller waits for it again,
    /// if no call came after the wait. `false` when one did (the round cannot be taken up).
    pub fn reopen(&mut self, phase: Phase) -> bool {
        let reopened = match (phase, &self.state) {
            (Phase::Dispatch, State::Dispatched) => State::DispatchSent,
            (Phase::Combine, State::Idle) => State::CombineSent,
            _ => return false,
        };
        self.state = reopened;
        true
    }
    /// `combine_async` succeeded; its pending combine.
    pub fn combine_sent(&mut self) -> PendingCombine {
        self.state = State::CombineSent;
        self.pending_combine().expect("just sent")
    }
    /// `combine_wait` may be called with `pending`: it is this rank's outstanding combine.
    pub fn check_combine_wait(&self, pending: &PendingCombine) -> Result<()> {
        self.expect("combine_wait", State::CombineSent)?;
        self.check_pending("combine", &pending.0)
    }
    /// The outstanding combine again (a wait that met a peer's rejection left it in flight).
    pub fn pending_combine(&self) -> Result<PendingCombine> {
        self.expect("pending_combine", State::CombineSent)?;
        Ok(PendingCombine(self.handle()))
    }

    /// A pending phase (its round's handle) from another rank, or an earlier round, is not this
    /// rank's.
    fn check_pending(&self, phase: &str, pending: &RoutingHandle) -> Result<()> {
        let current = self.handle();
        if *pending == current {
            return Ok(());
        }
        Err(EpError::StaleHandle {
            rank: self.rank,
            handle: format!(
                "the pending {phase} of rank {} round {}",
                pending.rank, pending.round
            ),
            current: format!("rank {} round {}", current.rank, current.round),
        })
    }
    /// `combine_wait` succeeded: the round is over and the buffers are free.
    pub fn combined(&mut self) {
        self.state = State::Idle;
    }

    /// After a timeout the peers' view of the round is unknown: refuse everything until re-init.
    pub fn poison(&mut self, cause: &EpError) {
        self.state = State::Poisoned(cause.to_string());
    }

    fn handle(&self) -> RoutingHandle {
        RoutingHandle {
            rank: self.rank,
            round: self.round.saturating_sub(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enforces_the_round_order() {
        let mut t = RoundTracker::new(3);
        assert!(matches!(
            t.pending_dispatch(),
            Err(EpError::OutOfOrder { rank: 3, .. })
        ));
        t.check_dispatch_async().unwrap();
        let pending = t.dispatch_sent();
        assert!(t.check_dispatch_async().is_err());
        t.check_dispatch_wait(&pending).unwrap();
        assert_eq!(t.pending_dispatch().unwrap(), pending);
        let other = RoundTracker::new(2).dispatch_sent();
        assert!(matches!(
            t.check_dispatch_wait(&other),
            Err(EpError::StaleHandle { rank: 3, .. })
        ));
        let h = t.dispatched();
        assert!(t.pending_dispatch().is_err());
        let stale = RoutingHandle { rank: 3, round: 7 };
        assert!(matches!(
            t.check_combine_async(&stale),
            Err(EpError::StaleHandle { .. })
        ));
        t.check_combine_async(&h).unwrap();
        t.check_routing(&h).unwrap();
        assert!(t.check_routing(&stale).is_err());
        let pending = t.combine_sent();
        t.check_combine_wait(&pending).unwrap();
        t.combined();
        t.check_routing(&h).unwrap(); // still the latest dispatch after its combine
        assert!(t.check_combine_wait(&pending).is_err());
        t.check_dispatch_async().unwrap();
        let _ = t.dispatch_sent();
        assert!(t.check_routing(&h).is_err()); // a newer dispatch is in flight
        t.poison(&EpError::Backend("x".into()));
        assert!(matches!(
            t.check_dispatch_async(),
            Err(EpError::Poisoned { .. })
        ));
    }
}
