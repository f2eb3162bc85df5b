//! A flat binary encoding of a [`Sinogram`], used for snapshots passed between engine tasks
//! and for `.sino` files.
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0      | 8    | magic `OHSINO01` |
//! | 8      | 4x6  | rings, detectors per ring, radial bins, views, max ring difference, span (u32) |
//! | 32     | 8x3  | ring spacing, crystal radius, bin size in mm (f64) |
//! | 56     | 4    | flags: bit 0 = final (not a snapshot), bit 1 = detector-pair data (normalise by lines of response) |
//! | 60     | 4    | reserved (0) |
//! | 64     | 4n   | net counts (i32), `[sinogram][view][bin]` |

use crate::error::FormatError;
use crate::geometry::Scanner;
use crate::layout::Layout;
use crate::sinogram::Sinogram;

/// Magic of an encoded sinogram.
pub const MAGIC: &[u8; 8] = b"OHSINO01";
/// Header length.
pub const HEADER_LEN: usize = 64;

/// Flags stored with an encoded sinogram.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SinoFlags {
    /// The acquisition has ended (this is not an intermediate snapshot).
    pub last: bool,
    /// Bins hold detector-pair data (reconstruct with line-of-response normalisation).
    pub detector_pairs: bool,
}

/// Byte offset of the flags word in an encoded sinogram.
pub const FLAGS_AT: usize = 56;

impl SinoFlags {
    /// The flags word: bit 0 final, bit 1 detector-pair data.
    fn word(self) -> u32 {
        u32::from(self.last) | u32::from(self.detector_pairs) << 1
    }

    fn from_word(w: u32) -> SinoFlags {
        SinoFlags {
            last: w & 1 != 0,
            detector_pairs: w & 2 != 0,
        }
    }
}

/// The flags of an encoded sinogram without decoding the rest (`None`: too short to hold
/// them; nothing else is checked, see [`check`]).
pub fn flags_of(b: &[u8]) -> Option<SinoFlags> {
    let w = b.get(FLAGS_AT..FLAGS_AT + 4)?;
    Some(SinoFlags::from_word(u32::from_le_bytes(w.try_into().ok()?)))
}

/// Sets the flags of an encoded sinogram (at least [`HEADER_LEN`] bytes).
pub fn set_flags(b: &mut [u8], flags: SinoFlags) {
    b[FLAGS_AT..FLAGS_AT + 4].copy_from_slice(&flags.word().to_le_bytes());
}

/// The length of an encoded sinogram of `scanner` (at its span).
pub fn encoded_len(scanner: &Scanner) -> Result<usize, crate::error::GeometryError> {
    let bins = Layout::new(scanner)?.bins(scanner)?;
    Ok(HEADER_LEN + 4 * bins)
}

/// Encodes a sinogram.
pub fn encode(s: &Sinogram, flags: SinoFlags) -> Vec<u8> {
    let mut b = vec![0u8; HEADER_LEN + 4 * s.data.len()];
    encode_into(&s.scanner, &s.data, flags, &mut b);
    b
}

/// Encodes the sinogram of `scanner` with counts `data` into `out`, which must be
/// `HEADER_LEN + 4 * data.len()` bytes long (a buffer of a free list, say).
pub fn encode_into(sc: &Scanner, data: &[i32], flags: SinoFlags, out: &mut [u8]) {
    assert_eq!(
        out.len(),
        HEADER_LEN + 4 * data.len(),
        "encode_into's buffer"
    );
    let mut head = Vec::with_capacity(HEADER_LEN);
    head.extend_from_slice(MAGIC);
    for v in [
        sc.rings,
        sc.detectors_per_ring,
        sc.radial_bins,
        sc.views,
        sc.max_ring_difference,
        sc.span,
    ] {
        head.extend_from_slice(&v.to_le_bytes());
    }
    for v in [sc.ring_spacing_mm, sc.crystal_radius_mm, sc.bin_size_mm] {
        head.extend_from_slice(&v.to_le_bytes());
    }
    head.extend_from_slice(&flags.word().to_le_bytes());
    head.extend_from_slice(&0u32.to_le_bytes());
    out[..HEADER_LEN].copy_from_slice(&head);
    // Filled in place (the loop vectorises; pushing value by value does not).
    for (o, v) in out[HEADER_LEN..].chunks_exact_mut(4).zip(data) {
        o.copy_from_slice(&v.to_le_bytes());
    }
}

/// Checks an encoded sinogram's header and length without decoding its counts.
pub fn check(b: &[u8]) -> Result<(), FormatError> {
    header(b).map(drop)
}

