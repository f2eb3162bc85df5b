//! The detector cylinder: where a photon reaches it and which crystal it hits there.
//!
//! The crystal of a point on the cylinder is `round(angle / pitch) mod detectors`, with the
//! angle from a polynomial `atan2` (error below 2e-6 rad, a ten-thousandth of the demo
//! scanner's 0.025 rad pitch) instead of the library call; the ring is
//! `floor((z + L/2) / spacing)`.

use crate::geometry::Scanner;

/// `atan2(y, x)` in `(-pi, pi]` to within 2e-6 rad: octant reduction and a degree-11
/// odd polynomial for `atan` on `[0, 1]`.
#[inline]
pub fn fast_atan2(y: f64, x: f64) -> f64 {
    use std::f64::consts::{FRAC_PI_2, PI};
    let (ax, ay) = (x.abs(), y.abs());
    let (lo, hi) = (ax.min(ay), ax.max(ay));
    let t = if hi > 0.0 { lo / hi } else { 0.0 };
    let t2 = t * t;
    let p = -0.011_721_20;
    let p = p * t2 + 0.052_653_32;
    let p = p * t2 - 0.116_432_87;
    let p = p * t2 + 0.193_543_46;
    let p = p * t2 - 0.332_623_47;
    let p = p * t2 + 0.999_977_26;
    let mut a = t * p;
    if ay > ax {
        a = FRAC_PI_2 - a;
    }
    if x < 0.0 {
        a = PI - a;
    }
    if y < 0.0 {
        -a
    } else {
        a
    }
}

/// Where a photon was detected.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    /// Crystal within the ring.
    pub det: u16,
    /// Ring.
    pub ring: u8,
    /// Path length from the emission point, mm.
    pub dist: f64,
}

/// The crystal cylinder of a scanner.
#[derive(Clone, Debug)]
pub struct Crystals {
    /// Radius, mm.
    pub radius: f64,
    /// Half the axial length, mm.
    pub half_len: f64,
    spacing: f64,
    rings: u32,
    dets: u32,
    /// Crystals per radian.
    per_rad: f64,
}

impl Crystals {
    /// The cylinder of a (validated) scanner.
    pub fn new(s: &Scanner) -> Self {
        Crystals {
            radius: s.crystal_radius_mm,
            half_len: s.axial_length_mm() / 2.0,
            spacing: s.ring_spacing_mm,
            rings: s.rings,
            dets: s.detectors_per_ring,
            per_rad: s.detectors_per_ring as f64 / std::f64::consts::TAU,
        }
    }

    /// The crystal at the point `(x, y)` of the cylinder (any radius: only its angle
    /// counts).
    #[inline]
    pub fn detector(&self, x: f64, y: f64) -> u16 {
        let n = self.dets;
        // In (-n/2, n/2] + n + 0.5: positive, so truncation rounds.
        let k = (fast_atan2(y, x) * self.per_rad + n as f64 + 0.5) as u32;
        (if k >= n { k - n } else { k }) as u16
    }

    /// The ring at height `z`, or `None` past either end.
    #[inline]
    pub fn ring(&self, z: f64) -> Option<u8> {
        // Truncation is `floor` on the range kept (and avoids a libm call).
        let r = (z + self.half_len) / self.spacing;
        (0.0..self.rings as f64).contains(&r).then_some(r as u8)
    }

    /// The ring at height `z`, for a `z` known to be on the cylinder up to rounding.
    #[inline]
    pub fn ring_clamped(&self, z: f64) -> u8 {
        let r = (z + self.half_len) / self.spacing;
        r.clamp(0.0, self.rings as f64 - 1.0) as u8
    }

    /// Where the ray `p + t u`, `t > 0`, from a point inside the cylinder meets it; `None`
    /// when it leaves through an end.
    #[inline]
    pub fn reach(&self, p: [f64; 3], u: [f64; 3]) -> Option<Hit> {
        let a = u[0] * u[0] + u[1] * u[1];
        if a < 1e-12 {
            return None;
        }
        let b = p[0] * u[0] + p[1] * u[1];
        let c = p[0] * p[0] + p[1] * p[1] - self.radius * self.radius;
        let t = (-b + (b * b - a * c).max(0.0).sqrt()) / a;
        let ring = self.ring(p[2] + t * u[2])?;
        Some(Hit {
            det: self.detector(p[0] + t * u[0], p[1] + t * u[1]),
            ring,
            dist: t,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn fast_atan2_is_within_2e6_of_the_library() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        for _ in 0..200_000 {
            let (y, x): (f64, f64) = (rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0));
            let d = (fast_atan2(y, x) - y.atan2(x)).abs();
            assert!(d < 2e-6, "{y} {x}: {d}");
        }
        for (y, x) in [(0.0, 1.0), (1.0, 0.0), (0.0, -1.0), (-1.0, 0.0), (1.0, 1.0)] {
            assert!((fast_atan2(y, x) - f64::atan2(y, x)).abs() < 2e-6);
        }
    }

    #[test]
    fn crystal_index_matches_rounded_library_angle() {
        // Only points within 2e-6 rad of a crystal boundary may differ, by one crystal.
        let c = Crystals::new(&Scanner::demo());
        let n = 256.0;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let mut differ = 0;
        let trials = 400_000;
        for _ in 0..trials {
            let a: f64 = rng.gen_range(-4.0..4.0);
            let (x, y) = (250.0 * a.cos(), 250.0 * a.sin());
            let want = (y.atan2(x) / std::f64::consts::TAU * n)
                .round()
                .rem_euclid(n) as u16;
            let got = c.detector(x, y);
            if got != want {
                differ += 1;
                let d = (got as i32 - want as i32).rem_euclid(256);
                assert!(d == 1 || d == 255, "{got} vs {want}");
            }
        }
        assert!(differ < trials / 1000, "{differ}");
    }

    #[test]
    fn reach_finds_the_ring_and_the_end_escapes() {
        let c = Crystals::new(&Scanner::demo());
        // Along +x from the centre: crystal 0, at the middle rings (z = 0 is a ring edge).
        let h = c.reach([0.0, 0.0, 0.1], [1.0, 0.0, 0.0]).unwrap();
        assert_eq!((h.det, h.ring), (0, 8));
        assert!((h.dist - 250.0).abs() < 1e-9);
        let h = c.reach([0.0, 0.0, -0.1], [0.0, -1.0, 0.0]).unwrap();
        assert_eq!((h.det, h.ring), (192, 7));
        assert!(c.reach([0.0, 0.0, 0.0], [0.6, 0.0, 0.8]).is_none());
    }
}
