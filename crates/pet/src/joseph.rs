//! A ray-driven 3D projector (Joseph's method) over offhost's sinogram stacks.
//!
//! Image: `slices x n x n` voxels (see [`Grid`]): column `i` at `x = (i - n/2) p`, row `j` at
//! `y = (n/2 - j) p` (row 0 at the top, `+y`, as the 2D projector), slice `k` at
//! `z = (k + 1 - rings) h` with `h` half the ring spacing, so slice `k` is the plane of the
//! ring pairs whose ring numbers add up to `k`.
//!
//! A bin `(sinogram, view v, tangential bin b)` is one line: normal angle `psi = v pi / views`,
//! signed distance `s` from the axis (`(b - bins/2) d` for arc-corrected data, `R sin((b -
//! bins/2) d / R)` otherwise, as STIR's `ProjDataInfoCylindricalNoArcCorr`), running along
//! `u = (-sin psi, cos psi)` between the crystal cylinder's points `t = +-T`,
//! `T = sqrt(R^2 - s^2)`. The first ring of the pair (`ring_a` of [`crate::Layout`]) is at
//! `t = -T`, as in STIR's geometry (checked against STIR's forward projection:
//! `tests/stir_projector.rs`). A sinogram of a segment holding several ring differences
//! (span > 1) is traced once, at the segment's mean ring difference and the sinogram's mean
//! `z` (STIR's ray tracing with its default one ray per bin does the same).
//!
//! Joseph's method: the line is sampled once per image row (or column, whichever axis the line
//! runs closer to), and the image is interpolated bilinearly in the plane of the other
//! transaxial axis and `z`, each sample weighted by the line's length per step (mm). Forward
//! and back projection use the same samples and weights, so they are exact adjoints.

use crate::error::GeometryError;
use crate::geometry::Scanner;
use crate::layout::Layout;
use crate::raytrace::Piece;

/// How a bin's line is spread over the voxels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Footprint {
    /// Joseph's method: one sample per image row or column, interpolated bilinearly in the
    /// other transaxial axis and in `z` (offhost's default).
    #[default]
    Joseph,
    /// STIR's ray-tracing matrix: each voxel weighs the length of the line in it (Siddon),
    /// a sinogram a tube as wide as its sinograms' spacing in `z` (module `raytrace`).
    RayTracing,
}

/// The voxel grid of a 3D reconstruction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grid {
    /// Voxels per row and per column of a slice.
    pub n: usize,
    /// Slices.
    pub slices: usize,
    /// Transaxial voxel size, mm.
    pub pixel_mm: f64,
    /// Slice spacing, mm.
    pub slice_mm: f64,
}

impl Grid {
    /// STIR's default image for a scanner: `bins x bins` voxels of the bin size,
    /// `2 rings - 1` slices of half the ring spacing.
    pub fn for_scanner(s: &Scanner) -> Self {
        Grid {
            n: s.radial_bins as usize,
            slices: 2 * s.rings as usize - 1,
            pixel_mm: s.bin_size_mm,
            slice_mm: s.ring_spacing_mm / 2.0,
        }
    }

    /// Voxels in the grid.
    pub fn len(&self) -> usize {
        self.n * self.n * self.slices
    }

    /// Whether the grid has no voxels.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One sample of a line in one plane: the first of the two transaxial neighbours, their
/// weights (zero for a neighbour outside the image) and the sample's `t` (mm).
#[derive(Clone, Copy, Debug)]
struct Sample {
    at: u32,
    w0: f32,
    w1: f32,
    t: f32,
}

/// Axial course of one sinogram: `z` in slice units at `t = 0`, the ring difference in mm,
/// and the number of ring pairs it sums.
#[derive(Clone, Copy, Debug)]
struct Axial {
    k_mid: f32,
    /// `(ring difference x ring spacing)`: `z_b - z_a`, mm.
    dz: f32,
    pairs: f32,
}

/// The projector for one scanner, layout and grid.
#[derive(Clone, Debug)]
pub struct Joseph {
    grid: Grid,
    views: usize,
    bins: usize,
    radius: f64,
    cos: Vec<f64>,
    sin: Vec<f64>,
    s: Vec<f64>,
    axial: Vec<Axial>,
    footprint: Footprint,
    /// Slices a sinogram's tube spans (ray tracing): its sinograms' spacing in `z`.
    tube: usize,
}

/// A sinogram's line along one transaxial line: `z` (slices) at `t = 0` and per mm of `t`,
/// and the line's length per mm of `t`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Course {
    pub(crate) k_mid: f32,
    pub(crate) dk_dt: f32,
    pub(crate) len_per_t: f32,
}

