//! The oracle: the contract computed directly, over all ranks at once, with no buffers, threads
//! or flags. Every backend is compared with it bit for bit. Keep it obviously correct rather than
//! fast: each output is built by the most literal reading of the contract (`docs/contract.md`).

use half::bf16;
use ndarray::{Array2, Array3, ArrayView2};

use crate::config::EpConfig;
use crate::epilogue::EpilogueSink;
use crate::error::{EpError, Result};
use crate::format::TokenFormat;
use crate::io::{CombineInput, CombineOutput, DispatchInput, DispatchOutput, RoutingHandle};
/// Fused SwiGLU: by definition, [`crate::swiglu::swiglu`].
pub use crate::swiglu::swiglu;
use crate::validate;

/// The first slot of token `t` that names expert `e`, if any.
fn first_slot(ids: &ArrayView2<'_, i32>, t: usize, e: usize) -> Option<usize> {
    (0..ids.ncols()).find(|&k| ids[[t, k]] == e as i32)
}

/// Dispatch for every rank. `inputs[r]` is rank `r`'s input.
pub fn dispatch(cfg: &EpConfig, inputs: &[DispatchInput<'_>]) -> Result<Vec<DispatchOutput>> {
    cfg.validate()?;
    check_rank_count(cfg, inputs.len())?;
    for (r, input) in inputs.iter().enumerate() {
        validate::dispatch_input(cfg, r, input)?;
    }
    let n_ranks = cfg.n_ranks();
    let n_local = cfg.n_local_experts();
    let n_groups = cfg.n_groups();
    let fmt = cfg.format;
    let payload_bytes = fmt.payload_bytes(cfg.hidden);
    let scale_bytes = fmt.scale_bytes(cfg.hidden);
    let row_multiple = fmt.group_row_multiple();

    let mut outputs = Vec::with_capacity(n_ranks);
    for dest in 0..n_ranks {
        // Rows in order: group ascending, then source rank, then source token.
        let mut payloads: Vec<Vec<u8>> = Vec::new();
        let mut row_scales: Vec<Vec<u8>> = Vec::new();
        let mut src_info: Vec<[i32; 2]> = Vec::new();
        let mut row_offsets = vec![0u32];
        let mut src_offsets = Array2::<u32>::zeros((n_groups, n_ranks + 1));
        let encode = |input: &DispatchInput<'_>, t: usize| {
            // BF16 copies the row's bits; the quantized formats encode it widened to f32.
            let row: Vec<bf16> = input.tokens.row(t).to_vec();
            let mut payload = vec![0u8; payload_bytes];
            let mut scales = vec![0u8; scale_bytes];
            fmt.encode_bf16(&row, input.input_scale(t), &mut payload, &mut scales);
            (payload, scales)
        };
        for g in 0..n_groups {
            for (src, input) in inputs.iter().enumerate() {
                src_offsets[[g, src]] = src_info.len() as u32;
                if g < cfg.shared_groups() {
                    // The shared expert: the rank's own tokens (its share under skip_a2a).
                    if src == dest {
                        for t in cfg.shared_token_range(dest, input.n_tokens()) {
                            let (p, sc) = encode(input, t);
                            payloads.push(p);
                            row_scales.push(sc);
                            src_info.push([t as i32, -1]);
                        }
                    }
                    continue;
                }
                let expert = dest * n_local + g - cfg.shared_groups();
                if !cfg.routes_to(src, expert) {
                    continue;
                }
                for t in 0..input.n_tokens() {
                    if let Some(k) = first_slot(&input.topk_ids, t, expert) {
                        let (p, sc) = encode(input, t);
                        payloads.push(p);
                        row_scales.push(sc);
                        src_info.push([t as i32, k as i32]);
                    }
                }
            }
            src_offsets[[g, n_ranks]] = src_info.len() as u32;
            while !src_info.len().is_multiple_of(row_multiple) {
                payloads.push(vec![0u8; payload_bytes]);
                row_scales.push(vec![0u8; scale_bytes]);
                src_info.push([-1, -1]);
            }
            row_offsets.push(src_info.len() as u32);
        }

        let rows = payloads.len();
        let mut recv_scales = vec![0u8; fmt.output_scales_bytes(cfg.hidden, rows)];
        for (r, scales) in row_scales.iter().enumerate() {
            if src_info[r][0] >= 0 {
                fmt.place_scales(cfg.hidden, rows, r, scales, &mut recv_scales);
            }
        }
        let mut expert_ids: Vec<i32> = vec![-1; cfg.shared_groups()];
        expert_ids.extend(0..n_local as i32);
        outputs.push(DispatchOutput {
            handle: RoutingHandle {
                rank: dest,
                round: 0,
            },
            format: fmt,
            hidden: cfg.hidden,
            n_tokens: inputs[dest].n_tokens(),
            recv_tokens: Array2::from_shape_vec((rows, payload_bytes), payloads.concat())
                .expect("rows x payload"),
            recv_scales,
            row_offsets,
            expert_ids,
            src_info: Array2::from_shape_vec((rows, 2), src_info.concat()).expect("rows x 2"),
            src_offsets,
        });
    }
    Ok(outputs)
}

