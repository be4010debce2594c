//! What callers hand to dispatch and combine, and what they get back.

use std::fmt::Write as _;

use half::bf16;
use ndarray::{Array2, Array3, ArrayView1, ArrayView2};

use crate::epilogue::Epilogue;
use crate::format::{Format, TokenFormat};

/// One rank's dispatch input.
#[derive(Clone, Copy, Debug)]
pub struct DispatchInput<'a> {
    /// `[T, hidden]` token rows.
    pub tokens: ArrayView2<'a, bf16>,
    /// `[T, top_k]` global expert ids; -1 masks a slot.
    pub topk_ids: ArrayView2<'a, i32>,
    /// `[T]` per-token input scales, read only by formats that take them.
    pub input_scales: Option<ArrayView1<'a, f32>>,
}

impl<'a> DispatchInput<'a> {
    /// An input without input scales (every token's scale is 1.0).
    pub fn new(tokens: ArrayView2<'a, bf16>, topk_ids: ArrayView2<'a, i32>) -> Self {
        DispatchInput {
            tokens,
            topk_ids,
            input_scales: None,
        }
    }

    /// `T`, the rows of `tokens`.
    pub fn n_tokens(&self) -> usize {
        self.tokens.nrows()
    }

    pub(crate) fn input_scale(&self, t: usize) -> f32 {
        self.input_scales.map_or(1.0, |s| s[t])
    }
}

/// Router weights `[T, top_k]`, f32 or bf16; both are read as f32.
#[derive(Clone, Copy, Debug)]
pub enum RouterWeights<'a> {
    /// f32 weights, read as they are.
    F32(ArrayView2<'a, f32>),
    /// bf16 weights, widened to f32 exactly.
    Bf16(ArrayView2<'a, bf16>),
}

impl RouterWeights<'_> {
    /// `(T, top_k)` as passed (checked against the call by validation).
    pub fn dim(&self) -> (usize, usize) {
        match self {
            RouterWeights::F32(w) => w.dim(),
            RouterWeights::Bf16(w) => w.dim(),
        }
    }

    /// Weight of token `t`, slot `k`, as f32.
    pub fn get(&self, t: usize, k: usize) -> f32 {
        match self {
            RouterWeights::F32(w) => w[[t, k]],
            RouterWeights::Bf16(w) => w[[t, k]].to_f32(),
        }
    }
}

/// One rank's combine input, made as what it asks for: [`CombineInput::weighted`] (reduced per
/// token) or [`CombineInput::unreduced`] (each slot's output).
#[derive(Clone, Copy, Debug)]
pub struct CombineInput<'a> {
    /// `[rows, hidden]` expert outputs, in the row order dispatch produced. With the fused shared
    /// expert, group 0's rows are the shared expert's outputs.
    pub expert_out: ArrayView2<'a, bf16>,
    /// With weights the output is reduced to `[T, hidden]`; without, it is `[T, top_k, hidden]`
    /// (set by the constructor that names the kind).
    pub weights: Option<RouterWeights<'a>>,
    /// What to do with each finished output chunk (reduced outputs only).
    pub epilogue: Option<&'a Epilogue>,
}

impl<'a> CombineInput<'a> {
    /// A combine that reduces each token's slots with its router weights to `[T, hidden]`.
    pub fn weighted(expert_out: ArrayView2<'a, bf16>, weights: RouterWeights<'a>) -> Self {
        CombineInput {
            expert_out,
            weights: Some(weights),
            epilogue: None,
        }
    }

    /// A combine that returns each slot's expert output as it is, `[T, top_k, hidden]`.
    pub fn unreduced(expert_out: ArrayView2<'a, bf16>) -> Self {
        CombineInput {
            expert_out,
            weights: None,
            epilogue: None,
        }
    }

    /// Apply `epilogue` to the reduced output (a weighted combine only).
    pub fn with_epilogue(mut self, epilogue: &'a Epilogue) -> Self {
        self.epilogue = Some(epilogue);
        self
    }
}

/// Ties a combine to the dispatch whose rows it sends back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RoutingHandle {
    /// The rank whose dispatch it is.
    pub rank: usize,
    /// Counts dispatches on this rank since init, from 0.
    pub round: u64,
}

