//! Latency probes of the protocol's signals (`ep bench --probe-signals`; kernels in
//! `kernels/probe.cu`): round trips of a word one block publishes and other blocks poll, per
//! flavour of publish and poll, per number of pollers and per nap between polls; a load or fence
//! right after a block's own stores; instruction fetch; and the step of `%globaltimer`, which the
//! kernels' trace stamps read. These say what a decode phase's steps are made of (docs/perf.md,
//! "The floors"), on one GPU.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::{sys, CudaContext, CudaStream};
use ep_core::{EpError, Result};

use crate::driver::cuda;
use crate::kernels::{launch, Program, PROBE_PROGRAM};
use crate::memory::DevBuf;
use crate::world::on_demand_program;

/// How the publishing block raises a word (the kernels' EP_PROBE_PUB_*, in order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Publish {
    /// `fence.acq_rel.sys` then `st.relaxed.sys`: what `ep_publish` does.
    Fence,
    /// `st.release.sys`.
    Release,
    /// `st.relaxed.sys` alone: orders nothing, the store's own cost.
    Relaxed,
    /// `fence.sc.sys` (`__threadfence_system`) then `st.relaxed.sys`.
    ScFence,
    /// `fence.acq_rel.gpu` then `st.relaxed.gpu`: enough only inside one GPU.
    GpuFence,
}

/// How a polling block reads it (the kernels' EP_PROBE_POLL_*, in order). The relaxed and volatile
/// polls take one `fence.acq_rel.sys` once the word is there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Poll {
    /// `ld.acquire.sys`: what `ep_poll_counts` does.
    Acquire,
    /// `ld.relaxed.sys`.
    Relaxed,
    /// `ld.volatile`.
    Volatile,
    /// `ld.acquire.gpu`: enough only inside one GPU.
    AcquireGpu,
}

/// What warp 0 does after the block's stores: probe.cu's `ep_probe_load_after_stores` op numbers
/// (the loads of each [`Poll`] flavour, without a fence, then EP_PROBE_OP_*).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadOp {
    /// `ld.acquire.sys`.
    Acquire = 0,
    /// `ld.relaxed.sys`.
    Relaxed = 1,
    /// `ld.volatile`.
    Volatile = 2,
    /// `ld.acquire.gpu`.
    AcquireGpu = 3,
    /// A weak `ld.global`.
    Plain = 4,
    /// `ld.relaxed.sys` then `fence.acq_rel.sys`: an acquire built of parts.
    RelaxedFence = 5,
    /// `fence.acq_rel.sys` alone.
    FenceSys = 6,
    /// `fence.acq_rel.gpu` alone.
    FenceGpu = 7,
    /// Nothing: the rounds' own cost, subtracted from the others.
    Nothing = 8,
}

/// The cost of one op after the block's stores of `stores_bytes`, ns: a round with the op less
/// a round without it (median over launches).
#[derive(Clone, Copy, Debug)]
pub struct LoadAfterStores {
    /// The op warp 0 ran.
    pub op: LoadOp,
    /// Bytes the block stored before it.
    pub stores_bytes: usize,
    /// The op's cost, ns.
    pub ns: f64,
}

/// One configuration of the round trip (probe.cu's `ep_probe_signal`).
#[derive(Clone, Copy, Debug)]
pub struct SignalCase {
    /// Blocks polling, one per SM (the grid is this plus the publisher).
    pub pollers: u32,
    /// Words published each round; each polling block reads them all, a thread per word.
    pub words: u32,
    /// How the publisher raises the words.
    pub publish: Publish,
    /// How the pollers read them.
    pub poll: Poll,
    /// `__nanosleep` between a poller's loads (0: none).
    pub nap_ns: u32,
    /// Bytes the publisher writes before it publishes (the row a count vouches for).
    pub payload_bytes: usize,
}

impl fmt::Display for SignalCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:>3} pollers x {:>3} words  publish {:<8} poll {:<10} nap {:>4} ns  payload {:>5} B",
            self.pollers,
            self.words,
            format!("{:?}", self.publish),
            format!("{:?}", self.poll),
            self.nap_ns,
            self.payload_bytes
        )
    }
}

/// A case and its round trip: publish, every poller sees it, every poller's ack seen back.
#[derive(Clone, Copy, Debug)]
pub struct SignalRoundTrip {
    /// The configuration run.
    pub case: SignalCase,
    /// Median over launches of the mean round trip, ns.
    pub round_trip_ns: f64,
}