/// The samples of one transaxial line: the stride of the second neighbour and the step
/// length per sample (mm, before the axial tilt).
#[derive(Clone, Debug, Default)]
pub(crate) struct Line {
    samples: Vec<Sample>,
    stride: usize,
    step: f32,
    half_chord: f32,
    /// Siddon's pieces (ray-tracing footprint).
    pub(crate) pieces: Vec<Piece>,
    /// Scratch: the `t` of every boundary crossed.
    pub(crate) cuts: Vec<f64>,
}

impl Line {
    /// Whether the line misses the image.
    pub(crate) fn is_empty(&self) -> bool {
        self.samples.is_empty() && self.pieces.is_empty()
    }
}

impl Joseph {
    /// A projector for `scanner`'s sinograms (its layout) onto `grid`; `arc_corrected` says
    /// how the tangential bins are spaced. The grid needs at least 2 x 2 voxels a slice and one
    /// slice, of positive sizes.
    pub fn new(
        scanner: &Scanner,
        layout: &Layout,
        grid: Grid,
        arc_corrected: bool,
    ) -> Result<Self, GeometryError> {
        Self::with_footprint(scanner, layout, grid, arc_corrected, Footprint::Joseph)
    }

    /// [`Joseph::new`] with the footprint chosen. Ray tracing needs the sinograms' spacing
    /// in `z` (a ring for span 1, half a ring above) to be a whole number of slices.
    pub fn with_footprint(
        scanner: &Scanner,
        layout: &Layout,
        grid: Grid,
        arc_corrected: bool,
        footprint: Footprint,
    ) -> Result<Self, GeometryError> {
        scanner.validate()?;
        if grid.n < 2
            || grid.slices == 0
            || !(grid.pixel_mm > 0.0 && grid.slice_mm > 0.0)
            || grid.len() > u32::MAX as usize
        {
            return Err(GeometryError::Invalid(format!(
                "image grid of {} x {} x {} voxels of {} x {} mm: needs at least 2 x 2 x 1, \
                 under 2^32 voxels, positive sizes",
                grid.n, grid.n, grid.slices, grid.pixel_mm, grid.slice_mm
            )));
        }
        let views = scanner.views as usize;
        let bins = scanner.radial_bins as usize;
        let r = scanner.crystal_radius_mm;
        let d = scanner.bin_size_mm;
        let ang = |v: usize| v as f64 * std::f64::consts::PI / views as f64;
        let s = (0..bins)
            .map(|b| {
                let t = (b as f64 - (bins / 2) as f64) * d;
                if arc_corrected {
                    t
                } else {
                    r * (t / r).sin()
                }
            })
            .collect();
        let h = grid.slice_mm;
        let rings = scanner.rings as i64;
        let spacing = scanner.ring_spacing_mm;
        let axial = (0..layout.total_sinograms())
            .map(|i| {
                let (seg, sum) = layout.locate(i).expect("index in range");
                let z_mid = (sum as f64 + 1.0 - rings as f64) * spacing / 2.0;
                let k_mid = z_mid / h + (grid.slices as f64 - 1.0) / 2.0;
                let mean_rd = (seg.min_rd + seg.max_rd) as f64 / 2.0;
                let pairs = (0..rings)
                    .filter(|&a| {
                        let b = sum as i64 - a;
                        (0..rings).contains(&b)
                            && (seg.min_rd as i64..=seg.max_rd as i64).contains(&(b - a))
                    })
                    .count();
                Axial {
                    k_mid: k_mid as f32,
                    dz: (mean_rd * spacing) as f32,
                    pairs: pairs as f32,
                }
            })
            .collect();
        let spacing_z = match scanner.span {
            1 => spacing,
            _ => spacing / 2.0,
        };
        let tube = (spacing_z / h).round();
        if footprint == Footprint::RayTracing && (tube < 1.0 || (spacing_z / h - tube).abs() > 1e-3)
        {
            return Err(GeometryError::Invalid(format!(
                "ray tracing: the sinograms are {spacing_z} mm apart in z, not a whole number \
                 of the image's {h} mm slices"
            )));
        }
        Ok(Joseph {
            grid,
            views,
            bins,
            radius: r,
            cos: (0..views).map(|v| ang(v).cos()).collect(),
            sin: (0..views).map(|v| ang(v).sin()).collect(),
            s,
            axial,
            footprint,
            tube: tube as usize,
        })
    }

