//! Sinogram layout: which ring pairs go to which sinogram, for span 1 or compressed data.
//!
//! Segments are ordered `0, -1, +1, -2, +2, ...` (the PETLINK and STIR order). A segment with
//! number `k > 0` holds ring differences `d = ring_b - ring_a` in
//! `[k*span - (span-1)/2, k*span + (span-1)/2]` (capped at the maximum ring difference), segment
//! `-k` the negated range. Inside a segment sinograms are ordered by axial position
//! `ring_a + ring_b`: in steps of 2 when the segment holds one ring difference (span 1), in
//! steps of 1 otherwise. A span of `2*max_ring_difference + 1` is single-slice rebinning: one
//! segment of `2*rings - 1` sinograms.

use crate::error::GeometryError;
use crate::geometry::Scanner;

/// One segment of a sinogram layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Segment number (0, -1, +1, ...).
    pub number: i32,
    /// Smallest ring difference in the segment.
    pub min_rd: i32,
    /// Largest ring difference in the segment.
    pub max_rd: i32,
    /// Index of the segment's first sinogram.
    pub first: u32,
    /// Number of sinograms (axial positions).
    pub count: u32,
    /// Smallest `ring_a + ring_b` of the segment.
    pub min_sum: u32,
    /// Step of `ring_a + ring_b` between consecutive sinograms (1 or 2).
    pub step: u32,
}

/// The full list of segments for a scanner, span and maximum ring difference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    rings: u32,
    segments: Vec<Segment>,
    total: u32,
    /// `ring_a * rings + ring_b` -> sinogram index, or `u32::MAX` when not kept.
    ring_pair: Vec<u32>,
}

impl Layout {
    /// Builds the layout of a scanner (its rings, maximum ring difference and span).
    pub fn new(scanner: &Scanner) -> Result<Self, GeometryError> {
        scanner.validate()?;
        let (n, mrd, span) = (
            scanner.rings as i32,
            scanner.max_ring_difference as i32,
            scanner.span as i32,
        );
        let half = (span - 1) / 2;
        let mut segments = Vec::new();
        let mut first = 0u32;
        let mut k = 0i32;
        loop {
            let lo = if k == 0 { 0 } else { k * span - half };
            if lo > mrd {
                break;
            }
            let hi = (k * span + half).min(mrd);
            let signs: &[i32] = if k == 0 { &[1] } else { &[-1, 1] };
            for &sign in signs {
                let (min_rd, max_rd) = if k == 0 {
                    (-hi, hi)
                } else if sign < 0 {
                    (-hi, -lo)
                } else {
                    (lo, hi)
                };
                let single = min_rd == max_rd;
                let lo_abs = if k == 0 { 0 } else { lo } as u32;
                let (count, step) = if single {
                    ((n - lo) as u32, 2)
                } else {
                    ((2 * n - 1) as u32 - 2 * lo_abs, 1)
                };
                segments.push(Segment {
                    number: sign * k,
                    min_rd,
                    max_rd,
                    first,
                    count,
                    min_sum: lo_abs,
                    step,
                });
                first += count;
            }
            k += 1;
        }
        let mut ring_pair = vec![u32::MAX; (n * n) as usize];
        for a in 0..n {
            for b in 0..n {
                let d = b - a;
                if let Some(seg) = segments.iter().find(|s| s.min_rd <= d && d <= s.max_rd) {
                    let idx = seg.first + ((a + b) as u32 - seg.min_sum) / seg.step;
                    ring_pair[(a * n + b) as usize] = idx;
                }
            }
        }
        Ok(Layout {
            rings: scanner.rings,
            segments,
            total: first,
            ring_pair,
        })
    }

    /// The segments in storage order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Bins (counts) of a sinogram stack of this layout for `scanner`'s views and radial bins,
    /// checked against [`crate::geometry::MAX_SINOGRAM_BINS`] (the error names the sizes).
    pub fn bins(&self, scanner: &Scanner) -> Result<usize, GeometryError> {
        let max = crate::geometry::MAX_SINOGRAM_BINS;
        let bins = u64::from(self.total)
            .checked_mul(u64::from(scanner.views))
            .and_then(|v| v.checked_mul(u64::from(scanner.radial_bins)))
            .filter(|&b| b <= max)
            .ok_or_else(|| {
                GeometryError::Invalid(format!(
                    "{} sinograms x {} views x {} radial bins exceed the limit of {max} bins",
                    self.total, scanner.views, scanner.radial_bins
                ))
            })?;
        usize::try_from(bins).map_err(|_| GeometryError::Invalid("sinogram too large".into()))
    }

    /// Total number of sinograms.
    pub fn total_sinograms(&self) -> u32 {
        self.total
    }

    /// Sinogram index of a ring pair, or `None` when its ring difference is not kept.
    pub fn sinogram(&self, ring_a: u32, ring_b: u32) -> Option<u32> {
        if ring_a >= self.rings || ring_b >= self.rings {
            return None;
        }
        let v = self.ring_pair[(ring_a * self.rings + ring_b) as usize];
        (v != u32::MAX).then_some(v)
    }

    /// The ring-pair table (`ring_a * rings + ring_b` -> sinogram or `u32::MAX`).
    pub fn ring_pair_table(&self) -> &[u32] {
        &self.ring_pair
    }

    /// Segment and `ring_a + ring_b` of a sinogram index.
    pub fn locate(&self, sino: u32) -> Option<(Segment, u32)> {
        let seg = self
            .segments
            .iter()
            .find(|s| s.first <= sino && sino < s.first + s.count)?;
        Some((*seg, seg.min_sum + (sino - seg.first) * seg.step))
    }

    /// Sinogram counts per segment in storage order (the Interfile "segment table").
    pub fn segment_table(&self) -> Vec<u32> {
        self.segments.iter().map(|s| s.count).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mmr_span1_has_4084_sinograms() {
        let l = Layout::new(&Scanner::mmr()).unwrap();
        assert_eq!(l.total_sinograms(), 4084);
        assert_eq!(l.segments().len(), 121);
        assert_eq!(&l.segment_table()[..3], &[64, 63, 63]);
    }

    #[test]
    fn mmr_span11_matches_header_segment_table() {
        let l = Layout::new(&Scanner::mmr().with_span(11)).unwrap();
        assert_eq!(
            l.segment_table(),
            vec![127, 115, 115, 93, 93, 71, 71, 49, 49, 27, 27]
        );
        assert_eq!(l.total_sinograms(), 837);
    }

    #[test]
    fn every_kept_pair_maps_to_a_distinct_span1_sinogram() {
        let s = Scanner::demo();
        let l = Layout::new(&s).unwrap();
        let mut seen = vec![false; l.total_sinograms() as usize];
        for a in 0..s.rings {
            for b in 0..s.rings {
                let i = l.sinogram(a, b).unwrap();
                assert!(!seen[i as usize], "pair {a},{b} collides");
                seen[i as usize] = true;
                let (seg, sum) = l.locate(i).unwrap();
                assert_eq!(sum, a + b);
                assert!(seg.min_rd <= b as i32 - a as i32 && b as i32 - a as i32 <= seg.max_rd);
            }
        }
        assert!(seen.iter().all(|&x| x));
    }

    #[test]
    fn ssrb_is_one_segment_by_axial_sum() {
        let s = Scanner::demo();
        let l = Layout::new(&s.with_span(s.ssrb_span())).unwrap();
        assert_eq!(l.segments().len(), 1);
        assert_eq!(l.total_sinograms(), 2 * s.rings - 1);
        assert_eq!(l.sinogram(3, 9), Some(12));
    }
}