/// What the probes found on one GPU.
#[derive(Clone, Debug)]
pub struct SignalProbes {
    /// The GPU's name, as the driver reports it.
    pub device: String,
    /// The GPU's SMs (multiprocessors).
    pub sms: u32,
    /// The smallest step `%globaltimer` took, ns.
    pub timer_step_ns: u64,
    /// How many steps `%globaltimer` took in 100 µs.
    pub timer_steps_per_100us: u64,
    /// The smallest step the SM clock (clock64) took between two reads, cycles (the trace's
    /// stamps read it).
    pub clock_step_cycles: u64,
    /// The SM clock's cycles over the same ~100 µs.
    pub clock_cycles_per_100us: u64,
    /// Each case run and its round trip, in the order run.
    pub round_trips: Vec<SignalRoundTrip>,
    /// Each op's cost after each size of stores.
    pub loads: Vec<LoadAfterStores>,
    /// Instruction fetch: [`CodeRun`]s of probe.cu's `ep_probe_code`, launch after launch.
    pub code_runs: Vec<CodeRun>,
    /// The SM clock the device reports (kHz), for the runs' cycles in time.
    pub clock_khz: u64,
}

/// One launch of `ep_probe_code`: a warp runs ~64 KB of straight code twice; SM cycles of each
/// pass. The first pass fetches the code, the second finds it in the SM's caches if it fits.
#[derive(Clone, Copy, Debug)]
pub struct CodeRun {
    /// SM cycles of the first pass, which fetches the code.
    pub first_pass_cycles: u64,
    /// SM cycles of the second pass, over the same code.
    pub second_pass_cycles: u64,
}

/// The cases `probe_signals` runs with `sms` SMs: the protocol's poll (acquire, nap 64 ns) and
/// publish (fence, relaxed store) against each other flavour, with one poller and with a
/// polling block on every other SM, as a single-launch phase's grid polls its counts.
pub fn default_cases(sms: u32) -> Vec<SignalCase> {
    let all = sms.saturating_sub(1).max(1);
    let base = SignalCase {
        pollers: 1,
        words: 1,
        publish: Publish::Fence,
        poll: Poll::Acquire,
        nap_ns: 64,
        payload_bytes: 0,
    };
    let mut cases = Vec::new();
    for (pollers, words) in [(1, 1), (all, 1), (all, 32), (all, 256)] {
        for poll in [
            Poll::Acquire,
            Poll::Relaxed,
            Poll::Volatile,
            Poll::AcquireGpu,
        ] {
            cases.push(SignalCase {
                pollers,
                words,
                poll,
                ..base
            });
        }
        for nap_ns in [0, 32, 256, 1024] {
            cases.push(SignalCase {
                pollers,
                words,
                nap_ns,
                ..base
            });
        }
        for publish in [
            Publish::Release,
            Publish::Relaxed,
            Publish::ScFence,
            Publish::GpuFence,
        ] {
            cases.push(SignalCase {
                pollers,
                words,
                publish,
                ..base
            });
        }
    }
    // A 1-token BF16 row written before the publish: what the fence waits for.
    for publish in [Publish::Fence, Publish::Release, Publish::Relaxed] {
        cases.push(SignalCase {
            payload_bytes: 14336,
            publish,
            ..base
        });
    }
    cases.push(SignalCase {
        pollers: 8,
        words: 256,
        ..base
    });
    cases.push(SignalCase {
        pollers: 32,
        words: 256,
        ..base
    });
    cases
}

const ROUNDS: i32 = 2000;
const LAUNCHES: usize = 5;
const TIMEOUT: Duration = Duration::from_secs(2);

/// The median over LAUNCHES runs of `run`.
fn median_of_launches(mut run: impl FnMut() -> Result<f64>) -> Result<f64> {
    Ok(crate::bench::median(
        (0..LAUNCHES).map(|_| run()).collect::<Result<_>>()?,
    ))
}

