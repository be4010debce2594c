//! Dispatch and combine on host arrays, for tests, tools and code that has its data on the host:
//! the inputs are checked on the host, copied into the communicator's own buffers
//! ([`EpComm::staging`]), and the outputs copied back. The round itself is the device API's.

use ndarray::{Array2, Array3};

use crate::backend::EpComm;
use crate::device_io::{CombineArgs, Combined, DispatchArgs, Dispatched};
use crate::error::{EpError, Phase, Result};
use crate::format::TokenFormat;
use crate::io::{CombineInput, CombineOutput, DispatchInput, DispatchOutput, RouterWeights};
use crate::memory::{Buffer, Element};
use crate::round::{PendingCombine, PendingDispatch};
use crate::validate;

/// The calls of [`EpComm`] on host arrays; every communicator has them.
pub trait HostIo: EpComm {
    /// [`EpComm::dispatch_async`] for host arrays: checked on the host (a bad input is refused,
    /// as the backend refuses one, with nothing written), then copied to the communicator.
    fn host_dispatch_async(&mut self, input: &DispatchInput<'_>) -> Result<PendingDispatch> {
        self.ready(Phase::Dispatch, None)?;
        let (rank, cfg) = (self.rank(), self.config().clone());
        if let Err(e) = validate::dispatch_input(&cfg, rank, input) {
            return Err(self.refuse(Phase::Dispatch, e));
        }
        let st = self.staging()?;
        let t = input.n_tokens();
        let tokens = contiguous(input.tokens.iter(), input.tokens.as_slice());
        let ids = contiguous(input.topk_ids.iter(), input.topk_ids.as_slice());
        self.write(&st.tokens, &tokens)?;
        self.write(&st.topk_ids, &ids)?;
        let scales = input
            .input_scales
            .map(|s| s.iter().copied().collect::<Vec<f32>>());
        if let Some(s) = &scales {
            self.write(&st.input_scales, s)?;
        }
        // SAFETY: `validate::dispatch_input` checked every id above.
        let mut args = unsafe { DispatchArgs::new(&st.tokens, &st.topk_ids, t).with_checked_ids() };
        if scales.is_some() {
            args = args.with_input_scales(&st.input_scales);
        }
        self.dispatch_async(&args)
    }

    /// [`EpComm::dispatch_wait`], the output copied to the host.
    fn host_dispatch_wait(&mut self, pending: PendingDispatch) -> Result<DispatchOutput> {
        let out = self.dispatch_wait(pending)?;
        self.dispatched_to_host(&out)
    }

    /// `host_dispatch_async` then `host_dispatch_wait`.
    fn host_dispatch(&mut self, input: &DispatchInput<'_>) -> Result<DispatchOutput> {
        let pending = self.host_dispatch_async(input)?;
        self.host_dispatch_wait(pending)
    }

    /// [`EpComm::combine_async`] for host arrays, of the dispatch `routing` (this rank's latest,
    /// on the host): checked against its rows on the host, then copied to the communicator.
    fn host_combine_async(
        &mut self,
        routing: &DispatchOutput,
        input: &CombineInput<'_>,
    ) -> Result<PendingCombine> {
        match self.ready(Phase::Combine, Some(&routing.handle)) {
            // A handle from another round is bad input to this round's combine.
            Err(e @ EpError::StaleHandle { .. }) => return Err(self.refuse(Phase::Combine, e)),
            other => other?,
        }
        let (rank, cfg) = (self.rank(), self.config().clone());
        let (rows, t) = (routing.rows(), routing.n_tokens);
        if let Err(e) = validate::combine_input(&cfg, rank, rows, t, input, self.host_closures()) {
            return Err(self.refuse(Phase::Combine, e));
        }
        let st = self.staging()?;
        let out = contiguous(input.expert_out.iter(), input.expert_out.as_slice());
        self.write(&st.expert_out, &out)?;
        let weights = input.weights.map(|w| match w {
            RouterWeights::F32(w) => w.iter().copied().collect::<Vec<f32>>(),
            // bf16 widens to f32 exactly.
            RouterWeights::Bf16(w) => w.iter().map(|x| x.to_f32()).collect(),
        });
        if let Some(w) = &weights {
            self.write(&st.weights, w)?;
        }
        let mut args = CombineArgs::unreduced(&st.expert_out);
        if weights.is_some() {
            args.weights = Some(&st.weights);
        }
        args.epilogue = input.epilogue;
        self.combine_async(&routing.handle, &args)
    }

