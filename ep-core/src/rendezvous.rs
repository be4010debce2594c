//! How the ranks of a world made one per process find each other before their backend connects
//! them: who this process is ([`RankSpec`], from the variables a launcher such as `torchrun` sets)
//! and a rendezvous over TCP ([`Rendezvous`]): rank 0 listens at the master address, every other
//! rank connects to it, and [`Rendezvous::all_gather`] hands every rank every rank's bytes (its
//! config, a communicator's id, memory handles). Small messages only. Every wait has a deadline,
//! and a rank that never came, or left, is named ([`EpError::Unreachable`]).

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::config::EpConfig;
use crate::error::{EpError, Result};

/// This process's place in a world of one process per rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankSpec {
    /// Its rank, `0..world_size`.
    pub rank: usize,
    /// Ranks in the world.
    pub world_size: usize,
    /// Its rank among the ranks of its node (its GPU's index there).
    pub local_rank: usize,
    /// Ranks a node.
    pub local_world_size: usize,
}

/// Where rank 0 listens (`MASTER_ADDR`, `MASTER_PORT`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Master {
    /// A host name or address.
    pub addr: String,
    /// A TCP port.
    pub port: u16,
}

impl RankSpec {
    /// From the variables `torchrun` sets (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`,
    /// `LOCAL_WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`), read through `get` (the caller's
    /// environment: the library reads none): each checked, and checked against the others.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<(RankSpec, Master)> {
        let var = |name: &str| {
            get(name)
                .filter(|v| !v.trim().is_empty())
                .ok_or_else(|| EpError::Launch {
                    variable: name.into(),
                    problem: "not set (a launcher such as `ep launch` or `torchrun` sets it)"
                        .into(),
                })
        };
        let number = |name: &str| -> Result<usize> {
            let v = var(name)?;
            v.trim().parse().map_err(|_| EpError::Launch {
                variable: name.into(),
                problem: format!("`{v}` is not a number"),
            })
        };
        let bad = |name: &str, problem: String| EpError::Launch {
            variable: name.into(),
            problem,
        };
        let spec = RankSpec {
            rank: number("RANK")?,
            world_size: number("WORLD_SIZE")?,
            local_rank: number("LOCAL_RANK")?,
            local_world_size: number("LOCAL_WORLD_SIZE")?,
        };
        let (w, l) = (spec.world_size, spec.local_world_size);
        if w == 0 || spec.rank >= w {
            return Err(bad(
                "RANK",
                format!("{} is not below WORLD_SIZE = {w}", spec.rank),
            ));
        }
        if l == 0 || w % l != 0 {
            return Err(bad(
                "LOCAL_WORLD_SIZE",
                format!("{l} does not divide WORLD_SIZE = {w} (every node has as many ranks)"),
            ));
        }
        if spec.local_rank != spec.rank % l {
            return Err(bad(
                "LOCAL_RANK",
                format!(
                    "{} is not RANK mod LOCAL_WORLD_SIZE = {} (ranks fill one node after another)",
                    spec.local_rank,
                    spec.rank % l
                ),
            ));
        }
        let port = var("MASTER_PORT")?;
        let master = Master {
            addr: var("MASTER_ADDR")?.trim().to_string(),
            port: port
                .trim()
                .parse()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| bad("MASTER_PORT", format!("`{port}` is not a TCP port")))?,
        };
        Ok((spec, master))
    }

    /// The node the rank is on.
    pub fn node(&self) -> usize {
        self.rank / self.local_world_size
    }
}

/// The first bytes of every connection: which protocol, then the rank and the world's size.
const HELLO: &[u8; 4] = b"EPRV";

/// A world's rendezvous: rank 0 holds a connection to every other rank, every other rank one to
/// rank 0.
pub struct Rendezvous {
    spec: RankSpec,
    deadline: Duration,
    /// Rank 0: the connection of each rank (`None` for itself). Others: the one to rank 0.
    links: Vec<Option<TcpStream>>,
}

impl Rendezvous {
    /// Rank 0 listens at `master`, every other rank connects to it (trying again until rank 0
    /// listens), each within `deadline`.
    pub fn connect(spec: RankSpec, master: &Master, deadline: Duration) -> Result<Rendezvous> {
        if spec.rank == 0 {
            let listener = TcpListener::bind((master.addr.as_str(), master.port)).map_err(|e| {
                EpError::Launch {
                    variable: "MASTER_PORT".into(),
                    problem: format!(
                        "rank 0 cannot listen at {}:{}: {e}",
                        master.addr, master.port
                    ),
                }
            })?;
            return Rendezvous::accept(spec, listener, deadline);
        }
        Rendezvous::join(spec, master, deadline)
    }

