//! The rules the contract states bit for bit (docs/contract.md), each checked against the bits
//! the contract names, not only against the oracle: a backend and an oracle that agreed on
//! another rule would fail here. The combine sum starts from +0; a NaN in a quantized block is a
//! fixed scale pattern with zero elements; a NaN in the combined output is `0x7FC0`; NVFP4
//! decodes `(f32(q) * f32(sf)) / input_scale`, left to right, with the source token's scale.

use ep_core::format::TokenFormat;
use ep_core::{
    bf16, oracle, CombineInput, DispatchOutput, EpBackend, EpComm, EpConfig, Format, HostIo,
    RouterWeights,
};
use ndarray::Array2;

use super::*;

/// Combine, on every rank held here, what `experts` gives for its dispatch output, with the
/// inputs' f32 weights, checked bit for bit against the oracle's combine of the same expert
/// outputs (for the ranks held elsewhere, of the oracle's dispatch); each rank's combined rows.
fn weighted_combine<C: EpComm>(
    comms: &mut [C],
    cfg: &EpConfig,
    inputs: &RoundInputs,
    dispatched: &[DispatchOutput],
    experts: impl Fn(&DispatchOutput) -> Array2<bf16>,
) -> Result<Vec<(usize, Array2<bf16>)>, String> {
    fn weighted<'a>(out: &'a Array2<bf16>, w: &'a Array2<f32>) -> CombineInput<'a> {
        CombineInput::weighted(out.view(), RouterWeights::F32(w.view()))
    }
    let outs: Vec<_> = dispatched.iter().map(&experts).collect();
    let got = ep_core::on_every_rank(comms, |c| {
        let r = c.rank();
        let i = position_of(dispatched, r).expect("every rank held here dispatched");
        c.host_combine(&dispatched[i], &weighted(&outs[i], &inputs.weights[r]))
    })
    .into_iter()
    .collect::<Result<Vec<_>, _>>()
    .map_err(err)?;
    let world = if dispatched.len() == cfg.n_ranks() {
        dispatched.to_vec()
    } else {
        let mut world = oracle::dispatch(cfg, &inputs.dispatch_inputs()).map_err(err)?;
        for d in dispatched {
            world[d.handle.rank] = d.clone();
        }
        world
    };
    let world_outs: Vec<_> = world.iter().map(&experts).collect();
    let plain: Vec<_> = (0..inputs.n_ranks())
        .map(|r| weighted(&world_outs[r], &inputs.weights[r]))
        .collect();
    let want = oracle::combine(cfg, &inputs.dispatch_inputs(), &world, &plain).map_err(err)?;
    got.iter()
        .zip(dispatched)
        .map(|(g, d)| {
            let r = d.handle.rank;
            if let Some(d) = g.bit_diff(&want[r]) {
                return Err(format!("rank {r}: combine differs from the oracle: {d}"));
            }
            let out = g
                .reduced()
                .cloned()
                .ok_or_else(|| format!("rank {r}: a weighted combine must be reduced"))?;
            Ok((r, out))
        })
        .collect()
}

/// Expert outputs that are `value(col)` on every real row and zero on padding rows.
fn constant_experts(d: &DispatchOutput, value: impl Fn(usize) -> bf16) -> Array2<bf16> {
    Array2::from_shape_fn((d.rows(), d.hidden), |(row, col)| {
        if d.src_info[[row, 0]] >= 0 {
            value(col)
        } else {
            bf16::ZERO
        }
    })
}

/// The combine sum starts from +0: with every expert output -0 (and positive weights, so every
/// product is -0), every combined element is +0 (`0x0000`), with and without the fused shared
/// expert (added last, also -0). A sum started from the first product would give -0.
pub fn combine_sum_starts_from_positive_zero<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    for cfg in [small_config(), small_config().with_shared_expert()] {
        let inputs = good_inputs(&cfg, 61);
        let mut comms = b.init_uniform(&cfg).map_err(err)?;
        let dispatched = dispatch_all(&mut comms, &inputs)?;
        let combined = weighted_combine(&mut comms, &cfg, &inputs, &dispatched, |d| {
            constant_experts(d, |_| bf16::NEG_ZERO)
        })?;
        for (r, out) in &combined {
            if let Some(((t, c), v)) = out.indexed_iter().find(|(_, v)| v.to_bits() != 0) {
                return Err(format!(
                    "shared expert {}: rank {r} token {t} column {c} is {:#06x}, not +0",
                    cfg.fused_shared_expert,
                    v.to_bits()
                ));
            }
        }
    }
    Ok(())
}

