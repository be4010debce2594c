//! The CUDA backend's memory: device memory behind a shared handle, allocated by the backend or
//! borrowed from the caller (another framework's tensor, by pointer).

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

use ep_core::{Buffer, Element};

/// A buffer of the CUDA backend ([`crate::CudaComm`]'s `EpComm::Buffer`): `len` elements at a
/// device address on one GPU. Clones and slices share the memory; whoever made the buffer is
/// kept alive by it (`owner`), or, for borrowed memory, by the caller.
pub struct DeviceBuffer<T: Element> {
    ptr: u64,
    len: usize,
    device: usize,
    owner: Option<Arc<dyn Any + Send + Sync>>,
    _elements: PhantomData<T>,
}

impl<T: Element> DeviceBuffer<T> {
    /// `len` elements at `ptr` on GPU `device`, kept alive by `owner`.
    pub(crate) fn owned(
        ptr: u64,
        len: usize,
        device: usize,
        owner: Arc<dyn Any + Send + Sync>,
    ) -> Self {
        DeviceBuffer {
            ptr,
            len,
            device,
            owner: Some(owner),
            _elements: PhantomData,
        }
    }

    /// Memory the caller owns (a PyTorch tensor's `data_ptr()`, a cudarc slice's device
    /// pointer): `len` elements of `T` at `ptr` on GPU `device`, aligned for `T`.
    ///
    /// # Safety
    /// The memory must stay allocated, on that GPU, until the rank's stream has run every round
    /// that was handed the buffer (waits may be stream-ordered: `synchronize` or `to_host`, or
    /// work ordered after it on the same stream), and must not be written by others while a
    /// round reads it.
    pub unsafe fn borrowed(ptr: u64, len: usize, device: usize) -> Self {
        DeviceBuffer {
            ptr,
            len,
            device,
            owner: None,
            _elements: PhantomData,
        }
    }

    /// Its device address.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// The GPU it is on (the ordinal as the driver numbers them).
    pub fn device(&self) -> usize {
        self.device
    }

    /// Whether dropping this handle frees memory: no other handle (or caller, for borrowed
    /// memory) keeps it.
    pub(crate) fn last_handle(&self) -> bool {
        self.owner
            .as_ref()
            .is_some_and(|o| Arc::strong_count(o) == 1)
    }

    /// Bytes it spans.
    pub fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
}

impl<T: Element> Clone for DeviceBuffer<T> {
    fn clone(&self) -> Self {
        DeviceBuffer {
            ptr: self.ptr,
            len: self.len,
            device: self.device,
            owner: self.owner.clone(),
            _elements: PhantomData,
        }
    }
}

impl<T: Element> fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DeviceBuffer<{}>[{}] at {:#x} on GPU {}{}",
            T::NAME,
            self.len,
            self.ptr,
            self.device,
            if self.owner.is_some() {
                ""
            } else {
                " (borrowed)"
            }
        )
    }
}

impl<T: Element> Buffer<T> for DeviceBuffer<T> {
    fn len(&self) -> usize {
        self.len
    }

    fn slice(&self, range: Range<usize>) -> Option<Self> {
        (range.start <= range.end && range.end <= self.len).then(|| DeviceBuffer {
            ptr: self.ptr + (range.start * std::mem::size_of::<T>()) as u64,
            len: range.len(),
            device: self.device,
            owner: self.owner.clone(),
            _elements: PhantomData,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ep_core::bf16;

    #[test]
    fn slices_offset_in_bytes_and_check_bounds() {
        // SAFETY: never handed to a round.
        let b = unsafe { DeviceBuffer::<bf16>::borrowed(0x1000, 8, 1) };
        let s = b.slice(2..6).unwrap();
        assert_eq!(
            (s.device_ptr(), s.len(), s.bytes(), s.device()),
            (0x1004, 4, 8, 1)
        );
        assert!(s.slice(1..5).is_none());
        assert!(b.slice(8..8).is_some_and(|e| e.is_empty()));
        assert!(format!("{b:?}").contains("borrowed"));
    }
}
