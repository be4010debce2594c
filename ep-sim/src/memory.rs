//! Symmetric memory: every rank owns the same set of buffers, and every other rank may write into
//! them. Like GPU memory mapped over NVLink, the bytes are plain (non-atomic) memory; the only
//! synchronisation is the receive counts, published with release stores and read with acquire
//! loads. That protocol is what makes the raw writes below data-race free.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

pub use ep_core::host_memory::{host_memory_limit, zeroed_vec};
use ep_core::{EpConfig, EpError, MessageLayout, Result};

/// "Not arrived": the value every receive count holds between rounds.
pub const SENTINEL: u64 = u64::MAX;

/// A zeroed byte buffer other threads write into. Pages are only mapped when first touched, so a
/// buffer sized for the worst case costs memory only for the slots a round really uses.
pub struct SymmetricBuffer {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer is plain memory; callers uphold the protocol (disjoint slots per sender,
// release/acquire on the counts) that orders every write before every read of the same bytes.
unsafe impl Send for SymmetricBuffer {}
unsafe impl Sync for SymmetricBuffer {}

/// 16 bytes: enough for 16-byte vector copies, and the largest alignment for which the system
/// allocator's zeroed allocation is `calloc` (lazily zeroed pages). Above it, std falls back to
/// malloc + memset, which would touch every page of a worst-case-sized receive buffer.
const ALIGN: usize = 16;

impl SymmetricBuffer {
    /// `len` zeroed bytes, or [`EpError::OutOfMemory`] naming them and `what` when the host
    /// cannot give them (more than [`host_memory_limit`], or the allocator refuses).
    pub fn new(len: usize, what: &str) -> Result<Self> {
        if len == 0 {
            return Ok(SymmetricBuffer {
                ptr: NonNull::dangling(),
                len,
            });
        }
        let oom = || EpError::OutOfMemory {
            bytes: len,
            what: what.to_string(),
        };
        if len > host_memory_limit() {
            return Err(oom());
        }
        let layout = Layout::from_size_align(len, ALIGN).map_err(|_| oom())?;
        // SAFETY: non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).ok_or_else(oom)?;
        Ok(SymmetricBuffer { ptr, len })
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no bytes (nothing was allocated).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `src` to `offset`.
    ///
    /// # Safety
    /// No other thread may read or write these bytes until a release/acquire pair on a receive
    /// count orders this write before that access.
    pub unsafe fn write(&self, offset: usize, src: &[u8]) {
        assert!(offset + src.len() <= self.len, "write past the buffer end");
        std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(offset), src.len());
    }

    /// The bytes at `offset..offset + len`.
    ///
    /// # Safety
    /// Every write to these bytes must happen-before this call (via an acquired count), and none
    /// may start while the slice lives.
    pub unsafe fn slice(&self, offset: usize, len: usize) -> &[u8] {
        assert!(offset + len <= self.len, "read past the buffer end");
        std::slice::from_raw_parts(self.ptr.as_ptr().add(offset), len)
    }

    /// # Safety
    /// As [`SymmetricBuffer::write`]: the caller owns these bytes exclusively for the slice's life.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut(&self, offset: usize, len: usize) -> &mut [u8] {
        assert!(offset + len <= self.len, "write past the buffer end");
        std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(offset), len)
    }
}

impl Drop for SymmetricBuffer {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: allocated in `new` with this layout.
            unsafe {
                dealloc(
                    self.ptr.as_ptr(),
                    Layout::from_size_align(self.len, ALIGN).unwrap(),
                )
            }
        }
    }
}

/// The receive counts of one buffer group: `[n_local_experts, n_ranks]`, index `g * n_ranks + src`.
pub struct Counts(Box<[AtomicU64]>);

impl Counts {
    fn new(n: usize) -> Self {
        Counts((0..n).map(|_| AtomicU64::new(SENTINEL)).collect())
    }

    /// Every count, at `count_index(g, src)`; `u64::MAX` means not arrived.
    pub fn as_slice(&self) -> &[AtomicU64] {
        &self.0
    }

