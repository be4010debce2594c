//! `ep run --dump DIR`: every rank's inputs and outputs of one round as `.npy` files, with a
//! `manifest.json` that says what each file holds and how quantized bytes are packed.
//!
//! NumPy has no bf16, so bf16 arrays are stored as their uint16 bit patterns; widen them with
//! `(a.astype(np.uint32) << 16).view(np.float32)`, or `torch.from_numpy(a).view(torch.bfloat16)`.
//!
//! A dump is self-sufficient: the manifest records the round's modes (`modes`), and each rank's
//! files hold, beside its inputs and outputs, the expert outputs its combine was fed
//! (`expert_out`), each received row's source rank (`src_rank`) and input scale
//! (`recv_input_scales`), and an epilogue's own inputs (`residual`), so the combine can be
//! recomputed from the dump alone (`scripts/check_dump.py` does).

use std::path::Path;

use ep::{bf16, CombineOutput, DispatchOutput, EpConfig, Epilogue, Format, TokenFormat};
use serde_json::{json, Value};

use crate::npy;

/// One rank's round, borrowed.
pub struct RankDump<'a> {
    pub tokens: &'a ndarray::Array2<bf16>,
    pub topk_ids: &'a ndarray::Array2<i32>,
    pub weights: &'a ndarray::Array2<f32>,
    pub input_scales: &'a ndarray::Array1<f32>,
    pub dispatch: &'a DispatchOutput,
    /// The expert outputs combine was given, `[rows, hidden]` in the dispatch output's row order.
    pub expert_out: &'a ndarray::Array2<bf16>,
    /// The rank's combine epilogue, if any.
    pub epilogue: Option<&'a Epilogue>,
    pub combine: &'a CombineOutput,
}

/// The round's modes that are not in [`EpConfig`] (the shared expert and skip_a2a are).
#[derive(Clone, Copy, Debug, Default)]
pub struct DumpModes {
    /// Combine ran without router weights: `[T, top_k, hidden]` output.
    pub unreduced: bool,
    /// Fused SwiGLU ran after dispatch, into this format (its output is not dumped).
    pub swiglu: Option<Format>,
}

/// How the manifest names an epilogue.
fn epilogue_json(e: Option<&Epilogue>) -> Value {
    match e {
        None => Value::Null,
        Some(Epilogue::AddResidual(_)) => json!({ "kind": "add_residual", "file": "residual" }),
        Some(Epilogue::Scale(s)) => json!({ "kind": "scale", "factor": s }),
        Some(Epilogue::QuantizeFp8) => json!({ "kind": "quantize_fp8" }),
        Some(Epilogue::Host(_)) => json!({ "kind": "host_closure" }),
        Some(Epilogue::Device(d)) => json!({ "kind": "device", "name": d.name }),
    }
}

struct Writer<'a> {
    dir: &'a Path,
    rank: usize,
    files: serde_json::Map<String, Value>,
}

impl Writer<'_> {
    fn put<T: npy::NpyElement>(
        &mut self,
        name: &str,
        shape: &[usize],
        data: impl IntoIterator<Item = T>,
        what: &str,
    ) -> std::io::Result<()> {
        let file = format!("rank{}_{name}.npy", self.rank);
        npy::write(&self.dir.join(&file), shape, data)?;
        self.files.insert(
            name.into(),
            json!({ "file": file, "dtype": T::DESCR, "shape": shape, "description": what }),
        );
        Ok(())
    }
}

fn bits(v: &[bf16]) -> impl Iterator<Item = u16> + '_ {
    v.iter().map(|x| x.to_bits())
}

