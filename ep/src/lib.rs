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
//! repository. The conformance suite for your own backend is the `ep-conformance` crate (its
//! `testgen!`); the `ep` command (`cargo install --path ep-cli`) runs scenarios, the suite and
//! benchmarks.

#![warn(missing_docs)]

mod any_backend;
mod any_comm;

pub use any_backend::{Backend, BackendKind};
pub use any_comm::{AnyBuffer, Comm};
pub use ep_core::*;
#[cfg(feature = "cuda")]
pub use ep_cuda as cuda;
#[cfg(feature = "sim")]
pub use ep_sim as sim;
/// The half this crate's API takes and returns (`bf16` rows): use it (`ep::half`) so your
/// element type is the same.
pub use half;
/// The ndarray this crate's API takes and returns: use it (`ep::ndarray`) so your arrays are of
/// the same version.
pub use ndarray;
