//! An MoE layer forward written once, generic over the backend: route each token to its top-k
//! experts, dispatch, run every local expert as one matmul over its rows where the rank computes
//! (ndarray on the simulator, a kernel on a GPU), combine with the router weights. Checked against
//! a dense computation of the same layer, and that no rank copied a byte between host and device
//! from its dispatch to its combine.
//!
//!     cargo run --release --example moe_layer            # on the simulator
//!     cargo run --release --example moe_layer -- cuda    # same code on GPUs (ep-cuda builds)

use approx::relative_eq;
use ep::ndarray::{Array1, Array2, ArrayView2, Axis};
use ep::{
    bf16, on_every_rank, AnyBuffer, BackendKind, Buffer, CombineArgs, DispatchArgs, Dispatched,
    EpBackend, EpComm, EpConfig,
};

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

/// A rank's local experts, in its memory: what a model's grouped GEMM would be. The one part of
/// the layer that depends on the backend: the simulator's memory is the host's, so it multiplies
/// with ndarray; on a GPU a kernel of the example's own (`gpu_experts`) runs on the rank's stream.
trait Experts: EpComm {
    /// Loads `weights` (`[n_local, hidden, hidden]`, row-major) where the rank computes.
    fn load_experts(&mut self, weights: &[f32]) -> ep::Result<Self::Buffer<f32>>;
    /// `y[row] = x[row] * W[expert of row]` for every row `d` delivered, into `y` (`[capacity,
    /// hidden]`), without leaving the rank's memory.
    fn run_experts(
        &mut self,
        d: &Dispatched<Self>,
        weights: &Self::Buffer<f32>,
        y: &Self::Buffer<bf16>,
    ) -> ep::Result<()>;
}

impl Experts for ep::Comm {
    fn load_experts(&mut self, weights: &[f32]) -> ep::Result<AnyBuffer<f32>> {
        self.upload(weights)
    }

    fn run_experts(
        &mut self,
        d: &Dispatched<Self>,
        weights: &AnyBuffer<f32>,
        y: &AnyBuffer<bf16>,
    ) -> ep::Result<()> {
        match (self, &d.recv_tokens, &d.row_offsets, weights, y) {
            (
                ep::Comm::Sim(_),
                AnyBuffer::Sim(x),
                AnyBuffer::Sim(offsets),
                AnyBuffer::Sim(w),
                AnyBuffer::Sim(y),
            ) => {
                sim_experts(d.n_groups(), d.hidden, x, offsets, w, y);
                Ok(())
            }
            #[cfg(feature = "cuda")]
            (
                ep::Comm::Cuda(c),
                AnyBuffer::Cuda(x),
                AnyBuffer::Cuda(offsets),
                AnyBuffer::Cuda(w),
                AnyBuffer::Cuda(y),
            ) => gpu_experts::run(c, d, x, offsets, w, y),
            _ => Err(ep::EpError::Backend("buffers of another backend".into())),
        }
    }
}

/// The experts on the simulator's memory (host memory: reading it is no copy off the device).
fn sim_experts(
    groups: usize,
    hidden: usize,
    x: &ep::sim::HostBuffer<u8>,
    offsets: &ep::sim::HostBuffer<u32>,
    w: &ep::sim::HostBuffer<f32>,
    y: &ep::sim::HostBuffer<bf16>,
) {
    let (offsets, w, x) = (offsets.to_vec(), w.to_vec(), x.to_vec());
    let mut out = vec![bf16::ZERO; y.len()];
    for g in 0..groups {
        let expert = ArrayView2::from_shape(
            (hidden, hidden),
            &w[g * hidden * hidden..][..hidden * hidden],
        )
        .expect("hidden x hidden");
        for row in offsets[g] as usize..offsets[g + 1] as usize {
            let bits = &x[row * hidden * 2..(row + 1) * hidden * 2];
            let v: Array1<f32> = bits
                .chunks_exact(2)
                .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect();
            for (o, r) in out[row * hidden..(row + 1) * hidden]
                .iter_mut()
                .zip(v.dot(&expert))
            {
                *o = bf16::from_f32(r);
            }
        }
    }
    y.write(&out).expect("y holds capacity rows");
}

/// The experts on a GPU: one block per row, each thread a column of `x * W` in f32.
#[cfg(feature = "cuda")]
mod gpu_experts {
    use ep::cuda::cudarc::driver::{LaunchConfig, PushKernelArg};
    use ep::cuda::{CudaComm, DeviceBuffer};
    use ep::{bf16, Dispatched, EpError};

