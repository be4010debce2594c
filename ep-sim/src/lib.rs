//! # ep-sim: the CPU backend
//!
//! A stand-in for a GPU world that follows the real protocol, so EP code runs and is tested on a
//! laptop: one thread per rank ([`ep_core::on_every_rank`]), symmetric per-rank buffers in two
//! groups (dispatch, combine), u64 receive counts with a `u64::MAX` sentinel published with
//! release stores and read with acquire loads, deterministic slots, counts reset after each phase.
//! Ranks of one node store into each other's buffers directly; ranks on different nodes go
//! through an ordered put-then-signal NIC thread.
//!
//! - [`memory`]: symmetric buffers, counts and their geometry.
//! - `transport`: direct stores inside a node, the NIC between nodes.
//! - `wait`: acquire-waits with a deadline.
//! - `comm`: [`SimComm`], one rank's dispatch and combine.

#![warn(missing_docs)]

mod buffer;
mod comm;
pub mod memory;
mod transport;
mod wait;

use std::sync::Arc;

use ep_core::rendezvous::Rendezvous;
use ep_core::{EpBackend, EpConfig, EpError, Result};

pub use buffer::HostBuffer;
pub use comm::SimComm;
use transport::{start_nics, Transport, World};

/// The simulator backend. Cheap to create; each [`EpBackend::init`] builds a fresh world.
#[derive(Clone, Copy, Debug, Default)]
pub struct SimBackend;

impl SimBackend {
    /// The backend (it holds nothing; worlds are built by `init`).
    pub fn new() -> Self {
        SimBackend
    }
}

impl EpBackend for SimBackend {
    type Comm = SimComm;

    fn name(&self) -> &str {
        "sim"
    }

    fn host_closures(&self) -> bool {
        true
    }

    /// One rank of a world whose ranks are made one at a time, each by its own process (or
    /// thread), found through `rv`: the configs agree (as `init` checks them), rank 0 creates
    /// a file for every rank's buffers and counts and the others map it too, each rank marks
    /// its counts "not arrived", and once every rank has mapped it the file's name goes (the
    /// mappings stay). Ranks on other nodes are reached through this process's NIC thread.
    fn init_rank(&self, cfg: &EpConfig, rv: &mut Rendezvous) -> Result<SimComm> {
        let cfg = rv.agree(cfg)?;
        let rank = rv.spec().rank;
        let geo = memory::Geometry::new(&cfg);
        let bytes = geo.rank_bytes(cfg.max_recv_rows()) * cfg.n_ranks();
        if bytes > memory::host_memory_limit() {
            return Err(EpError::OutOfMemory {
                bytes,
                what: "the world's shared buffers".into(),
            });
        }
        let io = |what: &str, e: std::io::Error| EpError::Backend(format!("{what}: {e}"));
        let named = match rank {
            0 => {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                let path =
                    std::env::temp_dir().join(format!("ep-sim-{}-{nanos}", std::process::id()));
                let file = std::fs::File::create_new(&path)
                    .map_err(|e| io("creating the world's shared buffers", e))?;
                file.set_len(bytes as u64)
                    .map_err(|e| io("sizing the world's shared buffers", e))?;
                path.to_string_lossy().into_owned().into_bytes()
            }
            _ => Vec::new(),
        };
        let path = String::from_utf8_lossy(&rv.all_gather(&named)?[0]).into_owned();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| io(&format!("opening {path}"), e))?;
        let mapping = memory::Mapping::new(&file)?;
        let world = Arc::new(World::in_mapping(&cfg, &mapping));
        world.ranks[rank].dispatch.counts.reset_all();
        world.ranks[rank].combine.counts.reset_all();
        rv.barrier()?;
        if rank == 0 {
            let _ = std::fs::remove_file(&path);
        }
        let nic = (cfg.n_nodes > 1).then(|| transport::start_nic(&world, cfg.node_of(rank)));
        Ok(SimComm::new(cfg, Transport::new(rank, world, nic)))
    }

    fn init(&self, configs: &[EpConfig]) -> Result<Vec<SimComm>> {
        let cfg = EpConfig::check_world(configs)?.clone();
        let world = Arc::new(World::new(&cfg)?);
        let nics = if cfg.n_nodes > 1 {
            start_nics(&world, cfg.n_nodes)
        } else {
            Vec::new()
        };
        Ok((0..cfg.n_ranks())
            .map(|r| {
                let nic = nics.get(cfg.node_of(r)).cloned();
                SimComm::new(cfg.clone(), Transport::new(r, Arc::clone(&world), nic))
            })
            .collect())
    }
}
