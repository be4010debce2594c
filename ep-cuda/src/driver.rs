//! Finding the CUDA driver, the GPUs and NVRTC, with clear errors where they are missing.
//! cudarc panics when a library it needs cannot be loaded, so every entry point checks first.

use cudarc::driver::result::DriverError;
use ep_core::EpError;

fn unavailable(reason: impl Into<String>) -> EpError {
    EpError::BackendUnavailable {
        backend: "cuda".into(),
        reason: reason.into(),
    }
}

/// Ranks wait on each other in kernels, so nothing may stand between a rank's kernel and the
/// hardware except its own stream. The driver shares `CUDA_DEVICE_MAX_CONNECTIONS` hardware work
/// queues (default 8) among a context's streams round-robin, so with several ranks on one GPU a
/// rank's send or signal kernel can queue behind another rank's spinning wait kernel (seen with
/// 4-8 ranks a GPU, e5ba2ef). With 32 queues every rank stream has its own;
/// [`MAX_RANKS_PER_GPU`] keeps it so. The driver reads the variable once, at its initialisation,
/// and the library reads no environment: a program that places several ranks on one GPU sets it
/// before its first CUDA call (the `ep` command and the GPU test runner do, unless it is set).
/// One rank per GPU needs nothing. (Lazily loaded kernels, the other driver default that delays
/// a rank, are loaded at start instead: [`crate::kernels::load_function`].)
pub const DRIVER_ENVIRONMENT: &[(&str, &str)] = &[("CUDA_DEVICE_MAX_CONNECTIONS", "32")];

/// The most ranks one GPU may hold: each needs a hardware work queue of its own (see
/// [`DRIVER_ENVIRONMENT`]), and some of the 32 are left to the driver.
pub const MAX_RANKS_PER_GPU: usize = 16;

/// The number of GPUs visible, or why there are none to use.
pub fn device_count() -> Result<usize, EpError> {
    // SAFETY: only tries to load the library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(unavailable(
            "no CUDA driver found (libcuda could not be loaded)",
        ));
    }
    cudarc::driver::result::init()
        .map_err(|e| unavailable(format!("the CUDA driver failed to initialise: {e}")))?;
    let n = cudarc::driver::result::device::get_count().map_err(cuda)?;
    if n <= 0 {
        return Err(unavailable("no GPU visible"));
    }
    Ok(n as usize)
}

/// Checks that NVRTC can be loaded.
pub fn nvrtc_present() -> Result<(), EpError> {
    // SAFETY: only tries to load the library.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(unavailable(
            "libnvrtc not found: put the CUDA toolkit's lib directory (targets/x86_64-linux/lib) on LD_LIBRARY_PATH",
        ))
    }
}

/// A CUDA driver error as an EpError.
pub fn cuda(e: DriverError) -> EpError {
    EpError::Backend(format!("CUDA: {e}"))
}

/// The GPU's UUID (16 bytes), which tells two processes whether they hold the same GPU.
pub fn uuid(ctx: &cudarc::driver::CudaContext) -> Result<Vec<u8>, EpError> {
    let mut id = std::mem::MaybeUninit::<cudarc::driver::sys::CUuuid>::zeroed();
    // SAFETY: writes the 16-byte UUID of a live device into `id`.
    unsafe { cudarc::driver::sys::cuDeviceGetUuid_v2(id.as_mut_ptr(), ctx.cu_device()).result() }
        .map_err(cuda)?;
    // SAFETY: initialised by the call above.
    let id = unsafe { id.assume_init() };
    Ok(id.bytes.iter().map(|&b| b as u8).collect())
}
