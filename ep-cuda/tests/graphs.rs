//! CUDA graphs. On two GPUs, a rank each (so the waits are stream-ordered): a decode round
//! (dispatch, an expert stand-in kernel, combine) is captured once per rank on the caller's
//! stream, then replayed 1,000 times with fresh inputs written into the same buffers, each
//! replay's output checked bit for bit against the oracle; then timed, replayed and issued call by
//! call; then a bad expert id in one rank's device memory must come back as a typed error; then
//! one rank stops replaying and the other's replay must end in a timeout naming it, within its
//! deadline. At 1 and 128 tokens a rank (EP_GRAPH_TOKENS: a comma-separated list),
//! EP_GRAPH_REPLAYS replays (default 1000). Without two GPUs it says it did not run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ep_conformance::rng::Rng;
use ep_core::oracle;
use ep_core::{
    bf16, on_every_rank, CombineArgs, CombineInput, Combined, DispatchArgs, DispatchInput,
    Dispatched, EpBackend, EpComm, EpConfig, EpError, Format, RouterWeights,
};
use ep_cuda::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use ep_cuda::cudarc::driver::{CudaFunction, CudaGraph, LaunchConfig, PushKernelArg};
use ep_cuda::{CudaBackend, CudaComm, DeviceBuffer};
use ndarray::Array2;

const HIDDEN: usize = 512;
const TOP_K: usize = 8;
const EXPERTS: usize = 32;
const DEADLINE: Duration = Duration::from_secs(2);

/// The expert stand-in: every row the dispatch delivered, doubled (exact in bf16 for the inputs'
/// range), one block a row; rows past the count on the device are left alone.
const EXPERT: &str = r#"
extern "C" __global__ void double_rows(const unsigned short* x, const unsigned* rows_end, int hidden,
                                       unsigned short* y) {
    unsigned row = blockIdx.x;
    if (row >= *rows_end) return;
    for (int c = threadIdx.x; c < hidden; c += blockDim.x) {
        unsigned short b = x[(size_t)row * hidden + c];
        float v = __uint_as_float((unsigned)b << 16) * 2.0f;
        y[(size_t)row * hidden + c] = (unsigned short)(__float_as_uint(v) >> 16);
    }
}
"#;

/// One round's inputs for every rank, from `(seed, round)`: tokens in [-1, 1), distinct experts a
/// token with some slots masked, weights.
struct Inputs {
    tokens: Vec<Array2<bf16>>,
    ids: Vec<Array2<i32>>,
    weights: Vec<Array2<f32>>,
}

impl Inputs {
    fn new(cfg: &EpConfig, t: usize, round: u64) -> Inputs {
        let mut rng = Rng::new(0x6a09_e667 ^ round.wrapping_mul(0x9e37_79b9));
        let n = cfg.n_ranks();
        let mut tokens = Vec::new();
        let mut ids = Vec::new();
        let mut weights = Vec::new();
        for _ in 0..n {
            tokens.push(Array2::from_shape_simple_fn((t, HIDDEN), || {
                bf16::from_f32(rng.range(-1.0, 1.0))
            }));
            let mut id = Array2::<i32>::zeros((t, TOP_K));
            for mut row in id.rows_mut() {
                for (k, e) in rng.distinct(TOP_K, EXPERTS).into_iter().enumerate() {
                    row[k] = if rng.chance(0.1) { -1 } else { e as i32 };
                }
            }
            ids.push(id);
            weights.push(Array2::from_shape_simple_fn((t, TOP_K), || rng.unit()));
        }
        Inputs {
            tokens,
            ids,
            weights,
        }
    }

    /// Every rank's combined rows by the oracle, the experts doubling their rows.
    fn expected(&self, cfg: &EpConfig) -> Vec<Array2<bf16>> {
        let d_in: Vec<_> = (0..cfg.n_ranks())
            .map(|r| DispatchInput::new(self.tokens[r].view(), self.ids[r].view()))
            .collect();
        let routing = oracle::dispatch(cfg, &d_in).expect("valid inputs");
        let y: Vec<Array2<bf16>> = routing
            .iter()
            .map(|d| d.decode_rows().mapv(|v| bf16::from_f32(2.0 * v)))
            .collect();
        let c_in: Vec<_> = (0..cfg.n_ranks())
            .map(|r| {
                CombineInput::weighted(y[r].view(), RouterWeights::F32(self.weights[r].view()))
            })
            .collect();
        oracle::combine(cfg, &d_in, &routing, &c_in)
            .expect("valid inputs")
            .into_iter()
            .map(|o| o.reduced().expect("weighted").clone())
            .collect()
    }
}

/// A rank's buffers: its inputs, sized for the round's tokens, and the experts' output.
struct RankBuffers {
    tokens: DeviceBuffer<bf16>,
    ids: DeviceBuffer<i32>,
    weights: DeviceBuffer<f32>,
    y: DeviceBuffer<bf16>,
}

