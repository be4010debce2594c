//! Host allocations that fail with a typed error ([`EpError::OutOfMemory`] naming the bytes and
//! the buffer) instead of aborting the process, for every backend's host-side buffers.

use crate::error::{EpError, Result};

/// The most bytes one buffer may ask for: the host's memory and swap (`/proc/meminfo`), or no
/// limit where that cannot be read. Pages may be mapped lazily, so a process may ask for more
/// than the host has in all; but a single buffer larger than all of it could never be filled,
/// and whether the allocator refuses it up front depends on the kernel's overcommit policy.
/// Refusing it here makes the error the same on every host.
pub fn host_memory_limit() -> usize {
    static LIMIT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        let Ok(info) = std::fs::read_to_string("/proc/meminfo") else {
            return usize::MAX;
        };
        let kib = |key: &str| -> Option<usize> {
            let line = info.lines().find(|l| l.starts_with(key))?;
            line.split_whitespace().nth(1)?.parse().ok()
        };
        match (kib("MemTotal:"), kib("SwapTotal:")) {
            (Some(m), s) => (m + s.unwrap_or(0)).saturating_mul(1024),
            _ => usize::MAX,
        }
    })
}

/// `n` default values in a vector, or [`EpError::OutOfMemory`] naming the bytes and `what` when
/// the host cannot give them (more than [`host_memory_limit`], or the allocator refuses).
pub fn zeroed_vec<T: Clone + Default>(n: usize, what: &str) -> Result<Vec<T>> {
    let bytes = n.saturating_mul(std::mem::size_of::<T>());
    let oom = || EpError::OutOfMemory {
        bytes,
        what: what.to_string(),
    };
    if bytes > host_memory_limit() {
        return Err(oom());
    }
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| oom())?;
    v.resize(n, T::default());
    Ok(v)
}
