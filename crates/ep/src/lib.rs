//! # ep: expert-parallel dispatch and combine for Mixture-of-Experts
//!
//! Depend on this crate; pick backends with cargo features and at run time with [`Backend`]. The
//! features are `sim` (the CPU simulator) and `cuda` (NVIDIA GPUs), both on by default: the CUDA
//! backend builds without CUDA and loads the driver and NVRTC at run time, so a machine without
//! them gets [`EpError::BackendUnavailable`] from [`Backend::new`] rather than a build failure.
//! Everything in [`ep_core`] is re-exported here, so generic code is written against
//! [`EpBackend`] / [`EpComm`]:
//!
//! ```
//! use ep::{EpBackend, EpComm, EpConfig};
//!
//! fn world_size<B: EpBackend>(backend: &B) -> ep::Result<usize> {
//!     let cfg = EpConfig::new(128, 2, 8, 16, 4);
//!     Ok(backend.init_uniform(&cfg)?.len())
//! }
//! let sim = ep::Backend::new(ep::BackendKind::Sim).unwrap();
//! assert_eq!(world_size(&sim).unwrap(), 4);
//! ```
//!
//! What every backend computes, bit for bit, is the contract: `docs/contract.md` in the
//! repository. The `ep` binary (`cargo install --path crates/ep`) runs scenarios, the
//! conformance suite and benchmarks from the command line.

mod any_backend;
pub mod dump;
pub mod npy;

pub use any_backend::{Backend, BackendKind};
pub use ep_core::*;

/// The conformance suite, for running it on your own backend (see its `testgen!`).
pub use ep_conformance as conformance;
#[cfg(feature = "cuda")]
pub use ep_cuda as cuda;
#[cfg(feature = "sim")]
pub use ep_sim as sim;
