//! A minimal writer for NumPy's `.npy` format (version 1.0): a magic string, a header dict
//! (`descr`, `fortran_order`, `shape`) padded so the data starts on a 64-byte boundary, then the
//! raw little-endian data in C order.

use std::io::{self, Write};
use std::path::Path;

/// An element type NumPy understands, with its `descr` string.
pub trait NpyElement: Copy {
    const DESCR: &'static str;
    fn write_le(self, out: &mut Vec<u8>);
}

macro_rules! npy_element {
    ($t:ty, $d:literal) => {
        impl NpyElement for $t {
            const DESCR: &'static str = $d;
            fn write_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    };
}
npy_element!(u8, "|u1");
npy_element!(u16, "<u2");
npy_element!(i32, "<i4");
npy_element!(u32, "<u4");
npy_element!(f32, "<f4");

/// Writes `data` (C order) with `shape` to `path`.
pub fn write<T: NpyElement>(
    path: &Path,
    shape: &[usize],
    data: impl IntoIterator<Item = T>,
) -> io::Result<()> {
    let mut body = Vec::new();
    let mut n = 0usize;
    for x in data {
        x.write_le(&mut body);
        n += 1;
    }
    let expected: usize = shape.iter().product();
    if n != expected {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: {n} elements for shape {shape:?}", path.display()),
        ));
    }
    let shape_text = match shape {
        [one] => format!("({one},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape_text}, }}",
        T::DESCR
    );
    // magic (6) + version (2) + header length (2) + header + '\n' is a multiple of 64.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut f = io::BufWriter::new(std::fs::File::create(path)?);
    f.write_all(b"\x93NUMPY\x01\x00")?;
    f.write_all(&(header.len() as u16).to_le_bytes())?;
    f.write_all(header.as_bytes())?;
    f.write_all(&body)?;
    f.flush()
}

#[cfg(test)]
mod tests {
    #[test]
    fn header_is_aligned_and_well_formed() {
        let dir = std::env::temp_dir().join(format!("ep-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.npy");
        super::write(&p, &[2, 3], [1i32, 2, 3, 4, 5, 6]).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
        let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        let header = std::str::from_utf8(&bytes[10..10 + hlen]).unwrap();
        assert!(header.starts_with("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }"));
        assert_eq!(bytes.len(), 10 + hlen + 24);
        assert!(super::write(&p, &[4], [1u8, 2]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
