//! Device self-checks (kernels in `kernels/selfcheck.cu`): arithmetic the kernels take to be
//! exact, checked on the GPU that runs them. The FP8 encode divides through a reciprocal
//! (`ep_div_normal`, common/numerics.cuh) where the contract says `x / scale`; it must give
//! `__fdiv_rn`'s e4m3 bytes, which depends on the device's reciprocal instruction, so the CUDA
//! conformance run checks it first (`ep conformance --backend cuda`, `tests/conformance.rs`).

use std::fmt;

use ep_core::Result;

use crate::driver::cuda;
use crate::kernels::{launch, SELFCHECK_PROGRAM};
use crate::memory::DevBuf;
use crate::world::on_demand_program;

/// Random f32 pairs the check tries beside the exhaustive bf16 ones.
const F32_PAIRS: u64 = 1 << 32;

/// The words of one check's tallies on the device (selfcheck.cu's EP_CHECK_WORDS).
const WORDS: usize = crate::kernels::constants::CHECK_WORDS;

/// One check's tallies (selfcheck.cu's EP_CHECK_WORDS, in order).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DivisionCounts {
    /// Pairs `(x, amax)` the check tried.
    pub pairs: u64,
    /// Scales `max(amax, 1e-4) / 448` whose f32 bits differ from `__fdiv_rn`'s.
    pub scales: u64,
    /// e4m3 bytes of `x / scale` that differ.
    pub fp8: u64,
    /// Quotients of at least 2^-10 whose f32 bits differ.
    pub quotients: u64,
    /// One differing pair, `(x, amax)`.
    pub example: Option<(f32, f32)>,
}

impl DivisionCounts {
    fn from_words(w: [u64; WORDS]) -> Self {
        DivisionCounts {
            pairs: w[0],
            scales: w[1],
            fp8: w[2],
            quotients: w[3],
            example: (w[4] != u64::MAX).then(|| {
                (
                    f32::from_bits(w[4] as u32),
                    f32::from_bits((w[4] >> 32) as u32),
                )
            }),
        }
    }

    /// Pairs were tried and none differed.
    pub fn passed(&self) -> bool {
        self.pairs > 0 && self.scales + self.fp8 + self.quotients == 0
    }
}

/// The FP8 encode's division on one GPU: every (bf16 element, bf16 block amax) pair a dispatch
/// can encode, and random f32 pairs (the combine's FP8 epilogue, SwiGLU).
#[derive(Clone, Debug)]
pub struct DivisionCheck {
    /// The GPU's name, as the driver reports it.
    pub device: String,
    /// Every (bf16 element, bf16 block amax) pair.
    pub bf16: DivisionCounts,
    /// The random f32 pairs.
    pub f32: DivisionCounts,
}

impl DivisionCheck {
    /// Both checks tried pairs and none differed.
    pub fn passed(&self) -> bool {
        self.bf16.passed() && self.f32.passed()
    }
}

/// The FP8 division check on every visible GPU, in order (what a CUDA conformance run does
/// first).
pub fn check_every_gpu() -> Result<Vec<DivisionCheck>> {
    (0..crate::CudaBackend::probe()?.len())
        .map(check_fp8_division)
        .collect()
}

/// Runs the FP8 division check on GPU `gpu`.
pub fn check_fp8_division(gpu: usize) -> Result<DivisionCheck> {
    let (ctx, k) = on_demand_program(gpu, "FP8 division check", SELFCHECK_PROGRAM)?;
    let ctx = &ctx;
    let stream = ctx.new_stream().map_err(cuda)?;
    let out = DevBuf::new(ctx, WORDS * 8)?;
    let run = |launch_it: &dyn Fn() -> Result<()>| -> Result<DivisionCounts> {
        let mut words = [0u64; WORDS];
        words[4] = u64::MAX;
        out.upload(&words, &stream)?;
        launch_it()?;
        out.download(&mut words, &stream)?;
        Ok(DivisionCounts::from_words(words))
    };
    // A block per finite non-negative bf16 amax (bits 0 .. 0x7f80).
    let bf16 = run(&|| {
        unsafe {
            // SAFETY: the arguments are the selfcheck.cu kernel's parameters in its order, the buffers
            // sized for the words it writes.
            launch(
                &stream,
                k.get("ep_check_fp8_division_bf16"),
                0x7f80,
                256,
                0,
                &[&out.ptr],
            )
        }
    })?;
    let f32 = run(&|| {
        let (seed, pairs) = (0x5eed_u64, F32_PAIRS);
        unsafe {
            // SAFETY: the arguments are the selfcheck.cu kernel's parameters in its order, the buffers
            // sized for the words it writes.
            launch(
                &stream,
                k.get("ep_check_fp8_division_f32"),
                4096,
                256,
                0,
                &[&seed, &pairs, &out.ptr],
            )
        }
    })?;
    Ok(DivisionCheck {
        device: ctx.name().map_err(cuda)?,
        bf16,
        f32,
    })
}

impl fmt::Display for DivisionCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} pairs, {} scales / {} e4m3 / {} quotients differ",
            self.pairs, self.scales, self.fp8, self.quotients
        )?;
        if let Some((x, a)) = self.example {
            write!(f, " (e.g. x = {x:e}, amax = {a:e})")?;
        }
        Ok(())
    }
}

impl fmt::Display for DivisionCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.passed() { "ok" } else { "FAILED" };
        write!(
            f,
            "{verdict:<6} FP8 division on {}: every bf16 pair: {}; random f32: {}",
            self.device, self.bf16, self.f32
        )
    }
}

#[cfg(test)]
mod tests {
    use super::DivisionCounts;

    /// An untouched example word reads as none.
    #[test]
    fn tallies_read_from_words() {
        let c = DivisionCounts::from_words([10, 0, 0, 0, u64::MAX]);
        assert!(c.passed() && c.example.is_none());
        let c = DivisionCounts::from_words([
            10,
            0,
            1,
            0,
            (2.0f32.to_bits() as u64) << 32 | 1.5f32.to_bits() as u64,
        ]);
        assert!(!c.passed());
        assert_eq!(c.example, Some((1.5, 2.0)));
        assert!(
            !DivisionCounts::default().passed(),
            "no pairs tried is no pass"
        );
    }
}