    /// How bins are spread over the voxels.
    pub fn footprint(&self) -> Footprint {
        self.footprint
    }

    /// Slices a sinogram's tube spans (ray tracing).
    pub(crate) fn tube_slices(&self) -> usize {
        self.tube
    }

    /// The voxel grid.
    pub fn grid(&self) -> Grid {
        self.grid
    }

    /// Bins in one sinogram stack (`sinograms x views x bins`).
    pub fn bins_len(&self) -> usize {
        self.axial.len() * self.views * self.bins
    }

    /// Views per sinogram.
    pub fn views(&self) -> usize {
        self.views
    }

    /// Tangential bins per view.
    pub fn bins(&self) -> usize {
        self.bins
    }

    /// Sinograms in the stack.
    pub fn sinograms(&self) -> usize {
        self.axial.len()
    }

    /// Ring pairs summed by each sinogram.
    pub fn pairs(&self) -> Vec<f32> {
        self.axial.iter().map(|a| a.pairs).collect()
    }

    /// Fills `line` with the transaxial samples of view `v`, tangential bin `b`.
    pub(crate) fn line(&self, v: usize, b: usize, line: &mut Line) {
        line.samples.clear();
        line.pieces.clear();
        let (cs, sn, s) = (self.cos[v], self.sin[v], self.s[b]);
        let big_t = (self.radius * self.radius - s * s).max(0.0).sqrt();
        line.half_chord = big_t as f32;
        if self.footprint == Footprint::RayTracing {
            self.trace(cs, sn, s, line);
            return;
        }
        let n = self.grid.n;
        let p = self.grid.pixel_mm;
        let c = (n / 2) as f64;
        let row_major = cs.abs() >= sn.abs();
        line.stride = if row_major { 1 } else { n };
        line.step = (p / if row_major { cs.abs() } else { sn.abs() }) as f32;
        for j in 0..n {
            // Row j (y fixed) or column j (x fixed): t, then the other coordinate.
            let (t, other) = if row_major {
                let y = (c - j as f64) * p;
                let t = (y - s * sn) / cs;
                (t, (s * cs - t * sn) / p + c)
            } else {
                let x = (j as f64 - c) * p;
                let t = (s * cs - x) / sn;
                (t, c - (s * sn + t * cs) / p)
            };
            if t.abs() > big_t {
                continue;
            }
            let o0 = other.floor();
            if o0 < -1.0 || o0 >= n as f64 {
                continue;
            }
            let w = (other - o0) as f32;
            // At the image's edges one neighbour is outside: the pair is shifted inwards and
            // the outside one's weight is zero.
            let (o0, w0, w1) = match o0 as i64 {
                -1 => (0, w, 0.0),
                o if o as usize + 1 == n => (n - 2, 0.0, 1.0 - w),
                o => (o as usize, 1.0 - w, w),
            };
            let at = if row_major { j * n + o0 } else { o0 * n + j };
            line.samples.push(Sample {
                at: at as u32,
                w0,
                w1,
                t: t as f32,
            });
        }
    }

