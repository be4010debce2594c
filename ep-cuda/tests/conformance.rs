//! The conformance suite on the GPU (every case but the simulator-only host-closure ones). On a
//! machine without a CUDA driver or GPU it says plainly that it did not run and counts nothing.
//! Beside the generic cases it runs a device-code epilogue through every combine path
//! (`ep_cuda::epilogue_check`). EP_RANKS_PER_GPU sets the placement, EP_FILTER selects cases by name;
//! the backend's options come from the `EP_CUDA_*` variables as the `ep` command reads them
//! (`ep_cuda::options_from_env_vars`, docs/tuning.md). The test hooks' variables need
//! `--features test-hooks`.
//!
//! The suite runs once per path policy (`ep_cuda::PathPolicy`: which kernels a round takes), each on a
//! backend made with that policy's options in this one process; EP_POLICY names a subset
//! (comma-separated), default all.

use std::time::Instant;

use ep_conformance::runner;
use ep_cuda::CudaBackend;

const DEVICE_EPILOGUE: &str = "cuda::device_epilogue";

const OTHER_OPTIONS: &str = "cuda::device_epilogue_other_compiled_options";

/// A device-code epilogue through every combine path (ep_cuda::epilogue_check), as one case
/// named `name`.
fn device_epilogue(backend: &CudaBackend, name: &str) -> runner::Outcome {
    let t0 = Instant::now();
    let result = match ep_cuda::epilogue_check::check(backend) {
        Ok(rounds) => rounds
            .iter()
            .find(|r| !r.passed())
            .map_or(Ok(()), |r| Err(r.to_string())),
        Err(e) => Err(e.to_string()),
    };
    runner::Outcome {
        name: name.into(),
        result,
        time: t0.elapsed(),
    }
}

fn main() {
    // Several ranks share a GPU here: the driver variable that needs, before the first CUDA call.
    for (var, value) in ep_cuda::driver::DRIVER_ENVIRONMENT {
        if std::env::var_os(var).is_none() {
            std::env::set_var(var, value);
        }
    }
    let gpus = match CudaBackend::probe() {
        Ok(g) => g,
        Err(e) => {
            println!("ep-cuda conformance: NOT RUN (not counted): {e}");
            return;
        }
    };
    let options = match ep_cuda::options_from_env_vars(|k| std::env::var(k).ok()) {
        Ok(o) => o,
        Err(e) => {
            println!("ep-cuda conformance: FAILED: {e}");
            std::process::exit(1);
        }
    };
    let ranks_per_gpu = std::env::var("EP_RANKS_PER_GPU")
        .ok()
        .and_then(|v| v.parse().ok());
    let backend = CudaBackend::new()
        .with_ranks_per_gpu_opt(ranks_per_gpu)
        .with_options(options);
    println!("ep-cuda conformance on {gpus:?}");
    let device_ok = match ep_cuda::selfcheck::check_every_gpu() {
        Ok(checks) => checks.iter().enumerate().fold(true, |ok, (gpu, c)| {
            println!("GPU {gpu}: {c}");
            ok && c.passed()
        }),
        Err(e) => {
            println!("FAILED FP8 division check: {e}");
            false
        }
    };
    let filter = std::env::var("EP_FILTER").ok();
    for (name, why) in runner::skipped_for(&backend, filter.as_deref()) {
        println!("skipped {name}: {why}");
    }
    let report = |o: &runner::Outcome| {
        let status = if o.result.is_ok() { "ok" } else { "FAILED" };
        println!(
            "{status:<6} {} ({:.0} ms)",
            o.name,
            o.time.as_secs_f64() * 1e3
        );
    };
    let chosen = std::env::var("EP_POLICY").ok();
    let mut outcomes = Vec::new();
    for policy in ep_cuda::PathPolicy::ALL {
        if chosen
            .as_deref()
            .is_some_and(|c| !c.split(',').any(|p| p == policy.name()))
        {
            continue;
        }
        println!("policy {policy}");
        let b = backend
            .clone()
            .with_options(policy.apply(backend.options.clone()));
        for mut o in runner::run_all(&b, filter.as_deref(), |_| {}) {
            o.name = format!("{policy}::{}", o.name);
            report(&o);
            outcomes.push(o);
        }
    }
    if filter
        .as_deref()
        .is_none_or(|f| DEVICE_EPILOGUE.contains(f))
    {
        let o = device_epilogue(&backend, DEVICE_EPILOGUE);
        report(&o);
        outcomes.push(o);
    }
    // The same check in the same process on a backend whose options change the compiled
    // programs and the buffers (the LL rows' bound): each backend must get its own kernels from
    // the per-device cache, or the LL rounds (1 token) would read rows sized for the other.
    if filter.as_deref().is_none_or(|f| OTHER_OPTIONS.contains(f)) {
        let ll = if backend.options.ll_max_tokens == 0 {
            8
        } else {
            0
        };
        let other = backend
            .clone()
            .with_options(backend.options.clone().ll_max_tokens(ll));
        let o = device_epilogue(&other, OTHER_OPTIONS);
        report(&o);
        outcomes.push(o);
    }
    if !runner::print_summary(&outcomes) || !device_ok {
        std::process::exit(1);
    }
}
