//! A communicator of any compiled-in backend ([`Comm`]) and its buffers ([`AnyBuffer`]): what
//! [`crate::Backend`] hands out. An enum rather than a trait object: the backends' buffer types
//! differ, and a buffer handed to the wrong backend is a typed error, not a crash.

use std::fmt;
use std::ops::Range;

use ep_core::{
    bf16, Buffer, CombineArgs, Combined, DispatchArgs, DispatchOutput, Dispatched, Element, EpComm,
    EpConfig, EpError, PendingCombine, PendingDispatch, Phase, Result, RoutingHandle, Staging,
    SwigluOptions, SwigluOutput,
};
use ndarray::ArrayView2;

/// One rank of a world of any backend.
pub enum Comm {
    /// A rank of the CPU simulator.
    #[cfg(feature = "sim")]
    Sim(ep_sim::SimComm),
    /// A rank on a GPU.
    #[cfg(feature = "cuda")]
    Cuda(ep_cuda::CudaComm),
}

/// A buffer of a [`Comm`]: the backend's own buffer type, tagged.
pub enum AnyBuffer<T: Element> {
    /// Host memory of the simulator.
    #[cfg(feature = "sim")]
    Sim(ep_sim::HostBuffer<T>),
    /// Device memory of the CUDA backend.
    #[cfg(feature = "cuda")]
    Cuda(ep_cuda::DeviceBuffer<T>),
}

impl<T: Element> Clone for AnyBuffer<T> {
    fn clone(&self) -> Self {
        match self {
            #[cfg(feature = "sim")]
            AnyBuffer::Sim(b) => AnyBuffer::Sim(b.clone()),
            #[cfg(feature = "cuda")]
            AnyBuffer::Cuda(b) => AnyBuffer::Cuda(b.clone()),
        }
    }
}

impl<T: Element> fmt::Debug for AnyBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            #[cfg(feature = "sim")]
            AnyBuffer::Sim(b) => b.fmt(f),
            #[cfg(feature = "cuda")]
            AnyBuffer::Cuda(b) => b.fmt(f),
        }
    }
}

impl<T: Element> Buffer<T> for AnyBuffer<T> {
    fn len(&self) -> usize {
        match self {
            #[cfg(feature = "sim")]
            AnyBuffer::Sim(b) => b.len(),
            #[cfg(feature = "cuda")]
            AnyBuffer::Cuda(b) => b.len(),
        }
    }

    fn slice(&self, range: Range<usize>) -> Option<Self> {
        match self {
            #[cfg(feature = "sim")]
            AnyBuffer::Sim(b) => b.slice(range).map(AnyBuffer::Sim),
            #[cfg(feature = "cuda")]
            AnyBuffer::Cuda(b) => b.slice(range).map(AnyBuffer::Cuda),
        }
    }
}

/// A buffer of another backend than the rank's.
fn foreign(rank: usize, what: &'static str) -> EpError {
    EpError::Incompatible {
        rank,
        what,
        why: "the buffer belongs to another backend than the rank",
    }
}

/// Per backend: its buffer type out of an [`AnyBuffer`], and its outputs into [`Comm`]'s.
macro_rules! backend_glue {
    ($variant:ident, $comm:ty, $unwrap:ident, $dispatched:ident, $combined:ident, $staging:ident) => {
        fn $unwrap<'a, T: Element>(
            rank: usize,
            what: &'static str,
            b: &'a AnyBuffer<T>,
        ) -> Result<&'a <$comm as EpComm>::Buffer<T>> {
            #[allow(unreachable_patterns)]
            match b {
                AnyBuffer::$variant(b) => Ok(b),
                _ => Err(foreign(rank, what)),
            }
        }

        fn $dispatched(d: Dispatched<$comm>) -> Dispatched<Comm> {
            {
                Dispatched {
                    handle: d.handle,
                    format: d.format,
                    hidden: d.hidden,
                    capacity: d.capacity,
                    n_tokens: d.n_tokens,
                    recv_tokens: AnyBuffer::$variant(d.recv_tokens),
                    recv_scales: AnyBuffer::$variant(d.recv_scales),
                    row_offsets: AnyBuffer::$variant(d.row_offsets),
                    src_info: AnyBuffer::$variant(d.src_info),
                    src_offsets: AnyBuffer::$variant(d.src_offsets),
                    expert_ids: d.expert_ids,
                }
            }
        }

        fn $combined(c: Combined<$comm>) -> Combined<Comm> {
            {
                match c {
                    Combined::Reduced(b) => Combined::Reduced(AnyBuffer::$variant(b)),
                    Combined::Unreduced(b) => Combined::Unreduced(AnyBuffer::$variant(b)),
                    Combined::Fp8 { payload, scales } => Combined::Fp8 {
                        payload: AnyBuffer::$variant(payload),
                        scales: AnyBuffer::$variant(scales),
                    },
                    Combined::Consumed => Combined::Consumed,
                }
            }
        }

        fn $staging(s: Staging<$comm>) -> Staging<Comm> {
            {
                Staging {
                    tokens: AnyBuffer::$variant(s.tokens),
                    topk_ids: AnyBuffer::$variant(s.topk_ids),
                    input_scales: AnyBuffer::$variant(s.input_scales),
                    expert_out: AnyBuffer::$variant(s.expert_out),
                    weights: AnyBuffer::$variant(s.weights),
                }
            }
        }
    };
}

