//! Combine epilogues: what happens to each finished output chunk instead of a plain store.
//!
//! The contract hands an epilogue `(token, column, values)` where `values` are the combined,
//! bf16-rounded outputs. The built-ins are what serving stacks fuse after combine; every backend
//! implements them. A host closure ([`Epilogue::Host`]) runs on the simulator only; GPU backends
//! take custom epilogues as device code ([`Epilogue::Device`]) instead.

use std::fmt;
use std::sync::Arc;

use half::bf16;
use ndarray::Array2;

use crate::config::EpConfig;
use crate::error::{EpError, Result};
use crate::format::{Fp8Block, TokenFormat};
use crate::io::CombineOutput;
use crate::numerics::round_bf16;

/// Columns per chunk handed to a host epilogue (GPU backends hand vector-sized chunks; callers
/// must not assume whole rows).
pub const EPILOGUE_CHUNK: usize = 128;

/// A closure called with `(token, first column, values)` for every chunk of the output.
pub type HostFn = dyn Fn(usize, usize, &[bf16]) + Send + Sync;

/// A custom epilogue in CUDA C for GPU backends: `source` defines
/// `__device__ void NAME(int token, int column, const unsigned short* values, int n)`, called
/// once per chunk of up to [`EPILOGUE_CHUNK`] columns of token `token`'s combined row, by one
/// thread, with the `n` values as bf16 bits (the programs are compiled without CUDA's headers).
/// It leaves its results through memory it owns (a pointer compiled into `source`); combine
/// stores nothing ([`CombineOutput::Consumed`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceEpilogue {
    /// The `__device__` function's name in `source` (a C identifier).
    pub name: String,
    /// CUDA C that defines the function `name`, compiled by NVRTC.
    pub source: String,
}

/// What combine does with each rounded output row instead of (or before) storing it; needs router
/// weights ([`EpError::Incompatible`] otherwise).
#[derive(Clone)]
pub enum Epilogue {
    /// `out = bf16(f32(combined) + f32(residual))`; `residual` is `[T, hidden]`. (Arithmetic
    /// NaN results are the canonical NaN, as everywhere: see `numerics::round_bf16`.)
    AddResidual(Arc<Array2<bf16>>),
    /// `out = bf16(f32(combined) * s)`.
    Scale(f32),
    /// The combined rows quantized to blockwise FP8 (same definition as the `fp8` token format):
    /// the output is [`CombineOutput::Fp8`].
    QuantizeFp8,
    /// A host closure; nothing is stored ([`CombineOutput::Consumed`]). Simulator only.
    Host(Arc<HostFn>),
    /// Device code for GPU backends.
    Device(DeviceEpilogue),
}

impl fmt::Debug for Epilogue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Epilogue::AddResidual(r) => write!(f, "AddResidual({:?})", r.dim()),
            Epilogue::Scale(s) => write!(f, "Scale({s})"),
            Epilogue::QuantizeFp8 => f.write_str("QuantizeFp8"),
            Epilogue::Host(_) => f.write_str("Host(..)"),
            Epilogue::Device(d) => write!(f, "Device({})", d.name),
        }
    }
}

impl Epilogue {
    /// Checks the epilogue against the call: it needs a reduced output, and its own inputs must
    /// fit. `host_closures` says whether the backend can run [`Epilogue::Host`].
    pub fn check(
        &self,
        cfg: &EpConfig,
        rank: usize,
        n_tokens: usize,
        host_closures: bool,
    ) -> Result<()> {
        match self {
            Epilogue::AddResidual(r) if r.dim() != (n_tokens, cfg.hidden) => Err(EpError::Shape {
                rank,
                what: "residual",
                expected: vec![n_tokens, cfg.hidden],
                got: r.shape().to_vec(),
            }),
            Epilogue::QuantizeFp8 if !cfg.hidden.is_multiple_of(Fp8Block.block()) => {
                Err(EpError::Incompatible {
                    rank,
                    what: "the quantize-to-FP8 epilogue with hidden not a multiple of 128",
                    why: "blockwise FP8 has one scale per 128 elements",
                })
            }
            Epilogue::Host(_) if !host_closures => Err(EpError::Incompatible {
                rank,
                what: "a host-closure epilogue on this backend",
                why: "the output never reaches the host here; give the epilogue as device code",
            }),
            Epilogue::Device(_) if host_closures => Err(EpError::Incompatible {
                rank,
                what: "a device-code epilogue on this backend",
                why: "this backend runs on the CPU; use a host closure",
            }),
            _ => Ok(()),
        }
    }
}