/// Writes every rank's round under `dir` (created if missing) and `dir/manifest.json`.
pub fn write_round(
    dir: &Path,
    scenario: &str,
    cfg: &EpConfig,
    modes: &DumpModes,
    ranks: &[RankDump<'_>],
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let fmt = cfg.format;
    // Every sender's per-token input scales: a received row decodes with its source token's.
    let all_scales: Vec<_> = ranks.iter().map(|r| r.input_scales.view()).collect();
    let mut manifest_ranks = Vec::new();
    for (rank, r) in ranks.iter().enumerate() {
        let mut w = Writer {
            dir,
            rank,
            files: Default::default(),
        };
        let t = r.tokens.nrows();
        let d = r.dispatch;
        let rows = d.rows();
        w.put(
            "tokens",
            &[t, cfg.hidden],
            bits(r.tokens.as_slice().unwrap()),
            "input token rows, bf16 bits",
        )?;
        w.put(
            "topk_ids",
            &[t, cfg.top_k],
            r.topk_ids.iter().copied(),
            "global expert ids, -1 masked",
        )?;
        w.put(
            "router_weights",
            &[t, cfg.top_k],
            r.weights.iter().copied(),
            "router weights, f32",
        )?;
        w.put(
            "input_scales",
            &[t],
            r.input_scales.iter().copied(),
            "per-token input scales (NVFP4's global input_scale)",
        )?;
        w.put(
            "recv_tokens",
            &[rows, d.recv_tokens.ncols()],
            d.recv_tokens.iter().copied(),
            &format!("received payloads, raw bytes: {}", fmt.payload_packing()),
        )?;
        let cols = cfg.hidden / fmt.block();
        match fmt {
            Format::Bf16 => {}
            Format::Fp8 => {
                let scales = d
                    .recv_scales
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes(b.try_into().unwrap()));
                w.put("recv_scales", &[cols, rows], scales, fmt.scale_layout())?;
            }
            Format::Mxfp4 => w.put(
                "recv_scales",
                &[rows, cols],
                d.recv_scales.iter().copied(),
                fmt.scale_layout(),
            )?,
            Format::Nvfp4 => {
                w.put(
                    "recv_scales",
                    &[d.recv_scales.len()],
                    d.recv_scales.iter().copied(),
                    fmt.scale_layout(),
                )?;
                let plain = ep::format::unswizzle(&d.recv_scales, rows, cols);
                w.put(
                    "recv_scales_rowmajor",
                    &[rows, cols],
                    plain,
                    "the same e4m3fn scales un-swizzled, row-major [rows, hidden/16]",
                )?;
            }
            // A format added later: its scales as raw bytes until it gets a shaped view here.
            _ => w.put(
                "recv_scales",
                &[d.recv_scales.len()],
                d.recv_scales.iter().copied(),
                fmt.scale_layout(),
            )?,
        }
        let src_rank = (0..rows).map(|row| d.source_rank(row).map_or(-1, |s| s as i32));
        w.put(
            "src_rank",
            &[rows],
            src_rank,
            "source rank of each row (from src_offsets); -1 padding",
        )?;
        let row_scales: Vec<f32> = (0..rows)
            .map(|row| d.source_input_scale(row, &all_scales))
            .collect();
        w.put(
            "recv_input_scales",
            &[rows],
            row_scales.iter().copied(),
            "input scale of each row's source token (input_scales of rank src_rank, token src_info[:, 0]); 1.0 padding",
        )?;
        let decoded = d.decode_rows_by(|row| row_scales[row]);
        w.put(
            "recv_decoded",
            &[rows, cfg.hidden],
            decoded.iter().copied(),
            "received rows decoded to f32, each with its source token's input scale (recv_input_scales)",
        )?;
        w.put(
            "expert_out",
            &[r.expert_out.nrows(), r.expert_out.ncols()],
            bits(r.expert_out.as_slice().expect("standard layout")),
            "expert outputs fed to combine, bf16 bits [rows, hidden], the rows of recv_tokens",
        )?;
        if let Some(Epilogue::AddResidual(res)) = r.epilogue {
            w.put(
                "residual",
                &[res.nrows(), res.ncols()],
                res.iter().map(|x| x.to_bits()),
                "the add-residual epilogue's residual, bf16 bits [T, hidden]",
            )?;
        }
        w.put(
            "row_offsets",
            &[d.row_offsets.len()],
            d.row_offsets.iter().copied(),
            "group g owns rows row_offsets[g]..row_offsets[g+1]",
        )?;
        w.put(
            "expert_ids",
            &[d.expert_ids.len()],
            d.expert_ids.iter().copied(),
            "local expert index of each group",
        )?;
        w.put(
            "src_info",
            &[rows, 2],
            d.src_info.iter().copied(),
            "(source token, top-k slot) per row; (-1, -1) padding",
        )?;
        w.put(
            "src_offsets",
            &[d.src_offsets.nrows(), d.src_offsets.ncols()],
            d.src_offsets.iter().copied(),
            "rows of source rank s in group g: src_offsets[g, s]..src_offsets[g, s+1]",
        )?;
        match r.combine {
            CombineOutput::Fp8 { payload, scales } => {
                let what = "combine output through the FP8 epilogue: e4m3fn bytes [T, hidden]";
                w.put("combined", &[t, cfg.hidden], payload.iter().copied(), what)?;
                let what = "its f32 scales, one per 128 elements [T, hidden/128]";
                w.put(
                    "combined_scales",
                    &[t, scales.ncols()],
                    scales.iter().copied(),
                    what,
                )?;
            }
            CombineOutput::Consumed => {}
            _ => w.put(
                "combined",
                &r.combine.shape(),
                bits(r.combine.as_slice()),
                "combine output, bf16 bits: [T, hidden] reduced or [T, top_k, hidden] unreduced",
            )?,
        }
        manifest_ranks.push(json!({
            "rank": rank, "tokens": t, "rows": rows,
            "epilogue": epilogue_json(r.epilogue), "files": w.files,
        }));
    }
    let epilogue = ranks.first().and_then(|r| r.epilogue);
    let manifest = json!({
        "scenario": scenario,
        "format": fmt.name(),
        "modes": {
            "shared_expert": cfg.fused_shared_expert,
            "skip_a2a": cfg.skip_a2a,
            "unreduced": modes.unreduced,
            "epilogue": epilogue_json(epilogue),
            "swiglu": modes.swiglu.map(|f| f.name()),
        },
        "combine": concat!(
            "weighted: per token, an f32 sum from +0.0 over k ascending of f32(w[t, k]) * f32(y), y the ",
            "expert_out row holding slot k (the first slot naming its expert; none for a masked slot or, under ",
            "skip_a2a, another device's expert), each product and sum rounded to f32; then the shared expert's ",
            "row (group 0) added; one bf16 rounding to nearest even, NaN as 0x7FC0; then the epilogue. ",
            "unreduced: [T, top_k, hidden], slot k's row or zeros"
        ),
        "config": {
            "hidden": cfg.hidden, "top_k": cfg.top_k, "n_experts": cfg.n_experts,
            "max_tokens_per_rank": cfg.max_tokens_per_rank,
            "n_gpus_per_node": cfg.n_gpus_per_node, "n_nodes": cfg.n_nodes,
        },
        "payload_packing": fmt.payload_packing(),
        "scale_layout": fmt.scale_layout(),
        "bf16": "bf16 arrays hold uint16 bit patterns: (a.astype(np.uint32) << 16).view(np.float32)",
        "ranks": manifest_ranks,
    });
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_string_pretty(&manifest).unwrap() + "\n",
    )
}

