//! Transaxial line-of-response lookup: detector pair within a ring -> (view, radial bin).
//!
//! A line through detectors at angles `phi_a`, `phi_b` on a circle of radius `R` has normal
//! angle `psi = (phi_a + phi_b) / 2` and signed distance `s = R cos((phi_b - phi_a) / 2)`,
//! so its points satisfy `x cos psi + y sin psi = s`. `psi` is folded into `[0, pi)` (flipping
//! the sign of `s`), then `view = round(psi / (pi / views))` and
//! `bin = round(s / bin_size + radial_bins / 2)` — the sampling of scikit-image's `radon`, so
//! the sinograms can be reconstructed with [`crate::fbp`] or `iradon` alike. Lines outside the
//! radial field of view map to [`OUTSIDE`].

use crate::geometry::Scanner;

/// Marks a detector pair whose line falls outside the radial field of view.
pub const OUTSIDE: u32 = u32::MAX;
/// Set in a table entry when detector B is the first detector of the line's orientation.
pub const SWAP: u32 = 1 << 31;

/// Continuous `(psi, s)` of the line through two detectors, `psi` in `[0, pi)`.
pub fn line_params(s: &Scanner, a: u32, b: u32) -> (f64, f64, bool) {
    let n = s.detectors_per_ring as f64;
    let phi = |d: u32| 2.0 * std::f64::consts::PI * d as f64 / n;
    let (pa, pb) = (phi(a), phi(b));
    let mut psi = (pa + pb) / 2.0;
    let mut dist = s.crystal_radius_mm * ((pb - pa) / 2.0).cos();
    // Orientation: the "first" detector is the one at negative t along (-sin psi, cos psi)
    // (STIR's: its ring is the first of the pair, as in the sinograms STIR writes).
    let mut ta = -(pa.cos()) * psi.sin() + pa.sin() * psi.cos();
    while psi >= std::f64::consts::PI {
        psi -= std::f64::consts::PI;
        dist = -dist;
        ta = -ta;
    }
    (psi, dist, ta > 0.0)
}

/// Builds the table `a * detectors_per_ring + b` -> `view * radial_bins + bin` (with
/// [`SWAP`] set when B is first), or [`OUTSIDE`].
pub fn build_table(s: &Scanner) -> Vec<u32> {
    let n = s.detectors_per_ring;
    let dpsi = std::f64::consts::PI / s.views as f64;
    let half = s.radial_bins as f64 / 2.0;
    let mut t = vec![OUTSIDE; (n * n) as usize];
    for a in 0..n {
        for b in 0..n {
            if a == b {
                continue;
            }
            let (psi, dist, swap) = line_params(s, a, b);
            // Ties (odd detector sums) go up consistently despite rounding error in psi.
            let mut view = (psi / dpsi + 1e-9).round() as i64;
            let mut dist = dist;
            let mut swap = swap;
            if view >= s.views as i64 {
                view -= s.views as i64;
                dist = -dist;
                swap = !swap;
            }
            let bin = (dist / s.bin_size_mm + half).round() as i64;
            if (0..s.radial_bins as i64).contains(&bin) {
                let v = view as u32 * s.radial_bins + bin as u32;
                t[(a * n + b) as usize] = v | if swap { SWAP } else { 0 };
            }
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_and_reverse_share_a_bin_with_opposite_orientation() {
        let s = Scanner::demo();
        let t = build_table(&s);
        let n = s.detectors_per_ring as usize;
        let mut inside = 0;
        for a in 0..n {
            for b in 0..n {
                let (x, y) = (t[a * n + b], t[b * n + a]);
                assert_eq!(x == OUTSIDE, y == OUTSIDE);
                if x != OUTSIDE && a != b {
                    inside += 1;
                    assert_eq!(x & !SWAP, y & !SWAP, "{a},{b}");
                    assert_ne!(x & SWAP, y & SWAP, "{a},{b}");
                }
            }
        }
        assert!(inside > n * n / 4);
    }

    #[test]
    fn diametric_pair_through_centre_is_central_bin() {
        let s = Scanner::demo();
        let t = build_table(&s);
        let n = s.detectors_per_ring;
        // Detectors 0 and n/2 are at angles 0 and pi: the line is the x axis, normal psi = pi/2.
        let v = t[(n / 2) as usize] & !SWAP;
        assert_eq!(v / s.radial_bins, s.views / 2);
        assert_eq!(v % s.radial_bins, s.radial_bins / 2);
    }
}
