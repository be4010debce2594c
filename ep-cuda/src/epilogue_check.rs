//! A device-code epilogue ([`Epilogue::Device`]) run end to end on the GPUs: each rank's epilogue
//! writes every value it is handed, sign bit flipped, into a device buffer of its own, and counts
//! each element it sees. The buffer must then hold the oracle's combined rows (flipped) and every
//! element must have been seen exactly once. The conformance suite cannot check this through the
//! backend's outputs (the combine stores nothing), so the GPU runners call it beside the cases
//! (`ep conformance --backend cuda`, `tests/conformance.rs`).
//!
//! The epilogue reaches its buffers through addresses compiled into its source: the only way a
//! device-code epilogue can leave a result, and the way a user's would (a pointer it owns).

use std::fmt;

use ep_core::{
    bf16, on_every_rank, oracle, CombineInput, DeviceEpilogue, DispatchInput, EpBackend, EpComm,
    EpConfig, Epilogue, HostIo, Result, RouterWeights,
};
use ndarray::Array2;

use crate::memory::DevBuf;
use crate::world::device_kernels;
use crate::CudaBackend;

/// Tokens per rank of the rounds checked: through each combine path (one launch, one launch
/// with marked rows, the reduce kernel, the reduce beside the send; comm/path.rs picks by size).
/// Tokens per rank of each round [`check`] runs.
pub const TOKENS: [usize; 4] = [1, 16, 300, 1024];

const HIDDEN: usize = 256;
const TOP_K: usize = 4;
const N_EXPERTS: usize = 16;
const N_RANKS: usize = 2;

/// The outcome of one round: the elements whose value differs from the oracle's, and the ones
/// seen other than once, each with an example.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EpilogueRound {
    /// Tokens per rank in the round (an entry of [`TOKENS`]).
    pub tokens: usize,
    /// Output elements checked, over every rank (tokens x hidden x ranks).
    pub elements: usize,
    /// Elements the epilogue saw once but whose bf16 value differs from the oracle's.
    pub wrong_values: usize,
    /// Elements the epilogue saw other than once.
    pub wrong_counts: usize,
    /// The first element that was wrong, in words (rank, token, column); `None` if none.
    pub example: Option<String>,
}

impl EpilogueRound {
    /// Elements were checked and none was wrong.
    pub fn passed(&self) -> bool {
        self.elements > 0 && self.wrong_values + self.wrong_counts == 0
    }
}

impl fmt::Display for EpilogueRound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} tokens per rank: {} elements, {} values differ from the oracle, {} not seen once",
            self.tokens, self.elements, self.wrong_values, self.wrong_counts
        )?;
        if let Some(e) = &self.example {
            write!(f, " (first: {e})")?;
        }
        Ok(())
    }
}