    /// [`EpComm::combine_wait`], the output copied to the host.
    fn host_combine_wait(&mut self, pending: PendingCombine) -> Result<CombineOutput> {
        let out = self.combine_wait(pending)?;
        self.combined_to_host(&out)
    }

    /// `host_combine_async` then `host_combine_wait`.
    fn host_combine(
        &mut self,
        routing: &DispatchOutput,
        input: &CombineInput<'_>,
    ) -> Result<CombineOutput> {
        let pending = self.host_combine_async(routing, input)?;
        self.host_combine_wait(pending)
    }

    /// A dispatch's output copied to the host: its real rows only (the row count first).
    fn dispatched_to_host(&mut self, out: &Dispatched<Self>) -> Result<DispatchOutput> {
        let row_offsets = self.to_host(&out.row_offsets)?;
        let rows = *row_offsets.last().unwrap_or(&0) as usize;
        let payload = out.payload_bytes();
        let scale_len = out.format.output_scales_bytes(out.hidden, rows);
        let recv_tokens = self.to_host(&prefix(&out.recv_tokens, rows * payload)?)?;
        let recv_scales = self.to_host(&prefix(&out.recv_scales, scale_len)?)?;
        let src_info = self.to_host(&prefix(&out.src_info, rows * 2)?)?;
        let src_offsets = self.to_host(&out.src_offsets)?;
        let n_ranks = self.config().n_ranks();
        Ok(DispatchOutput {
            handle: out.handle,
            format: out.format,
            hidden: out.hidden,
            n_tokens: out.n_tokens,
            recv_tokens: Array2::from_shape_vec((rows, payload), recv_tokens)
                .expect("rows x payload"),
            recv_scales,
            row_offsets,
            expert_ids: out.expert_ids.clone(),
            src_info: Array2::from_shape_vec((rows, 2), src_info).expect("rows x 2"),
            src_offsets: Array2::from_shape_vec((out.n_groups(), n_ranks + 1), src_offsets)
                .expect("groups x ranks+1"),
        })
    }

    /// A combine's output copied to the host.
    fn combined_to_host(&mut self, out: &Combined<Self>) -> Result<CombineOutput> {
        let (top_k, hidden) = (self.config().top_k, self.config().hidden);
        Ok(match out {
            Combined::Reduced(b) => {
                let v = self.to_host(b)?;
                CombineOutput::Reduced(
                    Array2::from_shape_vec((v.len() / hidden, hidden), v).expect("shape"),
                )
            }
            Combined::Unreduced(b) => {
                let v = self.to_host(b)?;
                let t = v.len() / (hidden * top_k);
                CombineOutput::Unreduced(
                    Array3::from_shape_vec((t, top_k, hidden), v).expect("shape"),
                )
            }
            Combined::Fp8 { payload, scales } => {
                let (p, s) = (self.to_host(payload)?, self.to_host(scales)?);
                let t = p.len() / hidden;
                CombineOutput::Fp8 {
                    payload: Array2::from_shape_vec((t, hidden), p).expect("shape"),
                    scales: Array2::from_shape_vec((t, hidden / 128), s).expect("shape"),
                }
            }
            Combined::Consumed => {
                self.synchronize()?;
                CombineOutput::Consumed
            }
        })
    }
}

impl<C: EpComm + ?Sized> HostIo for C {}

/// The first `len` elements of `buf`, or an error saying the backend's output was short.
fn prefix<T: Element, B: Buffer<T>>(buf: &B, len: usize) -> Result<B> {
    buf.slice(0..len).ok_or_else(|| {
        EpError::Backend(format!(
            "an output buffer holds {} {}s, the round wrote {len}",
            buf.len(),
            T::NAME
        ))
    })
}

/// An array's elements in row-major order: borrowed when it is contiguous, else copied.
fn contiguous<'a, T: Clone + 'a>(
    iter: impl Iterator<Item = &'a T>,
    slice: Option<&'a [T]>,
) -> std::borrow::Cow<'a, [T]> {
    match slice {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(iter.cloned().collect()),
    }
}
