//! The optional modes, alone and in the combinations serving stacks use: the fused shared
//! expert, skip_a2a, combine epilogues and fused SwiGLU; and the combinations that are refused.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ep_core::epilogue::EPILOGUE_CHUNK;
use ep_core::{
    bf16, oracle, CombineInput, ConfigError, EpBackend, EpComm, EpConfig, EpError, Epilogue,
    Format, GateUp, HostIo, RouterWeights, SwigluClamp, SwigluOptions,
};
use ndarray::Array2;

use super::{err, good_inputs, position_of, CaseResult, Ctx};
use crate::fixture::Fixture;
use crate::rng::Rng;
use crate::round::{run_and_check, Calls, RankRound, RoundOptions};
use crate::scenario::{RoundInputs, WeightKind};

fn round<B: EpBackend>(
    b: &B,
    cfg: &EpConfig,
    inputs: &RoundInputs,
    opts: &RoundOptions,
) -> Result<Vec<RankRound>, String> {
    let mut comms = b.init_uniform(cfg).map_err(err)?;
    run_and_check(&mut comms, inputs, opts)
}

fn fixture_inputs(name: &str, format: Format) -> Result<(EpConfig, RoundInputs), String> {
    let fx = Fixture::load(name)?;
    Ok((fx.config(format), fx.inputs()))
}

/// Every rank holds the same tokens: how skip_a2a is used (tensor-parallel attention before it).
fn replicated_inputs(cfg: &EpConfig, n_tokens: usize, seed: u64) -> RoundInputs {
    let mut rng = Rng::new(seed);
    let spec = crate::routing::RoutingSpec {
        masked: 0.05,
        duplicates: 0.1,
        ..Default::default()
    };
    let ids = spec.generate(&mut rng, n_tokens, cfg.top_k, cfg.n_experts, cfg.n_ranks());
    RoundInputs::with_random_values(cfg.hidden, vec![ids], seed).replicated(cfg.n_ranks())
}

/// The shared expert with FP8 dispatch and router weights (DeepSeek-style serving), fused and split.
pub fn shared_expert_fp8_weighted<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let (cfg, inputs) = fixture_inputs("uniform", Format::Fp8)?;
    let cfg = cfg.with_shared_expert();
    for opts in [
        RoundOptions::new(Calls::Fused, WeightKind::F32),
        RoundOptions::new(Calls::Split, WeightKind::Bf16),
    ] {
        let got = round(b, &cfg, &inputs, &opts)?;
        for g in &got {
            let (r, d) = (g.rank, &g.dispatch);
            let shared = (d.row_offsets[0]..d.src_offsets[[0, d.n_ranks()]]).len();
            if d.expert_ids[0] != -1
                || shared != inputs.tokens[r].nrows()
                || d.source_rank(0) != Some(r).filter(|_| shared > 0)
            {
                return Err(format!(
                    "rank {r}: group 0 is not this rank's {} tokens",
                    inputs.tokens[r].nrows()
                ));
            }
        }
    }
    Ok(())
}

/// The shared expert in every format (two nodes, so the shared rows mix with remote ones).
pub fn shared_expert_every_format<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    for &format in Format::ALL {
        let (cfg, inputs) = fixture_inputs("two_nodes_x4", format)?;
        round(
            b,
            &cfg.with_shared_expert(),
            &inputs,
            &RoundOptions::new(Calls::Fused, WeightKind::F32),
        )
        .map_err(|e| format!("{format}: {e}"))?;
    }
    Ok(())
}

