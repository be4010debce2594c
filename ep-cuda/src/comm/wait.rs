//! The sliced waits: a wait kernel spins for a slice of the deadline, the host reads the status
//! word it left and launches it again while counts are missing and time is left, or turns the
//! status into the phase's error.

use std::time::{Duration, Instant};

use ep_core::{EpError, MissingSignal, Phase, Result};

use super::CudaComm;
use crate::kernels::constants;

/// How long one launch of a wait kernel spins before the host launches it again, until the
/// deadline (`ep_wait_counts` in common/protocol.cuh says why waits are sliced). A rank held up behind a
/// peer's wait loses at most this; a relaunch (one launch and a status read) costs microseconds.
const WAIT_SLICE: Duration = Duration::from_millis(10);

/// How long a wait that met the rejection of a rank of another node waits for that rank's next
/// call before it returns `PeerRejected` (`exchange_with_rejecting`): where that call was
/// already made, its exchange ends within it, and the wait goes on as if nothing was rejected,
/// as it does inside a node.
const REJECTION_GRACE: Duration = Duration::from_millis(200);

/// The status word the wait and copy-out kernels leave (kernels/constants.rs, the kernels'
/// `EP_OK` ...).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
enum WaitStatus {
    Ok = constants::STATUS_OK,
    /// A wait slice ran out with counts missing.
    Pending = constants::STATUS_PENDING,
    CountOverflow = constants::STATUS_COUNT_OVERFLOW,
    CountMismatch = constants::STATUS_COUNT_MISMATCH,
    /// The counts were there, a message of an overlapped sender was not: the copy-out again.
    MessagesPending = constants::STATUS_MESSAGES_PENDING,
}

impl WaitStatus {
    const ALL: [WaitStatus; 5] = [
        WaitStatus::Ok,
        WaitStatus::Pending,
        WaitStatus::CountOverflow,
        WaitStatus::CountMismatch,
        WaitStatus::MessagesPending,
    ];

    fn from_word(w: u32) -> Option<WaitStatus> {
        Self::ALL.into_iter().find(|&s| s as u32 == w)
    }
}

impl CudaComm {
    /// Runs a phase's wait to completion. `issue` launches the wait kernel with a slice of the
    /// deadline (in ns), and what follows it on the device; while counts are missing and time is
    /// left, the host launches it again. With `issued`, the first slice is already on the stream
    /// (a single-launch phase waits inside its one kernel). Returns with the stream idle. A
    /// timeout names the (rank, expert) pairs that never arrived.
    pub(crate) fn wait_sliced(
        &mut self,
        phase: Phase,
        mut issued: bool,
        issue: &mut dyn FnMut(&mut Self, u64) -> Result<()>,
    ) -> Result<()> {
        let start = Instant::now();
        let mut slices = 0u32;
        self.round.rechecked = false;
        loop {
            let slice = self
                .cfg
                .timeout
                .saturating_sub(start.elapsed())
                .min(WAIT_SLICE);
            if !std::mem::take(&mut issued) {
                self.clean_status()?;
                issue(self, slice.as_nanos() as u64)?;
            }
            self.sync()?;
            slices += 1;
            let give_up = start.elapsed() >= self.cfg.timeout;
            if self.wait_outcome(phase, start, give_up)? {
                self.round.rejected_since = None;
                break;
            }
        }
        if slices > 1 && self.opts().log_waits {
            eprintln!(
                "ep-cuda: rank {} {phase:?} wait took {slices} slices ({} ms)",
                self.rank,
                start.elapsed().as_millis()
            );
        }
        Ok(())
    }

