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
