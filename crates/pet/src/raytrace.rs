//! The ray-tracing footprint of the 3D projector ([`Footprint::RayTracing`]): STIR's
//! ray-tracing matrix (`ProjMatrixByBinUsingRayTracing` with one ray per bin tangentially,
//! a cylindrical field of view, STIR 6.5's defaults), on the same lines as Joseph's method.
//!
//! - **Transaxially** (Siddon's method): a bin's line, clipped to the cylinder of radius
//!   `min(c, n - 1 - c) p` (`c = n / 2`, the centre voxel; STIR's field of view), is cut at
//!   every voxel boundary it crosses; each piece weighs its length in the voxel it lies in. A
//!   line running exactly along a boundary between two voxel columns (or rows) is traced
//!   half a voxel to each side with half the weight, as STIR does.
//! - **Axially**, a sinogram stands for a tube as wide as the spacing of its sinograms in `z`
//!   (`W` slices: 2 for span 1, whose sinograms of one segment are a ring apart, 1 for the
//!   odd spans above, half a ring apart). An oblique tube is traced as `W` rays one slice
//!   apart around its centre line, each with `1 / W` of the weight, and each piece of a ray
//!   is split among the slices it passes through by the part of its `z` course in each; a
//!   direct tube (ring difference 0 on average) weighs each slice by its overlap with the
//!   tube over `W` (span 1: a quarter, a half and a quarter over three slices).
//!
//! Weights are lengths in mm (STIR's are in units of the voxel's width, a constant factor
//! that OSEM's images do not depend on).

use crate::joseph::{Footprint, Joseph, Line};

/// One piece of a line inside one voxel column: the voxel in the plane, the piece's `t`
/// interval (mm) and its weight (1, or 1/2 for a line on a boundary traced twice).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Piece {
    at: u32,
    t0: f32,
    t1: f32,
    w: f32,
}

/// The radius of STIR's cylindrical field of view for an `n x n` slice of `p` mm voxels.
pub(crate) fn fov_radius(n: usize, p: f64) -> f64 {
    let c = n / 2;
    c.min(n - 1 - c) as f64 * p
}

/// How close to a voxel boundary (in voxels) a line along it counts as on it.
const ON_BOUNDARY: f64 = 1e-4;

impl Joseph {
    /// Fills `line.pieces` with the Siddon pieces of the line at normal angle `(cs, sn)`,
    /// signed distance `s` (`line.pieces` empty on entry: [`Joseph::line`] clears it).
    pub(crate) fn trace(&self, cs: f64, sn: f64, s: f64, line: &mut Line) {
        let g = self.grid();
        let (n, p) = (g.n, g.pixel_mm);
        let r = fov_radius(n, p);
        if s.abs() > r {
            return;
        }
        let a = (r * r - s * s).sqrt();
        let c = (n / 2) as f64;
        // Column and row coordinates (voxel units, centres at integers) along t:
        // x = s cs - t sn, y = s sn + t cs; column = x / p + c, row = c - y / p.
        let (x0, dx) = (s * cs / p + c, -sn / p);
        let (y0, dy) = (c - s * sn / p, -cs / p);
        let on = |v0: f64, dv: f64| {
            let frac = v0 - v0.floor();
            dv.abs() * 2.0 * a < ON_BOUNDARY && (frac - 0.5).abs() < ON_BOUNDARY
        };
        if on(x0, dx) {
            for off in [-0.5, 0.5] {
                self.siddon(x0 + off, dx, y0, dy, a, 0.5, line);
            }
        } else if on(y0, dy) {
            for off in [-0.5, 0.5] {
                self.siddon(x0, dx, y0 + off, dy, a, 0.5, line);
            }
        } else {
            self.siddon(x0, dx, y0, dy, a, 1.0, line);
        }
    }

    /// Siddon's method for `t` in `[-a, a]`: column `x0 + t dx`, row `y0 + t dy`.
    #[allow(clippy::too_many_arguments)]
    fn siddon(&self, x0: f64, dx: f64, y0: f64, dy: f64, a: f64, w: f32, line: &mut Line) {
        let n = self.grid().n;
        let ts = &mut line.cuts;
        ts.clear();
        ts.push(-a);
        ts.push(a);
        for (v0, dv) in [(x0, dx), (y0, dy)] {
            if dv.abs() < 1e-12 {
                continue;
            }
            // Boundaries at half-integers crossed for t in (-a, a).
            let (va, vb) = (v0 - a * dv, v0 + a * dv);
            let (lo, hi) = (va.min(vb), va.max(vb));
            let mut k = (lo - 0.5).ceil() + 0.5;
            while k < hi {
                ts.push((k - v0) / dv);
                k += 1.0;
            }
        }
        ts.sort_unstable_by(f64::total_cmp);
        for win in ts.windows(2) {
            let (t0, t1) = (win[0], win[1]);
            if t1 - t0 < 1e-9 {
                continue;
            }
            let tm = 0.5 * (t0 + t1);
            let (col, row) = ((x0 + tm * dx).round(), (y0 + tm * dy).round());
            if col < 0.0 || row < 0.0 || col >= n as f64 || row >= n as f64 {
                continue;
            }
            line.pieces.push(Piece {
                at: (row as usize * n + col as usize) as u32,
                t0: t0 as f32,
                t1: t1 as f32,
                w,
            });
        }
    }

