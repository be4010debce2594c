//! [`CudaOptions`]: every tunable and switch of the CUDA backend, passed when the backend is made
//! (`CudaBackend::new().with_options(..)`). The library reads no environment variable for them;
//! the `ep` command and the GPU test runner map the `EP_CUDA_*` variables onto these fields
//! through [`options_from_env_vars`] (docs/tuning.md lists them; the benchmark's `EP_BENCH_*`
//! variables set its own `BenchOptions`, feature `bench`). Token thresholds compare with the tokens
//! on the rank this round; `0` turns the path off. Paths and thresholds are explained in
//! docs/architecture.md ("Paths a round takes").

use ep_core::{EpError, Result};

/// The CUDA backend's options. `CudaOptions::default()` is the tuned behaviour; set fields with
/// the builder methods or with `CudaOptions { field: .., ..Default::default() }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaOptions {
    /// Up to this many tokens the dispatch is one launch (`ep_dispatch_single`); one node only.
    /// `None`: 128, or 1 on a rank that shares its GPU. `EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS`.
    pub single_dispatch_max_tokens: Option<usize>,
    /// Up to this many tokens a reduced combine is one launch (`ep_combine_single`). `None`: 256,
    /// or 128 on a rank that shares its GPU. `EP_CUDA_SINGLE_COMBINE_MAX_TOKENS`.
    pub single_combine_max_tokens: Option<usize>,
    /// From this many tokens the dispatch overlaps its copy-out with the transfer, for every
    /// format. `None`: 1024 for BF16, 2048 for the other formats. `EP_CUDA_OVERLAP_MIN_TOKENS`.
    pub overlap_min_tokens: Option<usize>,
    /// From this many tokens a multi-kernel dispatch that does not overlap lays out its groups
    /// before the send, on every rank. `None`: 512 on a rank with a GPU of its own, off on a rank
    /// that shares its GPU. `EP_CUDA_LAYOUT_FIRST_MIN_TOKENS`.
    pub layout_first_min_tokens: Option<usize>,
    /// From this many tokens an overlapped BF16 round takes the lean send and copy kernels.
    /// Default 2560. `EP_CUDA_LEAN_MIN_TOKENS`.
    pub lean_min_tokens: usize,
    /// From this many tokens a multi-kernel dispatch assigns slots per chunk of 128 tokens
    /// (`ep_assign_chunks`). Default 4096. `EP_CUDA_CHUNKED_ASSIGN_MIN_TOKENS`.
    pub chunked_assign_min_tokens: usize,
    /// From this many tokens (multi-kernel dispatch, no LL rows) the combine rows come back
    /// marked and are reduced beside the send. Default 1024. `EP_CUDA_MARKED_MIN_TOKENS`.
    pub marked_min_tokens: usize,
    /// From this many tokens a single-launch combine takes its rows marked. Default 16.
    /// `EP_CUDA_SINGLE_MARKED_MIN_TOKENS`.
    pub single_marked_min_tokens: usize,
    /// Up to this many tokens (one node) combine rows travel in LL form; compiled into the
    /// kernels and sizes the buffers. Default 8. `EP_CUDA_LL_MAX_TOKENS`.
    pub ll_max_tokens: usize,
    /// Chained (programmatic dependent) launches between a phase's kernels, where the GPU takes
    /// them (sm_90 and later). Default on. `EP_CUDA_CHAINED_LAUNCH=0` turns it off.
    pub chained_launch: bool,
    /// A phase's first kernel chained to what the stream ran before it (with
    /// `chained_launch`). Default on. `EP_CUDA_CHAINED_FIRST=0` turns it off.
    pub chained_first: bool,
    /// FP8 uses its own send kernel (40 registers a thread) rather than the every-format one.
    /// Default on. `EP_CUDA_SEND_FP8=0` turns it off.
    pub send_fp8: bool,
    /// Whether every overlapped round's send blocks write the rank's own rows. `None`: FP8 or
    /// lean rounds. `EP_CUDA_OWN_ROWS` (`1`: always, `0`: never).
    pub own_rows: Option<bool>,
    /// An overlapped round launches the copy-out again after the send on every SM. Default on.
    /// `EP_CUDA_COPY_HELPERS=0` turns it off.
    pub copy_helpers: bool,
    /// Threads per send block (a multiple of 32 from 64 to 512; the copy blocks follow it).
    /// `None`: 512 for BF16 overlapped, 256 for BF16 or FP8 otherwise, 512 for other formats.
    /// `EP_CUDA_SEND_THREADS`.
    pub send_threads: Option<u32>,
    /// The overlapped copy-out's grid, clamped to what is resident. `None`: by format and tokens.
    /// `EP_CUDA_OVERLAP_COPY_BLOCKS`.
    pub overlap_copy_blocks: Option<usize>,
    /// The grid of the marked reduce beside the combine's send. `None`: two thirds of the rank's
    /// single-launch blocks. `EP_CUDA_MARKED_REDUCE_BLOCKS`.
    pub marked_reduce_blocks: Option<usize>,
    /// Kernels compiled with time stamps, kept in device memory and printed after the run
    /// (scripts/trace_summary.py reads them). Default off. `EP_CUDA_TRACE` (`all`: [`Trace::All`]).
    pub trace: Trace,
    /// With `trace`: only this rank records. `None`: every rank. `EP_CUDA_TRACE_RANK`.
    pub trace_rank: Option<i32>,
    /// The SM clock, in MHz, that trace stamps (and the test hooks' delay spins) are converted
    /// at. `None`: 1980 (an H100's and H200's; common/trace.cuh). `EP_CUDA_TRACE_CLOCK_MHZ`.
    pub trace_clock_mhz: Option<u32>,
    /// A wait that took more than one slice is logged to stderr. Default off. `EP_CUDA_LOG_WAITS`.
    pub log_waits: bool,
    /// NVRTC compiles with `-lineinfo` (source lines for a profiler); same machine code. Default
    /// off. `EP_CUDA_LINEINFO=1`.
    pub lineinfo: bool,
    /// Test hooks: they change behaviour or timing on purpose; never for production.
    #[cfg(feature = "test-hooks")]
    pub hooks: TestHooks,
}