/// Runs the timer probe and `cases` (`default_cases` when `None`) on GPU `gpu`.
pub fn probe_signals(gpu: usize, cases: Option<Vec<SignalCase>>) -> Result<SignalProbes> {
    let (ctx, k) = on_demand_program(gpu, "signal probe", PROBE_PROGRAM)?;
    let ctx = &ctx;
    let sms = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(cuda)? as u32;
    let device = ctx.name().map_err(cuda)?;
    let stream = ctx.new_stream().map_err(cuda)?;
    let timer = DevBuf::new(ctx, 32)?;
    let mut timer_got = [0u64; 4];
    unsafe {
        // SAFETY: the arguments are the probe.cu kernel's parameters in its order, each device
        // pointer a live buffer of the size the kernel indexes.
        launch(&stream, k.get("ep_probe_timer"), 1, 32, 0, &[&timer.ptr])
    }?;
    timer.download(&mut timer_got, &stream)?;
    let [timer_step_ns, timer_steps_per_100us, clock_step_cycles, clock_cycles_per_100us] =
        timer_got;

    let out = DevBuf::new(ctx, 16)?;
    let mut got = [0u64; 2];

    let cases = cases.unwrap_or_else(|| default_cases(sms));
    let max_words = cases.iter().map(|c| c.words).max().unwrap_or(1);
    let max_payload = cases.iter().map(|c| c.payload_bytes).max().unwrap_or(0);
    let words = DevBuf::new(ctx, max_words as usize * 8)?;
    let acks = DevBuf::new(ctx, sms as usize * 8)?;
    let payload = DevBuf::new(ctx, max_payload)?;
    let mut round_trips = Vec::new();
    for case in cases {
        if case.pollers == 0 || case.pollers >= sms || case.words == 0 || case.words > 1024 {
            return Err(EpError::Backend(format!(
                "signal probe {case}: 1 to {} pollers (one per SM besides the publisher's) and 1 to 1024 words",
                sms - 1
            )));
        }
        let round_trip_ns = median_of_launches(|| {
            words.fill(0)?;
            acks.fill(0)?;
            out.fill(0)?;
            let (n_words, publish, poll, nap) = (
                case.words as i32,
                case.publish as i32,
                case.poll as i32,
                case.nap_ns as i32,
            );
            let (payload16, timeout) =
                ((case.payload_bytes / 16) as u64, TIMEOUT.as_nanos() as u64);
            // One block per SM at most (no shared memory to speak of), so every block is
            // resident and the polls end; a thread of the publisher per ack, so it waits for
            // them side by side.
            unsafe {
                // SAFETY: the arguments are the probe.cu kernel's parameters in its order, each device
                // pointer a live buffer of the size the kernel indexes.
                launch(
                    &stream,
                    k.get("ep_probe_signal"),
                    case.pollers + 1,
                    case.words.max(case.pollers).next_multiple_of(32),
                    0,
                    &[
                        &words.ptr,
                        &acks.ptr,
                        &n_words,
                        &ROUNDS,
                        &publish,
                        &poll,
                        &nap,
                        &payload.ptr,
                        &payload16,
                        &timeout,
                        &out.ptr,
                    ],
                )
            }?;
            out.download(&mut got, &stream)?;
            if got[1] != 0 {
                return Err(EpError::Backend(format!(
                    "signal probe {case}: a poll passed {TIMEOUT:?} (a block not resident?)"
                )));
            }
            Ok(got[0] as f64 / (ROUNDS - 1) as f64)
        })?;
        round_trips.push(SignalRoundTrip {
            case,
            round_trip_ns,
        });
    }
    let loads = probe_loads(ctx, &k, &stream, &out)?;
    let clock_khz = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
        .map_err(cuda)? as u64;
    let mut code_runs = Vec::new();
    let code_out = DevBuf::new(ctx, 24)?;
    for seed in 0..4u32 {
        unsafe {
            // SAFETY: the arguments are the probe.cu kernel's parameters in its order, each device
            // pointer a live buffer of the size the kernel indexes.
            launch(
                &stream,
                k.get("ep_probe_code"),
                1,
                32,
                0,
                &[&code_out.ptr, &seed],
            )
        }?;
        let mut c = [0u64; 3];
        code_out.download(&mut c, &stream)?;
        code_runs.push(CodeRun {
            first_pass_cycles: c[0],
            second_pass_cycles: c[1],
        });
    }
    Ok(SignalProbes {
        device,
        sms,
        timer_step_ns,
        timer_steps_per_100us,
        clock_step_cycles,
        clock_cycles_per_100us,
        round_trips,
        loads,
        code_runs,
        clock_khz,
    })
}

/// Every [`LoadOp`] after stores of 0, 512, 14,336 (a BF16 row) and 65,536 bytes, one block of
/// 512 threads.
fn probe_loads(
    ctx: &Arc<CudaContext>,
    k: &Program,
    stream: &CudaStream,
    out: &DevBuf,
) -> Result<Vec<LoadAfterStores>> {
    const ITERS: i32 = 4000;
    let sizes = [0usize, 512, 14336, 65536];
    let word = DevBuf::new(ctx, 64 * 8)?;
    word.fill(0)?;
    let scratch = DevBuf::new(ctx, *sizes.iter().max().unwrap())?;
    let round_ns = |op: LoadOp, bytes: usize| -> Result<f64> {
        median_of_launches(|| {
            let (stores16, code) = ((bytes / 16) as u64, op as i32);
            unsafe {
                // SAFETY: the arguments are the probe.cu kernel's parameters in its order, each device
                // pointer a live buffer of the size the kernel indexes.
                launch(
                    stream,
                    k.get("ep_probe_load_after_stores"),
                    1,
                    512,
                    0,
                    &[&word.ptr, &scratch.ptr, &stores16, &code, &ITERS, &out.ptr],
                )
            }?;
            let mut got = [0u64; 1];
            out.download(&mut got, stream)?;
            Ok(got[0] as f64 / ITERS as f64)
        })
    };
    let mut loads = Vec::new();
    for bytes in sizes {
        let base = round_ns(LoadOp::Nothing, bytes)?;
        for op in [
            LoadOp::Acquire,
            LoadOp::Relaxed,
            LoadOp::Volatile,
            LoadOp::AcquireGpu,
            LoadOp::Plain,
            LoadOp::RelaxedFence,
            LoadOp::FenceSys,
            LoadOp::FenceGpu,
            LoadOp::Nothing,
        ] {
            let ns = if op == LoadOp::Nothing {
                base
            } else {
                round_ns(op, bytes)? - base
            };
            loads.push(LoadAfterStores {
                op,
                stores_bytes: bytes,
                ns,
            });
        }
    }
    Ok(loads)
}

