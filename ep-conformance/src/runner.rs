//! Runs the suite outside `cargo test` (the `ep conformance` command): the same cases as
//! [`crate::testgen!`], snapshots compared with the embedded copies; in one process
//! ([`run_all`]) or in each process of a world of one process per rank ([`run_all_per_rank`]).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use ep_core::{EpBackend, Format};

use crate::cases::{self, CaseResult, Ctx, FixtureMode};
use crate::per_rank::PerRank;
use crate::snapshot::SnapshotMode;

/// A named case, ready to run on backend `B`.
pub struct Case<B: EpBackend> {
    /// `fixtures::NAME::FORMAT::MODE` or `cases::NAME`; the filters of [`cases_for`] match it.
    pub name: String,
    /// Runs only on backends with host-closure epilogues (the simulator).
    pub needs_host_closures: bool,
    run: CaseFn<B>,
}

enum CaseFn<B> {
    Fixture(&'static str, Format, FixtureMode),
    Plain(fn(&B, &Ctx) -> CaseResult),
}

#[doc(hidden)]
#[macro_export]
macro_rules! __runner_list {
    (fixtures [$($fx:ident)*] cases [$($case:ident)*] host_closure_cases [$($hcase:ident)*]) => {
        /// Every case, fixtures first, in the order `ep conformance` prints them.
        pub fn all_cases<B: $crate::__ep_core::EpBackend>() -> Vec<$crate::runner::Case<B>> {
            let mut v = Vec::new();
            $(
                for &format in $crate::__ep_core::Format::ALL {
                    for mode in $crate::cases::FixtureMode::ALL {
                        v.push($crate::runner::Case::fixture(stringify!($fx), format, mode));
                    }
                }
            )*
            $(
                v.push($crate::runner::Case::plain(stringify!($case), $crate::cases::$case::<B>));
            )*
            $(
                let mut c = $crate::runner::Case::plain(stringify!($hcase), $crate::cases::$hcase::<B>);
                c.needs_host_closures = true;
                v.push(c);
            )*
            v
        }

        /// The fixture names the suite lists.
        pub fn listed_fixtures() -> Vec<&'static str> {
            vec![$(stringify!($fx)),*]
        }
    };
}
crate::__with_cases!(__runner_list!());

impl Outcome {
    /// Why the case was skipped: its world could not be placed in a launch's processes.
    pub fn skipped(&self) -> Option<&str> {
        self.result.as_ref().err()?.strip_prefix(SKIP_PREFIX)
    }

    /// Whether the case failed (it neither passed nor was skipped).
    pub fn failed(&self) -> bool {
        self.result.is_err() && self.skipped().is_none()
    }
}

/// The outcome of one case.
pub struct Outcome {
    /// The case's [`Case::name`].
    pub name: String,
    /// `Err` with the first broken rule, or the panic's message.
    pub result: CaseResult,
    /// Wall time of the case.
    pub time: Duration,
}

impl<B: EpBackend> Case<B> {
    #[doc(hidden)]
    pub fn fixture(name: &'static str, format: Format, mode: FixtureMode) -> Self {
        Case {
            name: format!("fixtures::{name}::{format}::{}", mode.name()),
            needs_host_closures: false,
            run: CaseFn::Fixture(name, format, mode),
        }
    }

    #[doc(hidden)]
    pub fn plain(name: &str, f: fn(&B, &Ctx) -> CaseResult) -> Self {
        Case {
            name: format!("cases::{name}"),
            needs_host_closures: false,
            run: CaseFn::Plain(f),
        }
    }

    /// Why `backend` cannot run this case, or `None` when it can.
    pub fn skip_reason(&self, backend: &B) -> Option<&'static str> {
        (self.needs_host_closures && !backend.host_closures()).then_some(
            "needs host-closure epilogues, which only CPU backends run; \
             GPU backends take device-code epilogues instead",
        )
    }

    /// Runs the case on `backend`; a panic in it becomes an `Err` outcome.
    pub fn run(&self, backend: &B, cx: &Ctx) -> Outcome {
        let t0 = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| match &self.run {
            CaseFn::Fixture(name, format, mode) => {
                cases::fixture(backend, cx, name, *format, *mode)
            }
            CaseFn::Plain(f) => f(backend, cx),
        }))
        .unwrap_or_else(|p| {
            Err(p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panicked".into()))
        });
        Outcome {
            name: self.name.clone(),
            result,
            time: t0.elapsed(),
        }
    }
}

/// The cases `backend` runs: every case, less the host-closure ones where it has none.
pub fn cases_for<B: EpBackend>(backend: &B, filter: Option<&str>) -> Vec<Case<B>> {
    all_cases::<B>()
        .into_iter()
        .filter(|c| c.skip_reason(backend).is_none())
        .filter(|c| filter.is_none_or(|f| c.name.contains(f)))
        .collect()
}