/// The kernels' time stamps ([`CudaOptions::trace`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Trace {
    /// No stamps.
    #[default]
    Off,
    /// Block 0 and the publishing block of each grid record.
    On,
    /// Every block and every copied message records.
    All,
}

/// Test hooks ([`CudaOptions::hooks`], cargo feature `test-hooks`).
#[cfg(feature = "test-hooks")]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TestHooks {
    /// Copy-out blocks per sender (at least 1), so that tests take the loop over messages in
    /// small worlds. `None`: the resident blocks divided among senders.
    /// `EP_CUDA_COPY_OUT_PER_SENDER`.
    pub copy_out_per_sender: Option<usize>,
    /// How long, in ns, an overlapped round's send blocks wait for the layout before sending
    /// their own rows as messages. Default 0 (look once). `EP_CUDA_OWN_ROWS_WAIT_NS`.
    pub own_rows_wait_ns: u64,
    /// After the inputs are uploaded, a kernel changes them on the device and puts them back
    /// after this many ns (1 to 10,000,000). `None`: off. `EP_CUDA_LATE_INPUTS`.
    pub late_inputs_ns: Option<u64>,
    /// `(site, ns)`: every thread of a block spins `ns` ns at one site of a phase's chain
    /// (common/trace.cuh, EP_DELAY). `None`: off. `EP_CUDA_DELAY=SITE:NS`.
    pub delay: Option<(u32, u64)>,
}

