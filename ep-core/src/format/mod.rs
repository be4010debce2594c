//! Token formats: how one bf16 token row is encoded into a message, decoded again, and where its
//! scales go in the dispatch output. The message layout shared by all formats is [`MessageLayout`].

mod bf16;
pub mod fp8;
mod message;
pub mod mxfp4;
pub mod nvfp4;
pub mod scalar;
#[cfg(test)]
mod testing;

use std::fmt;
use std::str::FromStr;

pub use self::bf16::Bf16;
pub use self::fp8::Fp8Block;
pub use self::message::{MessageLayout, MASKED_ID_U16};
pub use self::mxfp4::Mxfp4;
pub use self::nvfp4::{unswizzle, Nvfp4};

/// What a token format must define so that every backend produces the same bits.
///
/// A format is pure data transformation: no state, no I/O (the only allocation is the widened
/// row of the default [`TokenFormat::encode_bf16`]). Backends call it per token (the simulator
/// directly; the GPU backend through a kernel that implements the same arithmetic, checked
/// against this one).
pub trait TokenFormat {
    /// Lower-case name used in errors and on the command line (`bf16`, `fp8`, ...).
    fn name(&self) -> &'static str;
    /// `hidden` must be a multiple of this (the scale block, or 8 for BF16's 16-byte rows).
    fn block(&self) -> usize;
    /// Encoded payload bytes of one row.
    fn payload_bytes(&self, hidden: usize) -> usize;
    /// Scale bytes of one row inside a message (plain per-token order).
    fn scale_bytes(&self, hidden: usize) -> usize;
    /// Each group's row count is rounded up to a multiple of this in the dispatch output.
    fn group_row_multiple(&self) -> usize;
    /// Encodes an f32 `row` into `payload` and `scales` (exactly `payload_bytes`/`scale_bytes`
    /// long): what fused SwiGLU does with its f32 output (BF16 rounds each element to bf16).
    fn encode(&self, row: &[f32], input_scale: f32, payload: &mut [u8], scales: &mut [u8]);
    /// Encodes a bf16 token row, as dispatch does. The quantized formats widen each element to
    /// f32 (exact) and [`TokenFormat::encode`] it; BF16 overrides this to copy the bits as they
    /// are, so every NaN payload (signalling included) arrives unchanged.
    fn encode_bf16(
        &self,
        row: &[half::bf16],
        input_scale: f32,
        payload: &mut [u8],
        scales: &mut [u8],
    ) {
        // Exact: the bits move up 16 places (a quantized block holding any NaN gets the NaN scale).
        let wide: Vec<f32> = row
            .iter()
            .map(|x| f32::from_bits(u32::from(x.to_bits()) << 16))
            .collect();
        self.encode(&wide, input_scale, payload, scales)
    }
    /// Decodes an encoded row back to f32 values (`out.len() == hidden`).
    fn decode(&self, payload: &[u8], scales: &[u8], input_scale: f32, out: &mut [f32]);
    /// Bytes of the dispatch output's scale array for `rows` rows (padding rows included).
    fn output_scales_bytes(&self, hidden: usize, rows: usize) -> usize;
    /// Writes row `row`'s message scales into the output scale array of `rows` rows, in the
    /// layout the grouped GEMM reads.
    fn place_scales(
        &self,
        hidden: usize,
        rows: usize,
        row: usize,
        msg_scales: &[u8],
        out: &mut [u8],
    );
    /// The inverse of [`TokenFormat::place_scales`]: row `row`'s scales in per-token order.
    fn gather_scales(
        &self,
        hidden: usize,
        rows: usize,
        row: usize,
        out: &[u8],
        msg_scales: &mut [u8],
    );
}

/// The formats this crate defines, chosen at run time (`EpConfig::format`, `ep run --format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Format {
    /// Raw bf16 rows; no scales.
    #[default]
    Bf16,
    /// Blockwise FP8: e4m3fn, one f32 scale per 128 elements (see [`fp8`]).
    Fp8,
    /// OCP MXFP4: e2m1, one e8m0 scale per 32 elements (see [`mxfp4`]).
    Mxfp4,
    /// NVFP4: e2m1, one e4m3fn scale per 16 elements and a global f32 input scale (see [`nvfp4`]).
    Nvfp4,
}

