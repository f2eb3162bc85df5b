//! Sinograms as STIR reads them: Interfile projection data, a `.hs` text header in STIR's
//! dialect and a raw data file beside it (`X.hs` names `X.s`).
//!
//! What is written:
//!
//! - header keys as STIR's own `write_basic_interfile_PDFS_header` writes them: `!INTERFILE`,
//!   `name of data file`, `originating system` (the scanner's name), `!number format` and
//!   `!number of bytes per pixel`, `number of dimensions := 4`, the four `matrix axis label`s
//!   and `!matrix size`s, `minimum` / `maximum ring difference per segment`, the
//!   `Scanner parameters` block (rings, detectors per ring, inner ring diameter = 2 x the
//!   crystal radius, depth of interaction 0, ring spacing, bin size, bins, one block per ring
//!   and bucket) and `applied corrections`;
//! - data in STIR's default storage order `Segment_View_AxialPos_TangPos` (segment, then view,
//!   then axial position, then tangential position fastest), segments in increasing number
//!   (`-K .. +K`, as STIR writes them), little-endian `float` (4 bytes) when every count is
//!   exact in `f32` (|count| <= 2^24), else `signed integer` (4 bytes).
//!
//! The mapping from offhost's [`Layout`]: a segment keeps its ring differences
//! (`ring_b - ring_a`, the same sign STIR gives the PETLINK addresses it decodes with the
//! segment order 0, -1, +1, ...); the axial position is the sinogram's index inside its segment
//! (increasing `ring_a + ring_b`); the view is offhost's view; the tangential position `t`
//! (STIR's `-bins/2 .. bins/2 - 1`, stored from the lowest) is offhost's radial bin
//! `t + bins/2`. For PETLINK data these are the mMR's own view and tangential indices, and the
//! span-11 files equal STIR's `lm_to_projdata` output bin for bin (`docs/notes/pet.md`).
//! Sinograms of offhost's simulator bin lines uniformly in their distance from the axis
//! (`lor`), so they are written as arc-corrected data (`applied corrections := {arc
//! correction}`, `effective central bin size (cm)`); that flag is how [`read`] knows to
//! normalise them by lines of response. STIR's projector and offhost's ray tracing give the
//! same sinograms of one image on these files (views, tangential positions, segments and the
//! tilt of their lines: `tests/stir_projector.rs`).
//!
//! The reader takes what STIR writes: either storage order, segments in any order (matched by
//! their ring differences, which must form one of offhost's layouts), `float`, `signed integer`
//! (2 or 4 bytes) or `unsigned integer` (2 bytes), either byte order, `data offset in bytes`.
//! Counts must be whole numbers that fit an `i32`. Sizes are checked against the data file's
//! length before anything is allocated.

mod read;
mod write;

use std::path::{Path, PathBuf};

use crate::layout::{Layout, Segment};

pub use read::{decode, decode_f32, parse_header, read, read_f32, ProjHeader};
pub use write::{data, header, write, write_to};

/// The data file beside header `hs`: the same name with extension `.s`.
pub fn data_path(hs: &Path) -> PathBuf {
    hs.with_extension("s")
}

/// Whether `path` names an Interfile projection data header (extension `.hs`).
pub fn is_header(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("hs"))
}

