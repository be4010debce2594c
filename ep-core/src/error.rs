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
    /// `EpBackend::init`: building the world and its buffers.
    Init,
    /// `dispatch_async` / `dispatch_wait`.
    Dispatch,
    /// `combine_async` / `combine_wait`.
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
    /// The rank whose count never arrived, 0..n_ranks.
    pub src_rank: usize,
    /// Global expert id, 0..n_experts.
    pub expert: usize,
}

/// Errors of config validation. Each names the field and the value that is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A field below its minimum.
    #[error("`{field}` must be at least {min}, got {value}")]
    TooSmall {
        /// The `EpConfig` field's name.
        field: &'static str,
        /// The value given.
        value: usize,
        /// The smallest value allowed.
        min: usize,
    },
    /// A field above its maximum.
    #[error("`{field}` must be at most {max}, got {value}")]
    TooLarge {
        /// The `EpConfig` field's name.
        field: &'static str,
        /// The value given.
        value: usize,
        /// The largest value allowed.
        max: usize,
    },
    /// `n_experts` is not a multiple of `n_ranks`, so ranks would hold different numbers of
    /// experts.
    #[error("n_experts = {n_experts} is not divisible by n_ranks = {n_ranks} (n_nodes x n_gpus_per_node): every rank must hold the same number of experts")]
    ExpertsNotDivisible {
        /// The config's `n_experts`.
        n_experts: usize,
        /// `n_gpus_per_node * n_nodes`.
        n_ranks: usize,
    },
    /// `hidden` is not a multiple of the token format's block.
    #[error("format {format} cannot take hidden = {hidden}: it must be a multiple of {block}")]
    HiddenNotAllowed {
        /// The format's name (`TokenFormat::NAME`).
        format: &'static str,
        /// The config's `hidden`.
        hidden: usize,
        /// The format's block, in elements.
        block: usize,
    },
    /// `EpBackend::init` got a number of configs other than the topology's rank count.
    #[error("the config list has {got} entries but the topology has {expected} ranks")]
    WrongRankCount {
        /// `n_ranks` of the first config.
        expected: usize,
        /// Configs passed.
        got: usize,
    },
    /// Options that do not go together (such as `skip_a2a` with several nodes).
    #[error("{what} is not allowed: {why}")]
    Incompatible {
        /// The option, or combination of options, refused.
        what: &'static str,
        /// The rule it breaks.
        why: &'static str,
    },
    /// A valid config this backend cannot run; the message says what is missing.
    #[error("{0}")]
    Unsupported(String),
    /// A buffer size that checked arithmetic found past `isize::MAX` bytes.
    #[error("`{field}` = {value} is too large: {what} would need more than isize::MAX bytes")]
    SizeOverflow {
        /// The field whose value makes the size overflow.
        field: &'static str,
        /// Its value.
        value: usize,
        /// The buffer (or size) that would overflow.
        what: &'static str,
    },
}