impl Default for CudaOptions {
    fn default() -> Self {
        CudaOptions {
            single_dispatch_max_tokens: None,
            single_combine_max_tokens: None,
            overlap_min_tokens: None,
            layout_first_min_tokens: None,
            lean_min_tokens: crate::comm::LEAN_MIN_TOKENS_BF16,
            chunked_assign_min_tokens: crate::comm::CHUNKED_ASSIGN_MIN_TOKENS,
            marked_min_tokens: crate::comm::MARKED_MIN_TOKENS,
            single_marked_min_tokens: crate::comm::SINGLE_MARKED_MIN_TOKENS,
            ll_max_tokens: crate::comm::LL_MAX_TOKENS,
            chained_launch: true,
            chained_first: true,
            send_fp8: true,
            own_rows: None,
            copy_helpers: true,
            send_threads: None,
            overlap_copy_blocks: None,
            marked_reduce_blocks: None,
            trace: Trace::Off,
            trace_rank: None,
            trace_clock_mhz: None,
            log_waits: false,
            lineinfo: false,
            #[cfg(feature = "test-hooks")]
            hooks: TestHooks::default(),
        }
    }
}

macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty,)*) => {
        impl CudaOptions {
            $(
                $(#[$doc])*
                pub fn $name(mut self, value: $ty) -> Self {
                    self.$name = value.into();
                    self
                }
            )*
        }
    };
}

setters! {
    /// Sets [`CudaOptions::single_dispatch_max_tokens`].
    single_dispatch_max_tokens: usize,
    /// Sets [`CudaOptions::single_combine_max_tokens`].
    single_combine_max_tokens: usize,
    /// Sets [`CudaOptions::overlap_min_tokens`].
    overlap_min_tokens: usize,
    /// Sets [`CudaOptions::layout_first_min_tokens`].
    layout_first_min_tokens: usize,
    /// Sets [`CudaOptions::lean_min_tokens`].
    lean_min_tokens: usize,
    /// Sets [`CudaOptions::chunked_assign_min_tokens`].
    chunked_assign_min_tokens: usize,
    /// Sets [`CudaOptions::marked_min_tokens`].
    marked_min_tokens: usize,
    /// Sets [`CudaOptions::single_marked_min_tokens`].
    single_marked_min_tokens: usize,
    /// Sets [`CudaOptions::ll_max_tokens`].
    ll_max_tokens: usize,
    /// Sets [`CudaOptions::chained_launch`].
    chained_launch: bool,
    /// Sets [`CudaOptions::chained_first`].
    chained_first: bool,
    /// Sets [`CudaOptions::send_fp8`].
    send_fp8: bool,
    /// Sets [`CudaOptions::own_rows`].
    own_rows: bool,
    /// Sets [`CudaOptions::copy_helpers`].
    copy_helpers: bool,
    /// Sets [`CudaOptions::send_threads`].
    send_threads: u32,
    /// Sets [`CudaOptions::overlap_copy_blocks`].
    overlap_copy_blocks: usize,
    /// Sets [`CudaOptions::marked_reduce_blocks`].
    marked_reduce_blocks: usize,
    /// Sets [`CudaOptions::trace`].
    trace: Trace,
    /// Sets [`CudaOptions::trace_rank`].
    trace_rank: i32,
    /// Sets [`CudaOptions::trace_clock_mhz`].
    trace_clock_mhz: u32,
    /// Sets [`CudaOptions::log_waits`].
    log_waits: bool,
    /// Sets [`CudaOptions::lineinfo`].
    lineinfo: bool,
}

