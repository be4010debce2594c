//! Memory where a backend computes: the element types its buffers hold and what every buffer
//! offers. Each backend has its own buffer type ([`crate::EpComm::Buffer`]): the simulator's is
//! host memory, the CUDA backend's device memory (its own or the caller's, borrowed).

use std::fmt::Debug;
use std::ops::Range;

use half::bf16;

mod sealed {
    pub trait Sealed {}
}

/// A type buffers hold: plain old data, every bit pattern valid, no padding, so backends may
/// move it as bytes. Implemented for `u8`, `i32`, `u32`, `f32` and `bf16`, the types dispatch
/// and combine read and write.
pub trait Element:
    sealed::Sealed + Copy + Default + Debug + PartialEq + Send + Sync + 'static
{
    /// Its name in errors (`bf16`, `i32`, ...).
    const NAME: &'static str;
}

macro_rules! element {
    ($($t:ty => $name:literal),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const NAME: &'static str = $name;
        }
    )*};
}
element!(u8 => "u8", i32 => "i32", u32 => "u32", f32 => "f32", bf16 => "bf16");

/// The bytes of `v`.
pub fn as_bytes<T: Element>(v: &[T]) -> &[u8] {
    // SAFETY: `Element` types are plain old data without padding (sealed to the five above).
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

/// The bytes of `v`, writable: any bytes are a valid `T`.
pub fn as_bytes_mut<T: Element>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as `as_bytes`; every bit pattern is a valid `Element`.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), std::mem::size_of_val(v)) }
}

/// What every backend's buffer offers generic code. A buffer is a handle: cloning it shares the
/// memory (outputs are handles to memory the communicator owns and reuses every round).
pub trait Buffer<T: Element>: Clone + Debug + Send + Sync {
    /// Elements it holds.
    fn len(&self) -> usize;
    /// Whether it holds none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Elements `range` of it, sharing its memory; `None` when the range does not fit.
    fn slice(&self, range: Range<usize>) -> Option<Self>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip() {
        let mut v = [bf16::from_f32(1.5), bf16::from_f32(-2.0)];
        assert_eq!(as_bytes(&v), &[0xc0, 0x3f, 0x00, 0xc0]);
        as_bytes_mut(&mut v)[1] = 0x40;
        assert_eq!(v[0], bf16::from_f32(6.0));
        assert_eq!(as_bytes(&[7u32]).len(), 4);
    }
}