    /// Reads the status a wait kernel left: `true` when every count (and, in a dispatch, every
    /// message awaited) arrived, `false` when its slice ran out first and `give_up` is not set
    /// yet.
    fn wait_outcome(&mut self, phase: Phase, start: Instant, give_up: bool) -> Result<bool> {
        let (n, l) = (self.cfg.n_ranks(), self.cfg.n_local_experts());
        // The outcome word alone on the way that every round takes; the per-count flags only
        // for the error.
        let mut code = [0u32];
        self.bufs().status.download(&mut code, &self.stream)?;
        let status = WaitStatus::from_word(code[0]);
        self.status_dirty = status != Some(WaitStatus::Ok);
        self.round.messages_pending = status == Some(WaitStatus::MessagesPending);
        let rank = self.rank;
        // A slice that ran out with counts missing (a slow path already: a slice is
        // milliseconds) may have a peer's poison among those that came: say so now rather than
        // wait for the rest. Nothing was reset, so the wait can be taken up again.
        if status == Some(WaitStatus::Pending) {
            if let Some(e) = self.peer_rejected(phase, start)? {
                return Err(e);
            }
        }
        let err = match status {
            Some(WaitStatus::Ok) => return Ok(true),
            Some(WaitStatus::Pending | WaitStatus::MessagesPending) if !give_up => {
                return Ok(false)
            }
            Some(WaitStatus::Pending | WaitStatus::MessagesPending) => {
                let mut status = vec![0u32; 1 + l * n];
                self.bufs().status.download(&mut status, &self.stream)?;
                let mut missing: Vec<_> = (0..l * n)
                    .filter(|&i| status[1 + i] != 0)
                    .map(|i| self.missing_signal(phase, i))
                    .collect();
                if missing.is_empty() {
                    // A wait that flags no count (the single-launch phases'): the awaited counts
                    // still "not arrived", which a wait that ran out leaves as they were.
                    missing = self.unarrived(phase)?;
                }
                let waited_ms = start.elapsed().as_millis() as u64;
                EpError::Timeout {
                    rank,
                    phase,
                    waited_ms,
                    missing,
                }
            }
            Some(WaitStatus::CountOverflow | WaitStatus::CountMismatch) => {
                // A poisoned count fails both checks (its low half passes any max_tokens, and no
                // combine sends as many rows). The wait kernels reset the counts only when every
                // one passed, so they are still there to look at, and to wait for again.
                if let Some(e) = self.peer_rejected(phase, start)? {
                    return Err(e);
                }
                // The peer may have published its real count over its poison since the kernel
                // looked: look once more before calling it a violation.
                if !std::mem::replace(&mut self.round.rechecked, true) && !give_up {
                    return Ok(false);
                }
                match status {
                    Some(WaitStatus::CountOverflow) => EpError::Backend(format!("rank {rank}: a receive count exceeds max_tokens_per_rank; the buffer protocol was violated")),
                    _ => EpError::Backend(format!("rank {rank}: combine received other row counts than this rank sent")),
                }
            }
            None => EpError::Backend(format!("rank {rank}: unknown wait status {}", code[0])),
        };
        Err(self.fail(err))
    }

    /// `PeerRejected` where an awaited count of `phase` holds a peer's poison; the round is
    /// then marked to be taken up again (nothing was reset). Once the poison has stood for the
    /// deadline, counted from the first wait that met it, a `Timeout` naming the peer instead,
    /// and the rank fails as after any timeout.
    fn peer_rejected(&mut self, phase: Phase, start: Instant) -> Result<Option<EpError>> {
        let counts = self.counts_now(phase)?;
        let Some((peer, reason)) = self.poisoned_count(&counts) else {
            return Ok(None);
        };
        if self.exchange_with_rejecting(phase, &counts)? {
            // The poison is replaced: the wait again, its counts checked afresh.
            self.round.rechecked = false;
            return Ok(None);
        }
        let since = *self.round.rejected_since.get_or_insert(start);
        if since.elapsed() >= self.cfg.timeout {
            let n = self.cfg.n_ranks();
            let missing = (0..self.cfg.n_local_experts())
                .map(|g| self.missing_signal(phase, g * n + peer))
                .collect();
            let err = EpError::Timeout {
                rank: self.rank,
                phase,
                waited_ms: since.elapsed().as_millis() as u64,
                missing,
            };
            return Ok(Some(self.fail(err)));
        }
        self.round.resume = true;
        Ok(Some(EpError::PeerRejected {
            rank: self.rank,
            peer,
            phase,
            reason,
        }))
    }

