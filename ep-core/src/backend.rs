//! The backend traits: the only API generic code needs.
//!
//! An [`EpBackend`] creates a world of ranks; each rank is an [`EpComm`] that one host thread
//! drives, as one process drives one GPU in a real deployment. The CPU simulator and the CUDA
//! backend implement exactly these traits, so code written against them runs on either.

use crate::config::EpConfig;
use crate::device_io::{CombineArgs, Combined, DispatchArgs, Dispatched};
use crate::error::Result;
use crate::error::{EpError, Phase};
use crate::io::{DispatchOutput, RoutingHandle};
use crate::memory::{Buffer, Element};
use crate::round::{PendingCombine, PendingDispatch};
use crate::swiglu::{SwigluOptions, SwigluOutput};
use half::bf16;
use ndarray::ArrayView2;

/// A way to build an expert-parallel world.
pub trait EpBackend: Send + Sync {
    /// One rank's communicator in a world of this backend.
    type Comm: EpComm + 'static;

    /// Short name for reports (`sim`, `cuda`).
    fn name(&self) -> &str;

    /// `ep_init` for every rank at once: validates the configs, checks that every rank's is
    /// identical (`EpError::ConfigMismatch` names the first rank that differs), allocates the
    /// symmetric buffers and returns one communicator per rank, in rank order. A failed init
    /// allocates nothing that outlives the call; init may be called again at any time to get a
    /// fresh world (for example after a timeout).
    fn init(&self, configs: &[EpConfig]) -> Result<Vec<Self::Comm>>;

    /// `ep_init` for this process's rank alone, in a world whose ranks are made one per process
    /// (or thread) and find each other through `rendezvous` (its [`crate::rendezvous::RankSpec`]
    /// says which rank this is): every rank's config is checked against every other's
    /// (`ConfigMismatch` on every rank, naming the first that differs), the symmetric buffers
    /// are shared through what the backend's ranks can reach, and a rank that never comes is a
    /// timeout naming it.
    fn init_rank(
        &self,
        config: &EpConfig,
        rendezvous: &mut crate::rendezvous::Rendezvous,
    ) -> Result<Self::Comm>;

    /// Whether combine can run host-closure epilogues (`Epilogue::Host`): true for CPU backends.
    fn host_closures(&self) -> bool {
        false
    }

    /// [`EpBackend::init`] with the same config on every rank.
    fn init_uniform(&self, config: &EpConfig) -> Result<Vec<Self::Comm>> {
        config.validate()?;
        self.init(&vec![config.clone(); config.n_ranks()])
    }
}

/// One rank's communicator. Every rank of a world must make the same sequence of calls; each call
/// checks its input first and returns a typed error with nothing written when it is bad.
///
/// Dispatch and combine work on the backend's own memory ([`EpComm::Buffer`]): inputs are the
/// caller's buffers, outputs handles to buffers the communicator sized at init and reuses every
/// round, so a round moves nothing through the host. Moving data to and from the host is
/// explicit ([`EpComm::write`], [`EpComm::to_host`]); [`crate::host_io::HostIo`] wraps the
/// calls for host arrays.
///
/// A rank whose `dispatch_async` or `combine_async` rejects its input (a bad shape or expert id,
/// a stale routing handle, no memory for it) writes nothing of its own, but tells the peers that
/// would wait for it: a poisoned count ([`crate::error::poison`]) where its count would go. Their
/// `*_wait` then returns [`crate::EpError::PeerRejected`] at once, naming the rank and the reason,
/// with nothing taken: the round is still theirs to finish. Once the rejecting rank calls the
/// phase again with good input (for dispatch an empty one will do; the call returns once its real
/// counts have replaced the poison), the peers call `*_wait` again and the round completes
/// exactly as if the rejected call had never been made. A `*_wait` that runs into the poison
/// again before that returns the same error at once, until the poison has stood for the deadline
/// (from the first wait that met it): then `EpError::Timeout` naming the rejecting rank. The
/// alternative is to initialise a new world on every rank.
pub trait EpComm: Send {
    /// This backend's memory: host memory for the simulator, device memory for a GPU backend.
    type Buffer<T: Element>: Buffer<T>;

    /// This rank's index in the world, 0..n_ranks.
    fn rank(&self) -> usize;
    /// The config the world was initialised with (the same on every rank).
    fn config(&self) -> &EpConfig;

    /// A zeroed buffer of `len` elements where this rank computes.
    fn alloc<T: Element>(&self, len: usize) -> Result<Self::Buffer<T>>;
    /// Copies `host` into the start of `dst`, in order with this rank's calls (a round issued
    /// before it has read its inputs first); `host` may be dropped once this returns.
    fn write<T: Element>(&mut self, dst: &Self::Buffer<T>, host: &[T]) -> Result<()>;
    /// The contents of `src` once this rank's calls so far have finished (what they wrote).
    fn to_host<T: Element>(&mut self, src: &Self::Buffer<T>) -> Result<Vec<T>>;
    /// A new buffer holding `host`.
    fn upload<T: Element>(&mut self, host: &[T]) -> Result<Self::Buffer<T>> {
        let buf = self.alloc(host.len())?;
        self.write(&buf, host)?;
        Ok(buf)
    }
    /// Waits for everything this rank issued, and returns the error of a wait that failed on
    /// the backend's side since the last call that could report it.
    fn synchronize(&mut self) -> Result<()>;

