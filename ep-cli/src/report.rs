//! Per-rank errors of a round, summarised: ranks that fail the same way share one line, timeouts
//! are called timeouts, and long rank lists are cut, so a world of a thousand ranks that times
//! out prints a few lines instead of one (or a thousand) per rank.

use ep::{EpError, Phase};

/// How many distinct errors a summary shows before it gives the count of the rest.
const SHOWN_ERRORS: usize = 8;

/// Ranks (ascending, no repeats) as runs, cut after the first few (`ep::error::compact_list`).
pub fn rank_list(ranks: &[usize]) -> String {
    ep::error::compact_list(ranks, "ranks")
}

/// What went wrong in a round, in a few lines.
#[derive(Debug)]
pub struct Summary {
    /// Every error was a timeout: the world must be initialised again.
    pub only_timeouts: bool,
    pub lines: Vec<String>,
}

impl Summary {
    /// `TIMEOUT` or `ERROR`, for the line that announces the failed round.
    pub fn headline(&self) -> &'static str {
        if self.only_timeouts {
            "TIMEOUT"
        } else {
            "ERROR"
        }
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.lines.join("\n"))
    }
}

/// One kind of failure and the ranks that had it.
enum Group {
    Timeout {
        phase: Phase,
        ranks: Vec<usize>,
        waited_ms: u64,
        missing: Vec<usize>,
    },
    Other {
        message: String,
        ranks: Vec<usize>,
    },
}

/// Summarises the errors of the ranks that failed (`(rank, error)`, in rank order) in a world of
/// `n_ranks`. Timeouts of one phase make one line (the ranks that timed out and the ranks they
/// waited for, both cut); other errors that read the same once their `rank N: ` prefix is
/// dropped make one line.
pub fn summarise(errors: &[(usize, EpError)], n_ranks: usize) -> Summary {
    let mut groups: Vec<Group> = Vec::new();
    for (rank, e) in errors {
        let rank = *rank;
        if let EpError::Timeout {
            phase, waited_ms, ..
        } = e
        {
            let found = groups.iter_mut().find_map(|g| match g {
                Group::Timeout {
                    phase: p,
                    ranks,
                    waited_ms: w,
                    missing,
                } if p == phase => Some((ranks, w, missing)),
                _ => None,
            });
            match found {
                Some((ranks, w, missing)) => {
                    ranks.push(rank);
                    *w = (*w).max(*waited_ms);
                    missing.extend(e.missing_ranks());
                }
                None => groups.push(Group::Timeout {
                    phase: *phase,
                    ranks: vec![rank],
                    waited_ms: *waited_ms,
                    missing: e.missing_ranks(),
                }),
            }
            continue;
        }
        let text = e.to_string();
        let prefix = format!("rank {rank}: ");
        let message = text.strip_prefix(&prefix).unwrap_or(&text).to_string();
        let found = groups.iter_mut().find_map(|g| match g {
            Group::Other { message: m, ranks } if *m == message => Some(ranks),
            _ => None,
        });
        match found {
            Some(ranks) => ranks.push(rank),
            None => groups.push(Group::Other {
                message,
                ranks: vec![rank],
            }),
        }
    }
    let only_timeouts =
        !groups.is_empty() && groups.iter().all(|g| matches!(g, Group::Timeout { .. }));
    let who = |ranks: &[usize]| match ranks {
        [r] => format!("rank {r}"),
        _ => format!("{} of {n_ranks} ranks ({})", ranks.len(), rank_list(ranks)),
    };
    let mut lines: Vec<String> = groups
        .iter_mut()
        .take(SHOWN_ERRORS)
        .map(|g| match g {
            Group::Timeout {
                phase,
                ranks,
                waited_ms,
                missing,
            } => {
                missing.sort_unstable();
                missing.dedup();
                let waited_for = if missing.is_empty() {
                    String::new()
                } else {
                    format!(
                        ", waiting for {} rank(s): {}",
                        missing.len(),
                        rank_list(missing)
                    )
                };
                format!(
                    "{}: {phase} timed out after {waited_ms} ms{waited_for}",
                    who(ranks)
                )
            }
            Group::Other { message, ranks } => format!("{}: {message}", who(ranks)),
        })
        .collect();
    if groups.len() > SHOWN_ERRORS {
        lines.push(format!(
            "... and {} more distinct errors",
            groups.len() - SHOWN_ERRORS
        ));
    }
    if groups.iter().any(|g| matches!(g, Group::Timeout { .. })) {
        lines.push("after a timeout the world must be initialised again".into());
    }
    Summary {
        only_timeouts,
        lines,
    }
}

