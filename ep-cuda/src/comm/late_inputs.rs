//! `TestHooks::late_inputs_ns` (`EP_CUDA_LATE_INPUTS=NS`), a test hook for the chained first
//! kernel (`Chain::First`): after a
//! phase's inputs are uploaded, the kernel a caller's model could run there, one that lets its
//! dependents launch at once and writes the phase's inputs last (late_inputs.cu, `ep_late_inputs`:
//! each word changed, then after NS nanoseconds put back; compiled only where the hook is set). The conformance suite run with it set checks
//! that every phase's first kernel waits for the kernel before it before it reads its inputs: one
//! that did not would route or weigh the changed words and miss the oracle.

use std::sync::Arc;

use ep_core::{EpConfig, EpError, Result};

use super::CudaComm;
use crate::kernels::{launch, Kernels, Program, LATE_INPUTS_PROGRAM};
use crate::memory::DevBuf;

/// How `ep_late_inputs` changes a word while it holds it: an expert id (a non-negative one to
/// its neighbour, a masked one kept: the kernels take ids as validated), or any other word (its
/// low bit of each half: a bf16 pair, or an f32 a little off).
#[derive(Clone, Copy)]
pub(super) enum Words {
    ExpertIds = 0,
    Bits = 1,
}

/// The hook's state on one rank: how long the late kernel holds the changed words, where it
/// keeps the words it changed, and its program (compiled as the rank's kernels are).
pub(crate) struct LateInputs {
    hold_ns: u64,
    saved: DevBuf,
    program: Arc<Program>,
}

impl LateInputs {
    /// The hook where `options` set it, with room for the largest input it changes (the tokens,
    /// the ids, the weights), and `ep_late_inputs` beside the rank's `kernels`, compiled as they
    /// were.
    pub(crate) fn from_options(
        cfg: &EpConfig,
        options: &crate::CudaOptions,
        kernels: &Kernels,
    ) -> Result<Option<Self>> {
        let Some(hold_ns) = options.hooks.late_inputs_ns else {
            return Ok(None);
        };
        if hold_ns == 0 || hold_ns > 10_000_000 {
            return Err(EpError::Backend(format!(
                "hooks.late_inputs_ns = {hold_ns}: expected nanoseconds from 1 to 10000000"
            )));
        }
        let t = cfg.max_tokens_per_rank;
        let words = (t * cfg.hidden / 2).max(t * cfg.top_k).max(1);
        Ok(Some(LateInputs {
            hold_ns,
            saved: DevBuf::new(&kernels.ctx, words * 4)?,
            program: kernels.program(LATE_INPUTS_PROGRAM)?,
        }))
    }
}

impl CudaComm {
    /// Under the hook: `ep_late_inputs` on the rank's stream over the first `n`
    /// 4-byte words of `buf`, launched plain (as a caller's kernel after its own copies), and not
    /// marked as a kernel of the phase (`CudaComm::launch` would add it to a probed breakdown).
    pub(super) fn late_inputs(&self, ptr: u64, bytes: usize, n: usize, words: Words) -> Result<()> {
        let Some(late) = &self.late else {
            return Ok(());
        };
        let n = n.min(bytes / 4).min(late.saved.len / 4) as u64;
        let k = late.program.get("ep_late_inputs");
        let args: [&dyn crate::kernels::KernelArg; 5] =
            [&ptr, &late.saved.ptr, &n, &(words as i32), &late.hold_ns];
        // A few blocks: the phase's first kernel, launched as it lets its dependents go, finds
        // room beside it.
        unsafe {
            // SAFETY: ep_late_inputs' parameters in its order; `words` and `saved` hold `n` words each.
            launch(&self.stream, k, 8, 256, 0, &args)
        }
    }
}
