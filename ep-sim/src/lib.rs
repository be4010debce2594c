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

use ep_core::{EpBackend, EpConfig, Result};

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
