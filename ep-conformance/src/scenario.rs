//! One round's inputs for every rank, and the stand-in experts applied between dispatch and
//! combine.

use ep_core::{bf16, CombineInput, DispatchInput, DispatchOutput, RouterWeights};
use ndarray::{Array1, Array2};

use crate::rng::Rng;

/// Owned inputs of every rank for one round.
#[derive(Clone, Debug)]
pub struct RoundInputs {
    /// Per rank, `[T_r, hidden]` token rows.
    pub tokens: Vec<Array2<bf16>>,
    /// Per rank, `[T_r, top_k]` global expert ids (-1 masked).
    pub topk_ids: Vec<Array2<i32>>,
    /// f32 router weights `[T, top_k]`.
    pub weights: Vec<Array2<f32>>,
    /// The same weights rounded to bf16, for the bf16-weights variant.
    pub weights_bf16: Vec<Array2<bf16>>,
    /// `[T]` per-token input scales ([`token_input_scale`]); formats that do not take them
    /// ignore them.
    pub input_scales: Vec<Array1<f32>>,
}

/// The NVFP4 input scale the suite starts from: `448 * 6 / 2`, the calibrated value for data
/// whose global amax is 2 (the suite's tokens lie in [-2, 2)).
pub const GLOBAL_INPUT_SCALE: f32 = 1344.0;

/// Token `t` of rank `rank`'s input scale: [`GLOBAL_INPUT_SCALE`] times one of five factors in
/// [1/2, 1] (never above the calibrated value, so no e4m3 scale saturates on the suite's tokens).
/// Serving stacks pass one global value per layer; the suite varies it by token and by rank so
/// that a backend, or a decoder, that used another token's scale for a row gets other values.
/// Neighbouring tokens differ, and so do the first tokens of ranks 0 to 4.
pub fn token_input_scale(rank: usize, t: usize) -> f32 {
    const FACTORS: [f32; 5] = [1.0, 0.75, 0.5, 0.875, 0.625];
    GLOBAL_INPUT_SCALE * FACTORS[(t + 2 * rank) % FACTORS.len()]
}

impl RoundInputs {
    /// Tokens uniform in [-2, 2) and weights uniform in [0, 1), drawn from `seed`.
    pub fn with_random_values(hidden: usize, topk_ids: Vec<Array2<i32>>, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let tokens = topk_ids
            .iter()
            .map(|ids| {
                Array2::from_shape_simple_fn((ids.nrows(), hidden), || {
                    bf16::from_f32(rng.range(-2.0, 2.0))
                })
            })
            .collect();
        let weights: Vec<Array2<f32>> = topk_ids
            .iter()
            .map(|ids| Array2::from_shape_simple_fn(ids.dim(), || rng.unit()))
            .collect();
        let weights_bf16 = weights.iter().map(|w| w.mapv(bf16::from_f32)).collect();
        let input_scales = topk_ids
            .iter()
            .enumerate()
            .map(|(r, ids)| Array1::from_shape_fn(ids.nrows(), |t| token_input_scale(r, t)))
            .collect();
        RoundInputs {
            tokens,
            topk_ids,
            weights,
            weights_bf16,
            input_scales,
        }
    }

    /// Ranks the inputs are for.
    pub fn n_ranks(&self) -> usize {
        self.tokens.len()
    }

    /// Rank 0's inputs on each of `n_ranks` ranks.
    pub fn replicated(&self, n_ranks: usize) -> Self {
        RoundInputs {
            tokens: vec![self.tokens[0].clone(); n_ranks],
            topk_ids: vec![self.topk_ids[0].clone(); n_ranks],
            weights: vec![self.weights[0].clone(); n_ranks],
            weights_bf16: vec![self.weights_bf16[0].clone(); n_ranks],
            input_scales: vec![self.input_scales[0].clone(); n_ranks],
        }
    }