impl fmt::Display for SignalProbes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "signal probes on {} ({} SMs)", self.device, self.sms)?;
        writeln!(
            f,
            "%globaltimer: smallest step {} ns, {} steps in 100 us",
            self.timer_step_ns, self.timer_steps_per_100us
        )?;
        writeln!(
            f,
            "SM clock (clock64): smallest step {} cycles, {} cycles over the same run",
            self.clock_step_cycles, self.clock_cycles_per_100us
        )?;
        writeln!(
            f,
            "round trip: publish, every poller sees it, every poller's ack back (median of {LAUNCHES} launches of {ROUNDS} rounds)"
        )?;
        for r in &self.round_trips {
            writeln!(f, "  {}  {:>7.0} ns", r.case, r.round_trip_ns)?;
        }
        for (i, r) in self.code_runs.iter().enumerate() {
            let us = |c: u64| c as f64 / self.clock_khz as f64 * 1e3;
            writeln!(
                f,
                "code fetch, launch {}: ~64 KB of straight code, first pass {} cycles ({:.2} us at {} MHz), second {} cycles ({:.2} us)",
                i + 1,
                r.first_pass_cycles,
                us(r.first_pass_cycles),
                self.clock_khz / 1000,
                r.second_pass_cycles,
                us(r.second_pass_cycles)
            )?;
        }
        writeln!(
            f,
            "warp 0's op right after the block's stores, ns (a round with it less one without; Nothing: the round itself)"
        )?;
        for l in &self.loads {
            writeln!(
                f,
                "  stores {:>5} B  {:<12} {:>7.0} ns",
                l.stores_bytes,
                format!("{:?}", l.op),
                l.ns
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{LoadOp, Poll, Publish};
    use crate::kernels::constants::defines;

    /// The enums' numbers are the kernels' (kernels/constants.rs names them for probe.cu); a poll
    /// and the load it makes share one.
    #[test]
    fn codes_match_the_kernels() {
        let codes = [
            (Publish::Fence as u64, "EP_PROBE_PUB_FENCE"),
            (Publish::Release as u64, "EP_PROBE_PUB_RELEASE"),
            (Publish::Relaxed as u64, "EP_PROBE_PUB_RELAXED"),
            (Publish::ScFence as u64, "EP_PROBE_PUB_SC_FENCE"),
            (Publish::GpuFence as u64, "EP_PROBE_PUB_GPU_FENCE"),
            (Poll::Acquire as u64, "EP_PROBE_POLL_ACQUIRE"),
            (Poll::Relaxed as u64, "EP_PROBE_POLL_RELAXED"),
            (Poll::Volatile as u64, "EP_PROBE_POLL_VOLATILE"),
            (Poll::AcquireGpu as u64, "EP_PROBE_POLL_ACQUIRE_GPU"),
            (LoadOp::Plain as u64, "EP_PROBE_OP_PLAIN"),
            (LoadOp::RelaxedFence as u64, "EP_PROBE_OP_RELAXED_FENCE"),
            (LoadOp::FenceSys as u64, "EP_PROBE_OP_FENCE_SYS"),
            (LoadOp::FenceGpu as u64, "EP_PROBE_OP_FENCE_GPU"),
            (LoadOp::Nothing as u64, "EP_PROBE_OP_NOTHING"),
        ];
        let defines = defines();
        for (code, name) in codes {
            let value = defines.iter().find(|(n, _)| n == name).map(|d| d.1);
            assert_eq!(value, Some(code), "{name}");
        }
        assert_eq!(Poll::Acquire as u64, LoadOp::Acquire as u64);
        assert_eq!(Poll::Relaxed as u64, LoadOp::Relaxed as u64);
        assert_eq!(Poll::Volatile as u64, LoadOp::Volatile as u64);
        assert_eq!(Poll::AcquireGpu as u64, LoadOp::AcquireGpu as u64);
    }
}
