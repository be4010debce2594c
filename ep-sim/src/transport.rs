//! How a rank's bytes and signals reach a peer.
//!
//! Inside a node a sender stores straight into the peer's receive buffer and publishes the count
//! itself, as a GPU does over NVLink. Between nodes it stages the bytes in its own send buffer and
//! hands the NIC of its node an ordered queue of puts followed by the signal; the NIC (a proxy
//! thread, like an RDMA proxy) executes them in order, so the signal lands after the data.

use std::sync::Arc;

use crossbeam::channel::{unbounded, Receiver, Sender};
use ep_core::{EpConfig, Result};

use crate::memory::{BufferGroup, Geometry, Mapping, RankMemory};

/// Every rank's memory plus the shared geometry.
pub struct World {
    pub geo: Geometry,
    pub ranks: Vec<RankMemory>,
    pub n_gpus_per_node: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupId {
    Dispatch,
    Combine,
}

impl World {
    /// Every rank's memory, or the first allocation that failed (whatever was allocated before
    /// it is freed).
    pub fn new(cfg: &EpConfig) -> Result<Self> {
        let geo = Geometry::new(cfg);
        let ranks = (0..cfg.n_ranks())
            .map(|r| geo.alloc_rank(r, cfg.max_recv_rows()))
            .collect::<Result<_>>()?;
        Ok(World {
            geo,
            ranks,
            n_gpus_per_node: cfg.n_gpus_per_node,
        })
    }

    /// Every rank's memory inside `mapping`, which every process of a world of one process per
    /// rank maps (`SimBackend::init_rank`).
    pub fn in_mapping(cfg: &EpConfig, mapping: &Arc<Mapping>) -> Self {
        let geo = Geometry::new(cfg);
        let ranks = (0..cfg.n_ranks())
            .map(|r| geo.map_rank(mapping, r, cfg.max_recv_rows()))
            .collect();
        World {
            geo,
            ranks,
            n_gpus_per_node: cfg.n_gpus_per_node,
        }
    }

    pub fn group(&self, rank: usize, g: GroupId) -> &BufferGroup {
        match g {
            GroupId::Dispatch => &self.ranks[rank].dispatch,
            GroupId::Combine => &self.ranks[rank].combine,
        }
    }
}

/// One operation queued on an inter-node connection.
pub enum Op {
    /// Copy `len` bytes from `src_rank`'s send buffer to `dst_rank`'s receive buffer.
    Put {
        group: GroupId,
        src_rank: usize,
        src_off: usize,
        dst_rank: usize,
        dst_off: usize,
        len: usize,
    },
    /// Publish a receive count on `dst_rank`, after every put queued before it.
    Signal {
        group: GroupId,
        dst_rank: usize,
        index: usize,
        value: u64,
    },
    /// Answer once every operation queued before it has run.
    Fence(Sender<()>),
}

/// Starts one NIC thread per node. Returns the queue of each node's NIC; a NIC thread ends when
/// every sender of its queue is dropped (when the world's communicators are dropped).
pub fn start_nics(world: &Arc<World>, n_nodes: usize) -> Vec<Sender<Op>> {
    (0..n_nodes).map(|node| start_nic(world, node)).collect()
}

/// One NIC thread for `node`'s ranks; it ends when its last sender goes.
pub fn start_nic(world: &Arc<World>, node: usize) -> Sender<Op> {
    let (tx, rx) = unbounded();
    let world = Arc::clone(world);
    std::thread::Builder::new()
        .name(format!("ep-sim-nic-{node}"))
        .spawn(move || run_nic(&world, rx))
        .expect("spawn NIC thread");
    tx
}

fn run_nic(world: &World, rx: Receiver<Op>) {
    for op in rx {
        match op {
            Op::Put {
                group,
                src_rank,
                src_off,
                dst_rank,
                dst_off,
                len,
            } => {
                // SAFETY: the sender staged these bytes before queueing the put and does not
                // touch them until the round is proven complete; the destination slot belongs to
                // this sender and is read only after the signal queued behind this put.
                unsafe {
                    let bytes = world.group(src_rank, group).send.slice(src_off, len);
                    world.group(dst_rank, group).recv.write(dst_off, bytes);
                }
            }
            Op::Signal {
                group,
                dst_rank,
                index,
                value,
            } => world.group(dst_rank, group).counts.publish(index, value),
            Op::Fence(done) => {
                let _ = done.send(());
            }
        }
    }
}

/// A rank's view of the fabric.
pub struct Transport {
    pub rank: usize,
    pub world: Arc<World>,
    nic: Option<Sender<Op>>,
}

impl Transport {
    pub fn new(rank: usize, world: Arc<World>, nic: Option<Sender<Op>>) -> Self {
        Transport { rank, world, nic }
    }

    pub fn same_node(&self, dst: usize) -> bool {
        dst / self.world.n_gpus_per_node == self.rank / self.world.n_gpus_per_node
    }

    /// Stores `bytes` into a peer on this node.
    ///
    /// # Safety
    /// `dst_off..+len` must be a slot only this rank writes this round, not read before the
    /// matching signal.
    pub unsafe fn store(&self, group: GroupId, dst: usize, dst_off: usize, bytes: &[u8]) {
        debug_assert!(self.same_node(dst));
        self.world.group(dst, group).recv.write(dst_off, bytes);
    }

    /// Queues a put of bytes already staged at `src_off` in this rank's send buffer to a peer on
    /// another node.
    pub fn put(&self, group: GroupId, src_off: usize, dst: usize, dst_off: usize, len: usize) {
        self.queue(Op::Put {
            group,
            src_rank: self.rank,
            src_off,
            dst_rank: dst,
            dst_off,
            len,
        });
    }

    /// Publishes `value` at `index` of `dst`'s counts, ordered after this rank's earlier stores
    /// and puts to `dst`.
    pub fn signal(&self, group: GroupId, dst: usize, index: usize, value: u64) {
        if self.same_node(dst) {
            self.world.group(dst, group).counts.publish(index, value);
        } else {
            self.queue(Op::Signal {
                group,
                dst_rank: dst,
                index,
                value,
            });
        }
    }

    /// Returns once every put and signal this rank queued has landed.
    pub fn flush(&self) {
        if self.nic.is_some() {
            let (tx, rx) = crossbeam::channel::bounded(1);
            self.queue(Op::Fence(tx));
            rx.recv()
                .expect("the NIC lives as long as the world's communicators");
        }
    }

    fn queue(&self, op: Op) {
        self.nic
            .as_ref()
            .expect("a world with several nodes has NICs")
            .send(op)
            .expect("the NIC lives as long as the world's communicators");
    }
}
