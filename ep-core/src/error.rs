//! The one error type of the contract. Every check that can fail on caller input runs before any
//! byte is written, so an `Err` always means "nothing happened" on this rank (except
//! [`EpError::Timeout`] and [`EpError::Poisoned`], after which the world must be initialised
//! again). A rank that rejects its input does tell its peers (a poisoned count, [`poison`]), so
//! that their waits return [`EpError::PeerRejected`] at once instead of at the deadline.

use std::fmt;

/// Shorthand used across the workspace.
pub type Result<T, E = EpError> = std::result::Result<T, E>;

/// Which operation of a round an error belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    Init,
    Dispatch,
    Combine,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Init => "init",
            Phase::Dispatch => "dispatch",
            Phase::Combine => "combine",
        })
    }
}

/// A receive count that never arrived: `src_rank` never signalled for global expert `expert`
/// (for combine, `expert` is the expert whose outputs `src_rank` owed this rank).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MissingSignal {
    pub src_rank: usize,
    pub expert: usize,
}

/// Errors of config validation. Each names the field and the value that is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("`{field}` must be at least {min}, got {value}")]
    TooSmall {
        field: &'static str,
        value: usize,
        min: usize,
    },
    #[error("`{field}` must be at most {max}, got {value}")]
    TooLarge {
        field: &'static str,
        value: usize,
        max: usize,
    },
    #[error("n_experts = {n_experts} is not divisible by n_ranks = {n_ranks} (n_nodes x n_gpus_per_node): every rank must hold the same number of experts")]
    ExpertsNotDivisible { n_experts: usize, n_ranks: usize },
    #[error("format {format} cannot take hidden = {hidden}: it must be a multiple of {block}")]
    HiddenNotAllowed {
        format: &'static str,
        hidden: usize,
        block: usize,
    },
    #[error("the config list has {got} entries but the topology has {expected} ranks")]
    WrongRankCount { expected: usize, got: usize },
    #[error("{what} is not allowed: {why}")]
    Incompatible {
        what: &'static str,
        why: &'static str,
    },
    #[error("{0}")]
    Unsupported(String),
    #[error("`{field}` = {value} is too large: {what} would need more than isize::MAX bytes")]
    SizeOverflow {
        field: &'static str,
        value: usize,
        what: &'static str,
    },
}

/// Everything a dispatch/combine call can return.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum EpError {
    #[error("invalid config: {0}")]
    Config(#[from] ConfigError),

    #[error("rank {rank}'s config differs from rank 0's in `{field}`: rank 0 has {expected}, rank {rank} has {got}")]
    ConfigMismatch {
        rank: usize,
        field: &'static str,
        expected: String,
        got: String,
    },

    #[error("rank {rank}: token {token} slot {slot} names expert {id}, outside [-1, {n_experts})")]
    ExpertIdOutOfRange {
        rank: usize,
        token: usize,
        slot: usize,
        id: i32,
        n_experts: usize,
    },

    #[error("rank {rank}: {tokens} tokens exceed max_tokens_per_rank = {max}")]
    TooManyTokens {
        rank: usize,
        tokens: usize,
        max: usize,
    },

    #[error("rank {rank}: `{what}` has shape {got:?}, expected {expected:?}")]
    Shape {
        rank: usize,
        what: &'static str,
        expected: Vec<usize>,
        got: Vec<usize>,
    },

    #[error("rank {rank}: token {token}'s input scale is {value}; it must be finite and positive")]
    InvalidInputScale {
        rank: usize,
        token: usize,
        value: f32,
    },

    #[error("rank {rank}: {what} is not allowed: {why}")]
    Incompatible {
        rank: usize,
        what: &'static str,
        why: &'static str,
    },

    #[error("rank {rank}: `{what}` must be in standard (row-major, contiguous) layout")]
    NotContiguous { rank: usize, what: &'static str },

    #[error("rank {rank}: {call} called out of order: {state}")]
    OutOfOrder {
        rank: usize,
        call: &'static str,
        state: String,
    },

    #[error("rank {rank}: the routing handle is from {handle}, not from this rank's latest dispatch ({current})")]
    StaleHandle {
        rank: usize,
        handle: String,
        current: String,
    },

    #[error(
        "rank {rank}: {phase} timed out after {waited_ms} ms waiting for {}",
        describe_missing(missing)
    )]
    Timeout {
        rank: usize,
        phase: Phase,
        waited_ms: u64,
        missing: Vec<MissingSignal>,
    },

    #[error("rank {rank}: an earlier round failed ({cause}); initialise the backend again")]
    Poisoned { rank: usize, cause: String },

    /// A peer rejected its own input for this phase and told this rank at once (a poisoned count
    /// where its count would be). Nothing was lost: this rank's call may be repeated. Once `peer`
    /// calls the phase again with good input, this rank's `*_wait` completes the round.
    #[error("rank {rank}: rank {peer} rejected its {phase} input ({reason}); the round resumes when rank {peer} issues {phase} again with good input: call {phase}_wait again (or initialise the backend again)")]
    PeerRejected {
        rank: usize,
        peer: usize,
        phase: Phase,
        reason: RejectReason,
    },

    #[error("out of memory: {what} needs {bytes} bytes")]
    OutOfMemory { bytes: usize, what: String },

    #[error("backend `{backend}` is not available: {reason}")]
    BackendUnavailable { backend: String, reason: String },

    #[error("{0}")]
    Backend(String),
}

