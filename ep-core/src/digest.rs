//! The hash `EpComm::memory_digest` folds a rank's symmetric memory into, one definition for every
//! backend: tests compare digests taken before and after a call that must write nothing.

/// The digest of nothing: where a backend starts folding.
pub const EMPTY: u64 = 0xcbf2_9ce4_8422_2325;

/// Folds `bytes` into `hash`, 8 little-endian bytes a word (FNV-style: fast enough for
/// test-sized buffers, deterministic).
pub fn fold_bytes(hash: &mut u64, bytes: &[u8]) {
    for chunk in bytes.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        fold_word(hash, u64::from_le_bytes(w));
    }
}

/// Folds receive counts into `hash`, a peer's poisoned count read as the sentinel it replaced
/// (`error::poison::unpoisoned`): the one write a rejected call makes, undone by its next call.
pub fn fold_counts(hash: &mut u64, counts: impl IntoIterator<Item = u64>) {
    for c in counts {
        fold_word(hash, crate::error::poison::unpoisoned(c));
    }
}

fn fold_word(hash: &mut u64, word: u64) {
    *hash = (*hash ^ word).wrapping_mul(0x100_0000_01b3).rotate_left(29);
}