    /// The course of sinogram `sino` along `line`.
    #[inline(always)]
    pub(crate) fn axial_course(&self, sino: usize, line: &Line) -> Course {
        let a = &self.axial[sino];
        let ht = line.half_chord.max(1e-3);
        // The line's z runs from z_a at t = -T to z_b at t = +T: dz/dt = (z_b - z_a) / 2T.
        let dz_dt = a.dz / (2.0 * ht);
        Course {
            k_mid: a.k_mid,
            dk_dt: dz_dt / self.grid.slice_mm as f32,
            len_per_t: (1.0 + dz_dt * dz_dt).sqrt(),
        }
    }

    /// Calls `f(voxel, axial weight x length, w0, w1)` for the two slices of every sample of
    /// `line` in sinogram `sino`: the sample's voxels are `voxel` (weight `w0`) and
    /// `voxel + stride` (`w1`).
    #[inline(always)]
    fn walk(&self, line: &Line, sino: usize, mut f: impl FnMut(usize, f32, f32, f32)) {
        let Course {
            k_mid,
            dk_dt,
            len_per_t,
        } = self.axial_course(sino, line);
        let len = line.step * len_per_t;
        let plane = self.grid.n * self.grid.n;
        let slices = self.grid.slices as i64;
        for smp in &line.samples {
            let fk = k_mid + dk_dt * smp.t;
            let k0 = fk.floor();
            let wk = fk - k0;
            let k0 = k0 as i64;
            if k0 < -1 || k0 >= slices {
                continue;
            }
            let base = smp.at as usize;
            if k0 >= 0 {
                f(k0 as usize * plane + base, (1.0 - wk) * len, smp.w0, smp.w1);
            }
            if k0 + 1 < slices {
                f((k0 + 1) as usize * plane + base, wk * len, smp.w0, smp.w1);
            }
        }
    }

    /// The line integral of `img` along bin `(sino, line)`.
    #[inline]
    pub(crate) fn forward_bin(&self, img: &[f32], line: &Line, sino: usize) -> f32 {
        let mut acc = 0f32;
        if self.footprint == Footprint::RayTracing {
            self.walk_rays(line, sino, |at, w| acc += w * img[at]);
            return acc;
        }
        let st = line.stride;
        self.walk(line, sino, |at, wz, w0, w1| {
            acc += wz * (w0 * img[at] + w1 * img[at + st]);
        });
        acc
    }

    /// Adds `value` times bin `(sino, line)`'s weights to `img`.
    #[inline]
    pub(crate) fn back_bin(&self, img: &mut [f32], line: &Line, sino: usize, value: f32) {
        if self.footprint == Footprint::RayTracing {
            self.walk_rays(line, sino, |at, w| img[at] += value * w);
            return;
        }
        let st = line.stride;
        self.walk(line, sino, |at, wz, w0, w1| {
            let v = value * wz;
            img[at] += v * w0;
            img[at + st] += v * w1;
        });
    }

    /// Projects `img` along bin `(sino, line)`, asks `back` what to project back for that
    /// value, and adds that times the bin's weights to `acc` (nothing for `None`): one walk
    /// of the bin for ray tracing (its weights kept in `scratch`), two for Joseph's method.
    #[inline]
    pub(crate) fn forward_back_bin(
        &self,
        img: &[f32],
        acc: &mut [f32],
        line: &Line,
        sino: usize,
        scratch: &mut Vec<(u32, f32)>,
        back: impl FnOnce(f32) -> Option<f32>,
    ) {
        if self.footprint != Footprint::RayTracing {
            if let Some(v) = back(self.forward_bin(img, line, sino)) {
                self.back_bin(acc, line, sino, v);
            }
            return;
        }
        scratch.clear();
        let mut ax = 0f32;
        self.walk_rays(line, sino, |at, w| {
            ax += w * img[at];
            scratch.push((at as u32, w));
        });
        if let Some(v) = back(ax) {
            for &(at, w) in scratch.iter() {
                acc[at as usize] += v * w;
            }
        }
    }