    /// Rank 0's side, on a listener of its own (a test binds port 0 and tells the others).
    pub fn accept(spec: RankSpec, listener: TcpListener, deadline: Duration) -> Result<Rendezvous> {
        let start = Instant::now();
        let io = |e: std::io::Error| EpError::Backend(format!("rendezvous: {e}"));
        listener.set_nonblocking(true).map_err(io)?;
        let mut links: Vec<Option<TcpStream>> = (0..spec.world_size).map(|_| None).collect();
        while links.iter().skip(1).any(Option::is_none) {
            match listener.accept() {
                Ok((mut s, _)) => {
                    s.set_nonblocking(false).map_err(io)?;
                    // Small messages answered at once: without this, Nagle's algorithm holds
                    // each message's second write for the peer's delayed ACK (tens of ms).
                    s.set_nodelay(true).map_err(io)?;
                    s.set_read_timeout(Some(remaining(start, deadline)))
                        .map_err(io)?;
                    let mut hello = [0u8; 12];
                    s.read_exact(&mut hello).map_err(io)?;
                    let rank =
                        u32::from_le_bytes(hello[4..8].try_into().expect("4 bytes")) as usize;
                    let world =
                        u32::from_le_bytes(hello[8..12].try_into().expect("4 bytes")) as usize;
                    if &hello[..4] != HELLO
                        || world != spec.world_size
                        || rank == 0
                        || rank >= world
                    {
                        return Err(EpError::Launch {
                            variable: "WORLD_SIZE".into(),
                            problem: format!(
                                "a process joined as rank {rank} of {world}; this world has {} ranks",
                                spec.world_size
                            ),
                        });
                    }
                    if links[rank].replace(s).is_some() {
                        return Err(EpError::Launch {
                            variable: "RANK".into(),
                            problem: format!("two processes joined as rank {rank}"),
                        });
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if start.elapsed() >= deadline {
                        let peers = (1..spec.world_size)
                            .filter(|&r| links[r].is_none())
                            .collect();
                        return Err(unreachable(spec.rank, peers, "connect", start));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(io(e)),
            }
        }
        Ok(Rendezvous {
            spec,
            deadline,
            links,
        })
    }

    /// Every other rank's side: connect to rank 0, trying again until it listens.
    pub fn join(spec: RankSpec, master: &Master, deadline: Duration) -> Result<Rendezvous> {
        let start = Instant::now();
        let addr = (master.addr.as_str(), master.port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| EpError::Launch {
                variable: "MASTER_ADDR".into(),
                problem: format!("`{}` does not resolve", master.addr),
            })?;
        let mut stream = loop {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                Ok(s) => break s,
                Err(_) if start.elapsed() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(_) => return Err(unreachable(spec.rank, vec![0], "listen", start)),
            }
        };
        // As rank 0's side: no write waits for a delayed ACK.
        let _ = stream.set_nodelay(true);
        let mut hello = HELLO.to_vec();
        hello.extend((spec.rank as u32).to_le_bytes());
        hello.extend((spec.world_size as u32).to_le_bytes());
        stream
            .write_all(&hello)
            .map_err(|_| unreachable(spec.rank, vec![0], "answer", start))?;
        let mut links: Vec<Option<TcpStream>> = vec![None];
        links[0] = Some(stream);
        Ok(Rendezvous {
            spec,
            deadline,
            links,
        })
    }

    /// This process's place in the world.
    pub fn spec(&self) -> RankSpec {
        self.spec
    }

    /// Every rank's `mine`, in rank order, on every rank, within the deadline.
    pub fn all_gather(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let start = Instant::now();
        let (rank, deadline) = (self.spec.rank, self.deadline);
        if rank != 0 {
            let link = self.links[0].as_mut().expect("joined");
            let lost = |_| unreachable(rank, vec![0], "answer", start);
            send(link, mine).map_err(lost)?;
            link.set_read_timeout(Some(remaining(start, deadline)))
                .map_err(lost)?;
            return (0..self.spec.world_size)
                .map(|_| receive(link).map_err(lost))
                .collect();
        }
        let mut all = vec![mine.to_vec()];
        let mut silent = Vec::new();
        for r in 1..self.spec.world_size {
            let link = self.links[r].as_mut().expect("accepted");
            let got = link
                .set_read_timeout(Some(remaining(start, deadline)))
                .and_then(|()| receive(link));
            match got {
                Ok(v) => all.push(v),
                Err(_) => {
                    silent.push(r);
                    all.push(Vec::new());
                }
            }
        }
        if !silent.is_empty() {
            return Err(unreachable(rank, silent, "send", start));
        }
        for r in 1..self.spec.world_size {
            let link = self.links[r].as_mut().expect("accepted");
            for v in &all {
                send(link, v).map_err(|_| unreachable(rank, vec![r], "stay", start))?;
            }
        }
        Ok(all)
    }

    /// Every rank's config, checked as [`EpConfig::check_world`] checks one process's: the world
    /// has as many ranks as the config says, and a rank whose config differs from rank 0's gets
    /// [`EpError::ConfigMismatch`] naming it and the first field, on every rank.
    pub fn agree(&mut self, cfg: &EpConfig) -> Result<EpConfig> {
        let all = self.all_gather(&cfg.to_bytes())?;
        let configs = all
            .iter()
            .enumerate()
            .map(|(r, b)| {
                EpConfig::from_bytes(b)
                    .ok_or_else(|| EpError::Backend(format!("rendezvous: rank {r} sent no config")))
            })
            .collect::<Result<Vec<_>>>()?;
        EpConfig::check_world(&configs).cloned()
    }

    /// Returns once every rank has called it (an empty [`Rendezvous::all_gather`]).
    pub fn barrier(&mut self) -> Result<()> {
        self.all_gather(&[]).map(drop)
    }
}

/// Every rank of an `n`-rank world (`local_world_size` ranks a node) on a thread of this process,
/// each with a rendezvous of its own over localhost (rank 0 on a port the system picks), running
/// `f` with it: a world made as separate processes make it, for tests and single-machine tools.
/// Returns each rank's result in rank order.
pub fn on_threads<R: Send>(
    n: usize,
    local_world_size: usize,
    deadline: Duration,
    f: impl Fn(Result<Rendezvous>) -> R + Sync,
) -> Vec<R> {
    let bound = TcpListener::bind("127.0.0.1:0").and_then(|l| Ok((l.local_addr()?.port(), l)));
    let (port, listener) = match bound {
        Ok(v) => v,
        Err(e) => {
            let err = || Err(EpError::Backend(format!("rendezvous: no local port: {e}")));
            return (0..n).map(|_| f(err())).collect();
        }
    };
    let master = Master {
        addr: "127.0.0.1".into(),
        port,
    };
    let mut listener = Some(listener);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|rank| {
                let (f, master) = (&f, &master);
                let mine = listener.take().filter(|_| rank == 0);
                s.spawn(move || {
                    let spec = RankSpec {
                        rank,
                        world_size: n,
                        local_rank: rank % local_world_size.max(1),
                        local_world_size,
                    };
                    let rv = match mine {
                        Some(l) => Rendezvous::accept(spec, l, deadline),
                        None => Rendezvous::join(spec, master, deadline),
                    };
                    f(rv)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// What is left of `deadline` since `start`, at least a millisecond (a zero timeout is none).
fn remaining(start: Instant, deadline: Duration) -> Duration {
    deadline
        .saturating_sub(start.elapsed())
        .max(Duration::from_millis(1))
}

fn unreachable(rank: usize, peers: Vec<usize>, during: &'static str, start: Instant) -> EpError {
    EpError::Unreachable {
        rank,
        peers,
        during,
        waited_ms: start.elapsed().as_millis() as u64,
    }
}

fn send(s: &mut TcpStream, v: &[u8]) -> std::io::Result<()> {
    s.write_all(&(v.len() as u64).to_le_bytes())?;
    s.write_all(v)
}

/// One message; a length past what a rendezvous carries is a broken stream, not an allocation.
fn receive(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    const MOST: u64 = 1 << 30;
    let mut len = [0u8; 8];
    s.read_exact(&mut len)?;
    let len = u64::from_le_bytes(len);
    if len > MOST {
        return Err(std::io::Error::new(
            ErrorKind::InvalidData,
            "message too long",
        ));
    }
    let mut v = vec![0u8; len as usize];
    s.read_exact(&mut v)?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    const GOOD: [(&str, &str); 6] = [
        ("RANK", "5"),
        ("WORLD_SIZE", "8"),
        ("LOCAL_RANK", "1"),
        ("LOCAL_WORLD_SIZE", "4"),
        ("MASTER_ADDR", "10.0.0.1"),
        ("MASTER_PORT", "29500"),
    ];

    #[test]
    fn reads_the_launcher_variables() {
        let (spec, master) = RankSpec::from_vars(vars(&GOOD)).unwrap();
        assert_eq!(
            (spec.rank, spec.world_size, spec.local_rank, spec.node()),
            (5, 8, 1, 1)
        );
        assert_eq!(
            master,
            Master {
                addr: "10.0.0.1".into(),
                port: 29500
            }
        );
    }

    #[test]
    fn a_bad_variable_is_named() {
        let with = |name: &str, value: Option<&str>| {
            let mut v: Vec<(&str, &str)> =
                GOOD.iter().copied().filter(|(n, _)| *n != name).collect();
            if let Some(x) = value {
                v.push((name, x));
            }
            match RankSpec::from_vars(vars(&v)) {
                Err(EpError::Launch { variable, .. }) => variable,
                other => panic!("{name}: {other:?}"),
            }
        };
        assert_eq!(with("RANK", None), "RANK");
        assert_eq!(with("RANK", Some("eight")), "RANK");
        assert_eq!(with("RANK", Some("8")), "RANK");
        assert_eq!(with("LOCAL_WORLD_SIZE", Some("3")), "LOCAL_WORLD_SIZE");
        assert_eq!(with("LOCAL_RANK", Some("2")), "LOCAL_RANK");
        assert_eq!(with("MASTER_PORT", Some("0")), "MASTER_PORT");
        assert_eq!(with("MASTER_ADDR", Some(" ")), "MASTER_ADDR");
    }

    fn spec(rank: usize, world_size: usize) -> RankSpec {
        RankSpec {
            rank,
            world_size,
            local_rank: rank,
            local_world_size: world_size,
        }
    }

    fn world<R: Send>(
        n: usize,
        deadline: Duration,
        f: impl Fn(Result<Rendezvous>) -> R + Sync,
    ) -> Vec<R> {
        on_threads(n, n, deadline, f)
    }

    #[test]
    fn every_rank_gets_every_ranks_bytes() {
        let out = world(4, Duration::from_secs(10), |rv| {
            let mut rv = rv.unwrap();
            let r = rv.spec().rank;
            rv.barrier().unwrap();
            rv.all_gather(&vec![r as u8; r + 1]).unwrap()
        });
        for got in out {
            assert_eq!(
                got,
                (0..4).map(|r| vec![r as u8; r + 1]).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn a_rank_that_never_sends_is_named_within_the_deadline() {
        let deadline = Duration::from_millis(300);
        let t0 = Instant::now();
        let out = world(3, deadline, |rv| {
            let mut rv = rv.unwrap();
            if rv.spec().rank == 2 {
                // Stays connected but never gathers until rank 0 has given up.
                std::thread::sleep(Duration::from_millis(600));
                return None;
            }
            Some(rv.all_gather(b"x"))
        });
        match &out[0] {
            Some(Err(EpError::Unreachable { rank: 0, peers, .. })) => assert_eq!(peers, &[2]),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            out[1],
            Some(Err(EpError::Unreachable { rank: 1, .. }))
        ));
        assert!(t0.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn configs_agree_across_processes_or_the_rank_that_differs_is_named() {
        let cfg = EpConfig::new(64, 2, 8, 4, 2).with_nodes(2);
        assert_eq!(EpConfig::from_bytes(&cfg.to_bytes()), Some(cfg.clone()));
        let modes = EpConfig::new(128, 4, 16, 8, 4)
            .with_skip_a2a(2)
            .with_shared_expert()
            .with_format(crate::Format::Nvfp4);
        assert_eq!(EpConfig::from_bytes(&modes.to_bytes()), Some(modes));
        assert_eq!(EpConfig::from_bytes(&[1, 2, 3]), None);
        let out = world(4, Duration::from_secs(10), |rv| {
            let mut rv = rv.unwrap();
            let mut mine = cfg.clone();
            if rv.spec().rank == 3 {
                mine.top_k = 4;
            }
            (rv.agree(&cfg), rv.agree(&mine))
        });
        for (same, differs) in out {
            assert_eq!(same.unwrap(), cfg);
            match differs {
                Err(EpError::ConfigMismatch { rank: 3, field, .. }) => assert_eq!(field, "top_k"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_rank_that_never_comes_is_named() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        match Rendezvous::accept(spec(0, 3), listener, Duration::from_millis(100)) {
            Err(e @ EpError::Unreachable { .. }) => {
                assert!(
                    e.to_string().contains("rank(s) 1, 2 did not connect"),
                    "{e}"
                )
            }
            other => panic!("{:?}", other.map(|_| ())),
        }
    }
}
