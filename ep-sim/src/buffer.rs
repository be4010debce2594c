//! The simulator's memory: host memory behind a shared handle, as a GPU backend's buffers are
//! device memory behind one.

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, RwLock};

use ep_core::{Buffer, Element, EpError, Result};

/// A buffer of the simulator ([`crate::SimComm`]'s `EpComm::Buffer`): `range` of a shared
/// host vector. Clones and slices share the elements.
pub struct HostBuffer<T: Element> {
    data: Arc<RwLock<Vec<T>>>,
    range: Range<usize>,
}

impl<T: Element> HostBuffer<T> {
    /// A buffer holding `v`.
    pub fn from_vec(v: Vec<T>) -> Self {
        let range = 0..v.len();
        HostBuffer {
            data: Arc::new(RwLock::new(v)),
            range,
        }
    }

    /// `len` zeroed elements, or an error when the host has no memory for them.
    pub fn zeroed(len: usize) -> Result<Self> {
        Ok(Self::from_vec(crate::memory::zeroed_vec(len, "a buffer")?))
    }

    /// The elements, copied.
    pub fn to_vec(&self) -> Vec<T> {
        self.data.read().expect("buffer lock")[self.range.clone()].to_vec()
    }

    /// The first `len` elements, copied; an error naming `what` when it holds fewer.
    pub(crate) fn prefix(&self, len: usize, what: &'static str) -> Result<Vec<T>> {
        let data = self.data.read().expect("buffer lock");
        data[self.range.clone()]
            .get(..len)
            .map(<[T]>::to_vec)
            .ok_or_else(|| too_short(what, len, self.range.len()))
    }

    /// Copies `host` into its start.
    pub fn write(&self, host: &[T]) -> Result<()> {
        if host.len() > self.range.len() {
            return Err(too_short(
                "a write's destination",
                host.len(),
                self.range.len(),
            ));
        }
        let mut data = self.data.write().expect("buffer lock");
        data[self.range.start..self.range.start + host.len()].copy_from_slice(host);
        Ok(())
    }
}

fn too_short(what: &'static str, want: usize, len: usize) -> EpError {
    EpError::Backend(format!(
        "{what}: needs {want} elements, the buffer holds {len}"
    ))
}

impl<T: Element> Clone for HostBuffer<T> {
    fn clone(&self) -> Self {
        HostBuffer {
            data: Arc::clone(&self.data),
            range: self.range.clone(),
        }
    }
}

impl<T: Element> fmt::Debug for HostBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HostBuffer<{}>[{}]", T::NAME, self.range.len())
    }
}

impl<T: Element> Buffer<T> for HostBuffer<T> {
    fn len(&self) -> usize {
        self.range.len()
    }

    fn slice(&self, range: Range<usize>) -> Option<Self> {
        (range.start <= range.end && range.end <= self.range.len()).then(|| HostBuffer {
            data: Arc::clone(&self.data),
            range: self.range.start + range.start..self.range.start + range.end,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_share_and_check_bounds() {
        let b = HostBuffer::from_vec(vec![1u32, 2, 3, 4]);
        let s = b.slice(1..3).unwrap();
        s.write(&[9]).unwrap();
        assert_eq!(b.to_vec(), [1, 9, 3, 4]);
        assert!(s.write(&[1, 2, 3]).is_err());
        assert!(b.slice(2..5).is_none());
        assert_eq!(s.prefix(2, "x").unwrap(), [9, 3]);
        assert!(s.prefix(3, "x").is_err());
    }
}
