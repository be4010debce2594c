//! A backend chosen at run time. Like candle's `Device`: the enum always has every variant, and a
//! backend that was not compiled in returns a clear error instead of changing the API.

use std::fmt;
use std::str::FromStr;

use ep_core::{EpBackend, EpComm, EpConfig, EpError, Result};

/// The backends this crate knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// The CPU simulator (feature `sim`).
    Sim,
    /// NVIDIA GPUs (feature `cuda`).
    Cuda,
}

impl BackendKind {
    pub const ALL: [BackendKind; 2] = [BackendKind::Sim, BackendKind::Cuda];

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

/// Any compiled-in backend, behind one type. Its communicators are `Box<dyn EpComm>`.
#[derive(Clone, Debug)]
pub enum Backend {
    #[cfg(feature = "sim")]
    Sim(ep_sim::SimBackend),
}

impl Backend {
    /// The backend `kind`, or [`EpError::BackendUnavailable`] saying why it cannot be had.
    pub fn new(kind: BackendKind) -> Result<Backend> {
        match kind {
            #[cfg(feature = "sim")]
            BackendKind::Sim => Ok(Backend::Sim(ep_sim::SimBackend::new())),
            #[cfg(not(feature = "sim"))]
            BackendKind::Sim => Err(not_compiled(kind)),
            BackendKind::Cuda => Err(EpError::BackendUnavailable {
                backend: kind.name().into(),
                reason: "the GPU backend (ep-cuda) is not part of this build yet".into(),
            }),
        }
    }

    pub fn kind(&self) -> BackendKind {
        match self {
            #[cfg(feature = "sim")]
            Backend::Sim(_) => BackendKind::Sim,
        }
    }
}

#[cfg(not(feature = "sim"))]
fn not_compiled(kind: BackendKind) -> EpError {
    EpError::BackendUnavailable {
        backend: kind.name().into(),
        reason: format!("not compiled in; rebuild with `--features {}`", kind.name()),
    }
}

impl EpBackend for Backend {
    type Comm = Box<dyn EpComm>;

    fn name(&self) -> &str {
        self.kind().name()
    }

    fn host_closures(&self) -> bool {
        match self {
            #[cfg(feature = "sim")]
            Backend::Sim(b) => b.host_closures(),
        }
    }

    fn init(&self, configs: &[EpConfig]) -> Result<Vec<Box<dyn EpComm>>> {
        fn boxed<C: EpComm + 'static>(v: Vec<C>) -> Vec<Box<dyn EpComm>> {
            v.into_iter()
                .map(|c| Box::new(c) as Box<dyn EpComm>)
                .collect()
        }
        match self {
            #[cfg(feature = "sim")]
            Backend::Sim(b) => b.init(configs).map(boxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_is_a_clear_error_not_a_panic() {
        let e = Backend::new(BackendKind::Cuda).unwrap_err();
        assert!(matches!(e, EpError::BackendUnavailable { .. }));
        assert!(e.to_string().contains("cuda"));
    }

    #[test]
    fn parses_names() {
        assert_eq!("SIM".parse::<BackendKind>(), Ok(BackendKind::Sim));
        assert!("tpu".parse::<BackendKind>().is_err());
    }
}
