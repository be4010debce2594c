//! The one error type of the contract. Every check that can fail on caller input runs before any
//! byte is written, so an `Err` always means "nothing happened" (except [`EpError::Timeout`] and
//! [`EpError::Poisoned`], after which the world must be initialised again).

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

    #[error("backend `{backend}` is not available: {reason}")]
    BackendUnavailable { backend: String, reason: String },

    #[error("{0}")]
    Backend(String),
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

fn describe_missing(missing: &[MissingSignal]) -> String {
    let mut ranks: Vec<usize> = missing.iter().map(|m| m.src_rank).collect();
    ranks.sort_unstable();
    ranks.dedup();
    let mut s = String::new();
    for (i, r) in ranks.iter().enumerate() {
        let experts: Vec<usize> = missing
            .iter()
            .filter(|m| m.src_rank == *r)
            .map(|m| m.expert)
            .collect();
        if i > 0 {
            s.push_str("; ");
        }
        s.push_str(&format!("rank {r} (experts {})", compact_list(&experts)));
    }
    s
}

/// `0-3,7,9-10`: short enough for an error line even with hundreds of experts.
fn compact_list(v: &[usize]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    out.join(",")
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
}
