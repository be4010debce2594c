//! Plain device allocations (`cuMemAlloc`). Memory from stream-ordered pools is not reachable
//! from a peer GPU even with peer access enabled, so every buffer a peer touches, and for
//! simplicity every other, comes from here.

use std::sync::Arc;

use cudarc::driver::result;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaContext, CudaStream};
use ep_core::{EpError, Result};

use crate::driver::cuda;

/// A device buffer of `len` bytes, freed on drop.
pub struct DevBuf {
    pub ptr: CUdeviceptr,
    pub len: usize,
    ctx: Arc<CudaContext>,
}

impl DevBuf {
    pub fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<DevBuf> {
        ctx.bind_to_thread().map_err(cuda)?;
        // cuMemAlloc of 0 bytes fails; a 16-byte allocation keeps every pointer valid.
        // SAFETY: plain allocation in the bound context.
        let ptr = unsafe { result::malloc_sync(len.max(16)) }.map_err(|e| {
            if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                EpError::OutOfMemory {
                    bytes: len,
                    what: format!("a device buffer on GPU {}", ctx.ordinal()),
                }
            } else {
                cuda(e)
            }
        })?;
        Ok(DevBuf {
            ptr,
            len,
            ctx: Arc::clone(ctx),
        })
    }

    /// Fills the whole buffer with `byte` and waits until the device has done it (cuMemset
    /// alone may return before it runs).
    pub fn fill(&self, byte: u8) -> Result<()> {
        self.ctx.bind_to_thread().map_err(cuda)?;
        // SAFETY: the range is inside the allocation.
        unsafe { result::memset_d8_sync(self.ptr, byte, self.len) }.map_err(cuda)?;
        self.ctx.synchronize().map_err(cuda)
    }

    /// Sets the first `len` bytes to `byte` on `stream`.
    pub fn fill_async(&self, byte: u8, len: usize, stream: &CudaStream) -> Result<()> {
        assert!(len <= self.len);
        // SAFETY: the range is inside the allocation.
        unsafe { result::memset_d8_async(self.ptr, byte, len, stream.cu_stream()) }.map_err(cuda)
    }

    /// Copies `src` to the start of the buffer on `stream`. Pageable sources are staged by the
    /// driver before this returns, so `src` may be dropped afterwards.
    pub fn upload<T>(&self, src: &[T], stream: &CudaStream) -> Result<()> {
        assert!(
            std::mem::size_of_val(src) <= self.len,
            "upload past the buffer end"
        );
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: the range is inside the allocation; T is plain data.
        unsafe { result::memcpy_htod_async(self.ptr, src, stream.cu_stream()) }.map_err(cuda)
    }

    /// Copies the start of the buffer into `dst` and waits for it.
    pub fn download<T>(&self, dst: &mut [T], stream: &CudaStream) -> Result<()> {
        assert!(
            std::mem::size_of_val(dst) <= self.len,
            "download past the buffer end"
        );
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: the range is inside the allocation; the stream is synchronised before `dst`
        // is used.
        unsafe { result::memcpy_dtoh_async(dst, self.ptr, stream.cu_stream()) }.map_err(cuda)?;
        stream.synchronize().map_err(cuda)
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by malloc_sync in this context. The world's buffers are freed
            // after every rank's stream is synchronised (CudaComm's drop); a caller's buffer from
            // `alloc` once no round holds it (rounds hold their inputs until the stream has run
            // them, `CudaComm::retired`), and cuMemFree waits for the device's work besides.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}