/// Combine for every rank. `dispatch_inputs` and `routing` are the inputs and outputs of the
/// matching [`dispatch`] call (the routing may come from any backend that matched it);
/// `inputs[r]` holds rank `r`'s expert outputs, in `routing[r]`'s row order, and weights.
pub fn combine(
    cfg: &EpConfig,
    dispatch_inputs: &[DispatchInput<'_>],
    routing: &[DispatchOutput],
    inputs: &[CombineInput<'_>],
) -> Result<Vec<CombineOutput>> {
    check_rank_count(cfg, dispatch_inputs.len())?;
    check_rank_count(cfg, routing.len())?;
    check_rank_count(cfg, inputs.len())?;
    for (r, input) in inputs.iter().enumerate() {
        validate::combine_input(
            cfg,
            r,
            routing[r].rows(),
            dispatch_inputs[r].n_tokens(),
            input,
            true,
        )?;
    }
    let n_local = cfg.n_local_experts();
    let (hidden, top_k) = (cfg.hidden, cfg.top_k);

    // returned[src][(t, k)] = (expert rank, row) that holds the output for token t's slot k.
    let mut returned: Vec<Array2<Option<(usize, usize)>>> = dispatch_inputs
        .iter()
        .map(|d| Array2::from_elem((d.n_tokens(), top_k), None))
        .collect();
    for (dest, out) in routing.iter().enumerate() {
        for row in 0..out.rows() {
            let (t, k) = (out.src_info[[row, 0]], out.src_info[[row, 1]]);
            if t < 0 || k < 0 {
                continue; // padding, or a shared-expert row (it stays on its rank)
            }
            let src = out.source_rank(row).expect("a real row has a source rank");
            returned[src][[t as usize, k as usize]] = Some((dest, row));
        }
    }

    let mut outputs = Vec::with_capacity(inputs.len());
    for (src, input) in inputs.iter().enumerate() {
        let ids = &dispatch_inputs[src].topk_ids;
        let n_tokens = dispatch_inputs[src].n_tokens();
        // The row holding token t's output for slot k: a duplicated expert's output sits at the
        // first slot that names it. Masked slots, and under skip_a2a other devices' experts, have
        // none.
        let output_row = |t: usize, k: usize| -> Option<&[bf16]> {
            let id = ids[[t, k]];
            if id < 0 || !cfg.routes_to(src, id as usize) {
                return None;
            }
            let k0 = first_slot(ids, t, id as usize).expect("slot k names it");
            let (dest, row) = returned[src][[t, k0]].unwrap_or_else(|| {
                panic!(
                    "oracle: no row for rank {src} token {t} slot {k0} (expert {id} on rank {})",
                    id as usize / n_local
                )
            });
            Some(expert_row(inputs, dest, row))
        };
        outputs.push(match &input.weights {
            Some(w) => {
                let shared = cfg.shared_token_range(src, n_tokens);
                let mut sink = EpilogueSink::new(input.epilogue, n_tokens, hidden);
                let mut row = vec![bf16::ZERO; hidden];
                for t in 0..n_tokens {
                    let mut acc = vec![0.0f32; hidden];
                    for k in 0..top_k {
                        if let Some(y) = output_row(t, k) {
                            let wk = w.get(t, k);
                            for (a, y) in acc.iter_mut().zip(y) {
                                // Product rounded, then sum rounded: no fused multiply-add.
                                let p = wk * y.to_f32();
                                *a += p;
                            }
                        }
                    }
                    if cfg.fused_shared_expert && shared.contains(&t) {
                        // Group 0 holds the shared expert's outputs, one row per token in order.
                        let r = routing[src].row_offsets[0] as usize + (t - shared.start);
                        for (a, y) in acc.iter_mut().zip(expert_row(inputs, src, r)) {
                            *a += y.to_f32();
                        }
                    }
                    for (o, a) in row.iter_mut().zip(&acc) {
                        *o = crate::numerics::round_bf16(*a);
                    }
                    sink.row(t, &row);
                }
                sink.finish()
            }
            None => {
                let mut out = Array3::<bf16>::zeros((n_tokens, top_k, hidden));
                for t in 0..n_tokens {
                    for k in 0..top_k {
                        if let Some(y) = output_row(t, k) {
                            for (o, y) in out.slice_mut(ndarray::s![t, k, ..]).iter_mut().zip(y) {
                                *o = *y;
                            }
                        }
                    }
                }
                CombineOutput::Unreduced(out)
            }
        });
    }
    Ok(outputs)
}

fn expert_row<'a>(inputs: &'a [CombineInput<'_>], dest: usize, row: usize) -> &'a [bf16] {
    let view = inputs[dest].expert_out;
    let hidden = view.ncols();
    let all = view.to_slice().expect("validated standard layout");
    &all[row * hidden..(row + 1) * hidden]
}

fn check_rank_count(cfg: &EpConfig, got: usize) -> Result<()> {
    if got != cfg.n_ranks() {
        return Err(EpError::Shape {
            rank: 0,
            what: "per-rank inputs",
            expected: vec![cfg.n_ranks()],
            got: vec![got],
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! A round small enough to work out by hand: 2 ranks, 4 experts (2 per rank), top-2.
    use super::*;
    use crate::io::RouterWeights;
    use ndarray::array;

    fn tokens(values: &[f32]) -> Array2<bf16> {
        Array2::from_shape_fn((values.len(), 8), |(t, c)| {
            bf16::from_f32(values[t] + c as f32)
        })
    }

    #[test]
    fn hand_worked_round() {
        let cfg = EpConfig::new(8, 2, 4, 4, 2);
        let x0 = tokens(&[10.0, 20.0, 30.0]);
        let x1 = tokens(&[40.0]);
        // rank 0: t0 -> experts 1, 2; t1 -> expert 2 twice; t2 -> masked, expert 0.
        let ids0 = array![[1, 2], [2, 2], [-1, 0]];
        // rank 1: t0 -> experts 3, 0.
        let ids1 = array![[3, 0]];
        let inputs = [
            DispatchInput::new(x0.view(), ids0.view()),
            DispatchInput::new(x1.view(), ids1.view()),
        ];
        let out = dispatch(&cfg, &inputs).unwrap();

        // Rank 0 holds experts 0 and 1. Expert 0: rank 0's t2 (slot 1), then rank 1's t0 (slot 1).
        assert_eq!(out[0].row_offsets, vec![0, 2, 3]);
        assert_eq!(out[0].src_info, array![[2, 1], [0, 1], [0, 0]]);
        assert_eq!(out[0].src_offsets, array![[0, 1, 2], [2, 3, 3]]);
        assert_eq!(out[0].source_rank(1), Some(1));
        // Rank 1 holds experts 2 and 3. t1 names expert 2 twice: one row, first slot.
        assert_eq!(out[1].row_offsets, vec![0, 2, 3]);
        assert_eq!(out[1].src_info, array![[0, 1], [1, 0], [0, 0]]);
        let rows1 = out[1].tokens_bf16().unwrap();
        assert_eq!(rows1[[1, 3]].to_f32(), 23.0); // rank 0's t1, column 3
        assert_eq!(rows1[[2, 0]].to_f32(), 40.0); // rank 1's t0

        // Experts return 2x their input; weights make each output easy to predict.
        let y: Vec<Array2<bf16>> = out
            .iter()
            .map(|d| {
                d.tokens_bf16()
                    .unwrap()
                    .mapv(|v| bf16::from_f32(v.to_f32() * 2.0))
            })
            .collect();
        let w0 = array![[0.25f32, 0.5], [0.5, 0.25], [100.0, 1.0]];
        let w1 = array![[1.0f32, 1.0]];
        let cin = [
            CombineInput::weighted(y[0].view(), RouterWeights::F32(w0.view())),
            CombineInput::weighted(y[1].view(), RouterWeights::F32(w1.view())),
        ];
        let got = combine(&cfg, &inputs, &out, &cin).unwrap();
        let r0 = got[0].reduced().unwrap();
        // t0: 0.25 * 2x + 0.5 * 2x = 1.5x; t1: the duplicate counts with both weights: 1.5x;
        // t2: the masked slot's weight (100) is ignored: 1.0 * 2x.
        assert_eq!(r0[[0, 1]].to_f32(), 1.5 * 11.0);
        assert_eq!(r0[[1, 0]].to_f32(), 1.5 * 20.0);
        assert_eq!(r0[[2, 2]].to_f32(), 2.0 * 32.0);
        assert_eq!(got[1].reduced().unwrap()[[0, 0]].to_f32(), 4.0 * 40.0);

        // Unreduced: the duplicate's output is in both of its slots, the masked slot is zero.
        let cin = [
            CombineInput::unreduced(y[0].view()),
            CombineInput::unreduced(y[1].view()),
        ];
        let got = combine(&cfg, &inputs, &out, &cin).unwrap();
        let CombineOutput::Unreduced(u) = &got[0] else {
            panic!("unreduced expected")
        };
        assert_eq!(u[[1, 0, 0]].to_f32(), 40.0);
        assert_eq!(u[[1, 1, 0]].to_f32(), 40.0);
        assert_eq!(u[[2, 0, 5]].to_f32(), 0.0);
        assert_eq!(u[[2, 1, 5]].to_f32(), 70.0);
    }

    #[test]
    fn bad_input_is_rejected_before_any_output() {
        let cfg = EpConfig::new(8, 2, 4, 4, 2);
        let x = tokens(&[1.0]);
        let good = array![[0, 1]];
        let bad = array![[0, 4]];
        let inputs = [
            DispatchInput::new(x.view(), good.view()),
            DispatchInput::new(x.view(), bad.view()),
        ];
        assert!(matches!(
            dispatch(&cfg, &inputs),
            Err(EpError::ExpertIdOutOfRange {
                rank: 1,
                token: 0,
                slot: 1,
                id: 4,
                ..
            })
        ));
    }

    #[test]
    fn bf16_rounding_is_nearest_even() {
        // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties go to even (1).
        assert_eq!(bf16::from_f32(1.0 + 2f32.powi(-8)).to_f32(), 1.0);
        // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6.
        assert_eq!(
            bf16::from_f32(1.0 + 3.0 * 2f32.powi(-8)).to_f32(),
            1.0 + 2f32.powi(-6)
        );
    }
}