/// Every rank's result of a round, or the summary of the errors of the ranks that failed.
pub fn all_ok<T>(results: Vec<Result<T, EpError>>) -> Result<Vec<T>, Summary> {
    let n_ranks = results.len();
    let mut ok = Vec::with_capacity(n_ranks);
    let mut errors = Vec::new();
    for (r, res) in results.into_iter().enumerate() {
        match res {
            Ok(v) => ok.push(v),
            Err(e) => errors.push((r, e)),
        }
    }
    if errors.is_empty() {
        Ok(ok)
    } else {
        Err(summarise(&errors, n_ranks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ep::MissingSignal;

    fn timeout(rank: usize, waited_for: &[usize]) -> (usize, EpError) {
        let missing = waited_for
            .iter()
            .flat_map(|&src_rank| {
                (0..16).map(move |expert| MissingSignal {
                    src_rank,
                    expert: 16 * src_rank + expert,
                })
            })
            .collect();
        (
            rank,
            EpError::Timeout {
                rank,
                phase: Phase::Dispatch,
                waited_ms: 10_000,
                missing,
            },
        )
    }

    #[test]
    fn rank_lists_are_runs_cut_after_a_few() {
        assert_eq!(rank_list(&[]), "");
        assert_eq!(rank_list(&[3]), "3");
        assert_eq!(rank_list(&[0, 1, 2, 3, 7, 9, 10]), "0-3, 7, 9, 10");
        let evens: Vec<usize> = (0..1000).step_by(2).collect();
        assert_eq!(
            rank_list(&evens),
            "0, 2, 4, 6, 8, 10, 12, 14, ... and 492 more ranks"
        );
        assert_eq!(rank_list(&(0..1000).collect::<Vec<_>>()), "0-999");
    }

    #[test]
    fn a_thousand_timeouts_make_two_short_lines() {
        // Every rank waits for every other: the flood the summary replaces.
        let n = 1000;
        let errors: Vec<_> = (0..n)
            .map(|r| {
                let others: Vec<usize> = (0..n).filter(|&o| o != r && o % 3 == 0).collect();
                timeout(r, &others)
            })
            .collect();
        let flood: usize = errors.iter().map(|(_, e)| e.to_string().len()).sum();
        let s = summarise(&errors, n);
        assert!(s.only_timeouts);
        assert_eq!(s.headline(), "TIMEOUT");
        assert_eq!(
            s.lines,
            [
                "1000 of 1000 ranks (0-999): dispatch timed out after 10000 ms, waiting for 334 \
                 rank(s): 0, 3, 6, 9, 12, 15, 18, 21, ... and 326 more ranks",
                "after a timeout the world must be initialised again",
            ]
        );
        assert!(s.to_string().len() * 100 < flood);
    }

    #[test]
    fn identical_errors_share_a_line_and_the_cause_is_not_a_timeout() {
        let bad = |rank| EpError::ExpertIdOutOfRange {
            rank,
            token: 0,
            slot: 1,
            id: 999,
            n_experts: 64,
        };
        let errors = vec![
            (0, bad(0)),
            timeout(1, &[0]),
            (2, bad(2)),
            (3, bad(3)),
            timeout(4, &[0, 2]),
        ];
        let s = summarise(&errors, 6);
        assert!(!s.only_timeouts);
        assert_eq!(s.headline(), "ERROR");
        assert_eq!(
            s.lines,
            [
                "3 of 6 ranks (0, 2, 3): token 0 slot 1 names expert 999, outside [-1, 64)",
                "2 of 6 ranks (1, 4): dispatch timed out after 10000 ms, waiting for 2 rank(s): 0, 2",
                "after a timeout the world must be initialised again",
            ]
        );
    }

    #[test]
    fn one_rank_is_named_alone_and_many_distinct_errors_are_cut() {
        let errors: Vec<_> = (0..20)
            .map(|r| (r, EpError::Backend(format!("fault {r}"))))
            .collect();
        let s = summarise(&errors[..1], 4);
        assert_eq!(s.lines, ["rank 0: fault 0"]);
        let s = summarise(&errors, 20);
        assert_eq!(s.lines.len(), SHOWN_ERRORS + 1);
        assert_eq!(s.lines[SHOWN_ERRORS], "... and 12 more distinct errors");
    }

    #[test]
    fn all_ok_passes_results_through() {
        let r: Vec<Result<u8, EpError>> = vec![Ok(1), Ok(2)];
        assert_eq!(all_ok(r).unwrap(), [1, 2]);
        let r: Vec<Result<u8, EpError>> = vec![Ok(1), Err(EpError::Backend("x".into()))];
        assert_eq!(all_ok(r).unwrap_err().lines, ["rank 1: x"]);
    }
}
