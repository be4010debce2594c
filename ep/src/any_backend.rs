//! A backend chosen at run time. Like candle's `Device`: the enum always has every variant, and a
//! backend that was not compiled in returns a clear error instead of changing the API.

use std::fmt;
use std::str::FromStr;

use ep_core::{EpBackend, EpConfig, Result};

use crate::any_comm::Comm;

/// The backends this crate knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// The CPU simulator (feature `sim`).
    Sim,
    /// NVIDIA GPUs (feature `cuda`).
    Cuda,
}

impl BackendKind {
    /// Every kind, compiled in or not.
    pub const ALL: [BackendKind; 2] = [BackendKind::Sim, BackendKind::Cuda];

    /// The name `ep --backend` and [`FromStr`] take (`sim`, `cuda`).
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Sim => "sim",
            BackendKind::Cuda => "cuda",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        BackendKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown backend `{s}`; known: sim, cuda"))
    }
}

/// Any compiled-in backend, behind one type. Its communicators are [`Comm`]s.
#[derive(Clone, Debug)]
pub enum Backend {
    /// The CPU simulator.
    #[cfg(feature = "sim")]
    Sim(ep_sim::SimBackend),
    /// Boxed: its options ([`ep_cuda::CudaOptions`]) make it much larger than the simulator.
    #[cfg(feature = "cuda")]
    Cuda(Box<ep_cuda::CudaBackend>),
}

impl Backend {
    /// The backend `kind`, or [`ep_core::EpError::BackendUnavailable`] saying why it cannot be had.
    pub fn new(kind: BackendKind) -> Result<Backend> {
        match kind {
            #[cfg(feature = "sim")]
            BackendKind::Sim => Ok(Backend::Sim(ep_sim::SimBackend::new())),
            #[cfg(not(feature = "sim"))]
            BackendKind::Sim => Err(not_compiled(kind)),
            #[cfg(feature = "cuda")]
            BackendKind::Cuda => Backend::cuda(None),
            #[cfg(not(feature = "cuda"))]
            BackendKind::Cuda => Err(not_compiled(kind)),
        }
    }

    /// The CUDA backend with `ranks_per_gpu` ranks on each GPU (`None`: spread evenly), after
    /// checking that a driver, a GPU and NVRTC are there.
    #[cfg(feature = "cuda")]
    pub fn cuda(ranks_per_gpu: Option<usize>) -> Result<Backend> {
        Backend::cuda_with(ranks_per_gpu, ep_cuda::CudaOptions::default())
    }

    /// [`Backend::cuda`] with the backend's tunables and switches set by `options`.
    #[cfg(feature = "cuda")]
    pub fn cuda_with(
        ranks_per_gpu: Option<usize>,
        options: ep_cuda::CudaOptions,
    ) -> Result<Backend> {
        ep_cuda::CudaBackend::probe()?;
        Ok(Backend::Cuda(Box::new(
            ep_cuda::CudaBackend::new()
                .with_ranks_per_gpu_opt(ranks_per_gpu)
                .with_options(options),
        )))
    }

    /// Which backend this is.
    pub fn kind(&self) -> BackendKind {
        match self {
            #[cfg(feature = "sim")]
            Backend::Sim(_) => BackendKind::Sim,
            #[cfg(feature = "cuda")]
            Backend::Cuda(_) => BackendKind::Cuda,
        }
    }
}

#[cfg(not(all(feature = "sim", feature = "cuda")))]
fn not_compiled(kind: BackendKind) -> ep_core::EpError {
    ep_core::EpError::BackendUnavailable {
        backend: kind.name().into(),
        reason: format!("not compiled in; rebuild with `--features {}`", kind.name()),
    }
}

impl EpBackend for Backend {
    type Comm = Comm;

    fn name(&self) -> &str {
        self.kind().name()
    }

    fn host_closures(&self) -> bool {
        match self {
            #[cfg(feature = "sim")]
            Backend::Sim(b) => b.host_closures(),
            #[cfg(feature = "cuda")]
            Backend::Cuda(b) => b.host_closures(),
        }
    }

    fn init(&self, configs: &[EpConfig]) -> Result<Vec<Comm>> {
        match self {
            #[cfg(feature = "sim")]
            Backend::Sim(b) => Ok(b.init(configs)?.into_iter().map(Comm::Sim).collect()),
            #[cfg(feature = "cuda")]
            Backend::Cuda(b) => Ok(b.init(configs)?.into_iter().map(Comm::Cuda).collect()),
        }
    }

    fn init_rank(
        &self,
        config: &EpConfig,
        rv: &mut ep_core::rendezvous::Rendezvous,
    ) -> Result<Comm> {
        match self {
            #[cfg(feature = "sim")]
            Backend::Sim(b) => Ok(Comm::Sim(b.init_rank(config, rv)?)),
            #[cfg(feature = "cuda")]
            Backend::Cuda(b) => Ok(Comm::Cuda(b.init_rank(config, rv)?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ep_core::EpError;

    #[test]
    fn cuda_without_a_gpu_is_a_clear_error_not_a_panic() {
        match Backend::new(BackendKind::Cuda) {
            Ok(_) => println!("a GPU is visible here; nothing to check"),
            Err(e) => {
                assert!(matches!(e, EpError::BackendUnavailable { .. }), "{e}");
                let msg = e.to_string();
                assert!(
                    msg.contains("cuda")
                        && (msg.contains("driver") || msg.contains("GPU") || msg.contains("nvrtc")),
                    "{msg}"
                );
            }
        }
    }

    #[test]
    fn parses_names() {
        assert_eq!("SIM".parse::<BackendKind>(), Ok(BackendKind::Sim));
        assert!("tpu".parse::<BackendKind>().is_err());
    }
}