    /// Calls `f(voxel, weight)` for every voxel of bin `(sino, line)` (ray-tracing footprint).
    #[inline]
    pub(crate) fn walk_rays(&self, line: &Line, sino: usize, mut f: impl FnMut(usize, f32)) {
        debug_assert_eq!(self.footprint(), Footprint::RayTracing);
        let ax = self.axial_course(sino, line);
        let g = self.grid();
        let plane = g.n * g.n;
        let slices = g.slices as i64;
        let rays = self.tube_slices();
        let tube = rays as f32;
        // Weight per mm of t, each ray's share of the tube in it.
        let per_t = ax.len_per_t / tube;
        if ax.dk_dt == 0.0 {
            // A direct tube: each slice weighs its overlap with [k_mid - W/2, k_mid + W/2].
            let (lo, hi) = (ax.k_mid - tube / 2.0, ax.k_mid + tube / 2.0);
            let first = floor(lo + 0.5).max(0);
            let last = floor(hi + 0.5).min(slices - 1);
            let weight = |k: i64| {
                let kf = k as f32;
                let overlap = hi.min(kf + 0.5) - lo.max(kf - 0.5);
                (overlap > 1e-4).then_some(overlap * per_t)
            };
            for pc in &line.pieces {
                let len = (pc.t1 - pc.t0) * pc.w;
                for k in first..=last {
                    if let Some(w) = weight(k) {
                        f(k as usize * plane + pc.at as usize, len * w);
                    }
                }
            }
            return;
        }
        // Oblique: W rays one slice apart, centred on the tube's line. A piece whose z course
        // crosses slices gives each the part of the course in it: per slice unit of z,
        // `per_t / |dk/dt|` of weight.
        let per_z = per_t / ax.dk_dt.abs();
        for r in 0..rays {
            let base = ax.k_mid + r as f32 - (tube - 1.0) / 2.0;
            for pc in &line.pieces {
                let (za, zb) = (base + ax.dk_dt * pc.t0, base + ax.dk_dt * pc.t1);
                let (lo, hi) = if za <= zb { (za, zb) } else { (zb, za) };
                let (k0, k1) = (floor(lo + 0.5), floor(hi + 0.5));
                let at = pc.at as usize;
                if k0 == k1 {
                    if (0..slices).contains(&k0) {
                        f(k0 as usize * plane + at, (pc.t1 - pc.t0) * per_t * pc.w);
                    }
                    continue;
                }
                let mut put = |k: i64, w: f32| {
                    if (0..slices).contains(&k) {
                        f(k as usize * plane + at, w);
                    }
                };
                let wz = per_z * pc.w;
                put(k0, (k0 as f32 + 0.5 - lo) * wz);
                for k in k0 + 1..k1 {
                    put(k, wz);
                }
                put(k1, (hi - (k1 as f32 - 0.5)) * wz);
            }
        }
    }
}

