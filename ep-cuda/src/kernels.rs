//! The CUDA kernels: sources embedded from `kernels/*.cu`, compiled at run time by NVRTC for
//! the device's architecture, cached per process, and launched through one small helper.

use std::collections::HashMap;
use std::ffi::c_void;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{result, CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig};
use cudarc::nvrtc::{CompileOptions, Ptx};
use ep_core::{EpError, Result};

use crate::driver::cuda;
use constants::TRACE_RECORD_WORDS;

pub mod constants;
pub mod params;
pub use params::KernelParams;

/// Every kernel source file, by its path under `kernels/`, the name `#include "path"` gives it
/// (a test checks that the folder holds no other).
macro_rules! kernel_files {
    ($($path:literal),+ $(,)?) => {
        &[$(($path, include_str!(concat!("kernels/", $path)))),+]
    };
}
/// Every `.cu`/`.cuh` file under `kernels/`, `(path relative to kernels/, its text)`, embedded at
/// build time; `#include`s resolve against it.
pub const FILES: &[(&str, &str)] = kernel_files!(
    "common.cuh",
    "common/types.cuh",
    "common/numerics.cuh",
    "common/formats.cuh",
    "common/ordering.cuh",
    "common/protocol.cuh",
    "common/trace.cuh",
    "params.cuh",
    "dispatch.cu",
    "dispatch/wire.cu",
    "dispatch/ids.cu",
    "dispatch/assign.cu",
    "dispatch/route.cu",
    "dispatch/layout.cu",
    "dispatch/send.cu",
    "dispatch/copy_out.cu",
    "dispatch/single.cu",
    "combine.cu",
    "combine/send.cu",
    "combine/reduce.cu",
    "combine/marked.cu",
    "combine/unreduced.cu",
    "combine/single.cu",
    "swiglu.cu",
    "bench.cu",
    "probe.cu",
    "selfcheck.cu",
    "late_inputs.cu",
);

/// What every program is compiled after: the shared headers and the parameter structs.
pub const COMMON: &str = include_str!("kernels/common.cuh");
/// The dispatch program (`kernels/dispatch.cu`, which includes `kernels/dispatch/`'s files).
pub const DISPATCH: &str = include_str!("kernels/dispatch.cu");
/// The combine program (`kernels/combine.cu`, which includes `kernels/combine/`'s files).
pub const COMBINE: &str = include_str!("kernels/combine.cu");
/// The SwiGLU program (`kernels/swiglu.cu`).
pub const SWIGLU: &str = include_str!("kernels/swiglu.cu");
/// The bench program (`kernels/bench.cu`): the copy ceiling, the NCCL baseline's local permutes
/// and reduction, the start gate and the floors.
pub const BENCH: &str = include_str!("kernels/bench.cu");
/// The signal probes' program (`kernels/probe.cu`).
pub const PROBE: &str = include_str!("kernels/probe.cu");
/// The self-check program (`kernels/selfcheck.cu`): the FP8 encode's division, checked.
pub const SELFCHECK: &str = include_str!("kernels/selfcheck.cu");
/// The late-inputs test hook's program (`kernels/late_inputs.cu`).
pub const LATE_INPUTS: &str = include_str!("kernels/late_inputs.cu");

/// A program's source as NVRTC takes it, being built: each `#include "path"` line replaced by
/// that file of [`FILES`] the first time a path is named (each file once, as an include guard
/// would), after a `#line` naming it, and followed by a `#line` back to the including file, so
/// that NVRTC's messages and `-lineinfo` point at the file and line. Includes are plain lines,
/// never inside an `#if`. (cudarc's NVRTC wrapper takes no headers, hence this.)
#[derive(Default)]
struct Includes {
    out: String,
    seen: Vec<&'static str>,
}

impl Includes {
    fn text(&mut self, name: &str, text: &str) {
        self.out += &format!("#line 1 \"{name}\"\n");
        for (i, line) in text.lines().enumerate() {
            let Some(path) = included(line) else {
                self.out += line;
                self.out.push('\n');
                continue;
            };
            let &(path, body) = FILES
                .iter()
                .find(|(p, _)| *p == path)
                .unwrap_or_else(|| panic!("{name}:{}: no kernel file {path:?}", i + 1));
            if self.seen.contains(&path) {
                self.out.push('\n');
            } else {
                self.seen.push(path);
                self.text(path, body);
                self.out += &format!("#line {} \"{name}\"\n", i + 2);
            }
        }
    }
}

/// The path of an `#include "path"` line.
fn included(line: &str) -> Option<&str> {
    line.strip_prefix("#include \"")?.strip_suffix('"')
}

