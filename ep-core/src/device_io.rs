//! Dispatch and combine on the backend's own memory: inputs are the caller's buffers, outputs
//! are handles to buffers the communicator sized once at init and reuses every round. Nothing
//! here moves data to or from the host; [`crate::host_io`] does, for tests, tools and laptops.

use crate::backend::EpComm;
use crate::epilogue::Epilogue;
use crate::format::{Format, TokenFormat};
use crate::io::RoutingHandle;
use half::bf16;

/// One rank's dispatch input, in the backend's memory. Buffers may be longer than the round
/// needs (a graph captured once reuses buffers sized for the most tokens); the round reads the
/// first `n_tokens` rows.
pub struct DispatchArgs<'a, C: EpComm + ?Sized> {
    /// `[n_tokens, hidden]` token rows, row-major.
    pub tokens: &'a C::Buffer<bf16>,
    /// `[n_tokens, top_k]` expert ids; `-1` masks a slot.
    pub topk_ids: &'a C::Buffer<i32>,
    /// `[n_tokens]` per-token input scales (finite, positive); `None` is 1.0 for every token.
    pub input_scales: Option<&'a C::Buffer<f32>>,
    /// Tokens this round: at most `max_tokens_per_rank`.
    pub n_tokens: usize,
    /// The caller vouches that every id is in `[-1, n_experts)`
    /// ([`DispatchArgs::with_checked_ids`]), so a backend need not check them where it reads them.
    ids_checked: bool,
}

impl<'a, C: EpComm + ?Sized> DispatchArgs<'a, C> {
    /// `n_tokens` tokens with their expert ids, input scale 1.0.
    pub fn new(tokens: &'a C::Buffer<bf16>, topk_ids: &'a C::Buffer<i32>, n_tokens: usize) -> Self {
        DispatchArgs {
            tokens,
            topk_ids,
            input_scales: None,
            n_tokens,
            ids_checked: false,
        }
    }

    /// Ids already checked, so the backend skips its own check (on CUDA a kernel per round).
    ///
    /// # Safety
    /// Every id of the round is in `[-1, n_experts)`: a backend that trusts this indexes ranks
    /// and experts by them, in other ranks' memory too.
    pub unsafe fn with_checked_ids(mut self) -> Self {
        self.ids_checked = true;
        self
    }

    /// Whether the caller vouched for the ids ([`DispatchArgs::with_checked_ids`]).
    pub fn ids_checked(&self) -> bool {
        self.ids_checked
    }

    /// With per-token input scales.
    pub fn with_input_scales(mut self, scales: &'a C::Buffer<f32>) -> Self {
        self.input_scales = Some(scales);
        self
    }
}

/// What a dispatch delivered to this rank, in the communicator's memory: the handles stay valid
/// until the rank's next dispatch writes the same buffers. Sized for
/// [`crate::EpConfig::max_recv_rows`] rows (`capacity`); how many are real is on the backend's
/// side, in `row_offsets` (its last entry: the rows, padding included), so that nothing waits
/// for the host between dispatch and the expert GEMM.
pub struct Dispatched<C: EpComm + ?Sized> {
    /// Identifies this dispatch; combine needs it.
    pub handle: RoutingHandle,
    /// The format rows are encoded in.
    pub format: Format,
    /// Elements per row.
    pub hidden: usize,
    /// Rows the buffers hold.
    pub capacity: usize,
    /// Tokens this rank dispatched in the round: the rows its combine returns.
    pub n_tokens: usize,
    /// `[capacity, payload_bytes(hidden)]` encoded rows, grouped per expert.
    pub recv_tokens: C::Buffer<u8>,
    /// The rows' scales in the format's output layout for the round's rows (empty for BF16).
    pub recv_scales: C::Buffer<u8>,
    /// `[n_groups + 1]` where each group's rows start; the last entry is the rows, padding
    /// included.
    pub row_offsets: C::Buffer<u32>,
    /// `[capacity, 2]` (source token, top-k slot) per row; `(-1, -1)` for padding.
    pub src_info: C::Buffer<i32>,
    /// `[n_groups, n_ranks + 1]` where each source rank's rows start inside each group.
    pub src_offsets: C::Buffer<u32>,
    /// The expert of each group: `-1` for the fused shared expert, else the local expert index.
    pub expert_ids: Vec<i32>,
}