/// One rank's dispatch output: the rows its local experts received, grouped per expert. Equal
/// means bit for bit (every field is bytes or integers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DispatchOutput {
    /// The handle combine (and SwiGLU) must present for these rows.
    pub handle: RoutingHandle,
    /// The token format of `recv_tokens` and `recv_scales`.
    pub format: Format,
    /// Elements per token row before encoding.
    pub hidden: usize,
    /// Tokens this rank dispatched in the round: the rows its combine returns.
    pub n_tokens: usize,
    /// `[rows, payload_bytes]` encoded payloads (for BF16, the little-endian bf16 row).
    pub recv_tokens: Array2<u8>,
    /// The scales of every row in the layout the format's grouped GEMM reads (empty for BF16).
    pub recv_scales: Vec<u8>,
    /// `[n_groups + 1]`: group `g` owns rows `row_offsets[g]..row_offsets[g + 1]`.
    pub row_offsets: Vec<u32>,
    /// `[n_groups]`: the local expert index of each group.
    pub expert_ids: Vec<i32>,
    /// `[rows, 2]`: (source token index, first top-k slot naming the expert); (-1, -1) for padding.
    pub src_info: Array2<i32>,
    /// `[n_groups, n_ranks + 1]`: source `s`'s rows in group `g` are `src_offsets[g][s]..src_offsets[g][s + 1]`
    /// (absolute rows); `src_offsets[g][n_ranks]` ends the real rows, padding follows.
    pub src_offsets: Array2<u32>,
}

impl DispatchOutput {
    /// Rows received, padding included.
    pub fn rows(&self) -> usize {
        self.recv_tokens.nrows()
    }

    /// Groups: the local experts, plus the shared expert when it is fused.
    pub fn n_groups(&self) -> usize {
        self.expert_ids.len()
    }

    /// Ranks in the world (source ranks of the rows).
    pub fn n_ranks(&self) -> usize {
        self.src_offsets.ncols() - 1
    }

    /// Rows that carry a token (padding excluded).
    pub fn real_rows(&self) -> usize {
        (0..self.n_groups())
            .map(|g| (self.src_offsets[[g, self.n_ranks()]] - self.src_offsets[[g, 0]]) as usize)
            .sum()
    }

    /// The rank that sent row `row`, or `None` for a padding row.
    pub fn source_rank(&self, row: usize) -> Option<usize> {
        let row = row as u32;
        let g = (0..self.n_groups()).find(|&g| row < self.row_offsets[g + 1])?;
        (0..self.n_ranks())
            .find(|&s| self.src_offsets[[g, s]] <= row && row < self.src_offsets[[g, s + 1]])
    }

    /// The received rows as bf16, for the BF16 format; `None` for a quantized format.
    pub fn tokens_bf16(&self) -> Option<Array2<bf16>> {
        if self.format != Format::Bf16 {
            return None;
        }
        let bytes = self.recv_tokens.as_slice().expect("standard layout");
        let values: Vec<bf16> = bytes
            .chunks_exact(2)
            .map(|b| bf16::from_bits(u16::from_le_bytes([b[0], b[1]])))
            .collect();
        Some(Array2::from_shape_vec((self.rows(), self.hidden), values).expect("rows x hidden"))
    }

    /// Every row decoded to f32 through the format (what the expert GEMM sees), with input
    /// scale 1 (see [`DispatchOutput::decode_rows_with`]).
    pub fn decode_rows(&self) -> Array2<f32> {
        self.decode_rows_with(1.0)
    }

    /// Every row decoded with one `input_scale` (NVFP4 reads it; the other formats ignore it):
    /// right only when every sender used that value for every token. See
    /// [`DispatchOutput::decode_rows_from`] for per-token scales.
    pub fn decode_rows_with(&self, input_scale: f32) -> Array2<f32> {
        self.decode_rows_by(|_| input_scale)
    }

