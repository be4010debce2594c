//! # ep-cuda: the GPU backend
//!
//! The contract's buffer protocol on NVIDIA GPUs. One process drives every GPU it sees, one
//! host thread and stream per rank; several ranks may share a GPU (each with its own buffers),
//! so the whole protocol runs on a single device. Senders store messages straight into the
//! receiving rank's buffer over NVLink (peer-to-peer, 16-byte stores) and publish counts with
//! system-scope release stores; receivers wait with acquire loads under a deadline. Between
//! nodes, messages are staged and put before the signal, as the inter-node transport orders them.
//!
//! - `driver`: finding the driver, GPUs and NVRTC (clear errors, never cudarc's panics).
//! - `kernels`: the `.cu` sources next to this file, NVRTC compilation (cached), launches.
//! - `memory`: plain device allocations peers can reach.
//! - `world`: `ep_init`: placement, peer access, every rank's buffers.
//! - `comm`: [`CudaComm`], one rank's dispatch, combine and SwiGLU.
//! - [`selfcheck`]: arithmetic the kernels take to be exact, checked on the device.
//!
//! With the cargo feature `bench` (the `ep` command's; never in a default build), what
//! `ep bench` measures, built on the modules above and used by none of them:
//! - `bench`: device-resident timed rounds behind a start gate, the copy ceiling and latency
//!   floors, the NCCL baseline, and their options (`bench::BenchOptions`).
//! - `probe`: latency probes of the protocol's signals (publish and poll flavours).
#![warn(missing_docs)]

#[cfg(feature = "bench")]
pub mod bench;
mod buffer;
mod comm;
pub mod driver;
pub mod epilogue_check;
mod ipc;
pub mod kernels;
mod memory;
mod net;
mod options;
mod path_policy;
#[cfg(feature = "bench")]
pub mod probe;
pub mod selfcheck;
mod world;

use std::sync::Arc;

use ep_core::{EpBackend, EpConfig, Result};

pub use buffer::DeviceBuffer;
pub use comm::CudaComm;
/// The cudarc this crate is built on: use it (`ep_cuda::cudarc`) for streams, contexts and
/// kernels of your own that share the rank's GPU.
pub use cudarc;
#[doc(hidden)]
pub use options::options_from_env_vars;
#[cfg(feature = "test-hooks")]
pub use options::TestHooks;
pub use options::{CudaOptions, Trace};
pub use path_policy::PathPolicy;

/// The CUDA backend. `ranks_per_gpu: None` spreads ranks over the visible GPUs as evenly as
/// possible (all on one GPU when only one is visible); `options`: its tunables and switches
/// ([`CudaOptions`]), which every rank of a world it makes reads.
#[derive(Clone, Debug, Default)]
pub struct CudaBackend {
    /// Ranks placed on each GPU, in rank order ([`CudaBackend::placement`]); `None`: as evenly as
    /// the visible GPUs allow.
    pub ranks_per_gpu: Option<usize>,
    /// The tunables and switches every rank of a world this backend makes reads.
    pub options: CudaOptions,
}

impl CudaBackend {
    /// The default backend: ranks spread over the visible GPUs, default options.
    pub fn new() -> Self {
        CudaBackend::default()
    }

    /// Which GPU each rank of `n_ranks` would run on, as `init` places them.
    pub fn placement(&self, n_ranks: usize, n_gpus: usize) -> Vec<usize> {
        let per_gpu = self
            .ranks_per_gpu
            .unwrap_or(n_ranks.div_ceil(n_gpus.max(1)))
            .max(1);
        (0..n_ranks).map(|r| r / per_gpu).collect()
    }

    /// The default backend with `ranks_per_gpu` ranks on each GPU.
    pub fn with_ranks_per_gpu(ranks_per_gpu: usize) -> Self {
        CudaBackend::new().with_ranks_per_gpu_opt(Some(ranks_per_gpu))
    }

    /// This backend with `ranks_per_gpu` (`None`: spread over the visible GPUs).
    pub fn with_ranks_per_gpu_opt(mut self, ranks_per_gpu: Option<usize>) -> Self {
        self.ranks_per_gpu = ranks_per_gpu;
        self
    }

    /// This backend with `options`.
    pub fn with_options(mut self, options: CudaOptions) -> Self {
        self.options = options;
        self
    }

    /// The visible GPUs by name, or why the backend cannot run here.
    pub fn probe() -> Result<Vec<String>> {
        let n = driver::device_count()?;
        driver::nvrtc_present()?;
        (0..n)
            .map(|i| {
                let d = cudarc::driver::result::device::get(i as i32).map_err(driver::cuda)?;
                cudarc::driver::result::device::get_name(d).map_err(driver::cuda)
            })
            .collect()
    }
}

impl EpBackend for CudaBackend {
    type Comm = CudaComm;

    fn name(&self) -> &str {
        "cuda"
    }

    fn init(&self, configs: &[EpConfig]) -> Result<Vec<CudaComm>> {
        let cfg = EpConfig::check_world(configs)?;
        let world = Arc::new(world::World::new(cfg, self.ranks_per_gpu, &self.options)?);
        (0..cfg.n_ranks())
            .map(|r| CudaComm::new(r, Arc::clone(&world)))
            .collect()
    }

    fn init_rank(
        &self,
        config: &EpConfig,
        rv: &mut ep_core::rendezvous::Rendezvous,
    ) -> Result<CudaComm> {
        let world = Arc::new(world::World::for_rank(config, rv, &self.options)?);
        CudaComm::new(rv.spec().rank, world)
    }
}