/// `x.floor()` for the slice coordinates here (|x| well under 2^20), without a libm call on
/// CPUs the build does not assume SSE4.1 of.
#[inline(always)]
fn floor(x: f32) -> i64 {
    let i = x as i64;
    i - i64::from((i as f32) > x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::Scanner;
    use crate::joseph::Grid;
    use crate::layout::Layout;

    fn projector(span: u32, arc: bool, grid: Option<Grid>) -> (Joseph, Grid, Layout) {
        let s = Scanner::small_for_tests(span);
        let l = Layout::new(&s).unwrap();
        let g = grid.unwrap_or_else(|| Grid::for_scanner(&s));
        let p = Joseph::with_footprint(&s, &l, g, arc, Footprint::RayTracing).unwrap();
        (p, g, l)
    }

    /// `proj` of an image that is 1 on the slices `lit` and 0 elsewhere.
    fn project_slices(p: &Joseph, g: Grid, lit: &[usize]) -> Vec<f32> {
        let plane = g.n * g.n;
        let mut img = vec![0f32; g.len()];
        for &k in lit {
            img[k * plane..(k + 1) * plane].fill(1.0);
        }
        let mut proj = vec![0f32; p.bins_len()];
        p.forward(&img, &mut proj);
        proj
    }

    /// Siddon's lengths add up to the chord through the field of view, for every line; a
    /// direct span-1 sinogram is a tube two slices wide (a quarter, a half, a quarter).
    #[test]
    fn lengths_add_up_to_the_chord_and_a_direct_tube_spans_three_slices() {
        let (p, g, l) = projector(1, true, None);
        let r = fov_radius(g.n, g.pixel_mm);
        let (views, bins) = (p.views(), p.bins());
        let chord = |b: usize| {
            let s = (b as f64 - (bins / 2) as f64) * 4.0;
            2.0 * (r * r - s * s).max(0.0).sqrt()
        };
        // Every slice lit: an inner direct sinogram sees the whole chord.
        let all: Vec<usize> = (0..g.slices).collect();
        let proj = project_slices(&p, g, &all);
        let sino = l.sinogram(2, 2).unwrap() as usize;
        for v in 0..views {
            for b in 0..bins {
                let got = proj[(sino * views + v) * bins + b] as f64;
                assert!(
                    (got - chord(b)).abs() < 1e-3,
                    "view {v} bin {b}: {got} vs {}",
                    chord(b)
                );
            }
        }
        // Slice 4 (the direct pairs' plane of rings 2 + 2) alone: the tube centred on it
        // takes half; on slice 3 alone, the tubes of sums 2 and 4 take a quarter each.
        let (mid, v) = (bins / 2, 3);
        let at = |proj: &[f32], ra: u32| {
            let sino = l.sinogram(ra, ra).unwrap() as usize;
            proj[(sino * views + v) * bins + mid] as f64
        };
        let c = chord(mid);
        let four = project_slices(&p, g, &[4]);
        assert!((at(&four, 2) - 0.5 * c).abs() < 1e-3, "{}", at(&four, 2));
        assert!(at(&four, 1).abs() < 1e-6 && at(&four, 3).abs() < 1e-6);
        let three = project_slices(&p, g, &[3]);
        assert!((at(&three, 1) - 0.25 * c).abs() < 1e-3, "{}", at(&three, 1));
        assert!((at(&three, 2) - 0.25 * c).abs() < 1e-3, "{}", at(&three, 2));
    }

    /// A line along the boundary between two voxel columns gives each half its length.
    #[test]
    fn a_line_on_a_voxel_boundary_is_shared_by_both_sides() {
        // Voxels of 8 mm, bins of 4 mm: bin `bins/2 + 1` (s = 4 mm) of view 0 runs along
        // x = 4 mm, the boundary of columns c and c + 1.
        let s = Scanner::small_for_tests(3);
        let g = Grid {
            n: 12,
            slices: 2 * s.rings as usize - 1,
            pixel_mm: 8.0,
            slice_mm: s.ring_spacing_mm / 2.0,
        };
        let (p, g, l) = projector(3, true, Some(g));
        let c = g.n / 2;
        let mut img = vec![0f32; g.len()];
        for k in 0..g.slices {
            for row in 0..g.n {
                img[(k * g.n + row) * g.n + c + 1] = 1.0;
            }
        }
        let mut proj = vec![0f32; p.bins_len()];
        p.forward(&img, &mut proj);
        let (bins, sino) = (p.bins(), l.sinogram(2, 2).unwrap() as usize);
        let r = fov_radius(g.n, g.pixel_mm);
        let chord = 2.0 * (r * r - 16.0).sqrt();
        let got = proj[sino * p.views() * bins + bins / 2 + 1] as f64;
        assert!((got - 0.5 * chord).abs() < 1e-3, "{got} vs {}", 0.5 * chord);
        // Two bins on (s = 8 mm): the middle of column c + 1, all of it.
        let got = proj[sino * p.views() * bins + bins / 2 + 2] as f64;
        let chord = 2.0 * (r * r - 64.0).sqrt();
        assert!((got - chord).abs() < 1e-3, "{got} vs {chord}");
    }

    /// A grid whose slices do not divide the sinograms' spacing is refused.
    #[test]
    fn slices_that_do_not_divide_the_spacing_are_refused() {
        let s = Scanner::small_for_tests(1);
        let l = Layout::new(&s).unwrap();
        let g = Grid {
            slice_mm: 1.5,
            ..Grid::for_scanner(&s)
        };
        let e = Joseph::with_footprint(&s, &l, g, true, Footprint::RayTracing).unwrap_err();
        assert!(e.to_string().contains("whole number"), "{e}");
        assert!(Joseph::with_footprint(&s, &l, g, true, Footprint::Joseph).is_ok());
    }
}
