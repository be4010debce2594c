//! The backend traits: the only API generic code needs.
//!
//! An [`EpBackend`] creates a world of ranks; each rank is an [`EpComm`] that one host thread
//! drives, as one process drives one GPU in a real deployment. The CPU simulator and the CUDA
//! backend implement exactly these traits, so code written against them runs on either.

use crate::config::EpConfig;
use crate::error::Result;
use crate::io::{CombineInput, CombineOutput, DispatchInput, DispatchOutput, RoutingHandle};
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
    /// This rank's index in the world, 0..n_ranks.
    fn rank(&self) -> usize;
    /// The config the world was initialised with (the same on every rank).
    fn config(&self) -> &EpConfig;

    /// Issues this rank's sends and returns the dispatch in flight; the caller may overlap other
    /// work before [`EpComm::dispatch_wait`].
    fn dispatch_async(&mut self, input: &DispatchInput<'_>) -> Result<PendingDispatch>;
    /// Waits for every peer's rows for this rank's experts and lays them out per expert.
    fn dispatch_wait(&mut self, pending: PendingDispatch) -> Result<DispatchOutput>;
    /// Sends the expert outputs of the dispatch identified by `handle` back to their tokens,
    /// reduced with router weights or not, as `input` was made ([`CombineInput::weighted`],
    /// [`CombineInput::unreduced`]).
    fn combine_async(
        &mut self,
        handle: &RoutingHandle,
        input: &CombineInput<'_>,
    ) -> Result<PendingCombine>;
    /// Waits for every returned row and reduces (or lays out, unreduced) per token.
    fn combine_wait(&mut self, pending: PendingCombine) -> Result<CombineOutput>;
    /// The dispatch in flight on this rank, again: after `dispatch_wait` returned
    /// [`crate::EpError::PeerRejected`] the round is still in flight, and this is how to wait
    /// again. An error when no dispatch is in flight.
    fn pending_dispatch(&self) -> Result<PendingDispatch>;
    /// The combine in flight on this rank, again (as [`EpComm::pending_dispatch`]).
    fn pending_combine(&self) -> Result<PendingCombine>;

    /// `dispatch_async` then `dispatch_wait`.
    fn dispatch(&mut self, input: &DispatchInput<'_>) -> Result<DispatchOutput> {
        let pending = self.dispatch_async(input)?;
        self.dispatch_wait(pending)
    }
    /// `combine_async` then `combine_wait`.
    fn combine(
        &mut self,
        handle: &RoutingHandle,
        input: &CombineInput<'_>,
    ) -> Result<CombineOutput> {
        let pending = self.combine_async(handle, input)?;
        self.combine_wait(pending)
    }

    /// Fused SwiGLU over the rows `routing` (this rank's latest dispatch output) delivered:
    /// `input` is the first expert GEMM's output `[capacity rows, 2 * I]`.
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

impl<C: EpComm + ?Sized> EpComm for Box<C> {
    fn rank(&self) -> usize {
        (**self).rank()
    }
    fn config(&self) -> &EpConfig {
        (**self).config()
    }
    fn dispatch_async(&mut self, input: &DispatchInput<'_>) -> Result<PendingDispatch> {
        (**self).dispatch_async(input)
    }
    fn dispatch_wait(&mut self, pending: PendingDispatch) -> Result<DispatchOutput> {
        (**self).dispatch_wait(pending)
    }
    fn combine_async(
        &mut self,
        handle: &RoutingHandle,
        input: &CombineInput<'_>,
    ) -> Result<PendingCombine> {
        (**self).combine_async(handle, input)
    }
    fn combine_wait(&mut self, pending: PendingCombine) -> Result<CombineOutput> {
        (**self).combine_wait(pending)
    }
    fn pending_dispatch(&self) -> Result<PendingDispatch> {
        (**self).pending_dispatch()
    }
    fn pending_combine(&self) -> Result<PendingCombine> {
        (**self).pending_combine()
    }
    fn swiglu(
        &mut self,
        routing: &DispatchOutput,
        input: ArrayView2<'_, bf16>,
        opts: &SwigluOptions,
    ) -> Result<SwigluOutput> {
        (**self).swiglu(routing, input, opts)
    }
    fn memory_digest(&self) -> Result<u64> {
        (**self).memory_digest()
    }
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