/// Segments in the order they are written: increasing segment number.
fn file_order(layout: &Layout) -> Vec<Segment> {
    let mut segs = layout.segments().to_vec();
    segs.sort_by_key(|s| s.number);
    segs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::Scanner;
    use crate::sinofile::SinoFlags;
    use crate::sinogram::Sinogram;

    fn filled(scanner: &Scanner) -> Sinogram {
        let mut s = Sinogram::new(scanner).unwrap();
        for (i, d) in s.data.iter_mut().enumerate() {
            *d = ((i * 7919) % 1001) as i32 - 300;
        }
        s
    }

    fn round_trip(s: &Sinogram, flags: SinoFlags) -> (Sinogram, SinoFlags) {
        let h = parse_header(&header(s, flags, "x.s")).unwrap();
        let d = decode(&h, &data(s)).unwrap();
        (
            d,
            SinoFlags {
                last: true,
                detector_pairs: h.arc_corrected,
            },
        )
    }

    #[test]
    fn round_trips_span1_odd_spans_and_ssrb() {
        let demo = Scanner::demo();
        for span in [1, 3, 5, demo.ssrb_span()] {
            let s = filled(&demo.with_span(span));
            for pairs in [false, true] {
                let fl = SinoFlags {
                    last: true,
                    detector_pairs: pairs,
                };
                let (d, f) = round_trip(&s, fl);
                assert_eq!(f, fl);
                assert_eq!(d.data, s.data, "span {span}");
                assert_eq!(d.scanner.with_span(1), s.scanner.with_span(1));
                assert_eq!(d.scanner.span, span);
            }
        }
    }

    #[test]
    fn header_has_stirs_segment_lists_for_the_mmr_span11() {
        let s = Sinogram::new(&Scanner::mmr().with_span(11)).unwrap();
        let h = header(&s, SinoFlags::default(), "m.s");
        assert!(
            h.contains("!matrix size [2] := { 27,49,71,93,115,127,115,93,71,49,27 }"),
            "{h}"
        );
        assert!(h.contains(
            "minimum ring difference per segment := { -60,-49,-38,-27,-16,-5,6,17,28,39,50 }"
        ));
        assert!(h.contains(
            "maximum ring difference per segment := { -50,-39,-28,-17,-6,5,16,27,38,49,60 }"
        ));
        assert!(h.contains("!number format := float"));
        assert!(h.contains("applied corrections := {None}"));
    }

    /// The first value of each storage order is segment -K's first axial position and view.
    #[test]
    fn data_are_view_major_in_increasing_segment_order() {
        let sc = Scanner::demo().with_span(5);
        let mut s = Sinogram::new(&sc).unwrap();
        let last = s
            .layout
            .segments()
            .iter()
            .find(|g| g.number == -3)
            .copied()
            .unwrap();
        let (views, bins) = (sc.views as usize, sc.radial_bins as usize);
        // Segment -3, axial 1, view 0, bin 2: the file's value number count(axial) * 0 + 1 row.
        s.data[((last.first as usize + 1) * views) * bins + 2] = 5;
        let b = data(&s);
        let at = (bins + 2) * 4;
        assert_eq!(f32::from_le_bytes(b[at..at + 4].try_into().unwrap()), 5.0);
    }

    #[test]
    fn large_counts_are_written_as_integers() {
        let mut s = Sinogram::new(&Scanner::demo().with_span(31)).unwrap();
        s.data[3] = (1 << 24) + 1;
        let h = header(&s, SinoFlags::default(), "x.s");
        assert!(h.contains("!number format := signed integer"));
        assert_eq!(round_trip(&s, SinoFlags::default()).0.data, s.data);
    }

    #[test]
    fn foreign_segments_and_bad_values_are_errors() {
        let s = Sinogram::new(&Scanner::demo().with_span(3)).unwrap();
        let h = header(&s, SinoFlags::default(), "x.s");
        let e = parse_header(&h.replace("{ -15,", "{ -14,"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not one of offhost's span-3 layout"), "{e}");
        let e = parse_header(&h.replace("!matrix size [4] := 11", "!matrix size [4] := 12"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("12 segments but 11"), "{e}");
        let p = parse_header(&h).unwrap();
        let mut d = data(&s);
        d[40..44].copy_from_slice(&0.5f32.to_le_bytes());
        let e = decode(&p, &d).unwrap_err().to_string();
        assert!(e.contains("byte offset 40"), "{e}");
        let e = decode(&p, &d[..100]).unwrap_err().to_string();
        assert!(e.contains("truncated projection data"), "{e}");
    }
}
