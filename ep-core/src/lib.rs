//! # ep-core: the expert-parallel dispatch/combine contract
//!
//! The contract is written out in `docs/contract.md` in the repository; this crate is its code.
//!
//! - [`config`]: [`EpConfig`], the world every rank agrees on, and its validation.
//! - [`mod@format`]: the [`TokenFormat`] trait, the formats, and the message layout.
//! - [`memory`], [`device_io`]: the backend's buffers, and dispatch and combine on them.
//! - [`io`], [`host_io`]: the same inputs and outputs as host arrays, and the calls on them.
//! - [`backend`]: the [`EpBackend`] / [`EpComm`] traits every backend implements.
//! - [`oracle`]: the contract computed directly; every backend must match it bit for bit.
//! - [`epilogue`], [`swiglu`]: what combine can do with its output, and fused SwiGLU.
//! - [`numerics`]: `exp` and friends, defined exactly so every backend computes the same bits.
//! - [`validate`], [`round`]: input checks and call-order rules shared by all backends.
//! - [`rendezvous`]: a world of one process per rank: its launcher's variables, and how its
//!   ranks find each other.
//! - [`error`]: [`EpError`], one typed error for everything; [`host_memory`]: host allocations
//!   that fail with it instead of aborting.
//!
//! Arithmetic is IEEE f32 with round-to-nearest-even and no fused multiply-add: the combine sum
//! for token `t` is `acc = +0.0; for k in 0..top_k { acc = acc + w[t][k] * f32(y[t][k]) }`, each
//! `*` and `+` rounded separately, masked slots skipped, then rounded to bf16 once (a NaN result
//! is the canonical bf16 NaN `0x7FC0`).

#![warn(missing_docs)]

pub mod backend;
pub mod config;
pub mod device_io;
pub mod digest;
pub mod epilogue;
pub mod error;
pub mod format;
pub mod host_io;
pub mod host_memory;
pub mod io;
pub mod memory;
pub mod numerics;
pub mod oracle;
pub mod rendezvous;
pub mod round;
pub mod swiglu;
pub mod validate;

pub use backend::{on_every_rank, EpBackend, EpComm, Staging};
pub use config::{EpConfig, EpConfigBuilder};
pub use device_io::{CombineArgs, Combined, DispatchArgs, Dispatched};
pub use epilogue::{DeviceEpilogue, Epilogue};
pub use error::{poison, ConfigError, EpError, MissingSignal, Phase, RejectReason, Result};
pub use format::{Format, MessageLayout, TokenFormat};
pub use half::bf16;
pub use host_io::HostIo;
pub use io::{
    CombineInput, CombineOutput, DispatchInput, DispatchOutput, RouterWeights, RoutingHandle,
};
pub use memory::{Buffer, Element};
pub use round::{PendingCombine, PendingDispatch};
pub use swiglu::{GateUp, SwigluClamp, SwigluOptions, SwigluOutput};