/// `kernels/<path>` alone, its includes expanded: it compiles only where the file includes all it
/// uses (kernels_compile checks each file so, [`check_syntax`]).
pub fn file_source(path: &str) -> String {
    let (path, text) = FILES
        .iter()
        .find(|(p, _)| *p == path)
        .unwrap_or_else(|| panic!("no kernel file {path:?} (kernels.rs, FILES)"));
    let mut inc = Includes {
        seen: vec![path],
        ..Default::default()
    };
    inc.text("constants.rs", &constants::header());
    inc.text(path, text);
    inc.out
}

/// The kernels of each program, by entry point.
pub const PROGRAMS: &[(&str, &str, &[&str])] = &[
    (
        "dispatch",
        DISPATCH,
        &[
            "ep_take_ids",
            "ep_assign_slots",
            "ep_assign_chunks",
            "ep_dispatch_send",
            "ep_dispatch_send_lean",
            "ep_dispatch_send_fp8",
            "ep_dispatch_put",
            "ep_dispatch_signal",
            "ep_dispatch_wait",
            "ep_dispatch_copy_out",
            "ep_dispatch_copy_messages",
            "ep_dispatch_copy_lean",
            "ep_dispatch_single",
            "ep_dispatch_single_spread",
            "ep_dispatch_single_bf16",
            "ep_dispatch_single_spread_bf16",
            "ep_dispatch_single_fp8",
            "ep_dispatch_single_spread_fp8",
        ],
    ),
    (
        "combine",
        COMBINE,
        &[
            "ep_combine_send",
            "ep_combine_send_ordered",
            "ep_combine_put",
            "ep_combine_signal",
            "ep_combine_net_rows",
            "ep_combine_wait",
            "ep_combine_reduce",
            "ep_combine_unreduced",
            "ep_combine_reduce_marked",
            "ep_combine_await_marks",
            "ep_combine_ll_unpack",
            "ep_combine_single",
            "ep_combine_single_ll",
            "ep_combine_single_plain",
            "ep_combine_single_ll_plain",
        ],
    ),
    ("swiglu", SWIGLU, &["ep_swiglu"]),
];

/// The benchmark's program (bench.rs, feature `bench`): compiled when `ep bench` first needs it on
/// a device, not with PROGRAMS at every start. The source is here in every build, so that every
/// build's kernels_compile test compiles it.
pub const BENCH_PROGRAM: (&str, &str, &[&str]) = (
    "bench",
    BENCH,
    &[
        "ep_copy",
        "ep_copy_to_peers",
        "ep_gather_rows",
        "ep_weighted_rows",
        "ep_bench_gate",
        "ep_bench_stamp",
        "ep_bench_nothing",
        "ep_bench_exchange",
        "ep_bench_read",
    ],
);

/// The late-inputs test hook's program (comm/late_inputs.rs, feature `test-hooks`): compiled only
/// where the hook is set.
pub const LATE_INPUTS_PROGRAM: (&str, &str, &[&str]) =
    ("late_inputs", LATE_INPUTS, &["ep_late_inputs"]);

/// The signal probes' program (probe.rs, feature `bench`): compiled only when a probe runs, not
/// with PROGRAMS at every start (its 64 KB straight run of code makes it the slowest to compile).
pub const PROBE_PROGRAM: (&str, &str, &[&str]) = (
    "probe",
    PROBE,
    &[
        "ep_probe_signal",
        "ep_probe_load_after_stores",
        "ep_probe_timer",
        "ep_probe_code",
    ],
);

/// The device self-checks' program (selfcheck.rs): compiled only when a check runs.
pub const SELFCHECK_PROGRAM: (&str, &str, &[&str]) = (
    "selfcheck",
    SELFCHECK,
    &["ep_check_fp8_division_bf16", "ep_check_fp8_division_f32"],
);

/// Every program is the shared headers and the parameter structs ([`COMMON`]) and then `body`
/// (its top file), after an optional prelude of defines, each `#include` expanded (`Includes`).
pub fn source(body: &str, prelude: &str) -> String {
    let mut inc = Includes {
        out: prelude.to_string(),
        ..Default::default()
    };
    inc.text("constants.rs", &constants::header());
    inc.text("common.cuh", COMMON);
    // The top file by its own name where it is one of FILES (a device epilogue's is not).
    let name = FILES
        .iter()
        .find(|(_, text)| *text == body)
        .map_or("program", |(path, _)| path);
    inc.text(name, body);
    inc.out
}

/// Compiles `src` for `arch` (`sm_90`), once per process: exact IEEE arithmetic, no fused
/// multiply-add (the contract's sums round each operation).
pub fn compile(src: &str, arch: &'static str) -> Result<Ptx> {
    compile_with(src, arch, false)
}