    /// Rank `rank`'s dispatch input, with its input scales.
    pub fn dispatch_input(&self, rank: usize) -> DispatchInput<'_> {
        DispatchInput {
            tokens: self.tokens[rank].view(),
            topk_ids: self.topk_ids[rank].view(),
            input_scales: Some(self.input_scales[rank].view()),
        }
    }

    /// Every rank's dispatch input, in rank order (what the oracle takes).
    pub fn dispatch_inputs(&self) -> Vec<DispatchInput<'_>> {
        (0..self.n_ranks())
            .map(|r| self.dispatch_input(r))
            .collect()
    }

    /// Rank `rank`'s router weights of `kind` (`None` for [`WeightKind::None`]).
    pub fn router_weights(&self, rank: usize, kind: WeightKind) -> Option<RouterWeights<'_>> {
        match kind {
            WeightKind::None => None,
            WeightKind::F32 => Some(RouterWeights::F32(self.weights[rank].view())),
            WeightKind::Bf16 => Some(RouterWeights::Bf16(self.weights_bf16[rank].view())),
        }
    }

    /// Rank `rank`'s combine input: `expert_out` with weights of `kind`, no epilogue.
    pub fn combine_input<'a>(
        &'a self,
        rank: usize,
        expert_out: &'a Array2<bf16>,
        kind: WeightKind,
    ) -> CombineInput<'a> {
        CombineInput {
            expert_out: expert_out.view(),
            weights: self.router_weights(rank, kind),
            epilogue: None,
        }
    }

    /// (token, destination rank) pairs of each rank, as DeepEP counts traffic: (all, without
    /// the rank itself).
    pub fn rank_pairs(&self, cfg: &ep_core::EpConfig) -> Vec<(usize, usize)> {
        self.topk_ids
            .iter()
            .enumerate()
            .map(|(r, ids)| {
                ids.outer_iter().fold((0, 0), |(all, remote), row| {
                    let reached = cfg.ranks_reached(row.iter().copied());
                    (
                        all + reached.len(),
                        remote + reached.iter().filter(|&&p| p != r).count(),
                    )
                })
            })
            .collect()
    }

    /// Bytes each rank sends, counted as DeepEP does: each token once per destination rank it
    /// reaches (the own rank included), times `bytes_per_token`.
    pub fn deepep_bytes(&self, cfg: &ep_core::EpConfig, bytes_per_token: usize) -> Vec<usize> {
        self.rank_pairs(cfg)
            .into_iter()
            .map(|(all, _)| all * bytes_per_token)
            .collect()
    }
}

/// Which router weights combine gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightKind {
    /// Unreduced output `[T, top_k, hidden]`.
    None,
    /// Reduced with [`RouterWeights::F32`].
    F32,
    /// Reduced with [`RouterWeights::Bf16`] (the f32 weights rounded to bf16).
    Bf16,
}

/// The stand-in experts: expert `g` multiplies its decoded rows by `1 + (g % 8) / 8` and rounds
/// to bf16. Different per expert so that a row sent back to the wrong slot shows up, exact in
/// f32 so the result does not depend on evaluation order. They see only the dispatch output, so
/// NVFP4 rows are decoded with [`GLOBAL_INPUT_SCALE`] whatever their token's scale: a fixed
/// function of the received bytes, which is all a stand-in needs (backend and oracle combine the
/// same expert outputs; `nvfp4_source_scales` checks the decode with each row's own scale).
pub fn toy_experts(out: &DispatchOutput) -> Array2<bf16> {
    let decoded = out.decode_rows_with(GLOBAL_INPUT_SCALE);
    let mut y = Array2::<bf16>::zeros(decoded.dim());
    for g in 0..out.n_groups() {
        let scale = 1.0 + (out.expert_ids[g] % 8) as f32 / 8.0;
        for row in out.row_offsets[g] as usize..out.row_offsets[g + 1] as usize {
            for (o, x) in y.row_mut(row).iter_mut().zip(decoded.row(row)) {
                *o = bf16::from_f32(x * scale);
            }
        }
    }
    y
}

/// Identity experts: each row decoded and rounded back to bf16.
pub fn identity_experts(out: &DispatchOutput) -> Array2<bf16> {
    out.decode_rows_with(GLOBAL_INPUT_SCALE)
        .mapv(bf16::from_f32)
}
