//! Fused SwiGLU on the dispatch output: `h = silu(gate) * up` in f32 for every row the dispatch
//! delivered, written in a token format. It reads the rows to process from the routing
//! (`row_offsets` and the per-group real rows), not from a host-side count: after dispatch only
//! the device knows how many rows arrived. Padding rows and rows past `row_offsets[last]` stay
//! zero (payload and scales).
//!
//! `min`/`max` return the non-NaN operand (IEEE minNum/maxNum, CUDA `fminf`/`fmaxf`); `exp` is
//! [`crate::numerics::exp`].

use half::bf16;
use ndarray::{Array2, ArrayView2};

use crate::error::{ConfigError, EpError, Result};
use crate::format::{Format, TokenFormat};
use crate::io::DispatchOutput;
use crate::numerics::{canonical_nan, sigmoid, silu};

/// Where gate and up sit in a row of `2 * I` columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateUp {
    /// Columns `0..I` are gate, `I..2I` are up.
    Split,
    /// Gate and up alternate: column `2c` is gate, `2c + 1` is up.
    Interleaved,
}

/// The clamped variant: `gate = min(gate, limit)`, `up = clamp(up, -limit, limit)`,
/// `h = (up + 1) * gate * sigmoid(alpha * gate)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SwigluClamp {
    /// Multiplies `gate` inside the sigmoid.
    pub alpha: f32,
    /// Upper bound of `gate`, and bound of `|up|`.
    pub limit: f32,
}

/// How `EpComm::swiglu` reads its input and writes `h`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SwigluOptions {
    /// Where gate and up sit in an input row.
    pub layout: GateUp,
    /// The clamped variant; `None` is plain `silu(gate) * up`.
    pub clamp: Option<SwigluClamp>,
    /// The format `h` is written in.
    pub format: Format,
    /// NVFP4's global input scale for `h` (ignored by the other formats).
    pub input_scale: f32,
}

impl SwigluOptions {
    /// Plain SwiGLU, gate and up split, written in `format` with input scale 1.0.
    pub fn new(format: Format) -> Self {
        SwigluOptions {
            layout: GateUp::Split,
            clamp: None,
            format,
            input_scale: 1.0,
        }
    }
}

/// SwiGLU output: `[rows, payload_bytes(I)]` plus scales in the format's output layout, with
/// `rows` = the input's row count (the capacity the caller allocated). Equal means bit for bit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwigluOutput {
    /// The format `payload` and `scales` are in.
    pub format: Format,
    /// `I`: elements per output row.
    pub width: usize,
    /// `[rows, payload_bytes(I)]` encoded rows; padding rows are zero.
    pub payload: Array2<u8>,
    /// The scales in the format's output layout (empty for BF16).
    pub scales: Vec<u8>,
}

impl SwigluOutput {
    /// The first differing byte, or `None` when bit-identical.
    pub fn bit_diff(&self, other: &SwigluOutput) -> Option<String> {
        if (self.format, self.width, self.payload.dim())
            != (other.format, other.width, other.payload.dim())
        {
            return Some(format!(
                "{} x {:?} vs {} x {:?}",
                self.format,
                self.payload.dim(),
                other.format,
                other.payload.dim()
            ));
        }
        for (r, (a, b)) in self
            .payload
            .outer_iter()
            .zip(other.payload.outer_iter())
            .enumerate()
        {
            if let Some(c) = a.iter().zip(b.iter()).position(|(x, y)| x != y) {
                return Some(format!("row {r} byte {c}: {:#04x} vs {:#04x}", a[c], b[c]));
            }
        }
        let i = self
            .scales
            .iter()
            .zip(&other.scales)
            .position(|(x, y)| x != y)?;
        Some(format!("scales byte {i}"))
    }
}

/// Checks `input` against the routing and the options.
pub fn check(
    rank: usize,
    routing: &DispatchOutput,
    input: &ArrayView2<'_, bf16>,
    opts: &SwigluOptions,
) -> Result<()> {
    let last = *routing.row_offsets.last().unwrap_or(&0) as usize;
    let cols = input.ncols();
    if input.nrows() < last || !cols.is_multiple_of(2) {
        return Err(EpError::Shape {
            rank,
            what: "swiglu input",
            expected: vec![last.max(input.nrows()), cols + cols % 2],
            got: input.shape().to_vec(),
        });
    }
    let width = cols / 2;
    if width == 0 || !width.is_multiple_of(opts.format.block()) {
        return Err(ConfigError::HiddenNotAllowed {
            format: opts.format.name(),
            hidden: width,
            block: opts.format.block(),
        }
        .into());
    }
    if !(opts.input_scale.is_finite() && opts.input_scale > 0.0) {
        return Err(EpError::InvalidInputScale {
            rank,
            token: 0,
            value: opts.input_scale,
        });
    }
    if !input.is_standard_layout() {
        return Err(EpError::NotContiguous {
            rank,
            what: "swiglu input",
        });
    }
    Ok(())
}

/// One row's activation, `width` values from `2 * width` inputs.
pub fn activate(x: &[bf16], layout: GateUp, clamp: Option<SwigluClamp>, h: &mut [f32]) {
    let width = h.len();
    for (c, h) in h.iter_mut().enumerate() {
        let (g, u) = match layout {
            GateUp::Split => (x[c].to_f32(), x[width + c].to_f32()),
            GateUp::Interleaved => (x[2 * c].to_f32(), x[2 * c + 1].to_f32()),
        };
        *h = canonical_nan(match clamp {
            None => silu(g) * u,
            Some(SwigluClamp { alpha, limit }) => {
                let g = g.min(limit);
                let u = u.min(limit).max(-limit);
                ((u + 1.0) * g) * sigmoid(alpha * g)
            }
        });
    }
}

/// The reference SwiGLU (backends without a device implement it with this).
pub fn swiglu(
    rank: usize,
    routing: &DispatchOutput,
    input: ArrayView2<'_, bf16>,
    opts: &SwigluOptions,
) -> Result<SwigluOutput> {
    check(rank, routing, &input, opts)?;
    let (rows, width) = (input.nrows(), input.ncols() / 2);
    let fmt = opts.format;
    let mut payload = Array2::<u8>::zeros((rows, fmt.payload_bytes(width)));
    let mut scales = vec![0u8; fmt.output_scales_bytes(width, rows)];
    let mut h = vec![0f32; width];
    let mut row_scales = vec![0u8; fmt.scale_bytes(width)];
    let n_ranks = routing.n_ranks();
    for g in 0..routing.n_groups() {
        let real = routing.src_offsets[[g, 0]] as usize..routing.src_offsets[[g, n_ranks]] as usize;
        for row in real {
            activate(
                input.row(row).as_slice().expect("checked"),
                opts.layout,
                opts.clamp,
                &mut h,
            );
            fmt.encode(
                &h,
                opts.input_scale,
                payload.row_mut(row).as_slice_mut().unwrap(),
                &mut row_scales,
            );
            fmt.place_scales(width, rows, row, &row_scales, &mut scales);
        }
    }
    Ok(SwigluOutput {
        format: fmt,
        width,
        payload,
        scales,
    })
}