/// [`compile`], with `lineinfo`: source lines in the code, for a profiler (ncu's source page;
/// [`crate::CudaOptions::lineinfo`]); the machine code is the same. Cached by source, arch and
/// `lineinfo`.
pub fn compile_with(src: &str, arch: &'static str, lineinfo: bool) -> Result<Ptx> {
    type Cache = Mutex<HashMap<(u64, &'static str, bool), String>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    src.hash(&mut h);
    let key = (h.finish(), arch, lineinfo);
    let cache = CACHE.get_or_init(Default::default);
    if let Some(ptx) = cache.lock().unwrap().get(&key) {
        return Ok(Ptx::from_src(ptx.clone()));
    }
    crate::driver::nvrtc_present()?;
    let opts = CompileOptions {
        ftz: Some(false),
        prec_div: Some(true),
        prec_sqrt: Some(true),
        fmad: Some(false),
        use_fast_math: Some(false),
        arch: Some(arch),
        options: if lineinfo {
            vec!["-lineinfo".into()]
        } else {
            vec![]
        },
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(src, opts).map_err(|e| {
        EpError::Backend(format!(
            "NVRTC could not compile an ep-cuda kernel for {arch}: {e}"
        ))
    })?;
    cache.lock().unwrap().insert(key, ptx.to_src());
    Ok(ptx)
}

/// Checks `src` with NVRTC's front end alone (`-fdevice-syntax-only`, no code generated): what
/// kernels_compile asks of each kernel file alone, that it includes all it uses.
pub fn check_syntax(src: &str, arch: &'static str) -> Result<()> {
    crate::driver::nvrtc_present()?;
    let opts = CompileOptions {
        arch: Some(arch),
        options: vec!["-fdevice-syntax-only".into()],
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(src, opts)
        .map(|_| ())
        .map_err(|e| EpError::Backend(format!("NVRTC rejects the source for {arch}: {e}")))
}

/// `sm_XY` for a compute capability, as the `'static` string NVRTC's options want.
pub fn arch_name(major: i32, minor: i32) -> &'static str {
    static NAMES: OnceLock<Mutex<HashMap<(i32, i32), &'static str>>> = OnceLock::new();
    let mut names = NAMES.get_or_init(Default::default).lock().unwrap();
    names
        .entry((major, minor))
        .or_insert_with(|| Box::leak(format!("sm_{major}{minor}").into_boxed_str()))
}

/// A program (`(name, body, entry points)`, as `PROGRAMS` lists them) compiled for `arch` after
/// `prelude` and loaded into `ctx`: its module and its kernels by entry point.
pub struct Program {
    /// The module the program was loaded as.
    pub module: Arc<CudaModule>,
    functions: HashMap<&'static str, CudaFunction>,
}

impl Program {
    /// Compiles `program` for `arch` after `prelude` (without `lineinfo`) and loads it into `ctx`.
    pub fn load(
        ctx: &Arc<CudaContext>,
        arch: &'static str,
        prelude: &str,
        program: (&str, &str, &[&'static str]),
    ) -> Result<Program> {
        Program::load_with(ctx, arch, prelude, false, program)
    }

    /// [`Program::load`], compiled with `lineinfo` ([`compile_with`]).
    pub fn load_with(
        ctx: &Arc<CudaContext>,
        arch: &'static str,
        prelude: &str,
        lineinfo: bool,
        (_, body, names): (&str, &str, &[&'static str]),
    ) -> Result<Program> {
        let module = ctx
            .load_module(compile_with(&source(body, prelude), arch, lineinfo)?)
            .map_err(cuda)?;
        let functions = names
            .iter()
            .map(|&name| Ok((name, load_function(&module, name)?)))
            .collect::<Result<_>>()?;
        Ok(Program { module, functions })
    }

    /// The kernel at entry point `name`; panics if the program has no such entry point.
    pub fn get(&self, name: &str) -> &CudaFunction {
        &self.functions[name]
    }
}

/// The loaded kernels of one device.
pub struct Kernels {
    /// The device's context, which the modules are loaded into.
    pub ctx: Arc<CudaContext>,
    /// The NVRTC target the programs were compiled for (`sm_90`, ...).
    pub arch: &'static str,
    /// The device takes programmatic dependent launches (sm_90 and later; `launch_ex`).
    pub chained_launches: bool,
    functions: HashMap<&'static str, CudaFunction>,
    modules: Vec<Arc<CudaModule>>,
    /// Compiled with the trace stamps ([`crate::CudaOptions::trace`]).
    tracing: bool,
    /// The defines and NVRTC option every program of these kernels is compiled with (the
    /// options' [`crate::CudaOptions::prelude`] and `lineinfo`), for the epilogue variants.
    prelude: String,
    lineinfo: bool,
    /// Under [`crate::CudaOptions::trace`]: the records copied from the device, not printed yet.
    trace: Mutex<Trace>,
    /// Combine variants with a device-code epilogue, by source hash.
    epilogues: Mutex<HashMap<u64, (Arc<CudaModule>, EpilogueKernels)>>,
    /// Programs compiled only when first asked for (`Kernels::program`), by name.
    on_demand: Mutex<HashMap<&'static str, Arc<Program>>>,
}

impl Kernels {
    /// Every program of [`PROGRAMS`], compiled as `options` ask (their defines and NVRTC's
    /// options: `CudaOptions::prelude`) and loaded into `ctx`.
    pub fn load(ctx: &Arc<CudaContext>, options: &crate::CudaOptions) -> Result<Kernels> {
        let (major, minor) = ctx.compute_capability().map_err(cuda)?;
        let arch = arch_name(major, minor);
        let mut functions = HashMap::new();
        let mut modules = Vec::new();
        let prelude = options.prelude();
        for &program in PROGRAMS {
            let p = Program::load_with(ctx, arch, &prelude, options.lineinfo, program)?;
            functions.extend(p.functions);
            modules.push(p.module);
        }
        Ok(Kernels {
            ctx: Arc::clone(ctx),
            arch,
            chained_launches: major >= 9,
            functions,
            tracing: options.trace != crate::options::Trace::Off,
            prelude,
            lineinfo: options.lineinfo,
            trace: Mutex::new(Trace {
                copied: vec![0; modules.len()],
                records: Vec::new(),
            }),
            modules,
            epilogues: Mutex::default(),
            on_demand: Mutex::default(),
        })
    }

    /// The kernel at entry point `name`; panics if no loaded program has it.
    pub fn get(&self, name: &str) -> &CudaFunction {
        &self.functions[name]
    }

    /// `program` (one of the on-demand programs: [`BENCH_PROGRAM`], [`LATE_INPUTS_PROGRAM`])
    /// compiled as these kernels were (the same defines and NVRTC options) into their context, the
    /// first time it is asked for; these kernels are made once per device and options
    /// (world.rs, `device_kernels`), so it is too.
    pub fn program(
        &self,
        program: (&'static str, &'static str, &'static [&'static str]),
    ) -> Result<Arc<Program>> {
        let mut loaded = self.on_demand.lock().unwrap();
        if let Some(p) = loaded.get(program.0) {
            return Ok(Arc::clone(p));
        }
        let p = Arc::new(Program::load_with(
            &self.ctx,
            self.arch,
            &self.prelude,
            self.lineinfo,
            program,
        )?);
        loaded.insert(program.0, Arc::clone(&p));
        Ok(p)
    }

    /// Under [`crate::CudaOptions::trace`], after `stream` synchronised: copies the trace records the kernels
    /// wrote since the last call to the host, to be printed by `print_trace`. Records are not
    /// cleared on the device, so ranks that share this device may collect each other's (and one
    /// still being written).
    pub fn collect_trace(&self, stream: &Arc<CudaStream>) -> Result<()> {
        if !self.tracing {
            return Ok(());
        }
        let mut trace = self.trace.lock().unwrap();
        let Trace { copied, records } = &mut *trace;
        for (module, done) in self.modules.iter().zip(copied.iter_mut()) {
            let mut count = [0u32];
            let view = module.get_global("ep_trace_count", stream).map_err(cuda)?;
            let view = unsafe { view.transmute::<u32>(1) }
                .ok_or_else(|| EpError::Backend("trace count is not a u32".into()))?;
            stream.memcpy_dtoh(&view, &mut count).map_err(cuda)?;
            let all = module
                .get_global("ep_trace_records", stream)
                .map_err(cuda)?;
            let cap = all.len() / (TRACE_RECORD_WORDS * 8);
            let count = count[0] as usize;
            let end = count.min(cap);
            if count > cap && *done < cap {
                eprintln!(
                    "trace: {} records past the buffer's {cap} dropped",
                    count - cap
                );
            }
            if end > *done {
                let words = unsafe { all.transmute::<u64>(cap * TRACE_RECORD_WORDS) }
                    .ok_or_else(|| EpError::Backend("trace records are not u64".into()))?;
                let new = words.slice(*done * TRACE_RECORD_WORDS..end * TRACE_RECORD_WORDS);
                let at = records.len();
                records.resize(at + new.len(), 0);
                stream.memcpy_dtoh(&new, &mut records[at..]).map_err(cuda)?;
                stream.synchronize().map_err(cuda)?;
            }
            *done = end.max(*done);
        }
        Ok(())
    }

    /// Prints the trace records collected so far, one `trace` line each (the stamps as µs from
    /// the start, -1 not reached), for scripts/trace_summary.py and trace_grid.py. Not between
    /// rounds: printed after each, a prefill round's thousands of lines hold its rank's host
    /// long enough to delay the next dispatch's first NVLink stores (seen at dcc018a).
    pub fn print_trace(&self) {
        let records = std::mem::take(&mut self.trace.lock().unwrap().records);
        let mut out = String::new();
        for rec in records.chunks_exact(TRACE_RECORD_WORDS) {
            out += &trace_line(rec);
            out.push('\n');
        }
        print!("{out}");
    }

    /// The combine kernels that reduce, with `name`/`source` compiled in as their epilogue.
    pub fn reduce_with_epilogue(&self, name: &str, user_source: &str) -> Result<EpilogueKernels> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (name, user_source).hash(&mut h);
        let key = h.finish();
        let mut cache = self.epilogues.lock().unwrap();
        if let Some((_, f)) = cache.get(&key) {
            return Ok(f.clone());
        }
        let prelude = format!("{}#define EP_USER_EPILOGUE {name}\n", self.prelude);
        let src = source(&format!("{user_source}\n{COMBINE}"), &prelude);
        let module = self
            .ctx
            .load_module(compile_with(&src, self.arch, self.lineinfo)?)
            .map_err(cuda)?;
        let f = EpilogueKernels {
            reduce: load_function(&module, "ep_combine_reduce")?,
            single: load_function(&module, "ep_combine_single")?,
            single_ll: load_function(&module, "ep_combine_single_ll")?,
        };
        cache.insert(key, (module, f.clone()));
        Ok(f)
    }
}

/// Kernel `name` of `module`, loaded now. Under lazy module loading (the driver's default, and
/// what PyTorch asks for) a kernel would otherwise load at its first launch, and that load may
/// wait for the kernels running in the context, such as a peer's wait kernel spinning on this
/// rank's signal: a rank's first signals then came far too late (5a3b5f2).
pub fn load_function(module: &Arc<CudaModule>, name: &str) -> Result<CudaFunction> {
    let f = module.load_function(name).map_err(cuda)?;
    // SAFETY: `f` is a live function of a loaded module; loading it has no other effect.
    unsafe { cudarc::driver::sys::cuFuncLoad(f.cu_function()) }
        .result()
        .map_err(cuda)?;
    Ok(f)
}

/// Trace records copied from the device (`Kernels::collect_trace`).
struct Trace {
    /// Per module, the records copied so far.
    copied: Vec<usize>,
    /// Their words, TRACE_RECORD_WORDS a record.
    records: Vec<u64>,
}

/// One trace record as a line: `trace NAME rank R block B sm S pub P start T: d1 ... d15`.
fn trace_line(rec: &[u64]) -> String {
    let name: String = rec[0]
        .to_le_bytes()
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| b as char)
        .collect();
    let (rank, block) = (rec[1] >> 32, rec[1] as u32);
    let (sm, published) = (rec[2] >> 32, rec[2] as u32);
    let stamps = &rec[3..];
    let start = stamps[0];
    let mut line =
        format!("trace {name} rank {rank} block {block} sm {sm} pub {published} start {start}:");
    for &t in &stamps[1..] {
        // The difference in integers: %globaltimer reads ~1.8e18 ns, where an f64 steps by 256 ns
        // (traces printed every stamp on that grid before 83aec65).
        let us = if t == 0 {
            -1.0
        } else {
            t.wrapping_sub(start) as i64 as f64 * 1e-3
        };
        line += &format!(" {us:.2}");
    }
    line
}

/// The kernels that reduce a combine, compiled with a device-code epilogue.
#[derive(Clone)]
pub struct EpilogueKernels {
    /// `ep_combine_reduce`.
    pub reduce: CudaFunction,
    /// `ep_combine_single`.
    pub single: CudaFunction,
    /// `ep_combine_single_ll`.
    pub single_ll: CudaFunction,
}

/// A value passed to a kernel by pointer, as `cuLaunchKernel` takes its arguments.
pub trait KernelArg {
    /// The address of the value, as an entry of `cuLaunchKernel`'s argument array.
    fn as_arg(&self) -> *mut c_void;
}

macro_rules! kernel_arg {
    ($($t:ty),*) => {$(
        impl KernelArg for $t {
            fn as_arg(&self) -> *mut c_void {
                self as *const $t as *mut c_void
            }
        }
    )*};
}
kernel_arg!(u64, i32, u32, f32, MsgLayout);

/// A dispatch message as it travels, the kernels' `struct MsgLayout`: ep-core's
/// [`ep_core::MessageLayout`], then each top-k slot's row slot at the receiver (i32), padded to
/// 16 bytes; `bytes` is the whole.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MsgLayout {
    /// Bytes of the row's payload, at offset 0.
    pub payload_bytes: i32,
    /// Offset of the row's scales, bytes.
    pub scales_off: i32,
    /// Bytes of the scales (0 where the format has none).
    pub scale_bytes: i32,
    /// Offset of the source token's index (i32).
    pub src_off: i32,
    /// Offset of the token's top-k expert ids (u16 each, `0xFFFF`: masked).
    pub ids_off: i32,
    /// Offset of the sender's row slot of each top-k slot (i32 each, -1 for none): the end of
    /// ep-core's layout.
    pub slots_off: i32,
    /// Bytes of the whole wire message, a multiple of 16.
    pub bytes: i32,
    /// Top-k slots per token: the entries of the ids and the slots.
    pub top_k: i32,
}

impl From<&ep_core::MessageLayout> for MsgLayout {
    fn from(m: &ep_core::MessageLayout) -> Self {
        MsgLayout {
            payload_bytes: m.payload.len() as i32,
            scales_off: m.scales.start as i32,
            scale_bytes: m.scales.len() as i32,
            src_off: m.src_token as i32,
            ids_off: m.ids as i32,
            slots_off: m.bytes as i32,
            bytes: (m.bytes + (4 * m.top_k).div_ceil(16) * 16) as i32,
            top_k: m.top_k as i32,
        }
    }
}

/// Launches `f` on `stream` with `grid` blocks of `block` threads and `smem` bytes of dynamic
/// shared memory, with positional arguments (the tool kernels: bench, probe, selfcheck, the late
/// inputs hook). The arguments are read by the driver during the call.
///
/// # Safety
/// `args` are `f`'s parameters, in its declared order and of its declared types, and every
/// device pointer among them is a live allocation of at least the size the kernel indexes.
pub(crate) unsafe fn launch(
    stream: &CudaStream,
    f: &CudaFunction,
    grid: u32,
    block: u32,
    smem: u32,
    args: &[&dyn KernelArg],
) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { launch_ex(stream, f, grid, block, smem, args, false) }
}

/// [`launch`], and with `chained` as a programmatic dependent launch (sm_90): the kernel may
/// start while the kernel before it on the stream finishes, and waits for it on the device
/// (`ep_await_prior_grid`, common/ordering.cuh). Only for kernels that call that wait.
///
/// # Safety
/// As [`launch`]'s.
pub(crate) unsafe fn launch_ex(
    stream: &CudaStream,
    f: &CudaFunction,
    grid: u32,
    block: u32,
    smem: u32,
    args: &[&dyn KernelArg],
    chained: bool,
) -> Result<()> {
    let mut ptrs: Vec<*mut c_void> = args.iter().map(|a| a.as_arg()).collect();
    // SAFETY: the caller's contract; `args` outlive the call.
    unsafe { launch_raw(stream, f, grid, block, smem, &mut ptrs, chained) }
}

/// Launches `f` as `launch_ex` does, with `params` as its one parameter (the dispatch, combine
/// and swiglu kernels, `kernels/params.cuh`). The driver copies `params` during the call.
///
/// # Safety
/// `f` declares `P`'s CUDA struct as its one parameter ([`KernelParams`]), and every device
/// pointer in `params` is null where the kernel allows it or else a live allocation of at least
/// the size the kernel indexes with the other fields.
pub unsafe fn launch_params<P: KernelParams>(
    stream: &CudaStream,
    f: &CudaFunction,
    grid: u32,
    block: u32,
    smem: u32,
    params: &P,
    chained: bool,
) -> Result<()> {
    let mut ptrs = [params as *const P as *mut c_void];
    // SAFETY: the caller's contract; `params` outlives the call.
    unsafe { launch_raw(stream, f, grid, block, smem, &mut ptrs, chained) }
}

/// `cuLaunchKernel` (or, `chained`, `cuLaunchKernelEx`) of `f` with `ptrs`, one pointer per
/// parameter; nothing for an empty grid; shared memory past 48 KB allowed first.
///
/// # Safety
/// `ptrs` points at values of `f`'s parameters' types, in order, whose device pointers are live
/// allocations of the sizes the kernel indexes.
unsafe fn launch_raw(
    stream: &CudaStream,
    f: &CudaFunction,
    grid: u32,
    block: u32,
    smem: u32,
    ptrs: &mut [*mut c_void],
    chained: bool,
) -> Result<()> {
    if grid == 0 {
        return Ok(());
    }
    // Beyond 48 KB of shared memory in all, a block's dynamic share must be allowed explicitly.
    if smem > 0 && smem as i32 + f.shared_size_bytes().map_err(cuda)? > 48 * 1024 {
        f.set_attribute(
            cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            smem as i32,
        )
        .map_err(cuda)?;
    }
    let cfg = LaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: smem,
    };
    stream.context().bind_to_thread().map_err(cuda)?;
    if chained {
        return launch_chained(stream, f, &cfg, ptrs);
    }
    // SAFETY: the caller's contract.
    unsafe {
        result::launch_kernel(
            f.cu_function(),
            cfg.grid_dim,
            cfg.block_dim,
            cfg.shared_mem_bytes,
            stream.cu_stream(),
            ptrs,
        )
    }
    .map_err(cuda)
}