impl RankBuffers {
    fn new(c: &CudaComm, t: usize) -> ep_core::Result<RankBuffers> {
        Ok(RankBuffers {
            tokens: c.alloc(t * HIDDEN)?,
            ids: c.alloc(t * TOP_K)?,
            weights: c.alloc(t * TOP_K)?,
            y: c.alloc(c.config().max_recv_rows() * HIDDEN)?,
        })
    }

    fn write(&self, c: &mut CudaComm, inputs: &Inputs) -> ep_core::Result<()> {
        let r = c.rank();
        let std = "standard layout";
        c.write(&self.tokens, inputs.tokens[r].as_slice().expect(std))?;
        c.write(&self.ids, inputs.ids[r].as_slice().expect(std))?;
        c.write(&self.weights, inputs.weights[r].as_slice().expect(std))
    }
}

/// One round through the device API on the rank's stream, nothing waited for: what is captured.
fn round(
    c: &mut CudaComm,
    b: &RankBuffers,
    expert: &CudaFunction,
    t: usize,
) -> ep_core::Result<Combined<CudaComm>> {
    let pending = c.dispatch_async(&DispatchArgs::new(&b.tokens, &b.ids, t))?;
    let d: Dispatched<CudaComm> = c.dispatch_wait(pending)?;
    let rows_end = d.row_offsets.device_ptr() + 4 * d.n_groups() as u64;
    let (x, y, hidden) = (d.recv_tokens.device_ptr(), b.y.device_ptr(), HIDDEN as i32);
    let stream = Arc::clone(c.stream());
    let mut launch = stream.launch_builder(expert);
    launch.arg(&x).arg(&rows_end).arg(&hidden).arg(&y);
    let cfg = LaunchConfig {
        grid_dim: (d.capacity.max(1) as u32, 1, 1),
        block_dim: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: x and y hold `capacity` rows of HIDDEN bf16, rows_end is the dispatch's row count.
    unsafe { launch.launch(cfg) }.map_err(|e| EpError::Backend(format!("expert: {e:?}")))?;
    let pending = c.combine_async(&d.handle, &CombineArgs::weighted(&b.y, &b.weights))?;
    c.combine_wait(pending)
}

fn capture(
    c: &mut CudaComm,
    b: &RankBuffers,
    expert: &CudaFunction,
    t: usize,
) -> ep_core::Result<(CudaGraph, DeviceBuffer<bf16>)> {
    let stream = Arc::clone(c.stream());
    let err = |e: &dyn std::fmt::Debug| EpError::Backend(format!("capture: {e:?}"));
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .map_err(|e| err(&e))?;
    let out = round(c, b, expert, t);
    let graph = stream
        .end_capture(CUgraphInstantiate_flags(0))
        .map_err(|e| err(&e))?;
    let out = out?;
    let graph = graph.ok_or_else(|| err(&"nothing captured"))?;
    let reduced = out.reduced().expect("weighted").clone();
    Ok((graph, reduced))
}

/// Per rank: the replays checked, then the timings (µs a round: replayed, issued call by call).
fn run_rank(
    c: &mut CudaComm,
    t: usize,
    replays: u64,
    barrier: &std::sync::Barrier,
) -> Result<(f64, f64), String> {
    let cfg = c.config().clone();
    let e = |e: EpError| e.to_string();
    let stream = c.context().new_stream().map_err(|e| format!("{e:?}"))?;
    c.set_stream(stream).map_err(e)?;
    let ptx = ep_cuda::cudarc::nvrtc::compile_ptx(EXPERT).map_err(|e| format!("{e:?}"))?;
    let module = c.context().load_module(ptx).map_err(|e| format!("{e:?}"))?;
    let expert = module
        .load_function("double_rows")
        .map_err(|e| format!("{e:?}"))?;
    let b = RankBuffers::new(c, t).map_err(e)?;
    let (graph, out) = capture(c, &b, &expert, t).map_err(e)?;
    let r = c.rank();
    for i in 0..replays {
        let inputs = Inputs::new(&cfg, t, i);
        b.write(c, &inputs).map_err(e)?;
        graph.launch().map_err(|e| format!("replay {i}: {e:?}"))?;
        let got = c
            .to_host(&out)
            .map_err(|err| format!("replay {i}: {err}"))?;
        let want = &inputs.expected(&cfg)[r];
        if got.as_slice() != want.as_slice().expect("standard layout") {
            let at = got.iter().zip(want.iter()).position(|(a, b)| a != b);
            return Err(format!(
                "replay {i}: rank {r} differs from the oracle at {at:?}"
            ));
        }
    }
    // Timed: replays back to back, then the same rounds issued call by call.
    let n = 200;
    barrier.wait();
    let t0 = Instant::now();
    for _ in 0..n {
        graph.launch().map_err(|e| format!("{e:?}"))?;
    }
    c.synchronize().map_err(e)?;
    let replayed = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
    barrier.wait();
    let t0 = Instant::now();
    for _ in 0..n {
        round(c, &b, &expert, t).map_err(e)?;
    }
    c.synchronize().map_err(e)?;
    let issued = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
    barrier.wait();
    // Rank 0's ids in device memory hold one outside [-1, experts): its batch is refused on the
    // device (none of its tokens sent, nothing indexed past the world) and its next wait for the
    // stream says which; rank 1's round completes.
    let mut inputs = Inputs::new(&cfg, t, u64::MAX);
    let bad = (t - 1, TOP_K - 1, EXPERTS as i32 + 5);
    inputs.ids[0][[bad.0, bad.1]] = bad.2;
    b.write(c, &inputs).map_err(e)?;
    round(c, &b, &expert, t).map_err(e)?;
    match (r, c.synchronize()) {
        (
            0,
            Err(EpError::ExpertIdOutOfRange {
                token, slot, id, ..
            }),
        ) if (token, slot, id) == bad => {}
        (0, other) => return Err(format!("a bad id in device memory: got {other:?}")),
        (_, other) => other.map_err(e)?,
    }
    if r == 0 {
        println!(
            "  rank 0: id {} at ({}, {}) in device memory -> ExpertIdOutOfRange",
            bad.2, bad.0, bad.1
        );
    }
    barrier.wait();
    // Rank 1 stops; rank 0's next replay, on good inputs again, waits for it until its deadline.
    if r == 0 {
        b.write(c, &Inputs::new(&cfg, t, 0)).map_err(e)?;
        let t0 = Instant::now();
        graph.launch().map_err(|e| format!("{e:?}"))?;
        let outcome = c.synchronize();
        let waited = t0.elapsed();
        match outcome {
            Err(EpError::Timeout { missing, .. }) if missing.iter().all(|m| m.src_rank == 1) => {
                // The replay's dispatch waits out the deadline; its combine, behind a wait that
                // ran out, gives up at once (common/protocol.cuh, `ep_slice`).
                if waited > DEADLINE + Duration::from_millis(500) {
                    return Err(format!(
                        "the timeout took {waited:?}, deadline {DEADLINE:?}"
                    ));
                }
                println!(
                    "  rank 0: replay without rank 1 -> timeout naming rank 1 after {waited:?}"
                );
            }
            other => {
                return Err(format!(
                    "replay without rank 1: expected a timeout, got {other:?}"
                ))
            }
        }
    }
    Ok((replayed, issued))
}

fn main() {
    let gpus = match CudaBackend::probe() {
        Ok(g) if g.len() >= 2 => g,
        Ok(g) => {
            println!(
                "ep-cuda graphs: NOT RUN (not counted): {} GPU(s), two needed",
                g.len()
            );
            return;
        }
        Err(e) => {
            println!("ep-cuda graphs: NOT RUN (not counted): {e}");
            return;
        }
    };
    let tokens: Vec<usize> = std::env::var("EP_GRAPH_TOKENS")
        .unwrap_or_else(|_| "1,128".into())
        .split(',')
        .map(|s| s.trim().parse().expect("EP_GRAPH_TOKENS: numbers"))
        .collect();
    let replays: u64 = std::env::var("EP_GRAPH_REPLAYS")
        .map(|s| s.parse().expect("EP_GRAPH_REPLAYS: a number"))
        .unwrap_or(1000);
    println!(
        "ep-cuda graphs on {} ({} GPUs), 2 ranks",
        gpus[0],
        gpus.len()
    );
    let mut failed = 0;
    for &t in &tokens {
        let cfg = EpConfig::builder()
            .hidden(HIDDEN)
            .top_k(TOP_K)
            .experts(EXPERTS)
            .max_tokens_per_rank(t.max(1))
            .gpus_per_node(2)
            .format(Format::Bf16)
            .timeout(DEADLINE)
            .build()
            .expect("a valid config");
        let mut comms = match CudaBackend::new().init_uniform(&cfg) {
            Ok(c) => c,
            Err(e) => {
                println!("FAILED {t} tokens: init: {e}");
                failed += 1;
                continue;
            }
        };
        let barrier = std::sync::Barrier::new(2);
        let t0 = Instant::now();
        let results = on_every_rank(&mut comms, |c| run_rank(c, t, replays, &barrier));
        match results.iter().find_map(|r| r.as_ref().err()) {
            Some(e) => {
                println!("FAILED {t} tokens: {e}");
                failed += 1;
            }
            None => {
                let worst = |f: fn(&(f64, f64)) -> f64| {
                    results
                        .iter()
                        .map(|r| f(r.as_ref().unwrap()))
                        .fold(0.0, f64::max)
                };
                println!(
                    "ok     {t} tokens a rank: {replays} replays bit-exact ({:.1} s); a round \
                     replayed {:.1} us, issued call by call {:.1} us (dispatch + expert + combine)",
                    t0.elapsed().as_secs_f64(),
                    worst(|r| r.0),
                    worst(|r| r.1)
                );
            }
        }
    }
    if failed > 0 {
        println!("ep-cuda graphs: {failed} FAILED");
        std::process::exit(1);
    }
    println!("ep-cuda graphs: {} passed", tokens.len());
}