/// skip_a2a: tokens reach only their own device's experts; weighted and unreduced, fused and
/// split, in every format.
pub fn skip_a2a<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    for &format in Format::ALL {
        let cfg = EpConfig::new(128, 4, 16, 24, 4)
            .with_skip_a2a(4)
            .with_format(format);
        let inputs = replicated_inputs(&cfg, 24, 31);
        for (calls, weights) in [
            (Calls::Fused, WeightKind::F32),
            (Calls::Split, WeightKind::None),
        ] {
            let got = round(b, &cfg, &inputs, &RoundOptions::new(calls, weights))
                .map_err(|e| format!("{format}: {e}"))?;
            for g in &got {
                let (r, d) = (g.rank, &g.dispatch);
                if (0..d.rows())
                    .any(|row| d.src_info[[row, 0]] >= 0 && d.source_rank(row) != Some(r))
                {
                    return Err(format!(
                        "{format}: rank {r} received a row from another rank under skip_a2a"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// skip_a2a with the shared expert split across the all-reduce ranks, for two all-reduce sizes.
pub fn skip_a2a_shared_expert<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    for (w, format) in [(4, Format::Bf16), (2, Format::Nvfp4)] {
        let cfg = EpConfig::new(128, 4, 16, 23, 4)
            .with_skip_a2a(w)
            .with_shared_expert()
            .with_format(format);
        let inputs = replicated_inputs(&cfg, 23, 37);
        let got = round(
            b,
            &cfg,
            &inputs,
            &RoundOptions::new(Calls::Fused, WeightKind::F32),
        )
        .map_err(|e| format!("W={w} {format}: {e}"))?;
        for g in &got {
            let (r, d) = (g.rank, &g.dispatch);
            let want = cfg.shared_token_range(r, 23);
            let first = d.src_info[[d.row_offsets[0] as usize, 0]];
            if d.src_offsets[[0, d.n_ranks()]] as usize - d.row_offsets[0] as usize != want.len()
                || (!want.is_empty() && first != want.start as i32)
            {
                return Err(format!(
                    "W={w}: rank {r}'s shared rows are not tokens {want:?}"
                ));
            }
        }
    }
    Ok(())
}

/// The built-in epilogues (residual, scale, quantize to FP8), also after a shared expert.
pub fn epilogues<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let (cfg, inputs) = fixture_inputs("ranks_uneven", Format::Bf16)?;
    let mut rng = Rng::new(41);
    let residuals: Vec<Epilogue> = inputs
        .tokens
        .iter()
        .map(|t| {
            Epilogue::AddResidual(Arc::new(Array2::from_shape_simple_fn(t.dim(), || {
                bf16::from_f32(rng.range(-4.0, 4.0))
            })))
        })
        .collect();
    let n = cfg.n_ranks();
    for (what, eps, cfg) in [
        ("residual", residuals, cfg.clone()),
        ("scale", vec![Epilogue::Scale(0.375); n], cfg.clone()),
        ("quantize-fp8", vec![Epilogue::QuantizeFp8; n], cfg.clone()),
        (
            "shared expert + fp8 dispatch + quantize-fp8",
            vec![Epilogue::QuantizeFp8; n],
            cfg.clone().with_shared_expert().with_format(Format::Fp8),
        ),
    ] {
        let opts = RoundOptions::new(Calls::Split, WeightKind::F32).with_epilogues(eps);
        let got = round(b, &cfg, &inputs, &opts).map_err(|e| format!("{what}: {e}"))?;
        let first = got.first().map(|g| &g.combine);
        if what.contains("fp8")
            && first.is_some_and(|c| !matches!(c, ep_core::CombineOutput::Fp8 { .. }))
        {
            return Err(format!("{what}: expected an FP8 output"));
        }
    }
    Ok(())
}

/// A host closure as epilogue (simulator only): it sees every chunk of every token exactly once,
/// with the values a plain weighted combine stores.
pub fn host_closure_epilogue<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    let (cfg, inputs) = fixture_inputs("masked_10pct", Format::Bf16)?;
    let plain = round(
        b,
        &cfg,
        &inputs,
        &RoundOptions::new(Calls::Fused, WeightKind::F32),
    )?;
    type Seen = Mutex<BTreeMap<(usize, usize, usize), Vec<bf16>>>;
    let seen: Arc<Seen> = Arc::default();
    let eps = (0..cfg.n_ranks())
        .map(|r| {
            let seen = Arc::clone(&seen);
            Epilogue::Host(Arc::new(move |t: usize, c: usize, v: &[bf16]| {
                let old = seen.lock().unwrap().insert((r, t, c), v.to_vec());
                assert!(old.is_none(), "chunk ({r}, {t}, {c}) delivered twice");
            }))
        })
        .collect();
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    let opts = RoundOptions::new(Calls::Fused, WeightKind::F32).with_epilogues(eps);
    let got = crate::round::all_ok(crate::round::run_round(&mut comms, &inputs, &opts))?;
    let seen = seen.lock().unwrap();
    for (g, p) in got.iter().zip(&plain) {
        let r = g.rank;
        if !matches!(g.combine, ep_core::CombineOutput::Consumed) {
            return Err("a host epilogue's combine must store nothing".into());
        }
        let want = p.combine.reduced().ok_or("plain combine must be reduced")?;
        for t in 0..want.nrows() {
            for c in (0..cfg.hidden).step_by(EPILOGUE_CHUNK) {
                let chunk = seen
                    .get(&(r, t, c))
                    .ok_or(format!("rank {r} token {t} column {c}: no chunk"))?;
                let expect = want.row(t);
                let expect = &expect.as_slice().unwrap()[c..(c + EPILOGUE_CHUNK).min(cfg.hidden)];
                if chunk
                    .iter()
                    .zip(expect)
                    .any(|(a, b)| a.to_bits() != b.to_bits())
                    || chunk.len() != expect.len()
                {
                    return Err(format!(
                        "rank {r} token {t} column {c}: chunk differs from the stored output"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Fused SwiGLU into every format, both gate/up layouts, plain and clamped: bit-exact against
/// the oracle, padding rows and rows past the last group zero, and checked against SwiGLU
/// computed independently of the oracle (`check_swiglu_independently`), so a backend that
/// reuses the oracle (the simulator) is checked too.
pub fn swiglu_every_format<B: EpBackend>(b: &B, _: &Ctx) -> CaseResult {
    // NVFP4 dispatch pads every group to 128 rows, so padding rows are plentiful.
    let (cfg, inputs) = fixture_inputs("skewed", Format::Nvfp4)?;
    let cfg = cfg.with_shared_expert();
    let got = round(
        b,
        &cfg,
        &inputs,
        &RoundOptions::new(Calls::Fused, WeightKind::F32),
    )?;
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    let dispatched: Vec<_> = super::dispatch_all(&mut comms, &inputs)?;
    for (d, g) in dispatched.iter().zip(&got) {
        if d.bit_diff(&g.dispatch).is_some() {
            return Err(format!(
                "rank {}: a second world dispatched differently",
                g.rank
            ));
        }
    }
    let width = 128;
    for (c, d) in comms.iter_mut().zip(&dispatched) {
        let r = c.rank();
        // Garbage of each rank's own, whichever process holds it.
        let mut rng = Rng::new(43 + r as u64);
        // Capacity rows past the last group, and garbage everywhere (padding rows included).
        let rows = d.rows() + 5;
        let x = Array2::from_shape_simple_fn((rows, 2 * width), || {
            bf16::from_f32(rng.range(-6.0, 6.0))
        });
        for &format in Format::ALL {
            for layout in [GateUp::Split, GateUp::Interleaved] {
                for clamp in [
                    None,
                    Some(SwigluClamp {
                        alpha: 1.702,
                        limit: 3.0,
                    }),
                ] {
                    let opts = SwigluOptions {
                        layout,
                        clamp,
                        format,
                        input_scale: 448.0,
                    };
                    let what = format!("rank {r} {format} {layout:?} clamp {clamp:?}");
                    let got = c
                        .swiglu(d, x.view(), &opts)
                        .map_err(|e| format!("{what}: {e}"))?;
                    let want = oracle::swiglu(r, d, x.view(), &opts).map_err(err)?;
                    if let Some(diff) = got.bit_diff(&want) {
                        return Err(format!("{what}: differs from the oracle: {diff}"));
                    }
                    let n = d.n_ranks();
                    let live = |row: usize| {
                        (0..d.n_groups()).any(|g| {
                            (d.src_offsets[[g, 0]] as usize..d.src_offsets[[g, n]] as usize)
                                .contains(&row)
                        })
                    };
                    if let Some(row) = (0..rows)
                        .find(|&row| !live(row) && got.payload.row(row).iter().any(|&v| v != 0))
                    {
                        return Err(format!("{what}: padding row {row} is not zero"));
                    }
                    check_swiglu_independently(d, &x, &got, &opts)
                        .map_err(|e| format!("{what}: {e}"))?;
                }
            }
        }
    }
    Ok(())
}

/// SwiGLU computed here from the contract's words, not through `ep_core::swiglu`: which rows
/// are live from `src_info` (not the group offsets), gate and up by layout, the activation in f32
/// with only `numerics::exp` shared (it is the definition of `exp`). BF16 output must equal it
/// bit for bit; every format, decoded, must be within its quantization step of the f64 value.
fn check_swiglu_independently(
    routing: &ep_core::DispatchOutput,
    x: &Array2<bf16>,
    got: &ep_core::SwigluOutput,
    opts: &SwigluOptions,
) -> CaseResult {
    use ep_core::format::TokenFormat;
    use ep_core::numerics::exp;
    let (w, fmt) = (got.width, opts.format);
    let rows = got.payload.nrows();
    let mut row_scales = vec![0u8; fmt.scale_bytes(w)];
    let mut decoded = vec![0f32; w];
    for row in (0..routing.rows()).filter(|&r| routing.src_info[[r, 0]] >= 0) {
        let (gate, up): (Vec<f32>, Vec<f32>) = (0..w)
            .map(|c| match opts.layout {
                GateUp::Split => (x[[row, c]].to_f32(), x[[row, w + c]].to_f32()),
                GateUp::Interleaved => (x[[row, 2 * c]].to_f32(), x[[row, 2 * c + 1]].to_f32()),
            })
            .unzip();
        let h32: Vec<f32> = gate
            .iter()
            .zip(&up)
            .map(|(&g, &u)| match opts.clamp {
                None => g / (1.0 + exp(-g)) * u,
                Some(SwigluClamp { alpha, limit }) => {
                    let (g, u) = (g.min(limit), u.clamp(-limit, limit));
                    ((u + 1.0) * g) * (1.0 / (1.0 + exp(-(alpha * g))))
                }
            })
            .collect();
        let h64: Vec<f64> = gate
            .iter()
            .zip(&up)
            .map(|(&g, &u)| {
                let (g, u) = (g as f64, u as f64);
                match opts.clamp {
                    None => g / (1.0 + (-g).exp()) * u,
                    Some(SwigluClamp { alpha, limit }) => {
                        let (g, u) = (g.min(limit as f64), u.clamp(-limit as f64, limit as f64));
                        (u + 1.0) * g / (1.0 + (-(alpha as f64) * g).exp())
                    }
                }
            })
            .collect();
        let payload = got.payload.row(row);
        let payload = payload.as_slice().ok_or("payload rows are contiguous")?;
        if fmt == Format::Bf16 {
            for (c, h) in h32.iter().enumerate() {
                let have = u16::from_le_bytes([payload[2 * c], payload[2 * c + 1]]);
                if have != bf16::from_f32(*h).to_bits() {
                    return Err(format!(
                        "row {row} col {c}: {have:#06x}, computed here {:#06x}",
                        bf16::from_f32(*h).to_bits()
                    ));
                }
            }
        }
        fmt.gather_scales(w, rows, row, &got.scales, &mut row_scales);
        fmt.decode(payload, &row_scales, opts.input_scale, &mut decoded);
        for (block, (have, want)) in decoded
            .chunks(fmt.block())
            .zip(h64.chunks(fmt.block()))
            .enumerate()
        {
            // NVFP4's scales saturate at e4m3's 448: no value decodes past 6 * 448 / input_scale.
            let top = match fmt {
                Format::Nvfp4 => 6.0 * 448.0 / opts.input_scale as f64,
                _ => f64::INFINITY,
            };
            let amax = want.iter().fold(0f64, |m, v| m.max(v.abs())).min(top);
            for (i, (&have, &want)) in have.iter().zip(want).enumerate() {
                let want = want.clamp(-top, top);
                // Half a step of the format's grid at this value or block, with room for the
                // f32 activation's own rounding.
                let tol = match fmt {
                    Format::Bf16 => want.abs() * 2f64.powi(-8),
                    Format::Fp8 => want.abs() * 2f64.powi(-4) + amax * 2f64.powi(-12),
                    Format::Mxfp4 => amax * 0.3,
                    _ => amax * 0.2,
                } + 1e-5;
                if (have as f64 - want).abs() > tol {
                    let c = block * fmt.block() + i;
                    return Err(format!(
                        "row {row} col {c}: decoded {have}, f64 SwiGLU {want} (within {tol})"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Combinations that are not allowed: each a typed error that says which and why, nothing
/// written, the world still usable.
pub fn combinations_not_allowed<B: EpBackend>(b: &B, cx: &Ctx) -> CaseResult {
    // skip_a2a across nodes: refused at init.
    let cfg = EpConfig::new(128, 4, 16, 8, 2)
        .with_nodes(2)
        .with_skip_a2a(2);
    match b.init_uniform(&cfg) {
        Err(EpError::Config(ConfigError::Incompatible { what, .. }))
            if what.contains("skip_a2a") => {}
        Err(e) => return Err(format!("skip_a2a across nodes: wrong error: {e}")),
        Ok(_) => return Err("skip_a2a across nodes was accepted".into()),
    }
    let cfg = super::small_config().with_shared_expert();
    let inputs = good_inputs(&cfg, 45);
    let mut comms = b.init_uniform(&cfg).map_err(err)?;
    let dispatched: Vec<_> = super::dispatch_all(&mut comms, &inputs)?;
    let outs: Vec<_> = dispatched
        .iter()
        .map(crate::scenario::toy_experts)
        .collect();
    // Rank 0's own memory: its peers' combine counts hold its poison (a rejected call tells the
    // ranks that would wait for it), which its good combine, issued first, replaces.
    let rank0 = position_of(&dispatched, 0);
    super::rank0_writes_nothing(
        &mut comms,
        cx,
        "a refused combine changed symmetric memory",
        |c| {
            let i = rank0.expect("called where rank 0 is held");
            refused_combinations(b, c, &dispatched[i], &outs[i], &inputs.weights[0])
        },
    )?;
    super::bad_input::combine_resumed(&mut comms, cx, &cfg, &inputs, dispatched, &outs, 0, false)
}

/// Rank 0's combines that must be refused, each with an error that names the combination.
fn refused_combinations<B: EpBackend>(
    b: &B,
    c: &mut B::Comm,
    dispatched: &ep_core::DispatchOutput,
    out: &Array2<bf16>,
    weights: &Array2<f32>,
) -> CaseResult {
    let quantize = Epilogue::QuantizeFp8; // hidden is 32 here
    let wrong_kind = if b.host_closures() {
        Epilogue::Device(ep_core::DeviceEpilogue {
            name: "noop".into(),
            source: String::new(),
        })
    } else {
        Epilogue::Host(Arc::new(|_: usize, _: usize, _: &[bf16]| {}))
    };
    let weighted = CombineInput::weighted(out.view(), RouterWeights::F32(weights.view()));
    let cases = [
        (
            "the fused shared expert without router weights",
            CombineInput::unreduced(out.view()),
        ),
        (
            "an epilogue without router weights",
            CombineInput::unreduced(out.view()).with_epilogue(&quantize),
        ),
        (
            "the quantize-to-FP8 epilogue with hidden not a multiple of 128",
            weighted.with_epilogue(&quantize),
        ),
        ("on this backend", weighted.with_epilogue(&wrong_kind)),
    ];
    for (what, input) in &cases {
        match c.host_combine_async(dispatched, input) {
            Err(e @ EpError::Incompatible { .. })
                if e.to_string().contains(what) && e.to_string().contains(": ") => {}
            Err(e) => return Err(format!("{what}: wrong error: {e}")),
            Ok(_) => return Err(format!("{what}: accepted")),
        }
    }
    Ok(())
}

/// Values whose f32 sums depend on their order at bf16 precision: sums land on the bf16 tie
/// 1 + 2^-8, where terms of half an f32 ulp (2^-24) decide the rounding, so a backend that sums
/// in another order, or adds the shared expert earlier, gives other bits.
const ORDER_SENSITIVE: [f32; 8] = [
    1.0,
    0.003_906_25,   // 2^-8: half a bf16 ulp at 1
    5.960_464_5e-8, // 2^-24: half an f32 ulp at 1
    5.960_464_5e-8,
    1.788_139_3e-7, // 3 * 2^-24
    -5.960_464_5e-8,
    1.0,
    0.003_906_25,
];

fn order_value(rank: usize, token: usize, slot: i32, col: usize) -> f32 {
    let mut h = (rank as u64) << 48 ^ (token as u64) << 24 ^ ((slot + 1) as u64) << 16 ^ col as u64;
    h = h.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    ORDER_SENSITIVE[(h >> 59) as usize % ORDER_SENSITIVE.len()]
}

/// Experts whose output for (source rank, token, slot) is an order-sensitive value.
fn order_experts(d: &ep_core::DispatchOutput) -> Array2<bf16> {
    Array2::from_shape_fn((d.rows(), d.hidden), |(row, col)| {
        let (t, k) = (d.src_info[[row, 0]], d.src_info[[row, 1]]);
        match d.source_rank(row) {
            Some(src) if t >= 0 => bf16::from_f32(order_value(src, t as usize, k, col)),
            _ => bf16::ZERO,
        }
    })
}

/// The combine sum is `acc = 0; acc += w[k] * y[k]` in ascending k, shared expert last, rounded
/// once. Crafted values make any other order visible; the case checks that it would be.
pub fn summation_order<B: EpBackend>(b: &B, cx: &Ctx) -> CaseResult {
    let cfg = EpConfig::new(128, 6, 8, 16, 2).with_shared_expert();
    let mut inputs = good_inputs(&cfg, 47);
    for w in inputs.weights.iter_mut() {
        w.fill(1.0);
    }
    let opts = RoundOptions {
        experts: order_experts,
        ..RoundOptions::new(Calls::Fused, WeightKind::F32)
    };
    let got = round(b, &cfg, &inputs, &opts)?;
    // Teeth: the contract's order against two others, from the same expert values.
    let (mut differs_reversed, mut differs_shared_first) = (0, 0);
    for g in &got {
        let r = g.rank;
        let out = g.combine.reduced().ok_or("reduced output expected")?;
        let ids = &inputs.topk_ids[r];
        for t in 0..ids.nrows() {
            for col in 0..cfg.hidden {
                let ys: Vec<f32> = (0..cfg.top_k)
                    .filter(|&k| ids[[t, k]] >= 0)
                    .map(|k| {
                        let k0 = (0..k).find(|&j| ids[[t, j]] == ids[[t, k]]).unwrap_or(k);
                        order_value(r, t, k0 as i32, col)
                    })
                    .collect();
                let shared = order_value(r, t, -1, col);
                let sum =
                    |v: &mut dyn Iterator<Item = f32>| bf16::from_f32(v.fold(0.0f32, |a, y| a + y));
                let contract = sum(&mut ys.iter().copied().chain([shared]));
                if contract.to_bits() != out[[t, col]].to_bits() {
                    return Err(format!("rank {r} token {t} column {col}: {} but the contract's order gives {contract}", out[[t, col]]));
                }
                differs_reversed +=
                    usize::from(sum(&mut ys.iter().rev().copied().chain([shared])) != contract);
                differs_shared_first += usize::from(
                    sum(&mut [shared].into_iter().chain(ys.iter().copied())) != contract,
                );
            }
        }
    }
    let differs_reversed = cx.total("elements the reversed order changes", differs_reversed)?;
    let differs_shared_first = cx.total(
        "elements the shared-first order changes",
        differs_shared_first,
    )?;
    if differs_reversed == 0 || differs_shared_first == 0 {
        return Err(format!(
            "the crafted values do not expose the order ({differs_reversed} / {differs_shared_first} elements differ)"
        ));
    }
    Ok(())
}