impl CudaOptions {
    /// Checks the values the kernels can take: a typed error naming the field, before anything
    /// is allocated.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(EpError::Backend(format!("CudaOptions: {what}")));
        if let Some(n) = self.send_threads {
            if !(64..=512).contains(&n) || n % 32 != 0 {
                return bad(format!(
                    "send_threads = {n}: expected a multiple of 32 from 64 to 512"
                ));
            }
        }
        #[cfg(feature = "test-hooks")]
        if let Some(ns) = self.hooks.late_inputs_ns {
            if ns == 0 || ns > 10_000_000 {
                return bad(format!(
                    "hooks.late_inputs_ns = {ns}: expected nanoseconds from 1 to 10000000"
                ));
            }
        }
        Ok(())
    }

    /// The defines every program is compiled with under these options (kernels.rs): programs
    /// compiled for two option values with the same prelude are the same program.
    pub(crate) fn prelude(&self) -> String {
        let mut prelude = format!("#define EP_LL_MAX_TOKENS {}\n", self.ll_max_tokens);
        // Causal profiling (common/trace.cuh, EP_DELAY).
        #[cfg(feature = "test-hooks")]
        if let Some((site, ns)) = self.hooks.delay {
            prelude += &format!("#define EP_DELAY_SITE {site}\n#define EP_DELAY_NS {ns}\n");
        }
        // The SM clock the delays spin and the stamps are read in (common/trace.cuh: 1980 MHz, an
        // H100's and H200's).
        if let Some(mhz) = self.trace_clock_mhz {
            prelude += &format!("#define EP_CLOCK_MHZ {mhz}\n");
        }
        if self.trace != Trace::Off {
            prelude += "#define EP_TRACE 1\n";
            if self.trace == Trace::All {
                prelude += "#define EP_TRACE_ALL 1\n";
            }
            // Ranks of one process print through one stdout, interleaved mid-line: one at a time.
            let only_rank = self.trace_rank.unwrap_or(-1);
            prelude += &format!("#define EP_TRACE_RANK {only_rank}\n");
        }
        prelude
    }

    /// What changes the compiled programs (their defines and NVRTC's options): the key of the
    /// per-device kernel cache (world.rs), so that backends with different options in one
    /// process each get their own programs.
    pub(crate) fn compile_key(&self) -> (String, bool) {
        (self.prelude(), self.lineinfo)
    }
}

