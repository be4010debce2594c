//! An MoE layer forward written once, generic over the backend: route each token to its top-k
//! experts, dispatch, run every local expert as one matmul over its rows (ndarray), combine with
//! the router weights. Checked against a dense computation of the same layer.
//!
//!     cargo run --release --example moe_layer            # on the simulator
//!     cargo run --release --example moe_layer -- cuda    # same code on GPUs (ep-cuda builds)

use approx::relative_eq;
use ep::{
    bf16, on_every_rank, BackendKind, CombineInput, DispatchInput, EpBackend, EpComm, EpConfig,
    RouterWeights,
};
use ndarray::{s, Array1, Array2, Axis};

/// A toy MoE layer: a linear router and one `hidden x hidden` matrix per expert.
struct MoeLayer {
    router: Array2<f32>,
    experts: Vec<Array2<f32>>,
    top_k: usize,
}

impl MoeLayer {
    fn new(hidden: usize, n_experts: usize, top_k: usize, seed: u64) -> Self {
        let mut rng = ep_conformance::rng::Rng::new(seed);
        let scale = 1.0 / (hidden as f32).sqrt();
        let mut mat = |r, c| Array2::from_shape_simple_fn((r, c), || rng.range(-scale, scale));
        MoeLayer {
            router: mat(hidden, n_experts),
            experts: (0..n_experts).map(|_| mat(hidden, hidden)).collect(),
            top_k,
        }
    }

    /// Top-k experts per token by router logit, softmax weights over the chosen k.
    fn route(&self, x: &Array2<bf16>) -> (Array2<i32>, Array2<f32>) {
        let logits = x.mapv(|v| v.to_f32()).dot(&self.router);
        let t = x.nrows();
        let mut ids = Array2::<i32>::zeros((t, self.top_k));
        let mut weights = Array2::<f32>::zeros((t, self.top_k));
        for (i, row) in logits.axis_iter(Axis(0)).enumerate() {
            let mut order: Vec<usize> = (0..row.len()).collect();
            order.sort_by(|&a, &b| row[b].total_cmp(&row[a]));
            let top = &order[..self.top_k];
            let z: Array1<f32> = top.iter().map(|&e| (row[e] - row[top[0]]).exp()).collect();
            let sum = z.sum();
            for (k, &e) in top.iter().enumerate() {
                ids[[i, k]] = e as i32;
                weights[[i, k]] = z[k] / sum;
            }
        }
        (ids, weights)
    }
}

/// The layer's forward pass on every rank of `backend`: the code a model would contain.
fn moe_forward<B: EpBackend>(
    backend: &B,
    cfg: &EpConfig,
    layer: &MoeLayer,
    tokens: &[Array2<bf16>],
) -> ep::Result<Vec<Array2<bf16>>> {
    let mut comms = backend.init_uniform(cfg)?;
    let routed: Vec<_> = tokens.iter().map(|x| layer.route(x)).collect();
    let n_local = cfg.n_local_experts();
    let per_rank = on_every_rank(&mut comms, |c| -> ep::Result<Array2<bf16>> {
        let r = c.rank();
        let (ids, weights) = &routed[r];
        let dispatched = c.dispatch(&DispatchInput::new(tokens[r].view(), ids.view()))?;

        // Grouped GEMM: each local expert multiplies the rows it received.
        let x = dispatched.decode_rows();
        let mut y = Array2::<bf16>::zeros((dispatched.rows(), cfg.hidden));
        for g in 0..dispatched.n_groups() {
            let rows = dispatched.row_offsets[g] as usize..dispatched.row_offsets[g + 1] as usize;
            let expert = r * n_local + dispatched.expert_ids[g] as usize;
            let out = x.slice(s![rows.clone(), ..]).dot(&layer.experts[expert]);
            y.slice_mut(s![rows, ..]).assign(&out.mapv(bf16::from_f32));
        }

        let combine_input = CombineInput::weighted(y.view(), RouterWeights::F32(weights.view()));
        let combined = c.combine(&dispatched.handle, &combine_input)?;
        Ok(combined.reduced().expect("weights given").clone())
    });
    per_rank.into_iter().collect()
}

/// The same layer without expert parallelism: every token visits its experts directly.
fn dense_forward(layer: &MoeLayer, x: &Array2<bf16>) -> Array2<f32> {
    let (ids, weights) = layer.route(x);
    let xf = x.mapv(|v| v.to_f32());
    let mut out = Array2::<f32>::zeros(x.dim());
    for t in 0..x.nrows() {
        for k in 0..layer.top_k {
            let y = xf.row(t).dot(&layer.experts[ids[[t, k]] as usize]);
            let y = y.mapv(|v| bf16::from_f32(v).to_f32());
            out.row_mut(t).scaled_add(weights[[t, k]], &y);
        }
    }
    out
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let kind: BackendKind = std::env::args()
        .nth(1)
        .as_deref()
        .unwrap_or("sim")
        .parse()?;
    let backend = ep::Backend::new(kind)?;
    let cfg = EpConfig::builder()
        .hidden(256)
        .top_k(4)
        .experts(16)
        .max_tokens_per_rank(64)
        .gpus_per_node(4)
        .build()?;
    let layer = MoeLayer::new(cfg.hidden, cfg.n_experts, cfg.top_k, 1);
    let mut rng = ep_conformance::rng::Rng::new(2);
    let tokens: Vec<Array2<bf16>> = [64, 40, 0, 17]
        .iter()
        .map(|&t| {
            Array2::from_shape_simple_fn((t, cfg.hidden), || bf16::from_f32(rng.range(-1.0, 1.0)))
        })
        .collect();

    let outputs = moe_forward(&backend, &cfg, &layer, &tokens)?;

    let mut worst = 0.0f32;
    for (x, got) in tokens.iter().zip(&outputs) {
        let want = dense_forward(&layer, x);
        for (g, w) in got.iter().zip(want.iter()) {
            let g = g.to_f32();
            // bf16 keeps 8 significant bits: allow a couple of its ulps.
            if !relative_eq!(g, *w, epsilon = 2e-3, max_relative = 2e-2) {
                return Err(format!("EP output {g} differs from dense {w}").into());
            }
            worst = worst.max((g - w).abs());
        }
    }
    println!(
        "MoE layer on {} ranks via `{kind}`: {} tokens, outputs match the dense layer (max |diff| {worst:.2e})",
        cfg.n_ranks(),
        tokens.iter().map(|t| t.nrows()).sum::<usize>()
    );
    Ok(())
}