    /// Between nodes the poison of a rank that rejected its input comes in the phase's exchange
    /// (net.rs, `reject`), and that rank's next call exchanges again with every peer: where
    /// counts of `phase` hold the poison of ranks of other nodes, and the phase can be taken up
    /// again, this rank exchanges again with each of them (and places the combine's rows
    /// again), and waits `REJECTION_GRACE` for it.
    /// `true`: it ended, the poison is replaced; `false`: no such rank, or it has not called
    /// again, and the exchange stays on the stream, before the wait that is taken up next.
    fn exchange_with_rejecting(&mut self, phase: Phase, counts: &[u64]) -> Result<bool> {
        let world = std::sync::Arc::clone(&self.world);
        let Some(net) = &world.net else {
            return Ok(false);
        };
        // A phase that cannot be taken up again (a later call was made) fails here: an
        // exchange after that call's would pair with the rejecting rank's next one.
        if !self.tracker.can_reopen(phase) {
            return Ok(false);
        }
        let (n, node) = (self.cfg.n_ranks(), self.cfg.node_of(self.rank));
        let rejecting: Vec<usize> = (0..n)
            .filter(|&s| self.cfg.node_of(s) != node)
            .filter(|&s| {
                (s..counts.len())
                    .step_by(n)
                    .any(|i| ep_core::poison::decode(counts[i]).is_some())
            })
            .collect();
        if rejecting.is_empty() {
            return Ok(false);
        }
        let b = self.bufs();
        let (recv, at) = match phase {
            Phase::Dispatch => (b.d_recv.ptr, b.d_counts.ptr),
            _ => (0, b.c_counts.ptr),
        };
        net.exchange_with(phase, &self.stream, recv, at, Some(&rejecting))?;
        if phase == Phase::Combine {
            self.place_net_rows()?;
        }
        net.settled(&self.stream, REJECTION_GRACE.min(self.cfg.timeout))
    }

    /// The signal the count at `i` (`group * n_ranks + source`) of `phase` stands for.
    fn missing_signal(&self, phase: Phase, i: usize) -> MissingSignal {
        let (n, l) = (self.cfg.n_ranks(), self.cfg.n_local_experts());
        let (g, s) = (i / n, i % n);
        match phase {
            Phase::Combine => MissingSignal {
                src_rank: s,
                expert: s * l + g,
            },
            _ => MissingSignal {
                src_rank: s,
                expert: self.rank * l + g,
            },
        }
    }

    /// The awaited counts of `phase` that still hold the sentinel, as signals.
    fn unarrived(&self, phase: Phase) -> Result<Vec<MissingSignal>> {
        let counts = self.counts_now(phase)?;
        let (n, rank) = (self.cfg.n_ranks(), self.rank);
        Ok(counts
            .iter()
            .enumerate()
            .filter(|&(i, &v)| v == u64::MAX && (self.cfg.skip_a2a.is_none() || i % n == rank))
            .map(|(i, _)| self.missing_signal(phase, i))
            .collect())
    }

    /// `phase`'s count array as it is now.
    fn counts_now(&self, phase: Phase) -> Result<Vec<u64>> {
        let b = self.bufs();
        let buf = if phase == Phase::Combine {
            &b.c_counts
        } else {
            &b.d_counts
        };
        let mut counts = vec![0u64; self.cfg.n_local_experts() * self.cfg.n_ranks()];
        buf.download(&mut counts, &self.stream)?;
        Ok(counts)
    }

    /// The first awaited count of a phase's `counts` that holds a peer's poison: the peer and
    /// its reason.
    fn poisoned_count(&self, counts: &[u64]) -> Option<(usize, ep_core::RejectReason)> {
        let (n, rank) = (self.cfg.n_ranks(), self.rank);
        counts.iter().enumerate().find_map(|(i, &v)| {
            let awaited = self.cfg.skip_a2a.is_none() || i % n == rank;
            let reason = ep_core::poison::decode(v).filter(|_| awaited)?;
            Some((i % n, reason))
        })
    }

    /// A wait slice's count wait (`wait`), unless the last slice had every count but not every
    /// message or LL row (EP_MESSAGES_PENDING): the counts are taken then, and only the status
    /// is reset for the kernels that wait for the rest.
    pub(super) fn wait_counts_unless_taken(
        &self,
        wait: impl FnOnce(&Self) -> Result<()>,
    ) -> Result<()> {
        if self.round.messages_pending {
            let b = self.bufs();
            b.status.fill_async(0, b.status.len, &self.stream)
        } else {
            wait(self)
        }
    }

    /// The first slice of a wait issued with its phase (single-launch or overlapped), in ns: the
    /// whole deadline where the waits are stream-ordered.
    pub(super) fn first_slice_ns(&self) -> u64 {
        if self.stream_waits {
            return self.cfg.timeout.as_nanos() as u64;
        }
        self.cfg.timeout.min(WAIT_SLICE).as_nanos() as u64
    }

