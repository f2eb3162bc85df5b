//! Scanner geometry: a cylinder of detector rings, and the sinogram sampling that goes with it.
//!
//! Coordinates: millimetres, the scanner axis is `z`, the transaxial plane is `(x, y)` with
//! the origin on the axis at the middle of the axial field of view. Detector `d` of a ring sits
//! at angle `2 pi d / detectors_per_ring` from the `+x` axis, ring `r` at
//! `z = (r + 0.5) * ring_spacing - rings * ring_spacing / 2`.

use crate::error::GeometryError;

/// Most views, and most radial bins, a sinogram may have (the mMR has 252 and 344).
pub const MAX_BINS_PER_AXIS: u32 = 8192;
/// Most bins (counts) in one sinogram stack: 2^29, 2 GiB of `i32` counts (the mMR at span 1
/// has 354 million). Sizes from headers are checked against it before anything is allocated.
pub const MAX_SINOGRAM_BINS: u64 = 1 << 29;

/// A cylindrical PET scanner and the sinogram sampling used with it.
#[derive(Clone, Debug, PartialEq)]
pub struct Scanner {
    /// Short name (`mmr`, `demo`, or the header's system name).
    pub name: String,
    /// Number of detector rings.
    pub rings: u32,
    /// Detectors (crystals) per ring.
    pub detectors_per_ring: u32,
    /// Distance between ring centres in mm.
    pub ring_spacing_mm: f64,
    /// Radius of the crystal cylinder in mm.
    pub crystal_radius_mm: f64,
    /// Radial (tangential) bins per sinogram row.
    pub radial_bins: u32,
    /// Views (projection angles over 180 degrees).
    pub views: u32,
    /// Radial bin size in mm.
    pub bin_size_mm: f64,
    /// Largest ring difference kept.
    pub max_ring_difference: u32,
    /// Axial compression (span, odd).
    pub span: u32,
}

impl Scanner {
    /// The Siemens Biograph mMR as described by the PETLINK header of the test data.
    pub fn mmr() -> Self {
        Scanner {
            name: "mmr".into(),
            rings: 64,
            detectors_per_ring: 504,
            ring_spacing_mm: 4.0625,
            crystal_radius_mm: 328.0,
            radial_bins: 344,
            views: 252,
            bin_size_mm: 2.0445,
            max_ring_difference: 60,
            span: 1,
        }
    }

    /// A small scanner that simulates, histograms and reconstructs fast on a laptop.
    pub fn demo() -> Self {
        Scanner {
            name: "demo".into(),
            rings: 16,
            detectors_per_ring: 256,
            ring_spacing_mm: 6.0,
            crystal_radius_mm: 250.0,
            radial_bins: 128,
            views: 128,
            bin_size_mm: 3.068,
            max_ring_difference: 15,
            span: 1,
        }
    }

    /// Looks a preset up by name (`mmr` or `demo`).
    pub fn preset(name: &str) -> Result<Self, GeometryError> {
        match name {
            "mmr" => Ok(Self::mmr()),
            "demo" => Ok(Self::demo()),
            other => Err(GeometryError::UnknownPreset(other.to_string())),
        }
    }

