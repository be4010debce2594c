//! [`PathPolicy`]: named sets of [`CudaOptions`] that make every round take one way through the
//! phases at every size, so that a test meets each kernel path with every case (the GPU test
//! runner and `ep conformance --policy` run the suite once per policy in one process).

use crate::CudaOptions;

/// One way through the phases, forced at every size (docs/architecture.md, "Paths a round
/// takes"). `Default` is the tuned choice by size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PathPolicy {
    /// The options as given: each round picks its path by size.
    Default,
    /// Every dispatch and reduced combine one launch (one node).
    Single,
    /// Every multi-kernel dispatch overlaps its copy-out with the transfer.
    Overlap,
    /// Every multi-kernel dispatch lays out its groups before the send.
    Layout,
    /// Single-launch phases, the combine's rows marked, no LL rows.
    Marked,
    /// Every phase multi-kernel.
    Multi,
    /// The combine reduces beside its send (marked rows); BF16 rounds take the lean kernels.
    Beside,
}

impl PathPolicy {
    /// Every policy, in the order the runners report them.
    pub const ALL: [PathPolicy; 7] = [
        PathPolicy::Default,
        PathPolicy::Single,
        PathPolicy::Overlap,
        PathPolicy::Layout,
        PathPolicy::Marked,
        PathPolicy::Multi,
        PathPolicy::Beside,
    ];

    /// The policy's name, as `--policy` and `EP_CUDA_PATH_POLICY` take it.
    pub fn name(self) -> &'static str {
        match self {
            PathPolicy::Default => "default",
            PathPolicy::Single => "single",
            PathPolicy::Overlap => "overlap",
            PathPolicy::Layout => "layout",
            PathPolicy::Marked => "marked",
            PathPolicy::Multi => "multi",
            PathPolicy::Beside => "beside",
        }
    }

    /// `options` with this policy's fields set over them.
    pub fn apply(self, options: CudaOptions) -> CudaOptions {
        const ALWAYS: Option<usize> = Some(1_000_000);
        match self {
            PathPolicy::Default => options,
            PathPolicy::Single => CudaOptions {
                single_dispatch_max_tokens: ALWAYS,
                single_combine_max_tokens: ALWAYS,
                ..options
            },
            PathPolicy::Overlap => CudaOptions {
                overlap_min_tokens: Some(1),
                ..options
            },
            PathPolicy::Layout => CudaOptions {
                layout_first_min_tokens: Some(1),
                single_dispatch_max_tokens: Some(0),
                ..options
            },
            PathPolicy::Marked => CudaOptions {
                single_dispatch_max_tokens: ALWAYS,
                single_combine_max_tokens: ALWAYS,
                single_marked_min_tokens: 1,
                ll_max_tokens: 0,
                ..options
            },
            PathPolicy::Multi => CudaOptions {
                single_dispatch_max_tokens: Some(0),
                single_combine_max_tokens: Some(0),
                ..options
            },
            PathPolicy::Beside => CudaOptions {
                marked_min_tokens: 1,
                lean_min_tokens: 0,
                ..options
            },
        }
    }
}

impl std::fmt::Display for PathPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for PathPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        PathPolicy::ALL
            .into_iter()
            .find(|p| p.name() == s.trim())
            .ok_or_else(|| {
                let names: Vec<_> = PathPolicy::ALL.iter().map(|p| p.name()).collect();
                format!("no path policy `{s}`; policies: {}", names.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_parses_from_its_name_and_all_but_default_change_the_options() {
        for p in PathPolicy::ALL {
            assert_eq!(p.name().parse::<PathPolicy>(), Ok(p));
            let applied = p.apply(CudaOptions::default());
            assert_eq!(
                applied == CudaOptions::default(),
                p == PathPolicy::Default,
                "{p}"
            );
            applied.validate().unwrap();
        }
        assert!("fast".parse::<PathPolicy>().unwrap_err().contains("beside"));
    }
}