/// Why a rank rejected its input, as it travels to its peers: a small code inside the poisoned
/// count ([`poison`]), since a string cannot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    ExpertIdOutOfRange,
    TooManyTokens,
    Shape,
    InvalidInputScale,
    Incompatible,
    NotContiguous,
    OutOfMemory,
    /// Any other error of the call (a failed compile of a device epilogue, a failed copy).
    Other,
}

impl RejectReason {
    const ALL: [RejectReason; 8] = [
        RejectReason::ExpertIdOutOfRange,
        RejectReason::TooManyTokens,
        RejectReason::Shape,
        RejectReason::InvalidInputScale,
        RejectReason::Incompatible,
        RejectReason::NotContiguous,
        RejectReason::OutOfMemory,
        RejectReason::Other,
    ];

    /// The reason a rank sends for `e`, the error its own call returns.
    pub fn of(e: &EpError) -> RejectReason {
        match e {
            EpError::ExpertIdOutOfRange { .. } => RejectReason::ExpertIdOutOfRange,
            EpError::TooManyTokens { .. } => RejectReason::TooManyTokens,
            EpError::Shape { .. } => RejectReason::Shape,
            EpError::InvalidInputScale { .. } => RejectReason::InvalidInputScale,
            EpError::Incompatible { .. } => RejectReason::Incompatible,
            EpError::NotContiguous { .. } => RejectReason::NotContiguous,
            EpError::OutOfMemory { .. } => RejectReason::OutOfMemory,
            _ => RejectReason::Other,
        }
    }

    /// The code carried in the low 16 bits of a poisoned count.
    pub fn code(self) -> u16 {
        Self::ALL.iter().position(|&r| r == self).unwrap() as u16 + 1
    }

    pub fn from_code(code: u16) -> RejectReason {
        (code as usize)
            .checked_sub(1)
            .and_then(|i| Self::ALL.get(i))
            .copied()
            .unwrap_or(RejectReason::Other)
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RejectReason::ExpertIdOutOfRange => "an expert id out of range",
            RejectReason::TooManyTokens => "more tokens than max_tokens_per_rank",
            RejectReason::Shape => "an array of the wrong shape",
            RejectReason::InvalidInputScale => "an input scale that is not finite and positive",
            RejectReason::Incompatible => "options that do not go together",
            RejectReason::NotContiguous => "an array not in standard layout",
            RejectReason::OutOfMemory => "out of memory",
            RejectReason::Other => "an error of its own",
        })
    }
}

/// The poisoned count: what a rank that rejects its input publishes where its receive counts
/// would go, so that every peer waiting for them returns [`EpError::PeerRejected`] at once
/// instead of at the deadline. The high 48 bits are all ones and the low 16 the reason's code
/// (never `0xFFFF`, so it is never the sentinel `u64::MAX`). No real count comes near: a dispatch
/// count's low half is at most `max_tokens_per_rank` (below `i32::MAX`), a combine count at most
/// the rows of a round.
pub mod poison {
    use super::RejectReason;

    const TAG: u64 = 0xFFFF_FFFF_FFFF_0000;

    pub fn encode(reason: RejectReason) -> u64 {
        TAG | u64::from(reason.code())
    }

    /// The reason, when `v` is a poisoned count.
    pub fn decode(v: u64) -> Option<RejectReason> {
        (v & TAG == TAG && v != u64::MAX).then(|| RejectReason::from_code(v as u16))
    }

    /// The count word as a digest of symmetric memory sees it: a poison reads as the sentinel it
    /// replaced, so a rejected call whose only write is its poison leaves every digest as it was
    /// (`EpComm::memory_digest`), while a poison stored over a real count still shows.
    pub fn unpoisoned(v: u64) -> u64 {
        if decode(v).is_some() {
            u64::MAX
        } else {
            v
        }
    }
}

impl EpError {
    /// The ranks a timeout waited for in vain, ascending and without repeats.
    pub fn missing_ranks(&self) -> Vec<usize> {
        match self {
            EpError::Timeout { missing, .. } => {
                let mut r: Vec<usize> = missing.iter().map(|m| m.src_rank).collect();
                r.sort_unstable();
                r.dedup();
                r
            }
            _ => Vec::new(),
        }
    }
}