#[cfg(feature = "sim")]
backend_glue!(
    Sim,
    ep_sim::SimComm,
    sim_buffer,
    sim_dispatched,
    sim_combined,
    sim_staging
);
#[cfg(feature = "cuda")]
backend_glue!(
    Cuda,
    ep_cuda::CudaComm,
    cuda_buffer,
    cuda_dispatched,
    cuda_combined,
    cuda_staging
);

/// `$body` with `$c` bound to the backend's communicator in `$self`, and the names `unwrap`,
/// `dispatched`, `combined` and `staging` to that backend's glue (`backend_glue`).
macro_rules! each {
    ($self:expr, $c:ident => $body:expr) => {
        match $self {
            #[cfg(feature = "sim")]
            Comm::Sim($c) => {
                #[allow(unused_imports)]
                use self::{
                    sim_buffer as unwrap, sim_combined as combined, sim_dispatched as dispatched,
                    sim_staging as staging,
                };
                $body
            }
            #[cfg(feature = "cuda")]
            Comm::Cuda($c) => {
                #[allow(unused_imports)]
                use self::{
                    cuda_buffer as unwrap, cuda_combined as combined,
                    cuda_dispatched as dispatched, cuda_staging as staging,
                };
                $body
            }
        }
    };
}

impl EpComm for Comm {
    type Buffer<T: Element> = AnyBuffer<T>;

    fn rank(&self) -> usize {
        each!(self, c => c.rank())
    }

    fn config(&self) -> &EpConfig {
        each!(self, c => c.config())
    }

    fn alloc<T: Element>(&self, len: usize) -> Result<AnyBuffer<T>> {
        match self {
            #[cfg(feature = "sim")]
            Comm::Sim(c) => c.alloc(len).map(AnyBuffer::Sim),
            #[cfg(feature = "cuda")]
            Comm::Cuda(c) => c.alloc(len).map(AnyBuffer::Cuda),
        }
    }

    fn write<T: Element>(&mut self, dst: &AnyBuffer<T>, host: &[T]) -> Result<()> {
        let rank = self.rank();
        each!(self, c => c.write(unwrap(rank, "a write's destination", dst)?, host))
    }

    fn to_host<T: Element>(&mut self, src: &AnyBuffer<T>) -> Result<Vec<T>> {
        let rank = self.rank();
        each!(self, c => c.to_host(unwrap(rank, "a read's source", src)?))
    }

    fn synchronize(&mut self) -> Result<()> {
        each!(self, c => c.synchronize())
    }

    fn staging(&mut self) -> Result<Staging<Self>> {
        each!(self, c => c.staging().map(staging))
    }

    fn dispatch_async(&mut self, args: &DispatchArgs<'_, Self>) -> Result<PendingDispatch> {
        let rank = self.rank();
        each!(self, c => {
            let tokens = unwrap(rank, "tokens", args.tokens)?;
            let ids = unwrap(rank, "topk_ids", args.topk_ids)?;
            let mut inner = DispatchArgs::new(tokens, ids, args.n_tokens);
            if let Some(s) = args.input_scales {
                inner = inner.with_input_scales(unwrap(rank, "input_scales", s)?);
            }
            if args.ids_checked() {
                // SAFETY: the caller vouched for these very ids.
                inner = unsafe { inner.with_checked_ids() };
            }
            c.dispatch_async(&inner)
        })
    }

    fn dispatch_wait(&mut self, pending: PendingDispatch) -> Result<Dispatched<Self>> {
        each!(self, c => c.dispatch_wait(pending).map(dispatched))
    }

    fn combine_async(
        &mut self,
        handle: &RoutingHandle,
        args: &CombineArgs<'_, Self>,
    ) -> Result<PendingCombine> {
        let rank = self.rank();
        each!(self, c => {
            let args = CombineArgs {
                expert_out: unwrap(rank, "expert_out", args.expert_out)?,
                weights: args
                    .weights
                    .map(|w| unwrap(rank, "router weights", w))
                    .transpose()?,
                epilogue: args.epilogue,
            };
            c.combine_async(handle, &args)
        })
    }

    fn combine_wait(&mut self, pending: PendingCombine) -> Result<Combined<Self>> {
        each!(self, c => c.combine_wait(pending).map(combined))
    }

    fn pending_dispatch(&self) -> Result<PendingDispatch> {
        each!(self, c => c.pending_dispatch())
    }

    fn pending_combine(&self) -> Result<PendingCombine> {
        each!(self, c => c.pending_combine())
    }

    fn ready(&self, phase: Phase, handle: Option<&RoutingHandle>) -> Result<()> {
        each!(self, c => c.ready(phase, handle))
    }

    fn host_closures(&self) -> bool {
        each!(self, c => c.host_closures())
    }

    fn refuse(&mut self, phase: Phase, err: EpError) -> EpError {
        each!(self, c => c.refuse(phase, err))
    }

    fn swiglu(
        &mut self,
        routing: &DispatchOutput,
        input: ArrayView2<'_, bf16>,
        opts: &SwigluOptions,
    ) -> Result<SwigluOutput> {
        each!(self, c => c.swiglu(routing, input, opts))
    }

    fn memory_digest(&self) -> Result<u64> {
        each!(self, c => c.memory_digest())
    }
}
