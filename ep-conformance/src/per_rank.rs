//! The suite with one process per rank, as a launcher (`ep launch`, `torchrun`) starts them: each
//! process runs the same cases for the ranks it holds and checks its own outputs against the
//! oracle, which it computes for the whole world from the seeds.
//!
//! - [`Processes`]: the world's processes, kept in step through their rendezvous. Every exchange
//!   carries the label of the point each process has reached (the case, and what in it), so
//!   processes that are out of step get an error naming where each one is, never a hang or a
//!   message meant for another point.
//! - [`PerRank`]: a backend whose `init` makes, in this process, only the ranks it holds, each
//!   with the inner backend's [`EpBackend::init_rank`], so the generic cases run unchanged on it
//!   with a slice of this process's communicators. A case's world need not have as many ranks
//!   as the launch has processes: rank `r` of a case's world lives in process `r % processes`,
//!   so a process may hold none of a small world's ranks (its slice is empty) or two of a large
//!   one's (each made on its own thread, as `init_rank` allows).

use std::net::TcpListener;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ep_core::rendezvous::{Master, RankSpec, Rendezvous};
use ep_core::{EpBackend, EpConfig, EpError, Result};

/// The processes of a world of one process per rank, seen from one of them: its rendezvous with
/// the others, and the case it is running (for the labels of its exchanges).
pub struct Processes {
    spec: RankSpec,
    master_addr: String,
    deadline: Duration,
    rendezvous: Mutex<Rendezvous>,
    case: Mutex<String>,
    /// Why the rendezvous can no longer be trusted: an exchange failed part way, so the next
    /// message on a connection may belong to the failed one.
    broken: Mutex<Option<String>>,
    /// Why the backend could not place a world of the current case in these processes (its
    /// `init_rank` returned `BackendUnavailable`: a GPU backend that takes a GPU per process,
    /// given a world with more ranks than the launch has GPUs): the case is skipped, not failed.
    unplaceable: Mutex<Option<String>>,
}

impl std::fmt::Debug for Processes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Processes")
            .field("spec", &self.spec)
            .field("master_addr", &self.master_addr)
            .finish_non_exhaustive()
    }
}

/// Where one process is: a case and a point in it.
type Label = String;

impl Processes {
    /// This process's side of the world's rendezvous at `master` (rank 0 listens there). Every
    /// exchange waits at most `deadline` for the slowest process, so it must exceed the longest
    /// case.
    pub fn connect(spec: RankSpec, master: &Master, deadline: Duration) -> Result<Processes> {
        let rv = Rendezvous::connect(spec, master, deadline)?;
        Ok(Processes::new(rv, &master.addr, deadline))
    }

    /// Over a rendezvous already made (`rendezvous::on_threads` in tests); `master_addr` is the
    /// address rank 0's process listens at, where it listens again for each case's world.
    pub fn new(rv: Rendezvous, master_addr: &str, deadline: Duration) -> Processes {
        Processes {
            spec: rv.spec(),
            master_addr: master_addr.to_string(),
            deadline,
            rendezvous: Mutex::new(rv),
            case: Mutex::new(String::new()),
            broken: Mutex::new(None),
            unplaceable: Mutex::new(None),
        }
    }

    /// Why a world of the case that ran last could not be placed in these processes, if so
    /// (and forgets it).
    pub fn take_unplaceable(&self) -> Option<String> {
        lock(&self.unplaceable).take()
    }

    /// This process's place in the world.
    pub fn spec(&self) -> RankSpec {
        self.spec
    }

    fn case(&self) -> String {
        lock(&self.case).clone()
    }