/// The scanner an encoded sinogram's header gives, checked against its length.
fn header(b: &[u8]) -> Result<Scanner, FormatError> {
    if b.len() < HEADER_LEN {
        return Err(FormatError::Truncated {
            what: "sinogram header",
            offset: 0,
            have: b.len(),
            need: HEADER_LEN,
        });
    }
    if &b[..8] != MAGIC {
        return Err(FormatError::BadMagic {
            expected: String::from_utf8_lossy(MAGIC).into(),
            found: String::from_utf8_lossy(&b[..8]).into(),
        });
    }
    let u = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    let f = |i: usize| f64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    let scanner = Scanner {
        name: "file".into(),
        rings: u(8),
        detectors_per_ring: u(12),
        radial_bins: u(16),
        views: u(20),
        max_ring_difference: u(24),
        span: u(28),
        ring_spacing_mm: f(32),
        crystal_radius_mm: f(40),
        bin_size_mm: f(48),
    };
    let bad_header = |e: crate::error::GeometryError| FormatError::BadHeader {
        offset: 8,
        what: e.to_string(),
    };
    // The size the header implies is checked against the data before anything is allocated.
    let layout = Layout::new(&scanner).map_err(bad_header)?;
    let bins = layout.bins(&scanner).map_err(bad_header)?;
    let need = bins
        .checked_mul(4)
        .and_then(|n| n.checked_add(HEADER_LEN))
        .ok_or_else(|| FormatError::BadHeader {
            offset: 8,
            what: format!("{bins} bins overflow the data length"),
        })?;
    if b.len() != need {
        return Err(FormatError::Mismatch {
            offset: b.len().min(need) as u64,
            what: format!("header implies {need} bytes, data has {}", b.len()),
        });
    }
    Ok(scanner)
}

/// Decodes a sinogram, checking the header and the length.
pub fn decode(b: &[u8]) -> Result<(Sinogram, SinoFlags), FormatError> {
    let scanner = header(b)?;
    let u = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    let mut s = Sinogram::new(&scanner).map_err(|e| FormatError::BadHeader {
        offset: 8,
        what: e.to_string(),
    })?;
    for (d, c) in s.data.iter_mut().zip(b[HEADER_LEN..].chunks_exact(4)) {
        *d = i32::from_le_bytes(c.try_into().expect("4 bytes"));
    }
    Ok((s, SinoFlags::from_word(u(FLAGS_AT))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_length_check() {
        let mut s = Sinogram::new(&Scanner::demo().with_span(31)).unwrap();
        s.data[12345] = -7;
        s.data[0] = 3;
        let fl = SinoFlags {
            last: true,
            detector_pairs: true,
        };
        let b = encode(&s, fl);
        let (d, f) = decode(&b).unwrap();
        assert_eq!(f, fl);
        assert_eq!(d.data, s.data);
        assert!(matches!(
            decode(&b[..b.len() - 4]),
            Err(FormatError::Mismatch { .. })
        ));
    }

    /// A 64-byte header whose sizes are valid numbers but absurd: each is an error naming
    /// the field and its limit, found before anything is allocated.
    #[test]
    fn crafted_headers_are_errors_before_allocation() {
        let base = encode(
            &Sinogram::new(&Scanner::demo()).unwrap(),
            SinoFlags::default(),
        );
        let with = |at: usize, v: u32| {
            let mut h = base[..HEADER_LEN].to_vec();
            h[at..at + 4].copy_from_slice(&v.to_le_bytes());
            h[48..56].copy_from_slice(&0.01f64.to_le_bytes());
            h
        };
        // views x bins that multiply past u64 (wrapped to 0 before).
        let mut h = with(16, u32::MAX);
        h[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = decode(&h).unwrap_err().to_string();
        assert!(e.contains("exceed the limit of 8192"), "{e}");
        // Valid per axis, petabytes together.
        let mut h = with(16, 8192);
        h[20..24].copy_from_slice(&8192u32.to_le_bytes());
        let e = decode(&h).unwrap_err().to_string();
        assert!(e.contains("exceed the limit of 536870912 bins"), "{e}");
        // Span 0xFFFFFFFF (looped for ever before).
        let e = decode(&with(28, u32::MAX)).unwrap_err().to_string();
        assert!(e.contains("span 4294967295 exceeds the limit"), "{e}");
        // A plausible header with no data.
        let e = decode(&base[..HEADER_LEN]).unwrap_err().to_string();
        assert!(e.contains("header implies"), "{e}");
    }
}
