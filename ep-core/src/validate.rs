//! Input checks shared by the oracle and every backend. They run before anything is written, so
//! a bad call leaves every buffer and flag as it was.

use crate::backend::EpComm;
use crate::config::EpConfig;
use crate::device_io::{CombineArgs, DispatchArgs};
use crate::epilogue::Epilogue;
use crate::error::{EpError, Result};
use crate::io::{CombineInput, DispatchInput};
use crate::memory::Buffer;

fn shape(rank: usize, what: &'static str, expected: &[usize], got: &[usize]) -> Result<()> {
    if expected == got {
        Ok(())
    } else {
        Err(EpError::Shape {
            rank,
            what,
            expected: expected.to_vec(),
            got: got.to_vec(),
        })
    }
}

/// Checks one rank's dispatch input against the config.
pub fn dispatch_input(cfg: &EpConfig, rank: usize, input: &DispatchInput<'_>) -> Result<()> {
    let t = input.tokens.nrows();
    if t > cfg.max_tokens_per_rank {
        return Err(EpError::TooManyTokens {
            rank,
            tokens: t,
            max: cfg.max_tokens_per_rank,
        });
    }
    shape(rank, "tokens", &[t, cfg.hidden], input.tokens.shape())?;
    shape(rank, "topk_ids", &[t, cfg.top_k], input.topk_ids.shape())?;
    if let Some(s) = input.input_scales {
        shape(rank, "input_scales", &[t], s.shape())?;
        if let Some((token, &value)) = s
            .iter()
            .enumerate()
            .find(|(_, v)| !(v.is_finite() && **v > 0.0))
        {
            return Err(EpError::InvalidInputScale { rank, token, value });
        }
    }
    if !input.tokens.is_standard_layout() {
        return Err(EpError::NotContiguous {
            rank,
            what: "tokens",
        });
    }
    for ((token, slot), &id) in input.topk_ids.indexed_iter() {
        if id < -1 || id >= cfg.n_experts as i32 {
            return Err(EpError::ExpertIdOutOfRange {
                rank,
                token,
                slot,
                id,
                n_experts: cfg.n_experts,
            });
        }
    }
    Ok(())
}

/// Checks one rank's combine input against the rows its dispatch produced and its token count.
/// `host_closures` says whether the backend can run host-closure epilogues.
pub fn combine_input(
    cfg: &EpConfig,
    rank: usize,
    rows: usize,
    n_tokens: usize,
    input: &CombineInput<'_>,
    host_closures: bool,
) -> Result<()> {
    shape(
        rank,
        "expert_out",
        &[rows, cfg.hidden],
        input.expert_out.shape(),
    )?;
    if !input.expert_out.is_standard_layout() {
        return Err(EpError::NotContiguous {
            rank,
            what: "expert_out",
        });
    }
    if let Some(w) = &input.weights {
        let (a, b) = w.dim();
        shape(rank, "router weights", &[n_tokens, cfg.top_k], &[a, b])?;
    }
    reduction(
        cfg,
        rank,
        n_tokens,
        input.weights.is_some(),
        input.epilogue,
        host_closures,
    )
}

/// What combine does with the rows: an epilogue needs weights and must suit the config, and the
/// fused shared expert needs the weighted sum.
fn reduction(
    cfg: &EpConfig,
    rank: usize,
    n_tokens: usize,
    weighted: bool,
    epilogue: Option<&Epilogue>,
    host_closures: bool,
) -> Result<()> {
    if let Some(e) = epilogue {
        if !weighted {
            return Err(EpError::Incompatible {
                rank,
                what: "an epilogue without router weights",
                why: "epilogues act on the reduced [T, hidden] output",
            });
        }
        e.check(cfg, rank, n_tokens, host_closures)?;
    }
    if !weighted && cfg.fused_shared_expert {
        return Err(EpError::Incompatible {
            rank,
            what: "the fused shared expert without router weights",
            why:
                "its output is added to the weighted sum; an unreduced output has nowhere to put it",
        });
    }
    Ok(())
}

/// A buffer of `len` elements that must hold `need` for `what`.
fn holds(rank: usize, what: &'static str, need: usize, len: usize) -> Result<()> {
    if len >= need {
        Ok(())
    } else {
        Err(EpError::Shape {
            rank,
            what,
            expected: vec![need],
            got: vec![len],
        })
    }
}

/// Checks one rank's dispatch buffers against the config: the token count and that each buffer
/// holds the round's elements. Values in the buffers are the backend's to check where it reads
/// them.
pub fn dispatch_args<C: EpComm + ?Sized>(
    cfg: &EpConfig,
    rank: usize,
    args: &DispatchArgs<'_, C>,
) -> Result<()> {
    let t = args.n_tokens;
    if t > cfg.max_tokens_per_rank {
        return Err(EpError::TooManyTokens {
            rank,
            tokens: t,
            max: cfg.max_tokens_per_rank,
        });
    }
    holds(rank, "tokens", t * cfg.hidden, args.tokens.len())?;
    holds(rank, "topk_ids", t * cfg.top_k, args.topk_ids.len())?;
    if let Some(s) = args.input_scales {
        holds(rank, "input_scales", t, s.len())?;
    }
    Ok(())
}

/// Checks one rank's combine buffers against the rows its dispatch produced (`rows`: an upper
/// bound where the backend keeps the count on the device) and its token count, and the epilogue
/// as [`combine_input`] does.
pub fn combine_args<C: EpComm + ?Sized>(
    cfg: &EpConfig,
    rank: usize,
    rows: usize,
    n_tokens: usize,
    args: &CombineArgs<'_, C>,
    host_closures: bool,
) -> Result<()> {
    holds(rank, "expert_out", rows * cfg.hidden, args.expert_out.len())?;
    if let Some(w) = args.weights {
        holds(rank, "router weights", n_tokens * cfg.top_k, w.len())?;
    }
    reduction(
        cfg,
        rank,
        n_tokens,
        args.weights.is_some(),
        args.epilogue,
        host_closures,
    )
}