    /// Every process's label and bytes, in rank order. An exchange that fails part way leaves
    /// the connections in an unknown state: every later one fails at once, saying why.
    fn gather(
        &self,
        label: &str,
        mine: &[u8],
    ) -> std::result::Result<Vec<(Label, Vec<u8>)>, String> {
        if let Some(why) = lock(&self.broken).as_ref() {
            return Err(format!("the processes' rendezvous broke earlier: {why}"));
        }
        let mut msg = label.as_bytes().to_vec();
        msg.push(0);
        msg.extend_from_slice(mine);
        let got = lock(&self.rendezvous).all_gather(&msg);
        let all = match got {
            Ok(all) => all,
            Err(e) => {
                let why = format!("at `{label}`: {e}");
                *lock(&self.broken) = Some(why.clone());
                return Err(format!("the processes' rendezvous broke {why}"));
            }
        };
        Ok(all
            .into_iter()
            .map(|m| match m.iter().position(|&b| b == 0) {
                Some(i) => (
                    String::from_utf8_lossy(&m[..i]).into_owned(),
                    m[i + 1..].to_vec(),
                ),
                None => (String::from_utf8_lossy(&m).into_owned(), Vec::new()),
            })
            .collect())
    }

    /// Every process's bytes at point `what` of the current case, in rank order; an error naming
    /// where each process is when they are not all there.
    pub fn exchange(&self, what: &str, mine: &[u8]) -> std::result::Result<Vec<Vec<u8>>, String> {
        let label = format!("{}: {what}", self.case());
        let all = self.gather(&label, mine)?;
        if all.iter().any(|(l, _)| *l != label) {
            return Err(out_of_step(&all));
        }
        Ok(all.into_iter().map(|(_, b)| b).collect())
    }

    /// Returns once every process has reached point `what` of the current case.
    pub fn barrier(&self, what: &str) -> std::result::Result<(), String> {
        self.exchange(what, &[]).map(drop)
    }

    /// `n` summed over the processes, at point `what` of the current case.
    pub fn total(&self, what: &str, n: u64) -> std::result::Result<u64, String> {
        let all = self.exchange(what, &n.to_le_bytes())?;
        all.iter()
            .map(|b| {
                b.as_slice()
                    .try_into()
                    .map(u64::from_le_bytes)
                    .map_err(|_| format!("{what}: a process sent {} bytes for a count", b.len()))
            })
            .sum()
    }

    /// Starts case `name` on every process: they must all be starting the same case (the same
    /// list in the same order); otherwise an error naming where each is.
    pub(crate) fn begin(&self, name: &str) -> std::result::Result<(), String> {
        name.clone_into(&mut lock(&self.case));
        self.barrier("start")
    }

    /// Ends the current case on every process, handing each process's `verdict` to all: a
    /// process that left the case early (it failed) waits here while the others reach the
    /// points it skipped, each of which then fails for them as out of step, until all have
    /// left it. Every process's verdict, in rank order.
    pub(crate) fn settle(&self, verdict: &[u8]) -> std::result::Result<Vec<Vec<u8>>, String> {
        /// Far more exchanges than any case makes.
        const MOST_TRIES: usize = 1000;
        let label = format!("{}: end", self.case());
        for _ in 0..MOST_TRIES {
            let all = self.gather(&label, verdict)?;
            if all.iter().all(|(l, _)| *l == label) {
                return Ok(all.into_iter().map(|(_, b)| b).collect());
            }
        }
        Err(format!(
            "processes still inside `{}` after {MOST_TRIES} exchanges",
            self.case()
        ))
    }