#[cfg(test)]
mod tests {
    //! A dump of the oracle's round, read back: rows decode with their source token's scale,
    //! and the manifest carries what the combine needs.
    use super::*;
    use ep::oracle;
    use ep_conformance::{toy_experts, Fixture};

    /// The f32 data of a version 1.0 `.npy` file (header length at bytes 8-9).
    fn read_f32(path: &Path) -> Vec<f32> {
        let b = std::fs::read(path).unwrap();
        let start = 10 + u16::from_le_bytes([b[8], b[9]]) as usize;
        b[start..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn nvfp4_rows_decode_with_their_source_tokens_scale() {
        let fx = Fixture::load("zero_token_ranks").unwrap();
        let cfg = fx.config(Format::Nvfp4).with_shared_expert();
        let inputs = fx.inputs();
        let dispatch = oracle::dispatch(&cfg, &inputs.dispatch_inputs()).unwrap();
        let expert_out: Vec<_> = dispatch.iter().map(toy_experts).collect();
        let combine_inputs: Vec<_> = (0..cfg.n_ranks())
            .map(|r| inputs.combine_input(r, &expert_out[r], ep_conformance::WeightKind::F32))
            .collect();
        let combine =
            oracle::combine(&cfg, &inputs.dispatch_inputs(), &dispatch, &combine_inputs).unwrap();
        let ranks: Vec<_> = (0..cfg.n_ranks())
            .map(|r| RankDump {
                tokens: &inputs.tokens[r],
                topk_ids: &inputs.topk_ids[r],
                weights: &inputs.weights[r],
                input_scales: &inputs.input_scales[r],
                dispatch: &dispatch[r],
                expert_out: &expert_out[r],
                epilogue: None,
                combine: &combine[r],
            })
            .collect();
        let dir = std::env::temp_dir().join(format!("ep-dump-test-{}", std::process::id()));
        write_round(
            &dir,
            "zero_token_ranks",
            &cfg,
            &DumpModes::default(),
            &ranks,
        )
        .unwrap();

        let manifest: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap())
                .unwrap();
        assert_eq!(manifest["modes"]["shared_expert"], json!(true));
        assert_eq!(manifest["modes"]["unreduced"], json!(false));
        assert!(manifest["ranks"][1]["files"]["expert_out"].is_object());
        assert!(manifest["ranks"][1]["files"]["src_rank"].is_object());

        let mut rows_from_other_ranks = 0;
        for (r, d) in dispatch.iter().enumerate() {
            let decoded = read_f32(&dir.join(format!("rank{r}_recv_decoded.npy")));
            let first = inputs.input_scales[r].first().copied().unwrap_or(1.0);
            let with_first = d.decode_rows_with(first);
            for row in 0..d.rows() {
                let (Some(s), t) = (d.source_rank(row), d.src_info[[row, 0]]) else {
                    continue;
                };
                let scale = inputs.input_scales[s][t as usize];
                let (mut payload, mut sc) = (vec![0u8; cfg.hidden / 2], vec![0u8; cfg.hidden / 16]);
                let token = inputs.tokens[s].row(t as usize).to_vec();
                Format::Nvfp4.encode_bf16(&token, scale, &mut payload, &mut sc);
                let mut want = vec![0f32; cfg.hidden];
                Format::Nvfp4.decode(&payload, &sc, scale, &mut want);
                let got = &decoded[row * cfg.hidden..(row + 1) * cfg.hidden];
                assert_eq!(got, &want[..], "rank {r} row {row} (rank {s} token {t})");
                if s != r && with_first.row(row).to_vec() != want {
                    rows_from_other_ranks += 1;
                }
            }
        }
        // Ranks 1 and 3 have no tokens: the old fallback decoded their rows with 1.0.
        assert!(rows_from_other_ranks > 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