/// Receives a combine's rounded output rows and produces the output the epilogue defines.
pub struct EpilogueSink {
    epilogue: Option<Epilogue>,
    hidden: usize,
    out: Array2<bf16>,
    fp8: Option<(Array2<u8>, Array2<f32>)>,
}

impl EpilogueSink {
    /// A sink for `n_tokens` rows of `hidden` columns; with no epilogue it stores the rows as
    /// they come.
    pub fn new(epilogue: Option<&Epilogue>, n_tokens: usize, hidden: usize) -> Self {
        let stores = !matches!(
            epilogue,
            Some(Epilogue::Host(_)) | Some(Epilogue::QuantizeFp8)
        );
        EpilogueSink {
            epilogue: epilogue.cloned(),
            hidden,
            out: Array2::zeros(if stores {
                (n_tokens, hidden)
            } else {
                (0, hidden)
            }),
            fp8: matches!(epilogue, Some(Epilogue::QuantizeFp8)).then(|| {
                (
                    Array2::zeros((n_tokens, hidden)),
                    Array2::zeros((n_tokens, hidden / 128)),
                )
            }),
        }
    }

    /// Token `t`'s combined row, already rounded to bf16.
    pub fn row(&mut self, t: usize, values: &[bf16]) {
        match &self.epilogue {
            None | Some(Epilogue::Device(_)) => self
                .out
                .row_mut(t)
                .iter_mut()
                .zip(values)
                .for_each(|(o, v)| *o = *v),
            Some(Epilogue::AddResidual(r)) => {
                for ((o, v), x) in self.out.row_mut(t).iter_mut().zip(values).zip(r.row(t)) {
                    *o = round_bf16(v.to_f32() + x.to_f32());
                }
            }
            Some(Epilogue::Scale(s)) => {
                for (o, v) in self.out.row_mut(t).iter_mut().zip(values) {
                    *o = round_bf16(v.to_f32() * s);
                }
            }
            Some(Epilogue::QuantizeFp8) => {
                let (payload, scales) = self.fp8.as_mut().expect("allocated for QuantizeFp8");
                let wide: Vec<f32> = values.iter().map(|v| v.to_f32()).collect();
                let mut s = vec![0u8; Fp8Block.scale_bytes(self.hidden)];
                Fp8Block.encode(
                    &wide,
                    1.0,
                    payload.row_mut(t).as_slice_mut().unwrap(),
                    &mut s,
                );
                for (o, b) in scales.row_mut(t).iter_mut().zip(s.chunks_exact(4)) {
                    *o = f32::from_le_bytes(b.try_into().unwrap());
                }
            }
            Some(Epilogue::Host(f)) => {
                for (i, chunk) in values.chunks(EPILOGUE_CHUNK).enumerate() {
                    f(t, i * EPILOGUE_CHUNK, chunk);
                }
            }
        }
    }

    /// The combine output once every row has been given: [`CombineOutput::Consumed`] for a host
    /// closure, [`CombineOutput::Fp8`] for [`Epilogue::QuantizeFp8`], [`CombineOutput::Reduced`]
    /// otherwise.
    pub fn finish(self) -> CombineOutput {
        match (self.epilogue, self.fp8) {
            (Some(Epilogue::Host(_)), _) => CombineOutput::Consumed,
            (_, Some((payload, scales))) => CombineOutput::Fp8 { payload, scales },
            _ => CombineOutput::Reduced(self.out),
        }
    }
}