/// NaN bit patterns. Dispatch: a quantized block holding a NaN or an infinity has the format's
/// NaN scale (FP8 f32 `0x7FC00000`, MXFP4 e8m0 `0xFF`, NVFP4 e4m3fn `0x7F`) and all-zero
/// elements; no other block has it. Combine: whatever NaN an expert output carries (signalling,
/// negative, with payload bits), a NaN combined element is the canonical `0x7FC0`.
pub fn nan_bit_patterns<B: EpBackend>(b: &B, cx: &Ctx) -> CaseResult {
    const HIDDEN: usize = 256;
    // (column, value) planted in token 0 and token 1 of rank 0.
    let planted = [(0usize, 3usize, bf16::NAN), (1, 130, bf16::INFINITY)];
    for format in [Format::Fp8, Format::Mxfp4, Format::Nvfp4] {
        let cfg = EpConfig::new(HIDDEN, 3, 8, 6, 2).with_format(format);
        let mut inputs = good_inputs(&cfg, 67);
        for &(t, c, v) in &planted {
            inputs.tokens[0][[t, c]] = v;
        }
        let got = fused_round(b, &cfg, &inputs).map_err(|e| format!("{format}: {e}"))?;
        let (block, scale_len) = (
            format.block(),
            format.scale_bytes(HIDDEN) / (HIDDEN / format.block()),
        );
        let nan_scale: &[u8] = match format {
            Format::Fp8 => &[0x00, 0x00, 0xC0, 0x7F],
            Format::Mxfp4 => &[0xFF],
            _ => &[0x7F],
        };
        let payload_per_block = format.payload_bytes(HIDDEN) / (HIDDEN / block);
        let mut seen = 0;
        for round in &got {
            let (r, d) = (round.rank, &round.dispatch);
            let mut scales = vec![0u8; format.scale_bytes(HIDDEN)];
            for row in (0..d.rows()).filter(|&row| d.src_info[[row, 0]] >= 0) {
                format.gather_scales(HIDDEN, d.rows(), row, &d.recv_scales, &mut scales);
                let token = d.src_info[[row, 0]] as usize;
                let from_rank0 = d.source_rank(row) == Some(0);
                for j in 0..HIDDEN / block {
                    let poisoned = from_rank0
                        && planted
                            .iter()
                            .any(|&(t, c, _)| t == token && c / block == j);
                    let scale = &scales[j * scale_len..(j + 1) * scale_len];
                    let elements = &d.recv_tokens.row(row).to_vec()
                        [j * payload_per_block..(j + 1) * payload_per_block];
                    if poisoned {
                        seen += 1;
                        if scale != nan_scale || elements.iter().any(|&e| e != 0) {
                            return Err(format!(
                                "{format}: rank {r} row {row} block {j}: scale {scale:02x?}, elements \
                                 {elements:02x?}; want scale {nan_scale:02x?} and zero elements"
                            ));
                        }
                    } else if scale == nan_scale {
                        return Err(format!(
                            "{format}: rank {r} row {row} block {j}: NaN scale in a finite block"
                        ));
                    }
                }
            }
        }
        if cx.total(&format!("{format}: planted blocks seen"), seen)? == 0 {
            return Err(format!("{format}: no planted block was delivered"));
        }
    }

    // Combine: expert outputs with NaNs of every kind in columns 0-3, ones elsewhere.
    let nans = [0x7F81u16, 0xFFC1, 0x7FFF, 0xFF80 | 0x0001];
    let cfg = small_config();
    let inputs = good_inputs(&cfg, 71);
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    let dispatched = dispatch_all(&mut comms, &inputs)?;
    let combined = weighted_combine(&mut comms, &cfg, &inputs, &dispatched, |d| {
        constant_experts(d, |c| {
            nans.get(c).map_or(bf16::ONE, |&bits| bf16::from_bits(bits))
        })
    })?;
    for &(r, ref out) in &combined {
        for t in 0..out.nrows() {
            let live = inputs.topk_ids[r].row(t).iter().any(|&e| e >= 0);
            for c in 0..nans.len() {
                let want = if live { 0x7FC0 } else { 0x0000 };
                if out[[t, c]].to_bits() != want {
                    return Err(format!(
                        "combine: rank {r} token {t} column {c} is {:#06x}, want {want:#06x}",
                        out[[t, c]].to_bits()
                    ));
                }
            }
        }
    }
    Ok(())
}