    /// `proj = A img` over all bins, `proj` in the sinogram's order `[sinogram][view][bin]`
    /// (one thread; [`crate::recon`]'s OSEM runs views in parallel).
    pub fn forward(&self, img: &[f32], proj: &mut [f32]) {
        assert_eq!(img.len(), self.grid.len(), "image size");
        assert_eq!(proj.len(), self.bins_len(), "projection size");
        let mut line = Line::default();
        let (vb, bins) = (self.views * self.bins, self.bins);
        for v in 0..self.views {
            for b in 0..bins {
                self.line(v, b, &mut line);
                for sino in 0..self.axial.len() {
                    proj[sino * vb + v * bins + b] = self.forward_bin(img, &line, sino);
                }
            }
        }
    }

    /// `img = A^T proj` (img is overwritten).
    pub fn back(&self, proj: &[f32], img: &mut [f32]) {
        assert_eq!(img.len(), self.grid.len(), "image size");
        assert_eq!(proj.len(), self.bins_len(), "projection size");
        img.iter_mut().for_each(|x| *x = 0.0);
        let mut line = Line::default();
        let (vb, bins) = (self.views * self.bins, self.bins);
        for v in 0..self.views {
            for b in 0..bins {
                self.line(v, b, &mut line);
                for sino in 0..self.axial.len() {
                    let y = proj[sino * vb + v * bins + b];
                    if y != 0.0 {
                        self.back_bin(img, &line, sino, y);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn small(span: u32, arc: bool) -> (Joseph, Grid) {
        let s = Scanner::small_for_tests(span);
        let l = Layout::new(&s).unwrap();
        let g = Grid::for_scanner(&s);
        (Joseph::new(&s, &l, g, arc).unwrap(), g)
    }

    #[test]
    fn back_is_the_adjoint_of_forward() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
        let cases = [(1, true), (3, false), (11, true)];
        let footprints = [Footprint::Joseph, Footprint::RayTracing];
        for (fp, (span, arc)) in footprints.into_iter().flat_map(|f| cases.map(|c| (f, c))) {
            let s = Scanner::small_for_tests(span);
            let l = Layout::new(&s).unwrap();
            let g = Grid::for_scanner(&s);
            let j = Joseph::with_footprint(&s, &l, g, arc, fp).unwrap();
            let x: Vec<f32> = (0..g.len()).map(|_| rng.gen::<f32>()).collect();
            let y: Vec<f32> = (0..j.bins_len()).map(|_| rng.gen::<f32>()).collect();
            let (mut ax, mut aty) = (vec![0.0; j.bins_len()], vec![0.0; g.len()]);
            j.forward(&x, &mut ax);
            j.back(&y, &mut aty);
            let l: f64 = ax.iter().zip(&y).map(|(a, b)| *a as f64 * *b as f64).sum();
            let r: f64 = x.iter().zip(&aty).map(|(a, b)| *a as f64 * *b as f64).sum();
            assert!(l > 1.0, "{fp:?} span {span}: {l}");
            assert!((l - r).abs() < 1e-5 * l, "{fp:?} span {span}: {l} vs {r}");
        }
    }

    /// The line the projector traces for the bin the histogrammer gives a detector pair runs
    /// through both detectors: transaxially within half a bin (and half a view), and axially
    /// at each detector's ring (its `z` at its end on the detector's side is that ring's, so
    /// an oblique line tilts the way the pair does; with the tilt reversed, as before
    /// 2026-11-30, it fails).
    #[test]
    fn a_bins_line_runs_through_the_detectors_the_histogrammer_put_into_it() {
        use crate::listmode::Event;
        use crate::sinogram::{EnergyWindow, Histogrammer};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(9);
        let mut checked = 0;
        for fp in [Footprint::Joseph, Footprint::RayTracing] {
            let s = Scanner::small_for_tests(1);
            let l = Layout::new(&s).unwrap();
            let j = Joseph::with_footprint(&s, &l, Grid::for_scanner(&s), true, fp).unwrap();
            let h = Histogrammer::new(&s, EnergyWindow::kev(435.0, 650.0)).unwrap();
            let n = s.detectors_per_ring;
            let mut line = Line::default();
            for _ in 0..2000 {
                let (da, db) = (rng.gen_range(0..n), rng.gen_range(0..n));
                let (ra, rb) = (rng.gen_range(0..s.rings), rng.gen_range(0..s.rings));
                let e = Event {
                    det_a: da as u16,
                    det_b: db as u16,
                    ring_a: ra as u8,
                    ring_b: rb as u8,
                    energy_a: 5110,
                    energy_b: 5110,
                    tof_ps: 0,
                    time_us: 0,
                    delayed: false,
                };
                let Some(i) = h.bin_of(&e) else { continue };
                let (vb, bins) = (j.views() * j.bins(), j.bins());
                let (sino, v, b) = (i / vb, i % vb / bins, i % bins);
                j.line(v, b, &mut line);
                let c = j.axial_course(sino, &line);
                for (d, r) in [(da, ra), (db, rb)] {
                    let phi = std::f64::consts::TAU * d as f64 / n as f64;
                    let (x, y) = (
                        s.crystal_radius_mm * phi.cos(),
                        s.crystal_radius_mm * phi.sin(),
                    );
                    let (cs, sn) = (j.cos[v], j.sin[v]);
                    // Within half a bin, and what half a view's angle moves a detector by.
                    let off = x * cs + y * sn - j.s[b];
                    let dpsi = std::f64::consts::PI / s.views as f64;
                    let tol = s.bin_size_mm / 2.0 + s.crystal_radius_mm * (dpsi / 2.0).sin();
                    assert!(off.abs() <= tol + 1e-9, "{fp:?} {e:?}: {off} mm off");
                    // The line's end on the detector's side (t = +-T) is at its ring's z
                    // (slice 2 r); a reversed tilt misses by twice the ring difference.
                    let t = (-x * sn + y * cs).signum() as f32 * line.half_chord;
                    let k = c.k_mid + c.dk_dt * t;
                    assert!(
                        (k - 2.0 * r as f32).abs() < 0.01,
                        "{fp:?} {e:?}: z at the detector is slice {k}, its ring's {}",
                        2 * r
                    );
                }
                checked += 1;
            }
        }
        assert!(checked > 1000, "{checked}");
    }

    /// A uniform image projects to the chord length through it: a ray through the centre of
    /// a unit image (in-plane) measures the image's width, a tilted one longer.
    #[test]
    fn projections_are_lengths_in_mm() {
        let (j, g) = small(1, true);
        let x = vec![1f32; g.len()];
        let mut p = vec![0f32; j.bins_len()];
        j.forward(&x, &mut p);
        let (views, bins) = (j.views(), j.bins());
        // Sinogram 0: ring pair (0, 0) at slice 0; view 0, central bin: a vertical line
        // through x = 0 over the image's 24 rows of 4 mm (inside the cylinder, |t| <= 60).
        let c = p[bins / 2];
        assert!((c - 96.0).abs() < 1e-3, "{c}");
        // View 4 (45 degrees) crosses the same circle-limited chord: 2 x 60 mm at most.
        let d = p[4 * bins + bins / 2];
        assert!(d > 90.0 && d <= 120.5, "{d}");
        // An oblique sinogram (segment of ring difference 1) through the middle is longer
        // than the direct one through the same voxels would be, never shorter.
        let l = Layout::new(&Scanner::small_for_tests(1)).unwrap();
        let sino = l.sinogram(2, 3).unwrap() as usize;
        let direct = l.sinogram(2, 2).unwrap() as usize;
        let (o, dd) = (
            p[sino * views * bins + bins / 2],
            p[direct * views * bins + bins / 2],
        );
        assert!(o >= dd - 1e-3 && o < dd * 1.01, "{o} vs {dd}");
    }
}