    /// Publishes a count: every data write by this thread before it is visible to the reader
    /// that acquires it.
    pub fn publish(&self, index: usize, value: u64) {
        self.0[index].store(value, Ordering::Release);
    }

    /// Back to "not arrived" for the next round.
    pub fn reset(&self, indices: &[usize]) {
        for &i in indices {
            self.0[i].store(SENTINEL, Ordering::Relaxed);
        }
    }
}

/// One buffer group (dispatch or combine) of one rank.
pub struct BufferGroup {
    /// Staging for puts to other nodes (a NIC reads from here).
    pub send: SymmetricBuffer,
    /// Where peers write this rank's incoming messages or rows, at the [`Geometry`] slots.
    pub recv: SymmetricBuffer,
    /// The counts peers publish once their writes into `recv` are done.
    pub counts: Counts,
}

/// Everything one rank owns.
pub struct RankMemory {
    /// Tokens on their way to the experts.
    pub dispatch: BufferGroup,
    /// Expert outputs on their way back to the tokens.
    pub combine: BufferGroup,
}

/// Buffer geometry derived from the config, shared by every rank.
#[derive(Clone, Debug)]
pub struct Geometry {
    /// Layout of one dispatch message.
    pub msg: MessageLayout,
    /// Ranks in the world.
    pub n_ranks: usize,
    /// Experts per rank (`n_local_experts`).
    pub n_local: usize,
    /// The config's `max_tokens_per_rank`.
    pub max_tokens: usize,
    /// Expert slots per token.
    pub top_k: usize,
    /// Bytes of one combine row (`hidden` bf16 values).
    pub row_bytes: usize,
}

impl Geometry {
    /// The geometry of `cfg`'s world.
    pub fn new(cfg: &EpConfig) -> Self {
        Geometry {
            msg: MessageLayout::new(cfg.format, cfg.hidden, cfg.top_k),
            n_ranks: cfg.n_ranks(),
            n_local: cfg.n_local_experts(),
            max_tokens: cfg.max_tokens_per_rank,
            top_k: cfg.top_k,
            row_bytes: cfg.hidden * 2,
        }
    }

    /// Dispatch receive slot of message `pos` from `src` for local expert `g`:
    /// `[n_local_experts, n_ranks, max_tokens_per_rank, msg]`.
    pub fn dispatch_slot(&self, g: usize, src: usize, pos: usize) -> usize {
        ((g * self.n_ranks + src) * self.max_tokens + pos) * self.msg.bytes
    }

    /// Combine receive slot of token `t`, slot `k`: `[max_tokens_per_rank, top_k, hidden]`.
    pub fn combine_slot(&self, t: usize, k: usize) -> usize {
        (t * self.top_k + k) * self.row_bytes
    }

    /// Index in [`Counts`] of the count from `src` for local expert `g`.
    pub fn count_index(&self, g: usize, src: usize) -> usize {
        g * self.n_ranks + src
    }

    /// Every buffer of one rank. The sizes cannot wrap: `EpConfig::validate` bounds them
    /// (`EpConfig::buffer_bytes`).
    pub fn alloc_rank(&self, rank: usize, max_recv_rows: usize) -> Result<RankMemory> {
        let counts = self.n_local * self.n_ranks;
        let buf =
            |len: usize, what: &str| SymmetricBuffer::new(len, &format!("rank {rank}'s {what}"));
        Ok(RankMemory {
            dispatch: BufferGroup {
                // One staged message per token: puts to several remote experts read the same one.
                send: buf(self.max_tokens * self.msg.bytes, "dispatch send buffer")?,
                recv: buf(
                    self.n_local * self.n_ranks * self.max_tokens * self.msg.bytes,
                    "dispatch receive buffer",
                )?,
                counts: Counts::new(counts),
            },
            combine: BufferGroup {
                send: buf(max_recv_rows * self.row_bytes, "combine send buffer")?,
                recv: buf(
                    self.max_tokens * self.top_k * self.row_bytes,
                    "combine receive buffer",
                )?,
                counts: Counts::new(counts),
            },
        })
    }
}