    /// Buffers the communicator owns for callers whose inputs are not in its memory yet (sized
    /// for `max_tokens_per_rank` tokens and `max_recv_rows` rows): [`crate::host_io`] copies host
    /// arrays into them. A round reads them like any caller's buffers.
    fn staging(&mut self) -> Result<Staging<Self>>;

    /// Issues this rank's sends and returns the dispatch in flight; the caller may overlap other
    /// work before [`EpComm::dispatch_wait`].
    fn dispatch_async(&mut self, input: &DispatchArgs<'_, Self>) -> Result<PendingDispatch>;
    /// Waits for every peer's rows for this rank's experts and lays them out per expert, in
    /// buffers the communicator owns ([`Dispatched`]: valid until the next dispatch).
    fn dispatch_wait(&mut self, pending: PendingDispatch) -> Result<Dispatched<Self>>;
    /// Sends the expert outputs of the dispatch identified by `handle` back to their tokens,
    /// reduced with router weights or not, as `input` was made ([`CombineArgs::weighted`],
    /// [`CombineArgs::unreduced`]).
    fn combine_async(
        &mut self,
        handle: &RoutingHandle,
        input: &CombineArgs<'_, Self>,
    ) -> Result<PendingCombine>;
    /// Waits for every returned row and reduces (or lays out, unreduced) per token.
    fn combine_wait(&mut self, pending: PendingCombine) -> Result<Combined<Self>>;
    /// The dispatch in flight on this rank, again: after `dispatch_wait` returned
    /// [`crate::EpError::PeerRejected`] the round is still in flight, and this is how to wait
    /// again. An error when no dispatch is in flight.
    fn pending_dispatch(&self) -> Result<PendingDispatch>;
    /// The combine in flight on this rank, again (as [`EpComm::pending_dispatch`]).
    fn pending_combine(&self) -> Result<PendingCombine>;
    /// Whether a call of `phase`'s async half may be made now (`handle`: a combine's routing),
    /// by the call order rules: `OutOfOrder`, `Poisoned` or (combine) `StaleHandle` when not.
    fn ready(&self, phase: Phase, handle: Option<&RoutingHandle>) -> Result<()>;
    /// Whether combine runs host-closure epilogues (`Epilogue::Host`): true for CPU backends.
    fn host_closures(&self) -> bool {
        false
    }
    /// Refuses this rank's call of `phase` with `err`, found by a check made outside the backend
    /// (as [`crate::host_io`] checks host arrays) while the call was [`EpComm::ready`] or its
    /// handle stale: tells the peers as a rejected call does, and returns `err`.
    fn refuse(&mut self, phase: Phase, err: EpError) -> EpError;

    /// `dispatch_async` then `dispatch_wait`.
    fn dispatch(&mut self, input: &DispatchArgs<'_, Self>) -> Result<Dispatched<Self>> {
        let pending = self.dispatch_async(input)?;
        self.dispatch_wait(pending)
    }
    /// `combine_async` then `combine_wait`.
    fn combine(
        &mut self,
        handle: &RoutingHandle,
        input: &CombineArgs<'_, Self>,
    ) -> Result<Combined<Self>> {
        let pending = self.combine_async(handle, input)?;
        self.combine_wait(pending)
    }

    /// Fused SwiGLU over the rows `routing` (this rank's latest dispatch output, on the host)
    /// delivered: `input` is the first expert GEMM's output `[capacity rows, 2 * I]`.
    fn swiglu(
        &mut self,
        routing: &DispatchOutput,
        input: ArrayView2<'_, bf16>,
        opts: &SwigluOptions,
    ) -> Result<SwigluOutput>;

    /// Test support, not a required method: a hash of the symmetric memory this rank owns
    /// (receive buffers and receive counts), for tests that prove a rejected call wrote nothing.
    /// A peer's poisoned count hashes as the sentinel it replaced (`error::poison::unpoisoned`):
    /// the poison is the one write a rejected call makes, and it is undone when the rejecting
    /// rank calls again. Slow. The default says the backend has none.
    fn memory_digest(&self) -> Result<u64> {
        Err(crate::EpError::Backend(
            "memory_digest: this backend offers no memory digest (test support)".into(),
        ))
    }
}

/// A communicator's own input buffers ([`EpComm::staging`]), handles to memory it keeps.
pub struct Staging<C: EpComm + ?Sized> {
    /// `[max_tokens_per_rank, hidden]` tokens.
    pub tokens: C::Buffer<bf16>,
    /// `[max_tokens_per_rank, top_k]` expert ids.
    pub topk_ids: C::Buffer<i32>,
    /// `[max_tokens_per_rank]` input scales.
    pub input_scales: C::Buffer<f32>,
    /// `[max_recv_rows, hidden]` expert outputs.
    pub expert_out: C::Buffer<bf16>,
    /// `[max_tokens_per_rank, top_k]` router weights.
    pub weights: C::Buffer<f32>,
}

/// Runs `f` once per rank, each on its own OS thread (ranks spin-wait on each other, so they
/// must not share a thread pool), and returns the results in rank order.
pub fn on_every_rank<C, R, F>(comms: &mut [C], f: F) -> Vec<R>
where
    C: EpComm,
    R: Send,
    F: Fn(&mut C) -> R + Sync,
{
    std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .iter_mut()
            .map(|c| {
                let f = &f;
                std::thread::Builder::new()
                    .name(format!("ep-rank-{}", c.rank()))
                    .spawn_scoped(s, move || f(c))
                    .expect("spawn rank thread")
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}