    /// The name of the preset with this one's geometry (any span), if one has it: what a
    /// pipeline's `scanner=` names it by.
    pub fn preset_name(&self) -> Option<&'static str> {
        let same = |p: &Scanner| {
            Scanner {
                name: String::new(),
                span: 1,
                ..p.clone()
            } == Scanner {
                name: String::new(),
                span: 1,
                ..self.clone()
            }
        };
        [("mmr", Self::mmr()), ("demo", Self::demo())]
            .into_iter()
            .find(|(_, p)| same(p))
            .map(|(n, _)| n)
    }

    /// Checks that the parameters describe a usable scanner.
    pub fn validate(&self) -> Result<(), GeometryError> {
        let bad = |m: String| Err(GeometryError::Invalid(m));
        if self.rings == 0 || self.rings > 256 {
            return bad(format!("rings must be 1..=256, got {}", self.rings));
        }
        if self.detectors_per_ring < 4
            || self.detectors_per_ring > 65535
            || !self.detectors_per_ring.is_multiple_of(2)
        {
            return bad(format!(
                "detectors per ring must be even and 4..=65534, got {}",
                self.detectors_per_ring
            ));
        }
        if self.views == 0 || self.radial_bins == 0 {
            return bad("views and radial bins must be positive".into());
        }
        for (what, v) in [("views", self.views), ("radial bins", self.radial_bins)] {
            if v > MAX_BINS_PER_AXIS {
                return bad(format!(
                    "{what} {v} exceed the limit of {MAX_BINS_PER_AXIS}"
                ));
            }
        }
        if self.max_ring_difference >= self.rings {
            return bad(format!(
                "max ring difference {} must be below the ring count {}",
                self.max_ring_difference, self.rings
            ));
        }
        if self.span.is_multiple_of(2) {
            return bad(format!("span must be odd, got {}", self.span));
        }
        if self.span > self.ssrb_span() {
            return bad(format!(
                "span {} exceeds the limit of {} (2 x max ring difference + 1: single-slice rebinning)",
                self.span,
                self.ssrb_span()
            ));
        }
        for (what, v) in [
            ("ring spacing", self.ring_spacing_mm),
            ("crystal radius", self.crystal_radius_mm),
            ("bin size", self.bin_size_mm),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return bad(format!("{what} must be positive, got {v}"));
            }
        }
        if self.radial_bins as f64 * self.bin_size_mm / 2.0 > 2.0 * self.crystal_radius_mm {
            return bad("radial field of view is larger than the scanner".into());
        }
        Ok(())
    }

    /// Axial length of the detector cylinder in mm.
    pub fn axial_length_mm(&self) -> f64 {
        self.rings as f64 * self.ring_spacing_mm
    }

    /// Number of bins in one sinogram (views x radial bins).
    pub fn plane_size(&self) -> usize {
        self.views as usize * self.radial_bins as usize
    }

    /// The same scanner with another span (axial compression).
    pub fn with_span(&self, span: u32) -> Self {
        Scanner {
            span,
            ..self.clone()
        }
    }

    /// Span that folds every kept ring difference into one segment (single-slice rebinning).
    pub fn ssrb_span(&self) -> u32 {
        2 * self.max_ring_difference + 1
    }
}

#[cfg(test)]
impl Scanner {
    /// A small scanner for unit tests: 6 rings of 64 detectors, 24 bins by 16 views, 4 mm
    /// everywhere, ring difference up to 5, at `span`.
    pub(crate) fn small_for_tests(span: u32) -> Scanner {
        Scanner {
            name: "t".into(),
            rings: 6,
            detectors_per_ring: 64,
            ring_spacing_mm: 4.0,
            crystal_radius_mm: 60.0,
            radial_bins: 24,
            views: 16,
            bin_size_mm: 4.0,
            max_ring_difference: 5,
            span,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid() {
        Scanner::mmr().validate().unwrap();
        Scanner::demo().validate().unwrap();
        assert_eq!(
            Scanner::preset("nope"),
            Err(GeometryError::UnknownPreset("nope".into()))
        );
    }

    #[test]
    fn rejects_spans_and_sizes_past_their_limits() {
        let e = Scanner::demo().with_span(u32::MAX).validate().unwrap_err();
        assert!(
            e.to_string()
                .contains("span 4294967295 exceeds the limit of 31"),
            "{e}"
        );
        let mut s = Scanner::demo();
        s.views = u32::MAX;
        let e = s.validate().unwrap_err();
        assert!(
            e.to_string()
                .contains("views 4294967295 exceed the limit of 8192"),
            "{e}"
        );
    }

    #[test]
    fn rejects_even_span_and_large_ring_difference() {
        assert!(Scanner::demo().with_span(2).validate().is_err());
        let mut s = Scanner::demo();
        s.max_ring_difference = 16;
        assert!(s.validate().is_err());
    }
}