impl<C: EpComm + ?Sized> Clone for Dispatched<C> {
    fn clone(&self) -> Self {
        Dispatched {
            handle: self.handle,
            format: self.format,
            hidden: self.hidden,
            capacity: self.capacity,
            n_tokens: self.n_tokens,
            recv_tokens: self.recv_tokens.clone(),
            recv_scales: self.recv_scales.clone(),
            row_offsets: self.row_offsets.clone(),
            src_info: self.src_info.clone(),
            src_offsets: self.src_offsets.clone(),
            expert_ids: self.expert_ids.clone(),
        }
    }
}

impl<C: EpComm + ?Sized> Dispatched<C> {
    /// Groups (local experts, and the shared expert first when fused).
    pub fn n_groups(&self) -> usize {
        self.expert_ids.len()
    }

    /// Bytes of one encoded row.
    pub fn payload_bytes(&self) -> usize {
        self.format.payload_bytes(self.hidden)
    }
}

/// One rank's combine input, in the backend's memory.
pub struct CombineArgs<'a, C: EpComm + ?Sized> {
    /// `[capacity, hidden]` expert outputs, one per row the dispatch delivered (rows past the
    /// round's are not read).
    pub expert_out: &'a C::Buffer<bf16>,
    /// `[n_tokens, top_k]` router weights to reduce with (bf16 weights widen exactly to f32);
    /// `None` returns the rows unreduced, `[n_tokens, top_k, hidden]`.
    pub weights: Option<&'a C::Buffer<f32>>,
    /// What to do with the reduced rows (needs weights).
    pub epilogue: Option<&'a Epilogue>,
}

impl<'a, C: EpComm + ?Sized> CombineArgs<'a, C> {
    /// Reduce each token's rows with its router weights: `[n_tokens, hidden]`.
    pub fn weighted(expert_out: &'a C::Buffer<bf16>, weights: &'a C::Buffer<f32>) -> Self {
        CombineArgs {
            expert_out,
            weights: Some(weights),
            epilogue: None,
        }
    }

    /// Each token's rows as they came back: `[n_tokens, top_k, hidden]`, masked slots zero.
    pub fn unreduced(expert_out: &'a C::Buffer<bf16>) -> Self {
        CombineArgs {
            expert_out,
            weights: None,
            epilogue: None,
        }
    }

    /// With an epilogue on the reduced rows.
    pub fn with_epilogue(mut self, epilogue: &'a Epilogue) -> Self {
        self.epilogue = Some(epilogue);
        self
    }
}

/// What a combine produced on this rank, in the communicator's memory (valid until its next
/// combine): buffers of exactly the round's size, for its `n_tokens` tokens.
pub enum Combined<C: EpComm + ?Sized> {
    /// `[n_tokens, hidden]` weighted sums (after the epilogue, if any).
    Reduced(C::Buffer<bf16>),
    /// `[n_tokens, top_k, hidden]` rows as they came back.
    Unreduced(C::Buffer<bf16>),
    /// The reduced rows quantized (`Epilogue::QuantizeFp8`): `[n_tokens, hidden]` FP8 bytes and
    /// `[n_tokens, hidden / 128]` scales.
    Fp8 {
        /// Payload bytes.
        payload: C::Buffer<u8>,
        /// Block scales.
        scales: C::Buffer<f32>,
    },
    /// An epilogue consumed the rows; nothing is stored.
    Consumed,
}

impl<C: EpComm + ?Sized> Clone for Combined<C> {
    fn clone(&self) -> Self {
        match self {
            Combined::Reduced(b) => Combined::Reduced(b.clone()),
            Combined::Unreduced(b) => Combined::Unreduced(b.clone()),
            Combined::Fp8 { payload, scales } => Combined::Fp8 {
                payload: payload.clone(),
                scales: scales.clone(),
            },
            Combined::Consumed => Combined::Consumed,
        }
    }
}

impl<C: EpComm + ?Sized> Combined<C> {
    /// The reduced rows, when that is what the combine produced.
    pub fn reduced(&self) -> Option<&C::Buffer<bf16>> {
        match self {
            Combined::Reduced(b) => Some(b),
            _ => None,
        }
    }
}