/// The cases the filter selects that `backend` cannot run, each with the reason, so a runner can
/// say what it leaves out instead of counting fewer cases than it announced.
pub fn skipped_for<B: EpBackend>(backend: &B, filter: Option<&str>) -> Vec<(String, &'static str)> {
    all_cases::<B>()
        .into_iter()
        .filter(|c| filter.is_none_or(|f| c.name.contains(f)))
        .filter_map(|c| Some((c.name.clone(), c.skip_reason(backend)?)))
        .collect()
}

/// Runs every case of [`cases_for`], calling `report` after each.
pub fn run_all<B: EpBackend>(
    backend: &B,
    filter: Option<&str>,
    mut report: impl FnMut(&Outcome),
) -> Vec<Outcome> {
    let cx = Ctx::in_process(SnapshotMode::Embedded);
    cases_for(backend, filter)
        .into_iter()
        .map(|c| {
            let o = c.run(backend, &cx);
            report(&o);
            o
        })
        .collect()
}

/// [`run_all`] in one process of a world of one process per rank, every process running the
/// same list: each case starts on every process together (they agree on its name first), runs
/// for the ranks each holds, and passes only if it passed on every process; every process gets
/// every case's verdict, which names the processes (by rank) where it failed. Once the processes
/// cannot agree (a list that differs, a process gone), the cases left fail as not run, so the
/// count stays the list's.
pub fn run_all_per_rank<B: EpBackend>(
    backend: &PerRank<B>,
    filter: Option<&str>,
    fixture_nodes: Option<usize>,
    mut report: impl FnMut(&Outcome),
) -> Vec<Outcome> {
    let processes = backend.processes();
    let cx = Ctx {
        snapshots: SnapshotMode::Embedded,
        processes: Some(processes),
        fixture_nodes,
    };
    let cases = cases_for(backend, filter);
    let mut broken = processes
        .begin(&format!("a list of {} cases", cases.len()))
        .err();
    let mut outcomes = Vec::new();
    for c in cases {
        let t0 = Instant::now();
        let result = match &broken {
            Some(why) => Err(format!("not run: {why}")),
            None => match processes.begin(&c.name) {
                Err(e) => Err(broken.insert(e).clone()),
                Ok(()) => {
                    processes.take_unplaceable();
                    let mine = c.run(backend, &cx).result;
                    let verdict = match processes.take_unplaceable() {
                        Some(why) => [&[SKIPPED][..], why.as_bytes()].concat(),
                        None => verdict_bytes(&mine),
                    };
                    match processes.settle(&verdict) {
                        Ok(all) => world_verdict(&all),
                        Err(e) => {
                            let lost = broken.insert(e).clone();
                            Err(match mine {
                                Ok(()) => lost,
                                Err(m) => format!("{m}\n{lost}"),
                            })
                        }
                    }
                }
            },
        };
        let o = Outcome {
            name: c.name.clone(),
            result,
            time: t0.elapsed(),
        };
        report(&o);
        outcomes.push(o);
    }
    outcomes
}

/// A process's verdict that the backend could not place the case's world in these processes
/// (then its reason); the case is skipped wherever one process says so.
const SKIPPED: u8 = 2;

/// The prefix of a skipped case's result (`Err`), which [`Outcome::skipped`] recognises.
const SKIP_PREFIX: &str = "skipped: ";

/// One process's verdict on a case, for the others.
fn verdict_bytes(result: &CaseResult) -> Vec<u8> {
    match result {
        Ok(()) => vec![0],
        Err(e) => [&[1u8][..], e.as_bytes()].concat(),
    }
}

/// The case's verdict from every process's (in rank order): passed where every process passed;
/// otherwise each failure, prefixed with its process's rank.
fn world_verdict(all: &[Vec<u8>]) -> CaseResult {
    if let Some((_, why)) = all
        .iter()
        .find_map(|v| v.split_first().filter(|(&t, _)| t == SKIPPED))
    {
        return Err(format!("{SKIP_PREFIX}{}", String::from_utf8_lossy(why)));
    }
    let failures: Vec<String> = all
        .iter()
        .enumerate()
        .filter_map(|(rank, v)| match v.split_first() {
            Some((0, _)) => None,
            Some((_, msg)) => Some(format!("[rank {rank}] {}", String::from_utf8_lossy(msg))),
            None => Some(format!("[rank {rank}] sent no verdict")),
        })
        .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// Prints each failure's details and the closing `N passed, N failed` line; returns whether
/// every case passed.
pub fn print_summary(outcomes: &[Outcome]) -> bool {
    let failed: Vec<_> = outcomes.iter().filter(|o| o.failed()).collect();
    for o in &failed {
        println!("\n--- {} ---\n{}", o.name, o.result.as_ref().unwrap_err());
    }
    let skipped: Vec<_> = outcomes.iter().filter_map(|o| o.skipped()).collect();
    let passed = outcomes.len() - failed.len() - skipped.len();
    match skipped.first() {
        None => println!("\n{passed} passed, {} failed", failed.len()),
        Some(why) => println!(
            "\n{passed} passed, {} failed, {} skipped (not counted as passed: {why}{})",
            failed.len(),
            skipped.len(),
            if skipped.iter().all(|w| w == why) {
                ""
            } else {
                "; and others"
            }
        ),
    }
    failed.is_empty()
}
