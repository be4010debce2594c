//! Symmetric memory: every rank owns the same set of buffers, and every other rank may write into
//! them. Like GPU memory mapped over NVLink, the bytes are plain (non-atomic) memory; the only
//! synchronisation is the receive counts, published with release stores and read with acquire
//! loads. That protocol is what makes the raw writes below data-race free.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use ep_core::host_memory::{host_memory_limit, zeroed_vec};
use ep_core::{EpConfig, EpError, MessageLayout, Result};

/// "Not arrived": the value every receive count holds between rounds.
pub const SENTINEL: u64 = u64::MAX;

/// A zeroed byte buffer other threads write into. Pages are only mapped when first touched, so a
/// buffer sized for the worst case costs memory only for the slots a round really uses.
pub struct SymmetricBuffer {
    ptr: NonNull<u8>,
    len: usize,
    /// The shared mapping the bytes are in (a world of one process per rank), kept alive by
    /// the buffer; `None`: a heap allocation of its own.
    mapping: Option<Arc<Mapping>>,
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
                mapping: None,
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
        Ok(SymmetricBuffer {
            ptr,
            len,
            mapping: None,
        })
    }

    /// `len` bytes at `offset` of `mapping` (inside it: `Geometry::map_rank` lays them out).
    fn in_mapping(mapping: &Arc<Mapping>, offset: usize, len: usize) -> Self {
        assert!(
            offset + len <= mapping.len(),
            "a buffer past the mapping's end"
        );
        SymmetricBuffer {
            // SAFETY: inside the mapping (asserted); the mapping lives as long as the buffer.
            ptr: NonNull::new(unsafe { mapping.ptr().add(offset) }).expect("mapped"),
            len,
            mapping: Some(Arc::clone(mapping)),
        }
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
        if self.len > 0 && self.mapping.is_none() {
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
pub struct Counts {
    /// The counts, in `heap` or in a shared mapping the buffer keeps alive.
    ptr: NonNull<AtomicU64>,
    len: usize,
    heap: Option<Box<[AtomicU64]>>,
    _mapping: Option<Arc<Mapping>>,
}

// SAFETY: the counts are atomics; the pointer is into memory the value keeps alive.
unsafe impl Send for Counts {}
unsafe impl Sync for Counts {}

impl Counts {
    fn new(n: usize) -> Self {
        let mut heap: Box<[AtomicU64]> = (0..n).map(|_| AtomicU64::new(SENTINEL)).collect();
        Counts {
            ptr: NonNull::new(heap.as_mut_ptr()).unwrap_or(NonNull::dangling()),
            len: n,
            heap: Some(heap),
            _mapping: None,
        }
    }

    /// `n` counts at `offset` of `mapping` (8-byte aligned), as they are there: the owning rank
    /// sets them to "not arrived" (`reset_all`) before any peer may publish.
    fn in_mapping(mapping: &Arc<Mapping>, offset: usize, n: usize) -> Self {
        assert!(
            offset.is_multiple_of(8) && offset + n * 8 <= mapping.len(),
            "counts outside the mapping"
        );
        // SAFETY: inside the mapping and aligned (asserted); AtomicU64 has u64's layout.
        let ptr = unsafe { mapping.ptr().add(offset) }.cast::<AtomicU64>();
        Counts {
            ptr: NonNull::new(ptr).expect("mapped"),
            len: n,
            heap: None,
            _mapping: Some(Arc::clone(mapping)),
        }
    }

    /// Every count, at `count_index(g, src)`; `u64::MAX` means not arrived.
    pub fn as_slice(&self) -> &[AtomicU64] {
        match &self.heap {
            Some(h) => h,
            // SAFETY: `len` atomics the mapping holds for as long as `self`.
            None => unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) },
        }
    }

    /// Publishes a count: every data write by this thread before it is visible to the reader
    /// that acquires it.
    pub fn publish(&self, index: usize, value: u64) {
        self.as_slice()[index].store(value, Ordering::Release);
    }

    /// Back to "not arrived" for the next round.
    pub fn reset(&self, indices: &[usize]) {
        let c = self.as_slice();
        for &i in indices {
            c[i].store(SENTINEL, Ordering::Relaxed);
        }
    }

    /// Every count "not arrived".
    pub fn reset_all(&self) {
        for c in self.as_slice() {
            c.store(SENTINEL, Ordering::Relaxed);
        }
    }
}

/// A file mapped into this process, shared with the other processes of the world that map it:
/// every rank's buffers and counts, at the offsets `Geometry::map_rank` gives.
pub struct Mapping(memmap2::MmapRaw);

impl Mapping {
    /// Maps all of `file`, shared.
    pub fn new(file: &std::fs::File) -> Result<Arc<Mapping>> {
        memmap2::MmapRaw::map_raw(file)
            .map(|m| Arc::new(Mapping(m)))
            .map_err(|e| EpError::Backend(format!("mapping the world's shared memory: {e}")))
    }

    fn ptr(&self) -> *mut u8 {
        self.0.as_mut_ptr()
    }

    fn len(&self) -> usize {
        self.0.len()
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

    /// Each of a rank's buffers and count arrays, bytes, in the order `map_rank` lays them out.
    fn rank_parts(&self, max_recv_rows: usize) -> [usize; 6] {
        let counts = self.n_local * self.n_ranks * 8;
        [
            self.max_tokens * self.msg.bytes,
            self.n_local * self.n_ranks * self.max_tokens * self.msg.bytes,
            counts,
            max_recv_rows * self.row_bytes,
            self.max_tokens * self.top_k * self.row_bytes,
            counts,
        ]
    }

    /// Bytes of one rank's memory in a shared mapping (each part 64-byte aligned).
    pub fn rank_bytes(&self, max_recv_rows: usize) -> usize {
        self.rank_parts(max_recv_rows)
            .iter()
            .map(|b| b.next_multiple_of(64))
            .sum()
    }

    /// Rank `rank`'s memory inside `mapping`, which holds every rank's, `rank_bytes` each.
    pub fn map_rank(
        &self,
        mapping: &Arc<Mapping>,
        rank: usize,
        max_recv_rows: usize,
    ) -> RankMemory {
        let parts = self.rank_parts(max_recv_rows);
        let mut offsets = [0usize; 6];
        let mut at = rank * self.rank_bytes(max_recv_rows);
        for (o, len) in offsets.iter_mut().zip(parts) {
            *o = at;
            at += len.next_multiple_of(64);
        }
        let buf = |i: usize| SymmetricBuffer::in_mapping(mapping, offsets[i], parts[i]);
        let counts = |i: usize| Counts::in_mapping(mapping, offsets[i], parts[i] / 8);
        RankMemory {
            dispatch: BufferGroup {
                send: buf(0),
                recv: buf(1),
                counts: counts(2),
            },
            combine: BufferGroup {
                send: buf(3),
                recv: buf(4),
                counts: counts(5),
            },
        }
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