/// An e2m1 code as f32 (bit 3 the sign).
fn e2m1(code: u8) -> f32 {
    const MAGNITUDES: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    let m = MAGNITUDES[(code & 7) as usize];
    if code & 8 != 0 {
        -m
    } else {
        m
    }
}

/// An e4m3fn byte as f32 (bias 7, no infinities, `S.1111.111` NaN).
fn e4m3(byte: u8) -> f32 {
    let (sign, exp, man) = (byte >> 7, (byte >> 3) & 0xF, byte & 7);
    let v = if exp == 0xF && man == 7 {
        f32::NAN
    } else if exp == 0 {
        man as f32 / 8.0 * 2f32.powi(-6)
    } else {
        (1.0 + man as f32 / 8.0) * 2f32.powi(exp as i32 - 7)
    };
    if sign == 1 {
        -v
    } else {
        v
    }
}

/// NVFP4 decodes `(f32(q) * f32(sf)) / input_scale`, left to right in f32, with the input scale
/// of the row's source token. Tokens carry input scales that differ per token (so the wrong
/// token's scale shows) and make `q * (sf / input_scale)` differ in the last bit for some
/// elements (checked: the case has teeth). Decoded here from the bytes, and compared with the
/// format's decode and with `DispatchOutput::decode_rows_from`, which finds each row's source.
pub fn nvfp4_decode_order<B: EpBackend>(b: &B, cx: &Ctx) -> CaseResult {
    const HIDDEN: usize = 64;
    let cfg = EpConfig::new(HIDDEN, 2, 8, 16, 2).with_format(Format::Nvfp4);
    let mut inputs = good_inputs(&cfg, 73);
    // Scales whose reciprocals are inexact, spread so each token's differs.
    for (r, s) in inputs.input_scales.iter_mut().enumerate() {
        for (t, v) in s.iter_mut().enumerate() {
            *v = 1344.0 / (3.0 + (r * 16 + t) as f32 * 0.37);
        }
    }
    let got = fused_round(b, &cfg, &inputs)?;
    let fmt = Format::Nvfp4;
    let (mut elements, mut orders_differ) = (0usize, 0usize);
    let all_scales: Vec<_> = inputs.input_scales.iter().map(|s| s.view()).collect();
    for round in &got {
        let (r, d) = (round.rank, &round.dispatch);
        // What a user decodes with: every row with its source token's scale.
        let user = d.decode_rows_from(&all_scales);
        let mut scales = vec![0u8; fmt.scale_bytes(HIDDEN)];
        let mut decoded = vec![0f32; HIDDEN];
        for row in (0..d.rows()).filter(|&row| d.src_info[[row, 0]] >= 0) {
            let src = d.source_rank(row).ok_or("a real row has a source rank")?;
            let s = inputs.input_scales[src][d.src_info[[row, 0]] as usize];
            fmt.gather_scales(HIDDEN, d.rows(), row, &d.recv_scales, &mut scales);
            let payload = d.recv_tokens.row(row).to_vec();
            fmt.decode(&payload, &scales, s, &mut decoded);
            for (i, have) in decoded.iter().enumerate() {
                let q = e2m1((payload[i / 2] >> (4 * (i % 2))) & 0xF);
                let sf = e4m3(scales[i / 16]);
                let want = (q * sf) / s;
                elements += 1;
                orders_differ += usize::from((q * (sf / s)).to_bits() != want.to_bits());
                let users = user[[row, i]];
                if have.to_bits() != want.to_bits() || users.to_bits() != want.to_bits() {
                    return Err(format!(
                        "rank {r} row {row} element {i}: the format decodes {have}, \
                         DispatchOutput::decode_rows_from {users}, (q * sf) / s = {want} \
                         (q {q}, sf {sf}, s {s})"
                    ));
                }
            }
        }
    }
    let elements = cx.total("elements decoded", elements)?;
    if cx.total("elements whose order shows", orders_differ)? == 0 {
        return Err(format!(
            "no element of {elements} tells the two orders apart: the case has no teeth"
        ));
    }
    Ok(())
}