    /// Every row decoded with the input scale of the token it carries: `input_scales[s][t]` for a
    /// row from source rank `s` (`source_rank`) and token `t` (`src_info[row][0]`), as each
    /// sender's `DispatchInput::input_scales` held it. Padding rows decode with 1.0 (they are
    /// zero). `input_scales` has one entry per rank.
    pub fn decode_rows_from(&self, input_scales: &[ArrayView1<'_, f32>]) -> Array2<f32> {
        self.decode_rows_by(|row| self.source_input_scale(row, input_scales))
    }

    /// The input scale row `row` was encoded with, given every rank's per-token input scales
    /// (1.0 for a padding row).
    pub fn source_input_scale(&self, row: usize, input_scales: &[ArrayView1<'_, f32>]) -> f32 {
        match (self.source_rank(row), self.src_info[[row, 0]]) {
            (Some(s), t) if t >= 0 => input_scales[s][t as usize],
            _ => 1.0,
        }
    }

    /// Every row decoded with the input scale `scale_of(row)`.
    pub fn decode_rows_by(&self, scale_of: impl Fn(usize) -> f32) -> Array2<f32> {
        let mut out = Array2::<f32>::zeros((self.rows(), self.hidden));
        let scale_bytes = self.format.scale_bytes(self.hidden);
        let mut scales = vec![0u8; scale_bytes];
        for r in 0..self.rows() {
            // Scales live in the output layout; the decode wants the per-token order back.
            self.format
                .gather_scales(self.hidden, self.rows(), r, &self.recv_scales, &mut scales);
            let payload = self.recv_tokens.row(r);
            self.format.decode(
                payload.as_slice().expect("standard layout"),
                &scales,
                scale_of(r),
                out.row_mut(r).as_slice_mut().expect("standard layout"),
            );
        }
        out
    }

    /// The first difference from `other` in any output byte, or `None` when bit-identical.
    pub fn bit_diff(&self, other: &DispatchOutput) -> Option<String> {
        if self.format != other.format || self.hidden != other.hidden {
            return Some(format!(
                "format/hidden {}/{} vs {}/{}",
                self.format, self.hidden, other.format, other.hidden
            ));
        }
        if self.row_offsets != other.row_offsets {
            return Some(format!(
                "row_offsets {:?} vs {:?}",
                self.row_offsets, other.row_offsets
            ));
        }
        if self.expert_ids != other.expert_ids {
            return Some(format!(
                "expert_ids {:?} vs {:?}",
                self.expert_ids, other.expert_ids
            ));
        }
        if self.src_offsets != other.src_offsets {
            return Some(format!(
                "src_offsets\n{:?}\nvs\n{:?}",
                self.src_offsets, other.src_offsets
            ));
        }
        if self.src_info.dim() != other.src_info.dim() {
            return Some(format!(
                "src_info shape {:?} vs {:?}",
                self.src_info.dim(),
                other.src_info.dim()
            ));
        }
        for (r, (a, b)) in self
            .src_info
            .outer_iter()
            .zip(other.src_info.outer_iter())
            .enumerate()
        {
            if a != b {
                return Some(format!("src_info row {r}: {a} vs {b}"));
            }
        }
        if self.recv_tokens.dim() != other.recv_tokens.dim() {
            return Some(format!(
                "recv_tokens shape {:?} vs {:?}",
                self.recv_tokens.dim(),
                other.recv_tokens.dim()
            ));
        }
        for (r, (a, b)) in self
            .recv_tokens
            .outer_iter()
            .zip(other.recv_tokens.outer_iter())
            .enumerate()
        {
            if let Some(c) = a.iter().zip(b.iter()).position(|(x, y)| x != y) {
                return Some(format!(
                    "recv_tokens row {r} byte {c}: {:#04x} vs {:#04x}",
                    a[c], b[c]
                ));
            }
        }
        if let Some(i) = first_byte_diff(&self.recv_scales, &other.recv_scales) {
            return Some(format!("recv_scales differ at byte {i}"));
        }
        None
    }

    /// A deterministic text rendering of the routing (not the payloads): per group, the rows of
    /// each source rank as `token.slot`, in row order. Padding is left out, so the report is the
    /// same in every format; this is what routing snapshots store. Use it with
    /// `insta::assert_snapshot!` to pin your own routing.
    pub fn routing_report(&self) -> String {
        let mut s = String::new();
        let n_ranks = self.n_ranks();
        let _ = writeln!(
            s,
            "rank {}: {} rows, {} groups",
            self.handle.rank,
            self.real_rows(),
            self.n_groups()
        );
        for g in 0..self.n_groups() {
            let real = self.src_offsets[[g, n_ranks]] - self.src_offsets[[g, 0]];
            let _ = write!(s, "  g{g} e{}: {real}", self.expert_ids[g]);
            for src in 0..n_ranks {
                let (a, b) = (self.src_offsets[[g, src]], self.src_offsets[[g, src + 1]]);
                if a == b {
                    continue;
                }
                let _ = write!(s, " | r{src}:");
                for row in a..b {
                    let r = row as usize;
                    let _ = write!(s, " {}.{}", self.src_info[[r, 0]], self.src_info[[r, 1]]);
                }
            }
            s.push('\n');
        }
        s
    }
}

fn first_byte_diff(a: &[u8], b: &[u8]) -> Option<usize> {
    if a.len() != b.len() {
        return Some(a.len().min(b.len()));
    }
    a.iter().zip(b).position(|(x, y)| x != y)
}

/// One rank's combine output. Equal means bit for bit ([`CombineOutput::bit_diff`] finds
/// nothing): the contract fixes every bit, so a NaN equals the same NaN and `-0` differs from
/// `+0`.
#[derive(Clone, Debug)]
pub enum CombineOutput {
    /// `[T, hidden]`: the weighted sum over slots, rounded to bf16 once (then the epilogue).
    Reduced(Array2<bf16>),
    /// `[T, top_k, hidden]`: each slot's expert output, masked slots zero.
    Unreduced(Array3<bf16>),
    /// The quantize-to-FP8 epilogue: e4m3fn `[T, hidden]` and f32 scales `[T, hidden / 128]`.
    Fp8 {
        /// `[T, hidden]` e4m3fn bytes.
        payload: Array2<u8>,
        /// `[T, hidden / 128]`, one scale per block of 128 elements.
        scales: Array2<f32>,
    },
    /// A host-closure epilogue took every chunk; nothing was stored.
    Consumed,
}

impl PartialEq for CombineOutput {
    fn eq(&self, other: &Self) -> bool {
        self.bit_diff(other).is_none()
    }
}

impl Eq for CombineOutput {}

impl CombineOutput {
    /// The output array's shape (the payload's for FP8); empty for [`CombineOutput::Consumed`].
    pub fn shape(&self) -> Vec<usize> {
        match self {
            CombineOutput::Reduced(a) => a.shape().to_vec(),
            CombineOutput::Unreduced(a) => a.shape().to_vec(),
            CombineOutput::Fp8 { payload, .. } => payload.shape().to_vec(),
            CombineOutput::Consumed => Vec::new(),
        }
    }

    /// The bf16 elements in row-major order (empty for the FP8 and consumed outputs).
    pub fn as_slice(&self) -> &[bf16] {
        match self {
            CombineOutput::Reduced(a) => a.as_slice().expect("standard layout"),
            CombineOutput::Unreduced(a) => a.as_slice().expect("standard layout"),
            CombineOutput::Fp8 { .. } | CombineOutput::Consumed => &[],
        }
    }

    /// The `[T, hidden]` array of a [`CombineOutput::Reduced`] output.
    pub fn reduced(&self) -> Option<&Array2<bf16>> {
        match self {
            CombineOutput::Reduced(a) => Some(a),
            _ => None,
        }
    }

    /// The first element whose bits differ from `other`, or `None` when bit-identical.
    pub fn bit_diff(&self, other: &CombineOutput) -> Option<String> {
        if std::mem::discriminant(self) != std::mem::discriminant(other)
            || self.shape() != other.shape()
        {
            return Some(format!(
                "kind/shape {:?} vs {:?}",
                self.shape(),
                other.shape()
            ));
        }
        if let (
            CombineOutput::Fp8 {
                payload: p,
                scales: s,
            },
            CombineOutput::Fp8 {
                payload: q,
                scales: t,
            },
        ) = (self, other)
        {
            if let Some(i) = p.iter().zip(q.iter()).position(|(a, b)| a != b) {
                return Some(format!("fp8 payload byte {i} (flat)"));
            }
            let i = s
                .iter()
                .zip(t.iter())
                .position(|(a, b)| a.to_bits() != b.to_bits())?;
            return Some(format!("fp8 scale {i} (flat)"));
        }
        let (a, b) = (self.as_slice(), other.as_slice());
        let i = a
            .iter()
            .zip(b)
            .position(|(x, y)| x.to_bits() != y.to_bits())?;
        Some(format!(
            "element {i} (flat): {:?} ({:#06x}) vs {:?} ({:#06x})",
            a[i],
            a[i].to_bits(),
            b[i],
            b[i].to_bits()
        ))
    }
}