impl Format {
    /// Every format, in the order the CLI and the conformance suite list them.
    pub const ALL: &'static [Format] = &[Format::Bf16, Format::Fp8, Format::Mxfp4, Format::Nvfp4];

    fn imp(&self) -> &'static dyn TokenFormat {
        match self {
            Format::Bf16 => &Bf16,
            Format::Fp8 => &Fp8Block,
            Format::Mxfp4 => &Mxfp4,
            Format::Nvfp4 => &Nvfp4,
        }
    }

    /// Bytes of one encoded token: payload plus its scales.
    pub fn token_bytes(&self, hidden: usize) -> usize {
        self.payload_bytes(hidden) + self.scale_bytes(hidden)
    }

    /// Whether the per-token input scale (see `DispatchInput::input_scales`) is read.
    pub fn takes_input_scales(&self) -> bool {
        matches!(self, Format::Nvfp4)
    }

    /// How a payload byte is packed, for people reading dumps.
    pub fn payload_packing(&self) -> &'static str {
        match self {
            Format::Bf16 => "bf16 little-endian, 2 bytes per element",
            Format::Fp8 => "e4m3fn, 1 byte per element",
            Format::Mxfp4 | Format::Nvfp4 => {
                "e2m1, 2 elements per byte: element 2i in bits 0-3, element 2i+1 in bits 4-7"
            }
        }
    }

    /// How the dispatch output's scale array is laid out, for people reading dumps.
    pub fn scale_layout(&self) -> &'static str {
        match self {
            Format::Bf16 => "none",
            Format::Fp8 => "f32 little-endian, transposed [hidden/128, rows]; groups padded to 4 rows",
            Format::Mxfp4 => "e8m0 bytes (2^(b-127), 0xFF NaN), row-major [rows, hidden/32]",
            Format::Nvfp4 => {
                "e4m3fn bytes, 128x4 swizzled tiles of [rows, hidden/16] (columns padded to 4); groups padded to 128 rows"
            }
        }
    }
}

impl TokenFormat for Format {
    fn name(&self) -> &'static str {
        self.imp().name()
    }
    fn block(&self) -> usize {
        self.imp().block()
    }
    fn payload_bytes(&self, hidden: usize) -> usize {
        self.imp().payload_bytes(hidden)
    }
    fn scale_bytes(&self, hidden: usize) -> usize {
        self.imp().scale_bytes(hidden)
    }
    fn group_row_multiple(&self) -> usize {
        self.imp().group_row_multiple()
    }
    fn encode(&self, row: &[f32], input_scale: f32, payload: &mut [u8], scales: &mut [u8]) {
        self.imp().encode(row, input_scale, payload, scales)
    }
    fn encode_bf16(
        &self,
        row: &[half::bf16],
        input_scale: f32,
        payload: &mut [u8],
        scales: &mut [u8],
    ) {
        self.imp().encode_bf16(row, input_scale, payload, scales)
    }
    fn decode(&self, payload: &[u8], scales: &[u8], input_scale: f32, out: &mut [f32]) {
        self.imp().decode(payload, scales, input_scale, out)
    }
    fn output_scales_bytes(&self, hidden: usize, rows: usize) -> usize {
        self.imp().output_scales_bytes(hidden, rows)
    }
    fn place_scales(
        &self,
        hidden: usize,
        rows: usize,
        row: usize,
        msg_scales: &[u8],
        out: &mut [u8],
    ) {
        self.imp().place_scales(hidden, rows, row, msg_scales, out)
    }
    fn gather_scales(
        &self,
        hidden: usize,
        rows: usize,
        row: usize,
        out: &[u8],
        msg_scales: &mut [u8],
    ) {
        self.imp().gather_scales(hidden, rows, row, out, msg_scales)
    }
}

/// The largest |x| of a block, or `None` when the block holds a NaN or an infinity (such a block
/// is encoded as a NaN scale with zero elements in every quantized format).
pub(crate) fn finite_amax(xs: &[f32]) -> Option<f32> {
    let mut amax = 0.0f32;
    for x in xs {
        if !x.is_finite() {
            return None;
        }
        amax = amax.max(x.abs());
    }
    Some(amax)
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Format::ALL
            .iter()
            .copied()
            .find(|f| f.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let names: Vec<_> = Format::ALL.iter().map(|f| f.name()).collect();
                format!("unknown format `{s}`; known: {}", names.join(", "))
            })
    }
}