/// Runs a weighted combine with a device-code epilogue on `N_RANKS` ranks placed by `backend`,
/// once per entry of [`TOKENS`]. Each rank's buffers (and so its epilogue's source, compiled once)
/// serve every round.
pub fn check(backend: &CudaBackend) -> Result<Vec<EpilogueRound>> {
    let placement = backend.placement(N_RANKS, crate::driver::device_count()?);
    let most = TOKENS.iter().max().copied().unwrap_or(0) * HIDDEN;
    let sinks = placement
        .iter()
        .enumerate()
        .map(|(r, &gpu)| {
            let ctx = device_kernels(gpu, &backend.options)?.ctx.clone();
            let values = DevBuf::new(&ctx, most * 2)?;
            let seen = DevBuf::new(&ctx, most * 4)?;
            let epilogue = Epilogue::Device(DeviceEpilogue {
                name: format!("ep_check_epilogue_rank{r}"),
                source: epilogue_source(r, values.ptr, seen.ptr),
            });
            Ok(Sink {
                values,
                seen,
                epilogue,
                ctx,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    TOKENS
        .iter()
        .map(|&t| check_round(backend, &sinks, t))
        .collect()
}

/// Where rank r's epilogue leaves what it is handed.
struct Sink {
    values: DevBuf,
    seen: DevBuf,
    epilogue: Epilogue,
    ctx: std::sync::Arc<cudarc::driver::CudaContext>,
}

fn check_round(backend: &CudaBackend, sinks: &[Sink], tokens: usize) -> Result<EpilogueRound> {
    let cfg = EpConfig::new(HIDDEN, TOP_K, N_EXPERTS, tokens, N_RANKS);
    let inputs: Vec<RankInputs> = (0..N_RANKS).map(|r| RankInputs::new(r, tokens)).collect();
    let dispatch_inputs: Vec<DispatchInput<'_>> = inputs.iter().map(|i| i.dispatch()).collect();
    let mut comms = backend.init_uniform(&cfg)?;
    let dispatched = on_every_rank(&mut comms, |c| c.host_dispatch(&dispatch_inputs[c.rank()]))
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
    // Expert outputs: the received rows as they are (BF16 messages are the rows' bits).
    let expert_out: Vec<Array2<bf16>> = dispatched
        .iter()
        .map(|d| d.tokens_bf16().expect("a BF16 round"))
        .collect();
    for s in sinks {
        s.values.fill(0)?;
        s.seen.fill(0)?;
    }
    let elements = tokens * HIDDEN;
    let combine_inputs: Vec<CombineInput<'_>> = (0..N_RANKS)
        .map(|r| {
            CombineInput::weighted(
                expert_out[r].view(),
                RouterWeights::F32(inputs[r].weights.view()),
            )
            .with_epilogue(&sinks[r].epilogue)
        })
        .collect();
    on_every_rank(&mut comms, |c| {
        c.host_combine(&dispatched[c.rank()], &combine_inputs[c.rank()])
    })
    .into_iter()
    .collect::<Result<Vec<_>>>()?;

    // The oracle's plain weighted combine: the values a device epilogue is handed.
    let plain: Vec<CombineInput<'_>> = (0..N_RANKS)
        .map(|r| {
            CombineInput::weighted(
                expert_out[r].view(),
                RouterWeights::F32(inputs[r].weights.view()),
            )
        })
        .collect();
    let want = oracle::combine(&cfg, &dispatch_inputs, &dispatched, &plain)?;
    let mut round = EpilogueRound {
        tokens,
        elements: elements * N_RANKS,
        ..Default::default()
    };
    for (r, s) in sinks.iter().enumerate() {
        let stream = s.ctx.default_stream();
        let mut got = vec![0u16; elements];
        let mut counts = vec![0u32; elements];
        s.values.download(&mut got, &stream)?;
        s.seen.download(&mut counts, &stream)?;
        let want = want[r].reduced().expect("a weighted combine is reduced");
        for (i, (w, (&g, &n))) in want.iter().zip(got.iter().zip(&counts)).enumerate() {
            let (t, c) = (i / HIDDEN, i % HIDDEN);
            if n != 1 {
                round.wrong_counts += 1;
                round
                    .example
                    .get_or_insert_with(|| format!("rank {r} token {t} column {c} seen {n} times"));
            } else if g ^ 0x8000 != w.to_bits() {
                round.wrong_values += 1;
                round.example.get_or_insert_with(|| {
                    format!(
                        "rank {r} token {t} column {c}: {:#06x}, oracle {:#06x}",
                        g ^ 0x8000,
                        w.to_bits()
                    )
                });
            }
        }
    }
    Ok(round)
}

/// The epilogue of rank `rank`: the documented signature, values as bf16 bits.
fn epilogue_source(rank: usize, values: u64, seen: u64) -> String {
    format!(
        "__device__ void ep_check_epilogue_rank{rank}(int token, int column, const unsigned short* v, int n) {{\n\
         \x20   unsigned short* values = (unsigned short*){values:#x}ull;\n\
         \x20   unsigned int* seen = (unsigned int*){seen:#x}ull;\n\
         \x20   for (int i = 0; i < n; ++i) {{\n\
         \x20       unsigned long long at = (unsigned long long)token * {HIDDEN} + column + i;\n\
         \x20       values[at] = v[i] ^ 0x8000u;\n\
         \x20       atomicAdd(seen + at, 1u);\n\
         \x20   }}\n\
         }}\n"
    )
}

/// One rank's tokens, ids (a masked slot and a duplicated expert now and then) and weights, from
/// a fixed sequence.
struct RankInputs {
    tokens: Array2<bf16>,
    ids: Array2<i32>,
    weights: Array2<f32>,
}

impl RankInputs {
    fn new(rank: usize, n: usize) -> Self {
        let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ ((rank as u64 + 1) * 0x1000_0000_01b3);
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let tokens = Array2::from_shape_simple_fn((n, HIDDEN), || {
            bf16::from_f32(((next() >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0)
        });
        let ids = Array2::from_shape_simple_fn((n, TOP_K), || match next() % 16 {
            0 => -1,
            x => ((x * 7 + next() % N_EXPERTS as u64) % N_EXPERTS as u64) as i32,
        });
        let weights = Array2::from_shape_simple_fn((n, TOP_K), || {
            (next() >> 40) as f32 / (1u64 << 24) as f32
        });
        RankInputs {
            tokens,
            ids,
            weights,
        }
    }

    fn dispatch(&self) -> DispatchInput<'_> {
        DispatchInput::new(self.tokens.view(), self.ids.view())
    }
}
