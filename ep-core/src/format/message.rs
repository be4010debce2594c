//! The per-token message: payload, then scales, then the source token index (i32), then the
//! `top_k` expert ids (u16), each part padded to 16 bytes so every part starts on a vector store.

use std::ops::Range;

use half::bf16;

use super::{Format, TokenFormat};

/// How a masked id (-1) is written in a message's u16 id field.
pub const MASKED_ID_U16: u16 = u16::MAX;

const fn pad16(n: usize) -> usize {
    n.div_ceil(16) * 16
}

/// Byte offsets of the parts of one message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageLayout {
    /// The encoded row, `TokenFormat::payload_bytes(hidden)` bytes from 0.
    pub payload: Range<usize>,
    /// The row's scales in plain order, `TokenFormat::scale_bytes(hidden)` bytes (empty for
    /// BF16).
    pub scales: Range<usize>,
    /// Offset of the source token index (i32, little-endian).
    pub src_token: usize,
    /// Offset of the `top_k` expert ids (u16, little-endian, masked = [`MASKED_ID_U16`]).
    pub ids: usize,
    /// Id fields in a message.
    pub top_k: usize,
    /// Total bytes of one message (a multiple of 16).
    pub bytes: usize,
}

impl MessageLayout {
    /// The layout of a message carrying a `hidden`-element row in `format` with `top_k` ids.
    pub fn new(format: Format, hidden: usize, top_k: usize) -> Self {
        let payload = 0..format.payload_bytes(hidden);
        let s0 = pad16(payload.end);
        let scales = s0..s0 + format.scale_bytes(hidden);
        let src_token = pad16(scales.end);
        let ids = src_token + 16;
        let bytes = ids + pad16(2 * top_k);
        MessageLayout {
            payload,
            scales,
            src_token,
            ids,
            top_k,
            bytes,
        }
    }

    /// Writes a whole message for one token row (encoded by [`TokenFormat::encode_bf16`]).
    /// `msg.len() == self.bytes`.
    pub fn write(
        &self,
        format: Format,
        msg: &mut [u8],
        row: &[bf16],
        input_scale: f32,
        src_token: u32,
        ids: &[i32],
    ) {
        debug_assert_eq!(msg.len(), self.bytes);
        let (head, tail) = msg.split_at_mut(self.scales.start);
        format.encode_bf16(
            row,
            input_scale,
            &mut head[self.payload.clone()],
            &mut tail[..self.scales.len()],
        );
        msg[self.src_token..self.src_token + 4].copy_from_slice(&src_token.to_le_bytes());
        for (k, &id) in ids.iter().enumerate() {
            let v = if id < 0 { MASKED_ID_U16 } else { id as u16 };
            msg[self.ids + 2 * k..self.ids + 2 * k + 2].copy_from_slice(&v.to_le_bytes());
        }
    }

    /// The source token index (on the sending rank) written in `msg`.
    pub fn src_token(&self, msg: &[u8]) -> i32 {
        i32::from_le_bytes(msg[self.src_token..self.src_token + 4].try_into().unwrap())
    }

    /// Slot `k`'s expert id, -1 when masked.
    pub fn id(&self, msg: &[u8], k: usize) -> i32 {
        let at = self.ids + 2 * k;
        match u16::from_le_bytes([msg[at], msg[at + 1]]) {
            MASKED_ID_U16 => -1,
            v => v as i32,
        }
    }

    /// The first slot of the message that names `expert`: the `k` of `src_info`.
    pub fn first_slot_of(&self, msg: &[u8], expert: usize) -> Option<usize> {
        (0..self.top_k).find(|&k| self.id(msg, k) == expert as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_16_byte_aligned() {
        let l = MessageLayout::new(Format::Bf16, 7168, 8);
        assert_eq!(l.payload, 0..14336);
        assert_eq!(l.src_token, 14336);
        assert_eq!(l.ids, 14352);
        assert_eq!(l.bytes, 14368);
        let l = MessageLayout::new(Format::Bf16, 8, 9);
        assert_eq!((l.src_token, l.ids, l.bytes), (16, 32, 64));
    }

    #[test]
    fn header_round_trips() {
        let l = MessageLayout::new(Format::Bf16, 16, 3);
        let mut msg = vec![0u8; l.bytes];
        let row: Vec<bf16> = (0..16).map(|i| bf16::from_f32(i as f32)).collect();
        l.write(Format::Bf16, &mut msg, &row, 1.0, 77, &[5, -1, 5]);
        assert_eq!(l.src_token(&msg), 77);
        assert_eq!((l.id(&msg, 0), l.id(&msg, 1), l.id(&msg, 2)), (5, -1, 5));
        assert_eq!(l.first_slot_of(&msg, 5), Some(0));
        assert_eq!(l.first_slot_of(&msg, 4), None);
    }
}