/// Ranks (and expert ranges per rank) an error line names before it says "and N more": a world of
/// a thousand ranks that all time out must still give one readable line.
const LIST_HEAD: usize = 8;

fn describe_missing(missing: &[MissingSignal]) -> String {
    let mut ranks: Vec<usize> = missing.iter().map(|m| m.src_rank).collect();
    ranks.sort_unstable();
    ranks.dedup();
    let mut s = String::new();
    for (i, r) in ranks.iter().take(LIST_HEAD).enumerate() {
        let experts: Vec<usize> = missing
            .iter()
            .filter(|m| m.src_rank == *r)
            .map(|m| m.expert)
            .collect();
        if i > 0 {
            s.push_str("; ");
        }
        s.push_str(&format!(
            "rank {r} (experts {})",
            compact_list(&experts, "experts")
        ));
    }
    if ranks.len() > LIST_HEAD {
        s.push_str(&format!("; and {} more ranks", ranks.len() - LIST_HEAD));
    }
    s
}

/// Ascending values without repeats as runs, `0-3, 7, 9, 10` (a run of two is written out), cut
/// after the first eight runs with the count of the values left: `0, 2, 4, ... and 492 more
/// ranks`, `what` naming them. Short enough for one line whatever the world's size.
pub fn compact_list(values: &[usize], what: &str) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &v in values {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == v => *end = v,
            _ => runs.push((v, v)),
        }
    }
    let shown: Vec<String> = runs
        .iter()
        .take(LIST_HEAD)
        .map(|&(a, b)| match b - a {
            0 => a.to_string(),
            1 => format!("{a}, {b}"),
            _ => format!("{a}-{b}"),
        })
        .collect();
    let mut s = shown.join(", ");
    let rest: usize = runs.iter().skip(LIST_HEAD).map(|(a, b)| b - a + 1).sum();
    if rest > 0 {
        s.push_str(&format!(", ... and {rest} more {what}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_message_names_ranks_and_experts() {
        let e = EpError::Timeout {
            rank: 0,
            phase: Phase::Dispatch,
            waited_ms: 100,
            missing: vec![
                MissingSignal {
                    src_rank: 3,
                    expert: 0,
                },
                MissingSignal {
                    src_rank: 3,
                    expert: 1,
                },
                MissingSignal {
                    src_rank: 3,
                    expert: 2,
                },
                MissingSignal {
                    src_rank: 5,
                    expert: 7,
                },
            ],
        };
        let msg = e.to_string();
        assert!(msg.contains("rank 3 (experts 0-2)"), "{msg}");
        assert!(msg.contains("rank 5 (experts 7)"), "{msg}");
        assert_eq!(e.missing_ranks(), vec![3, 5]);
    }

    /// A thousand ranks that all time out, each with scattered experts: one short line that
    /// names the first few and counts the rest.
    #[test]
    fn long_rank_lists_are_cut() {
        let missing: Vec<MissingSignal> = (0..1000)
            .flat_map(|r| {
                (0..40).step_by(2).map(move |e| MissingSignal {
                    src_rank: r,
                    expert: e,
                })
            })
            .collect();
        let e = EpError::Timeout {
            rank: 0,
            phase: Phase::Combine,
            waited_ms: 10_000,
            missing,
        };
        let msg = e.to_string();
        assert!(msg.len() < 1000, "{} bytes: {msg}", msg.len());
        assert!(
            msg.contains("rank 7 (experts 0, 2, 4, 6, 8, 10, 12, 14, ... and 12 more experts)"),
            "{msg}"
        );
        assert!(!msg.contains("rank 8 "), "{msg}");
        assert!(msg.ends_with("; and 992 more ranks"), "{msg}");
        assert_eq!(e.missing_ranks().len(), 1000);
    }

    #[test]
    fn poison_round_trips_every_reason_and_is_never_a_count() {
        for r in RejectReason::ALL {
            let v = poison::encode(r);
            assert_ne!(v, u64::MAX);
            assert!(v & 0xFFFF_FFFF > i32::MAX as u64);
            assert_eq!(poison::decode(v), Some(r));
        }
        for v in [0, 1, 7, i32::MAX as u64, u64::MAX, 0xFFFF_FFFF_0000_0005] {
            assert_eq!(poison::decode(v), None, "{v:#x}");
        }
        let e = EpError::ExpertIdOutOfRange {
            rank: 1,
            token: 0,
            slot: 0,
            id: 999,
            n_experts: 16,
        };
        assert_eq!(RejectReason::of(&e), RejectReason::ExpertIdOutOfRange);
        let p = EpError::PeerRejected {
            rank: 0,
            peer: 1,
            phase: Phase::Dispatch,
            reason: RejectReason::of(&e),
        }
        .to_string();
        assert!(
            p.contains("rank 1 rejected its dispatch input (an expert id out of range)"),
            "{p}"
        );
    }
}
