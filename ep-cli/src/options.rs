//! The one place the `ep` command reads the environment for the backends' options: the
//! `EP_CUDA_*` variables docs/tuning.md lists, mapped onto [`ep::cuda::CudaOptions`] by ep-cuda's
//! `options_from_env_vars` (which the GPU test runner uses too, so the mapping exists once), and
//! `ep bench`'s `EP_BENCH_*`, mapped onto its `BenchOptions` by ep-cuda's benchmark. The library
//! itself reads none of them.

/// The CUDA backend's options as the environment sets them; a value that does not parse is an
/// error naming its variable.
#[cfg(feature = "cuda")]
pub fn cuda_options_from_env() -> Result<ep::cuda::CudaOptions, String> {
    ep::cuda::options_from_env_vars(|k| std::env::var(k).ok())
}

/// Before the first CUDA call: the driver variables a process with several ranks on one GPU
/// needs ([`ep::cuda::driver::DRIVER_ENVIRONMENT`]), each set unless the user set it.
pub fn prepare_cuda_driver() {
    #[cfg(feature = "cuda")]
    for (var, value) in ep::cuda::driver::DRIVER_ENVIRONMENT {
        if std::env::var_os(var).is_none() {
            // SAFETY (std's: no other thread reads the environment): called first in `main`,
            // before any thread starts.
            std::env::set_var(var, value);
        }
    }
}

/// `ep bench`'s settings on the CUDA backend (the L2 evict and rewarm before each timed phase) as
/// the environment sets them; a value that does not parse is an error naming its variable.
#[cfg(feature = "cuda")]
pub fn bench_options_from_env() -> Result<ep::cuda::bench::BenchOptions, String> {
    ep::cuda::bench::BenchOptions::from_env_vars(|k| std::env::var(k).ok())
}