/// `cuLaunchKernelEx` with the programmatic stream serialization attribute ([`launch_ex`]).
fn launch_chained(
    stream: &CudaStream,
    f: &CudaFunction,
    cfg: &LaunchConfig,
    ptrs: &mut [*mut c_void],
) -> Result<()> {
    use cudarc::driver::sys;
    // SAFETY: a zeroed attribute is a valid union value; the one field set is the one the id
    // names.
    let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    let config = sys::CUlaunchConfig {
        gridDimX: cfg.grid_dim.0,
        gridDimY: cfg.grid_dim.1,
        gridDimZ: cfg.grid_dim.2,
        blockDimX: cfg.block_dim.0,
        blockDimY: cfg.block_dim.1,
        blockDimZ: cfg.block_dim.2,
        sharedMemBytes: cfg.shared_mem_bytes,
        hStream: stream.cu_stream(),
        attrs: &mut attr,
        numAttrs: 1,
    };
    // SAFETY: as in `launch_raw`; `config` and `attr` outlive the call, which copies them.
    unsafe {
        sys::cuLaunchKernelEx(
            &config,
            f.cu_function(),
            ptrs.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    }
    .result()
    .map_err(cuda)
}

#[cfg(test)]
pub(crate) mod tests {
    /// The wire message is ep-core's message, then one i32 row slot per top-k slot, and stays a
    /// multiple of 16 bytes (messages are copied and stored with 16-byte accesses).
    #[test]
    fn wire_message_appends_the_row_slots() {
        use ep_core::{Format, MessageLayout};
        for format in [Format::Bf16, Format::Fp8, Format::Mxfp4, Format::Nvfp4] {
            for (hidden, top_k) in [(7168, 8), (128, 1), (256, 5), (2048, 64)] {
                let msg = MessageLayout::new(format, hidden, top_k);
                let wire = super::MsgLayout::from(&msg);
                assert_eq!(wire.slots_off as usize, msg.bytes);
                assert!(wire.bytes as usize >= msg.bytes + 4 * top_k);
                assert!((wire.bytes as usize) < msg.bytes + 4 * top_k + 16);
                assert_eq!(wire.bytes % 16, 0, "{format:?} {hidden} {top_k}");
                assert_eq!(wire.payload_bytes as usize, msg.payload.len());
            }
        }
    }

    /// `kernels/` holds the files of FILES and no other, so a file added there is named here.
    #[test]
    fn files_are_the_kernels_folder() {
        fn walk(dir: &std::path::Path, root: &std::path::Path, found: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let path = e.unwrap().path();
                if path.is_dir() {
                    walk(&path, root, found);
                } else if path.extension().is_some_and(|x| x == "cu" || x == "cuh") {
                    let rel = path.strip_prefix(root).unwrap();
                    found.push(rel.to_str().unwrap().replace('\\', "/"));
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kernels");
        let mut found = Vec::new();
        walk(&root, &root, &mut found);
        found.sort();
        let mut named: Vec<_> = super::FILES.iter().map(|(p, _)| p.to_string()).collect();
        named.sort();
        assert_eq!(found, named);
    }

    /// Every file is compiled into some program, once, whole, after a `#line` naming it; and each
    /// file of a program's folder is in that program (a part not included would compile nowhere).
    #[test]
    fn programs_take_every_file_once() {
        let bodies: Vec<&str> = super::PROGRAMS
            .iter()
            .chain([
                &super::PROBE_PROGRAM,
                &super::SELFCHECK_PROGRAM,
                &super::BENCH_PROGRAM,
                &super::LATE_INPUTS_PROGRAM,
            ])
            .map(|(_, body, _)| *body)
            .collect();
        let programs: Vec<String> = bodies.iter().map(|b| super::source(b, "")).collect();
        for (path, text) in super::FILES {
            // A program's top file is its body.
            if bodies.contains(text) {
                continue;
            }
            let marker = format!("#line 1 \"{path}\"\n");
            let mut reached = false;
            for program in &programs {
                let n = program.matches(&marker).count();
                assert!(n <= 1, "{path} twice in a program");
                reached |= n == 1;
            }
            assert!(reached, "{path} is in no program");
            // Its text up to its first include, and its last lines after them.
            let head: String = text
                .lines()
                .take_while(|l| !l.starts_with("#include"))
                .map(|l| format!("{l}\n"))
                .collect();
            let tail: String = text
                .lines()
                .rev()
                .take_while(|l| !l.starts_with("#include"))
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .map(|l| format!("{l}\n"))
                .collect();
            assert!(
                programs
                    .iter()
                    .any(|p| p.contains(&format!("{marker}{head}")) && p.contains(&tail)),
                "{path}"
            );
        }
        for (folder, program) in [("dispatch/", super::DISPATCH), ("combine/", super::COMBINE)] {
            let program = super::source(program, "");
            for (path, _) in super::FILES.iter().filter(|(p, _)| p.starts_with(folder)) {
                assert!(program.contains(&format!("#line 1 \"{path}\"\n")), "{path}");
            }
        }
    }

    /// An include expands in place, once, and the including file's lines go on numbered after it.
    #[test]
    fn includes_expand_once_in_place() {
        let body = "#include \"common/types.cuh\"\nint x;\n#include \"params.cuh\"\n";
        let src = super::source(body, "#define A 1\n");
        assert!(src.starts_with("#define A 1\n#line 1 \"constants.rs\"\n#define EP_MAX_TOP_K"));
        assert!(src.contains("\n#line 1 \"common.cuh\"\n"));
        assert_eq!(src.matches("#line 1 \"common/types.cuh\"").count(), 1);
        assert!(src.ends_with("#line 1 \"program\"\n\nint x;\n\n"));
        let alone = super::file_source("params.cuh");
        assert!(alone.contains("#line 1 \"common/types.cuh\"\n"));
        assert!(alone.contains("\n#line 9 \"params.cuh\"\n"));
    }

    /// Every kernel of the dispatch, combine and swiglu programs takes one parameter struct of
    /// kernels/params.cuh (`__grid_constant__`, not copied to local memory, unless its body takes
    /// no address of it).
    #[test]
    fn kernels_take_one_parameter_struct() {
        for program in [super::DISPATCH, super::COMBINE, super::SWIGLU] {
            let program = &super::source(program, "");
            let decls: Vec<&str> = program.split("__global__ void").skip(1).collect();
            assert!(!decls.is_empty());
            for decl in decls {
                // Past `__launch_bounds__(..)`, if any, to the kernel's own parameter list.
                let decl = match decl.trim_start().strip_prefix("__launch_bounds__") {
                    Some(rest) => &rest[rest.find(')').unwrap() + 1..],
                    None => decl,
                };
                let params = &decl[decl.find('(').unwrap() + 1..decl.find(')').unwrap()];
                let ty = params
                    .trim_start_matches("const ")
                    .trim_start_matches("__grid_constant__ ")
                    .split(' ')
                    .next()
                    .unwrap();
                assert!(
                    params.ends_with(" p") && !params.contains(','),
                    "a kernel takes `{params}`"
                );
                assert!(
                    super::params::layouts().iter().any(|l| l.name == ty),
                    "{ty} is not a struct of params.rs"
                );
            }
        }
    }

    /// A trace record prints as the line scripts/trace_summary.py parses: the name from its
    /// bytes, the stamps as µs from the start, -1 for one not reached; and the record's size is
    /// common/trace.cuh's (its stamps are the constants').
    #[test]
    fn trace_record_prints_as_a_trace_line() {
        let mut rec = vec![0u64; super::TRACE_RECORD_WORDS];
        rec[0] = u64::from_le_bytes(*b"send\0\0\0\0");
        rec[1] = (1u64 << 32) | 4095;
        rec[2] = (131u64 << 32) | 1;
        rec[3] = 1_000_000;
        rec[4] = 1_001_500;
        rec[6] = 1_000_250;
        let line = super::trace_line(&rec);
        let want = "trace send rank 1 block 4095 sm 131 pub 1 start 1000000: 1.50 -1.00 0.25";
        assert!(line.starts_with(want), "{line}");
        assert_eq!(
            line.split(':').nth(1).unwrap().split_whitespace().count(),
            31
        );
        // At a real %globaltimer (~1.8e18 ns) a 30 ns step still prints: an f64 of the
        // reading itself steps by 256 ns there.
        let start = 1_795_521_494_967_019_424u64;
        rec[3] = start;
        rec[4] = start + 30;
        rec[6] = start + 1_310;
        let line = super::trace_line(&rec);
        let want = format!("start {start}: 0.03 -1.00 1.31 ");
        assert!(line.contains(&want), "{line}");
        assert!(super::source("", "").contains("#define EP_TRACE_WORDS (3 + EP_N_STAMPS)"));
    }

    /// The shared constants are defined once, by kernels/constants.rs, ahead of every program
    /// and every file compiled alone: no kernel file defines one of them again (NVRTC would only
    /// warn of a different value), and each has one value.
    #[test]
    fn shared_constants_are_defined_once_ahead_of_every_file() {
        let defines = super::constants::defines();
        let mut names: Vec<&str> = defines.iter().map(|(n, _)| n.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), defines.len());
        for (path, text) in super::FILES {
            for name in &names {
                assert!(
                    !text.contains(&format!("#define {name} ")),
                    "{path} defines {name}: it is kernels/constants.rs'"
                );
            }
            assert!(super::file_source(path).contains(&super::constants::header()));
        }
        let header = super::constants::header();
        assert!(header.contains(&format!(
            "#define EP_MAX_TOP_K {}\n",
            ep_core::config::MAX_TOP_K
        )));
        for (body, prelude) in [(super::DISPATCH, ""), ("", "#define A 1\n")] {
            assert!(super::source(body, prelude).contains(&header));
        }
    }
}