/// Everything a dispatch/combine call can return.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum EpError {
    /// A config failed validation (at init).
    #[error("invalid config: {0}")]
    Config(#[from] ConfigError),

    /// At init, rank `rank`'s config differs from rank 0's; `field` is the first that differs.
    #[error("rank {rank}'s config differs from rank 0's in `{field}`: rank 0 has {expected}, rank {rank} has {got}")]
    ConfigMismatch {
        /// The rank whose config differs, 1..n_ranks.
        rank: usize,
        /// The `EpConfig` field's name.
        field: &'static str,
        /// Rank 0's value, formatted.
        expected: String,
        /// Rank `rank`'s value, formatted.
        got: String,
    },

    /// A `topk_ids` entry outside `[-1, n_experts)`.
    #[error("rank {rank}: token {token} slot {slot} names expert {id}, outside [-1, {n_experts})")]
    ExpertIdOutOfRange {
        /// The rank whose input holds it.
        rank: usize,
        /// Token index on that rank (row of `topk_ids`).
        token: usize,
        /// Slot, 0..top_k (column of `topk_ids`).
        slot: usize,
        /// The id found.
        id: i32,
        /// The config's `n_experts`.
        n_experts: usize,
    },

    /// A dispatch input with more than `max_tokens_per_rank` tokens.
    #[error("rank {rank}: {tokens} tokens exceed max_tokens_per_rank = {max}")]
    TooManyTokens {
        /// The rank that passed them.
        rank: usize,
        /// Tokens passed (`T_r`).
        tokens: usize,
        /// The config's `max_tokens_per_rank`.
        max: usize,
    },

    /// An input array of the wrong shape.
    #[error("rank {rank}: `{what}` has shape {got:?}, expected {expected:?}")]
    Shape {
        /// The rank that passed it.
        rank: usize,
        /// The array's name (`tokens`, `topk_ids`, `expert_out`, ...).
        what: &'static str,
        /// The shape the call needs.
        expected: Vec<usize>,
        /// The shape passed.
        got: Vec<usize>,
    },

    /// A per-token input scale (NVFP4) that is not finite and positive.
    #[error("rank {rank}: token {token}'s input scale is {value}; it must be finite and positive")]
    InvalidInputScale {
        /// The rank that passed it.
        rank: usize,
        /// Token index on that rank.
        token: usize,
        /// The scale found.
        value: f32,
    },

    /// Call options that do not go together (an epilogue without router weights, a host epilogue
    /// on a GPU backend, ...).
    #[error("rank {rank}: {what} is not allowed: {why}")]
    Incompatible {
        /// The rank that made the call.
        rank: usize,
        /// The option, or combination of options, refused.
        what: &'static str,
        /// The rule it breaks.
        why: &'static str,
    },

    /// An input array not in standard (row-major, contiguous) layout.
    #[error("rank {rank}: `{what}` must be in standard (row-major, contiguous) layout")]
    NotContiguous {
        /// The rank that passed it.
        rank: usize,
        /// The array's name.
        what: &'static str,
    },

    /// A call outside the order `dispatch_async, dispatch_wait, combine_async, combine_wait`;
    /// nothing was written and no peer is told.
    #[error("rank {rank}: {call} called out of order: {state}")]
    OutOfOrder {
        /// The rank that made the call.
        rank: usize,
        /// The call refused (`dispatch_async`, ...).
        call: &'static str,
        /// Where the round stands and what to call instead.
        state: String,
    },

    /// A routing handle that is not from this rank's latest finished dispatch.
    #[error("rank {rank}: the routing handle is from {handle}, not from this rank's latest dispatch ({current})")]
    StaleHandle {
        /// The rank that made the call.
        rank: usize,
        /// The handle passed, as `rank R round N`.
        handle: String,
        /// The handle the call needs, or that there is no finished dispatch.
        current: String,
    },

    /// A wait missed the config's deadline; the world must be initialised again.
    #[error(
        "rank {rank}: {phase} timed out after {waited_ms} ms waiting for {}",
        describe_missing(missing)
    )]
    Timeout {
        /// The rank that waited.
        rank: usize,
        /// The phase it waited in.
        phase: Phase,
        /// Milliseconds it waited.
        waited_ms: u64,
        /// Every (source rank, expert) count that had not arrived.
        missing: Vec<MissingSignal>,
    },

    /// Any call on a rank after its timeout; the world must be initialised again.
    #[error("rank {rank}: an earlier round failed ({cause}); initialise the backend again")]
    Poisoned {
        /// The rank that made the call.
        rank: usize,
        /// The error that poisoned it, formatted.
        cause: String,
    },

    /// A peer rejected its own input for this phase and told this rank at once (a poisoned count
    /// where its count would be). Nothing was lost: this rank's call may be repeated. Once `peer`
    /// calls the phase again with good input, this rank's `*_wait` completes the round.
    #[error("rank {rank}: rank {peer} rejected its {phase} input ({reason}); the round resumes when rank {peer} issues {phase} again with good input: call {phase}_wait again (or initialise the backend again)")]
    PeerRejected {
        /// The rank whose wait met the poisoned count.
        rank: usize,
        /// The rank that rejected its input.
        peer: usize,
        /// The phase `peer` rejected.
        phase: Phase,
        /// Why `peer` rejected it.
        reason: RejectReason,
    },

    /// A host or device allocation failed; the process survives.
    #[error("out of memory: {what} needs {bytes} bytes")]
    OutOfMemory {
        /// Bytes asked for.
        bytes: usize,
        /// The buffer asked for.
        what: String,
    },

    /// The backend cannot run on this machine (no driver, no GPU, not built in).
    #[error("backend `{backend}` is not available: {reason}")]
    BackendUnavailable {
        /// The backend's name (`sim`, `cuda`).
        backend: String,
        /// What is missing.
        reason: String,
    },

    /// A variable a launcher sets (`RANK`, `WORLD_SIZE`, ...) is missing or does not fit the
    /// others.
    #[error("launcher variable {variable}: {problem}")]
    Launch {
        /// The variable's name.
        variable: String,
        /// What is wrong with it.
        problem: String,
    },

    /// Ranks of a world made one per process did not reach the rendezvous in time, or left it
    /// ([`crate::rendezvous`]).
    #[error(
        "rank {rank}: rank(s) {} did not {during} within {waited_ms} ms",
        compact_list(peers, "ranks")
    )]
    Unreachable {
        /// The rank that waited.
        rank: usize,
        /// The ranks it did not hear from.
        peers: Vec<usize>,
        /// What they did not do (`connect`, `send`, ...).
        during: &'static str,
        /// Milliseconds it waited.
        waited_ms: u64,
    },

    /// Any other failure inside a backend (a driver call, a kernel compile); the message says
    /// which.
    #[error("{0}")]
    Backend(String),
}

/// Why a rank rejected its input, as it travels to its peers: a small code inside the poisoned
/// count ([`poison`]), since a string cannot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// [`EpError::ExpertIdOutOfRange`].
    ExpertIdOutOfRange,
    /// [`EpError::TooManyTokens`].
    TooManyTokens,
    /// [`EpError::Shape`].
    Shape,
    /// [`EpError::InvalidInputScale`].
    InvalidInputScale,
    /// [`EpError::Incompatible`].
    Incompatible,
    /// [`EpError::NotContiguous`].
    NotContiguous,
    /// [`EpError::OutOfMemory`].
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

    /// The reason for a code from [`RejectReason::code`]; an unknown code is [`RejectReason::Other`].
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

    /// The poisoned count that carries `reason`.
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