    const SOURCE: &str = r#"
extern "C" __global__ void experts(const unsigned short* x, const unsigned* row_offsets, int groups,
                                   const float* w, int hidden, unsigned short* y) {
    unsigned row = blockIdx.x;
    if (row >= row_offsets[groups]) return;
    int g = 0;
    while (row >= row_offsets[g + 1]) g++;
    const float* wg = w + (size_t)g * hidden * hidden;
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
        float acc = 0.f;
        for (int i = 0; i < hidden; i++)
            acc += __uint_as_float((unsigned)x[(size_t)row * hidden + i] << 16) * wg[(size_t)i * hidden + c];
        unsigned u = __float_as_uint(acc);
        y[(size_t)row * hidden + c] = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
}
"#;

    pub fn run(
        c: &mut CudaComm,
        d: &Dispatched<ep::Comm>,
        x: &DeviceBuffer<u8>,
        offsets: &DeviceBuffer<u32>,
        w: &DeviceBuffer<f32>,
        y: &DeviceBuffer<bf16>,
    ) -> ep::Result<()> {
        let err = |e: &dyn std::fmt::Debug| EpError::Backend(format!("experts kernel: {e:?}"));
        let ptx = ep::cuda::cudarc::nvrtc::compile_ptx(SOURCE).map_err(|e| err(&e))?;
        let module = c.context().load_module(ptx).map_err(|e| err(&e))?;
        let f = module.load_function("experts").map_err(|e| err(&e))?;
        let (groups, hidden) = (d.n_groups() as i32, d.hidden as i32);
        let (px, po, pw, py) = (
            x.device_ptr(),
            offsets.device_ptr(),
            w.device_ptr(),
            y.device_ptr(),
        );
        let cfg = LaunchConfig {
            grid_dim: (d.capacity.max(1) as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let stream = c.stream().clone();
        let mut launch = stream.launch_builder(&f);
        launch
            .arg(&px)
            .arg(&po)
            .arg(&groups)
            .arg(&pw)
            .arg(&hidden)
            .arg(&py);
        // SAFETY: the pointers are the rank's buffers of the sizes the kernel indexes: x and y
        // `capacity` rows of `hidden`, w `groups` matrices, row_offsets `groups + 1` entries.
        unsafe { launch.launch(cfg) }.map_err(|e| err(&e))?;
        Ok(())
    }
}

/// The layer's forward pass on every rank of `backend`: the code a model would contain. The
/// tokens, the router's ids and weights and the experts' weights are put in each rank's memory
/// first (a model has them there); from dispatch to combine nothing goes through the host.
fn moe_forward<B: EpBackend>(
    backend: &B,
    cfg: &EpConfig,
    layer: &MoeLayer,
    tokens: &[Array2<bf16>],
) -> ep::Result<(Vec<Array2<bf16>>, Vec<u64>)>
where
    B::Comm: Experts,
{
    let mut comms = backend.init_uniform(cfg)?;
    let routed: Vec<_> = tokens.iter().map(|x| layer.route(x)).collect();
    let n_local = cfg.n_local_experts();
    let per_rank = on_every_rank(&mut comms, |c| -> ep::Result<(Array2<bf16>, u64)> {
        let r = c.rank();
        let (ids, weights) = &routed[r];
        let t = tokens[r].nrows();
        let mine: Vec<f32> = layer.experts[r * n_local..(r + 1) * n_local]
            .iter()
            .flat_map(|m| m.iter().copied())
            .collect();
        let experts = c.load_experts(&mine)?;
        let x = c.upload(tokens[r].as_slice().expect("standard layout"))?;
        let ids = c.upload(ids.as_slice().expect("standard layout"))?;
        let weights = c.upload(weights.as_slice().expect("standard layout"))?;
        let y = c.alloc::<bf16>(cfg.max_recv_rows() * cfg.hidden)?;
        let before = host_copies(c);

        let dispatched = c.dispatch(&DispatchArgs::new(&x, &ids, t))?;
        c.run_experts(&dispatched, &experts, &y)?;
        let combined = c.combine(&dispatched.handle, &CombineArgs::weighted(&y, &weights))?;

        let moved = host_copies(c) - before;
        let out = c.to_host(combined.reduced().expect("weights given"))?;
        Ok((
            Array2::from_shape_vec((t, cfg.hidden), out).expect("t x hidden"),
            moved,
        ))
    });
    per_rank
        .into_iter()
        .collect::<ep::Result<Vec<_>>>()
        .map(|v| v.into_iter().unzip())
}

/// Bytes this rank copied between host and device so far (the simulator has no device: 0).
fn host_copies<C: EpComm + 'static>(c: &C) -> u64 {
    let any: &dyn std::any::Any = c;
    match any.downcast_ref::<ep::Comm>() {
        #[cfg(feature = "cuda")]
        Some(ep::Comm::Cuda(c)) => c.copies().1,
        _ => 0,
    }
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

    let (outputs, moved) = moe_forward(&backend, &cfg, &layer, &tokens)?;
    // Between dispatch and combine the tokens and expert outputs stay where the rank computes.
    if let Some(bytes) = moved.iter().find(|&&b| b != 0) {
        return Err(
            format!("a rank copied {bytes} bytes between host and device in its round").into(),
        );
    }

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