    /// A phase's wait left on the stream (`stream_waits`): issued with the whole deadline unless
    /// its first launch already was (`issued`), not waited for. The host reads its status at the
    /// next point it waits for the stream anyway (`check_waits`).
    pub(crate) fn wait_on_stream(
        &mut self,
        phase: Phase,
        issued: bool,
        issue: &mut dyn FnMut(&mut Self, u64) -> Result<()>,
    ) -> Result<()> {
        if !issued {
            self.clean_status()?;
            issue(self, self.cfg.timeout.as_nanos() as u64)?;
        }
        self.unchecked.get_or_insert(phase);
        Ok(())
    }

    /// The status word back to EP_OK where the host saw it otherwise, before a wait is launched
    /// (a wait that finds an earlier failure there gives up at once: common/protocol.cuh,
    /// `ep_failed_before`).
    pub(super) fn clean_status(&mut self) -> Result<()> {
        if std::mem::take(&mut self.status_dirty) {
            self.bufs().status.fill_async(0, 4, &self.stream)?;
        }
        Ok(())
    }

    /// After the stream has run: a batch of expert ids from device memory that the dispatch
    /// refused (dispatch/ids.cu: every id masked, the first bad one recorded) is
    /// `ExpertIdOutOfRange`; the round went on without the rank's tokens, so the rank is
    /// poisoned.
    fn check_refused(&mut self) -> Result<()> {
        if !self.ids_on_device {
            return Ok(());
        }
        let mut w = [0u32; 4];
        self.bufs().refused.download(&mut w, &self.stream)?;
        if w[0] == 0 {
            return Ok(());
        }
        self.bufs().refused.fill_async(0, 16, &self.stream)?;
        let err = EpError::ExpertIdOutOfRange {
            rank: self.rank,
            token: w[1] as usize,
            slot: w[2] as usize,
            id: w[3] as i32,
            n_experts: self.cfg.n_experts,
        };
        Err(self.fail(err))
    }

    /// After the stream has run: the status the last wait left, as the host waits read it. A
    /// wait that ran out of its deadline is a timeout naming what never came. One that met a
    /// peer's poison is taken up again from the host (`wait_sliced`), which returns
    /// `PeerRejected` as a host wait does, and reopens the phase for the caller's next wait, if
    /// nothing was called after it; otherwise the rank is poisoned. A captured round's replays
    /// are checked the same way: the status word is the last wait's, whichever call issued it.
    pub(crate) fn check_waits(&mut self) -> Result<()> {
        self.check_refused()?;
        if !self.stream_waits {
            return Ok(());
        }
        // The earliest wait not read yet: a later one gives up behind a failure and leaves it.
        // A replayed graph's round starts with its dispatch.
        let phase = self.unchecked.take().unwrap_or(Phase::Dispatch);
        let mut code = [0u32];
        self.bufs().status.download(&mut code, &self.stream)?;
        let status = WaitStatus::from_word(code[0]);
        self.status_dirty = status != Some(WaitStatus::Ok);
        if status == Some(WaitStatus::Ok) {
            return Ok(());
        }
        // A wait that ran out had the whole deadline; one that met a count that failed its check
        // can be taken up again only if no later call was made (the round's state is gone then).
        let ran_out = matches!(
            status,
            Some(WaitStatus::Pending | WaitStatus::MessagesPending)
        );
        if ran_out || !self.tracker.can_reopen(phase) {
            let now = Instant::now();
            let start = match ran_out {
                true => now.checked_sub(self.cfg.timeout).unwrap_or(now),
                false => now,
            };
            return match self.wait_outcome(phase, start, true) {
                Ok(_) => Ok(()),
                Err(e) => Err(self.fail(e)),
            };
        }
        // From the host, as host waits: slices, and a relaunch once a poison is replaced.
        let issue: &mut dyn FnMut(&mut Self, u64) -> Result<()> = match phase {
            Phase::Combine => &mut |c, slice| {
                c.issue_combine_wait(slice)?;
                c.issue_combine_output()
            },
            _ => &mut |c, slice| c.issue_dispatch_wait(slice),
        };
        match self.wait_sliced(phase, true, issue) {
            Err(e @ EpError::PeerRejected { .. }) if self.tracker.reopen(phase) => Err(e),
            Err(e @ EpError::PeerRejected { .. }) => Err(self.fail(e)),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    /// Every status code reads back as itself, and the five are distinct.
    #[test]
    fn status_codes_read_back() {
        for status in super::WaitStatus::ALL {
            assert_eq!(super::WaitStatus::from_word(status as u32), Some(status));
        }
        assert_eq!(super::WaitStatus::from_word(5), None);
    }
}
