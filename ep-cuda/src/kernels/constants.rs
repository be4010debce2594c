//! The numbers the host and the kernels both use, defined here once: every program is compiled
//! after `#define`s made from them ([`header`]), and no kernel file defines them itself (a test
//! checks), so the two sides cannot disagree.

/// Slots per token the kernels' per-token arrays hold (`EP_MAX_TOP_K`): the most the config
/// admits.
pub const MAX_TOP_K: usize = ep_core::config::MAX_TOP_K;
/// Time stamps in one trace record (`EP_N_STAMPS`, common/trace.cuh).
pub const TRACE_STAMPS: usize = 32;
/// Words of one trace record: name, (rank, block), (SM, published), then the stamps
/// (common/trace.cuh's `EP_TRACE_WORDS`).
pub const TRACE_RECORD_WORDS: usize = 3 + TRACE_STAMPS;

/// Tokens per block of `ep_assign_chunks` (`EP_ASSIGN_CHUNK`, dispatch/assign.cu).
pub const ASSIGN_CHUNK: usize = 128;
/// Threads of an `ep_assign_chunks` block (`EP_ASSIGN_THREADS`).
pub const ASSIGN_THREADS: u32 = 256;
/// Expert and rank columns per pass over a chunk (`EP_ASSIGN_COLS`).
pub const ASSIGN_COLS: usize = 2048;

/// The wait and copy-out kernels' status word (common/protocol.cuh): every count (and message)
/// arrived (`EP_OK`).
pub const STATUS_OK: u32 = 0;
/// A wait slice ran out with counts missing (`EP_PENDING`).
pub const STATUS_PENDING: u32 = 1;
/// A count past what the sender could have sent (`EP_COUNT_OVERFLOW`).
pub const STATUS_COUNT_OVERFLOW: u32 = 2;
/// Counts that disagree with each other (`EP_COUNT_MISMATCH`).
pub const STATUS_COUNT_MISMATCH: u32 = 3;
/// The counts were there, a message was not when the slice ran out (`EP_MESSAGES_PENDING`).
pub const STATUS_MESSAGES_PENDING: u32 = 4;

/// Words of the FP8 division self-check's tallies (`EP_CHECK_WORDS`, selfcheck.cu).
pub const CHECK_WORDS: usize = 5;

/// The signal probes' publish flavours (`EP_PROBE_PUB_*`, probe.cu), in order.
pub const PROBE_PUBLISH: [&str; 5] = ["FENCE", "RELEASE", "RELAXED", "SC_FENCE", "GPU_FENCE"];
/// The signal probes' poll flavours (`EP_PROBE_POLL_*`), in order; they are also the first load
/// operations.
pub const PROBE_POLL: [&str; 4] = ["ACQUIRE", "RELAXED", "VOLATILE", "ACQUIRE_GPU"];
/// The load probes' operations after the poll flavours (`EP_PROBE_OP_*`), numbered on from
/// them; `NOTHING` (or any number above) times no operation.
pub const PROBE_OPS: [&str; 5] = [
    "PLAIN",
    "RELAXED_FENCE",
    "FENCE_SYS",
    "FENCE_GPU",
    "NOTHING",
];

/// Every constant as the kernels name it, with its value.
pub fn defines() -> Vec<(String, u64)> {
    let mut d: Vec<(String, u64)> = vec![
        ("EP_MAX_TOP_K".into(), MAX_TOP_K as u64),
        ("EP_N_STAMPS".into(), TRACE_STAMPS as u64),
        ("EP_ASSIGN_CHUNK".into(), ASSIGN_CHUNK as u64),
        ("EP_ASSIGN_THREADS".into(), ASSIGN_THREADS as u64),
        ("EP_ASSIGN_COLS".into(), ASSIGN_COLS as u64),
        ("EP_OK".into(), STATUS_OK as u64),
        ("EP_PENDING".into(), STATUS_PENDING as u64),
        ("EP_COUNT_OVERFLOW".into(), STATUS_COUNT_OVERFLOW as u64),
        ("EP_COUNT_MISMATCH".into(), STATUS_COUNT_MISMATCH as u64),
        ("EP_MESSAGES_PENDING".into(), STATUS_MESSAGES_PENDING as u64),
        ("EP_CHECK_WORDS".into(), CHECK_WORDS as u64),
    ];
    let numbered = |prefix: &str, names: &[&str], first: usize| {
        names
            .iter()
            .enumerate()
            .map(|(i, n)| (format!("EP_PROBE_{prefix}_{n}"), (first + i) as u64))
            .collect::<Vec<_>>()
    };
    d.extend(numbered("PUB", &PROBE_PUBLISH, 0));
    d.extend(numbered("POLL", &PROBE_POLL, 0));
    d.extend(numbered("OP", &PROBE_OPS, PROBE_POLL.len()));
    d
}

/// The `#define` lines every program is compiled after.
pub fn header() -> String {
    defines()
        .iter()
        .map(|(name, value)| format!("#define {name} {value}\n"))
        .collect()
}