/// The options that the `EP_CUDA_*` variables docs/tuning.md lists ask for, read through `get`
/// (a variable's value, `None` when unset): the one mapping from variable to field, used by the
/// `ep` command and the GPU test runner with a lookup of the process's environment. A value
/// that does not parse is an error naming the variable. Test hooks' variables are refused
/// without the `test-hooks` feature.
#[doc(hidden)]
pub fn options_from_env_vars(
    get: impl Fn(&str) -> Option<String>,
) -> std::result::Result<CudaOptions, String> {
    // A path policy first, the single variables over it.
    let mut o = match get("EP_CUDA_PATH_POLICY") {
        None => CudaOptions::default(),
        Some(v) => v
            .parse::<crate::PathPolicy>()
            .map_err(|e| format!("EP_CUDA_PATH_POLICY={v}: {e}"))?
            .apply(CudaOptions::default()),
    };
    let number = |var: &str| -> std::result::Result<Option<usize>, String> {
        match get(var) {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse::<usize>()
                .map(Some)
                .map_err(|_| format!("{var}={v}: expected a whole number")),
        }
    };
    // `0`: off; any other number: on.
    let switch = |var: &str, default: bool| -> std::result::Result<bool, String> {
        Ok(number(var)?.map_or(default, |n| n != 0))
    };
    let set = |field: &mut usize, var: &str| -> std::result::Result<(), String> {
        if let Some(n) = number(var)? {
            *field = n;
        }
        Ok(())
    };
    let set_some = |field: &mut Option<usize>, var: &str| -> std::result::Result<(), String> {
        if let Some(n) = number(var)? {
            *field = Some(n);
        }
        Ok(())
    };
    set_some(
        &mut o.single_dispatch_max_tokens,
        "EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS",
    )?;
    set_some(
        &mut o.single_combine_max_tokens,
        "EP_CUDA_SINGLE_COMBINE_MAX_TOKENS",
    )?;
    set_some(&mut o.overlap_min_tokens, "EP_CUDA_OVERLAP_MIN_TOKENS")?;
    set_some(
        &mut o.layout_first_min_tokens,
        "EP_CUDA_LAYOUT_FIRST_MIN_TOKENS",
    )?;
    set(&mut o.lean_min_tokens, "EP_CUDA_LEAN_MIN_TOKENS")?;
    set(
        &mut o.chunked_assign_min_tokens,
        "EP_CUDA_CHUNKED_ASSIGN_MIN_TOKENS",
    )?;
    set(&mut o.marked_min_tokens, "EP_CUDA_MARKED_MIN_TOKENS")?;
    set(
        &mut o.single_marked_min_tokens,
        "EP_CUDA_SINGLE_MARKED_MIN_TOKENS",
    )?;
    set(&mut o.ll_max_tokens, "EP_CUDA_LL_MAX_TOKENS")?;
    o.chained_launch = switch("EP_CUDA_CHAINED_LAUNCH", true)?;
    o.chained_first = switch("EP_CUDA_CHAINED_FIRST", true)?;
    o.send_fp8 = switch("EP_CUDA_SEND_FP8", true)?;
    o.own_rows = number("EP_CUDA_OWN_ROWS")?.map(|n| n != 0);
    o.copy_helpers = switch("EP_CUDA_COPY_HELPERS", true)?;
    if let Some(n) = number("EP_CUDA_SEND_THREADS")? {
        if !(64..=512).contains(&n) || n % 32 != 0 {
            return Err(format!(
                "EP_CUDA_SEND_THREADS={n}: expected a multiple of 32 from 64 to 512"
            ));
        }
        o.send_threads = Some(n as u32);
    }
    o.overlap_copy_blocks = number("EP_CUDA_OVERLAP_COPY_BLOCKS")?;
    o.marked_reduce_blocks = number("EP_CUDA_MARKED_REDUCE_BLOCKS")?;
    o.trace = match get("EP_CUDA_TRACE").as_deref() {
        None => Trace::Off,
        Some("all") => Trace::All,
        Some(_) => Trace::On,
    };
    if let Some(v) = get("EP_CUDA_TRACE_RANK") {
        o.trace_rank = Some(
            v.trim()
                .parse()
                .map_err(|_| format!("EP_CUDA_TRACE_RANK={v}: expected a rank"))?,
        );
    }
    if let Some(v) = get("EP_CUDA_TRACE_CLOCK_MHZ") {
        o.trace_clock_mhz = Some(
            v.trim()
                .parse()
                .map_err(|_| format!("EP_CUDA_TRACE_CLOCK_MHZ={v}: expected MHz"))?,
        );
    }
    o.log_waits = get("EP_CUDA_LOG_WAITS").is_some();
    o.lineinfo = match get("EP_CUDA_LINEINFO").as_deref().map(str::trim) {
        None | Some("0") => false,
        Some("1") => true,
        Some(v) => return Err(format!("EP_CUDA_LINEINFO={v}: expected 0 or 1")),
    };
    let hook_vars = [
        "EP_CUDA_COPY_OUT_PER_SENDER",
        "EP_CUDA_OWN_ROWS_WAIT_NS",
        "EP_CUDA_LATE_INPUTS",
        "EP_CUDA_DELAY",
    ];
    #[cfg(not(feature = "test-hooks"))]
    if let Some(var) = hook_vars.iter().find(|v| get(v).is_some()) {
        return Err(format!(
            "{var} is a test hook: build with --features test-hooks to use it"
        ));
    }
    #[cfg(feature = "test-hooks")]
    {
        let _ = hook_vars;
        o.hooks.copy_out_per_sender = number("EP_CUDA_COPY_OUT_PER_SENDER")?;
        o.hooks.own_rows_wait_ns = number("EP_CUDA_OWN_ROWS_WAIT_NS")?.unwrap_or(0) as u64;
        o.hooks.late_inputs_ns = number("EP_CUDA_LATE_INPUTS")?.map(|n| n as u64);
        if let Some(v) = get("EP_CUDA_DELAY") {
            let parsed = v.split_once(':').and_then(|(a, b)| {
                Some((a.trim().parse::<u32>().ok()?, b.trim().parse::<u64>().ok()?))
            });
            o.hooks.delay =
                Some(parsed.ok_or_else(|| format!("EP_CUDA_DELAY={v}: expected SITE:NS"))?);
        }
    }
    o.validate().map_err(|e| e.to_string())?;
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(vars: &[(&str, &str)]) -> std::result::Result<CudaOptions, String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        options_from_env_vars(|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    #[test]
    fn no_variables_are_the_defaults() {
        assert_eq!(from(&[]).unwrap(), CudaOptions::default());
        let d = CudaOptions::default();
        assert_eq!(
            (
                d.lean_min_tokens,
                d.chunked_assign_min_tokens,
                d.marked_min_tokens
            ),
            (2560, 4096, 1024)
        );
        assert_eq!((d.single_marked_min_tokens, d.ll_max_tokens), (16, 8));
        assert_eq!(d.prelude(), "#define EP_LL_MAX_TOKENS 8\n");
    }

    #[test]
    fn variables_map_to_fields() {
        let o = from(&[
            ("EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS", "1000000"),
            ("EP_CUDA_LL_MAX_TOKENS", "0"),
            ("EP_CUDA_CHAINED_FIRST", "0"),
            ("EP_CUDA_OWN_ROWS", "1"),
            ("EP_CUDA_SEND_THREADS", "128"),
            ("EP_CUDA_TRACE", "all"),
            ("EP_CUDA_TRACE_RANK", "1"),
            ("EP_CUDA_LINEINFO", "1"),
        ])
        .unwrap();
        let want = CudaOptions::default()
            .single_dispatch_max_tokens(1_000_000)
            .ll_max_tokens(0)
            .chained_first(false)
            .own_rows(true)
            .send_threads(128)
            .trace(Trace::All)
            .trace_rank(1)
            .lineinfo(true);
        assert_eq!(o, want);
        assert_ne!(o.compile_key(), CudaOptions::default().compile_key());
    }

    #[test]
    fn a_path_policy_sets_its_fields_and_single_variables_override_it() {
        let o = from(&[("EP_CUDA_PATH_POLICY", "multi")]).unwrap();
        assert_eq!(o, crate::PathPolicy::Multi.apply(CudaOptions::default()));
        let o = from(&[
            ("EP_CUDA_PATH_POLICY", "multi"),
            ("EP_CUDA_SINGLE_COMBINE_MAX_TOKENS", "7"),
        ])
        .unwrap();
        assert_eq!(o.single_dispatch_max_tokens, Some(0));
        assert_eq!(o.single_combine_max_tokens, Some(7));
        let e = from(&[("EP_CUDA_PATH_POLICY", "fast")]).unwrap_err();
        assert!(
            e.contains("EP_CUDA_PATH_POLICY") && e.contains("multi"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_value_names_its_variable() {
        for (var, value) in [
            ("EP_CUDA_OVERLAP_MIN_TOKENS", "many"),
            ("EP_CUDA_SEND_THREADS", "100"),
            ("EP_CUDA_LINEINFO", "yes"),
            ("EP_CUDA_TRACE_RANK", "x"),
        ] {
            let e = from(&[(var, value)]).unwrap_err();
            assert!(e.contains(var), "{var}={value}: {e}");
        }
    }

    #[test]
    #[cfg(not(feature = "test-hooks"))]
    fn hooks_need_the_feature() {
        let e = from(&[("EP_CUDA_LATE_INPUTS", "1000")]).unwrap_err();
        assert!(e.contains("test-hooks"), "{e}");
    }

    #[test]
    #[cfg(feature = "test-hooks")]
    fn hooks_map_to_fields() {
        let o = from(&[("EP_CUDA_DELAY", "2:500"), ("EP_CUDA_LATE_INPUTS", "1000")]).unwrap();
        assert_eq!(o.hooks.delay, Some((2, 500)));
        assert_eq!(o.hooks.late_inputs_ns, Some(1000));
        assert!(o.prelude().contains("#define EP_DELAY_SITE 2\n"));
        assert!(from(&[("EP_CUDA_LATE_INPUTS", "0")]).is_err());
    }
}