    /// This process's ranks of a world with one config per rank: rank `r` lives in process
    /// `r % processes`, made by `backend.init_rank` over a rendezvous of that world's ranks alone
    /// (rank 0's process listens on a fresh port for it), each rank on its own thread. The
    /// processes holding none of its ranks get an empty list.
    fn init_ranks<B: EpBackend>(&self, backend: &B, configs: &[EpConfig]) -> Result<Vec<B::Comm>> {
        let (n, p, w) = (configs.len(), self.spec.rank, self.spec.world_size);
        if n == 0 {
            // No world: the error every backend gives.
            return EpConfig::check_world(configs).map(|_| Vec::new());
        }
        let listener = (p == 0).then(|| TcpListener::bind((self.master_addr.as_str(), 0)));
        // Rank 0's port, or why it has none.
        let port = match &listener {
            Some(Ok(l)) => l
                .local_addr()
                .map_or_else(|e| e.to_string(), |a| a.port().to_string()),
            Some(Err(e)) => e.to_string(),
            None => String::new(),
        };
        let all = self
            .exchange(&format!("a world of {n} ranks"), port.as_bytes())
            .map_err(EpError::Backend)?;
        let local: Vec<usize> = (p..n).step_by(w).collect();
        if local.is_empty() {
            return Ok(Vec::new());
        }
        let port = String::from_utf8_lossy(&all[0]).into_owned();
        let master = Master {
            addr: self.master_addr.clone(),
            port: port.parse().map_err(|_| {
                EpError::Backend(format!(
                    "rank 0's process cannot listen for the case's world at {}: {port}",
                    self.master_addr
                ))
            })?,
        };
        let mut listener = listener.and_then(|l| l.ok());
        let made: Vec<Result<B::Comm>> = std::thread::scope(|s| {
            let handles: Vec<_> = local
                .iter()
                .map(|&r| {
                    let spec = self.rank_spec(r, n);
                    let (master, deadline) = (&master, self.deadline);
                    let mine = listener.take().filter(|_| r == 0);
                    let cfg = &configs[r];
                    s.spawn(move || {
                        let mut rv = match mine {
                            Some(l) => Rendezvous::accept(spec, l, deadline)?,
                            None => Rendezvous::join(spec, master, deadline)?,
                        };
                        backend.init_rank(cfg, &mut rv)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        if let Some(why) = made.iter().find_map(|m| match m {
            Err(EpError::BackendUnavailable { reason, .. }) => Some(reason.clone()),
            _ => None,
        }) {
            lock(&self.unplaceable).get_or_insert(why);
        }
        made.into_iter().collect()
    }

    /// Rank `r`'s place in a case's world of `n` ranks. Where the world is the launch's, it is
    /// this process's own; otherwise its local rank is still this process's (a GPU backend picks
    /// its device by it) wherever the launch's ranks a node divide `n`.
    fn rank_spec(&self, r: usize, n: usize) -> RankSpec {
        if n == self.spec.world_size {
            return self.spec;
        }
        let l = self.spec.local_world_size;
        let local_world_size = if n.is_multiple_of(l) { l } else { n };
        RankSpec {
            rank: r,
            world_size: n,
            local_rank: r % local_world_size,
            local_world_size,
        }
    }
}

/// Which process is where, for an error: processes at the same point share a line.
fn out_of_step(all: &[(Label, Vec<u8>)]) -> String {
    let mut at: Vec<(&str, Vec<usize>)> = Vec::new();
    for (r, (label, _)) in all.iter().enumerate() {
        match at.iter_mut().find(|(l, _)| *l == label.as_str()) {
            Some((_, ranks)) => ranks.push(r),
            None => at.push((label, vec![r])),
        }
    }
    let places: Vec<String> = at
        .iter()
        .map(|(label, ranks)| {
            format!(
                "{} at `{label}`",
                ep_core::error::compact_list(ranks, "ranks")
            )
        })
        .collect();
    format!("processes out of step: {}", places.join("; "))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means a case panicked while holding it; the value is still whole.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A backend whose worlds are made one rank per process: `init` returns only the ranks this
/// process holds (see the module's page), each made by the inner backend's `init_rank`, so a
/// config that differs in another process is the `ConfigMismatch` that process's rank sees.
#[derive(Clone)]
pub struct PerRank<B> {
    inner: B,
    processes: Arc<Processes>,
}

impl<B: EpBackend> PerRank<B> {
    /// `inner`'s ranks, made in the processes of `processes`.
    pub fn new(inner: B, processes: Arc<Processes>) -> Self {
        PerRank { inner, processes }
    }

    /// The world's processes.
    pub fn processes(&self) -> &Processes {
        &self.processes
    }
}

impl<B: EpBackend> EpBackend for PerRank<B> {
    type Comm = B::Comm;

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn host_closures(&self) -> bool {
        self.inner.host_closures()
    }

    fn init(&self, configs: &[EpConfig]) -> Result<Vec<B::Comm>> {
        self.processes.init_ranks(&self.inner, configs)
    }

    fn init_rank(&self, config: &EpConfig, rendezvous: &mut Rendezvous) -> Result<B::Comm> {
        self.inner.init_rank(config, rendezvous)
    }
}
