//! A matched 2D projector pair (pixel-driven, linear interpolation in the radial direction).
//!
//! Image: `n x n` pixels of the radial bin size, row 0 at the top (`+y`), column 0 at the
//! left (`-x`), centre pixel `n / 2`. Sinogram: `views x bins`, view `v` at angle
//! `v * pi / views`, bin `k` at `t = k - bins / 2` (in pixels). Pixel `(row, col)` projects to
//! `t = (col - c) cos(theta) - (row - c) sin(theta)`, interpolated between the two nearest bins
//! exactly as numpy's `interp` does (zero outside the first and last bin centres). These are
//! the conventions of scikit-image's `radon`/`iradon`.

/// Forward and back projection for one sinogram plane.
#[derive(Clone, Debug)]
pub struct Projector {
    n: usize,
    views: usize,
    bins: usize,
    cos: Vec<f64>,
    sin: Vec<f64>,
}

impl Projector {
    /// A projector for an `n x n` image and a `views x bins` sinogram.
    pub fn new(n: usize, views: usize, bins: usize) -> Self {
        let ang = |v: usize| v as f64 * std::f64::consts::PI / views as f64;
        Projector {
            n,
            views,
            bins,
            cos: (0..views).map(|v| ang(v).cos()).collect(),
            sin: (0..views).map(|v| ang(v).sin()).collect(),
        }
    }

    /// Calls `f(row, first column, last column, base)` for every image row of view `v`
    /// that meets the sinogram: column `col` of the row projects to `base + col * cos`.
    #[inline]
    fn rows(&self, v: usize, f: impl FnMut(usize, usize, usize, f64)) {
        self.rows_in(v, 0..self.n, f);
    }

    /// [`rows`](Self::rows) for the image rows in `range` only.
    #[inline]
    fn rows_in(
        &self,
        v: usize,
        range: std::ops::Range<usize>,
        mut f: impl FnMut(usize, usize, usize, f64),
    ) {
        let c = (self.n / 2) as f64;
        let half = (self.bins / 2) as f64;
        let last = (self.bins - 1) as f64;
        let (cs, sn) = (self.cos[v], self.sin[v]);
        for row in range {
            let base = -(row as f64 - c) * sn + half - c * cs;
            // Columns whose position falls inside [0, last], found without testing each one.
            let (c0, c1) = if cs.abs() < 1e-12 {
                if (0.0..=last).contains(&base) {
                    (0, self.n - 1)
                } else {
                    continue;
                }
            } else {
                let (a, b) = ((0.0 - base) / cs, (last - base) / cs);
                let (lo, hi) = if cs > 0.0 { (a, b) } else { (b, a) };
                let lo = lo.ceil().max(0.0);
                let hi = hi.floor().min((self.n - 1) as f64);
                if lo > hi {
                    continue;
                }
                (lo as usize, hi as usize)
            };
            f(row, c0, c1, base);
        }
    }

    /// Calls `f(pixel, bin, weight)` for every non-zero weight of view `v`.
    #[inline]
    fn each(&self, v: usize, mut f: impl FnMut(usize, usize, f64)) {
        let last = (self.bins - 1) as f64;
        let cs = self.cos[v];
        self.rows(v, |row, c0, c1, base| {
            for col in c0..=c1 {
                let idx = base + col as f64 * cs;
                if !(0.0..=last).contains(&idx) {
                    continue;
                }
                let k0 = (idx as usize).min(self.bins.saturating_sub(2));
                let w = idx - k0 as f64;
                let p = row * self.n + col;
                f(p, k0, 1.0 - w);
                if k0 + 1 < self.bins {
                    f(p, k0 + 1, w);
                }
            }
        });
    }

    /// `sino = A img` (sino is overwritten).
    pub fn forward(&self, img: &[f32], sino: &mut [f32]) {
        sino.iter_mut().for_each(|x| *x = 0.0);
        for v in 0..self.views {
            let row = &mut sino[v * self.bins..(v + 1) * self.bins];
            self.each(v, |p, k, w| row[k] += (w * img[p] as f64) as f32);
        }
    }

    /// `img = A^T sino` (img is overwritten).
    pub fn back(&self, sino: &[f32], img: &mut [f32]) {
        img.iter_mut().for_each(|x| *x = 0.0);
        if self.bins < 2 {
            for v in 0..self.views {
                let row = &sino[v * self.bins..(v + 1) * self.bins];
                self.each(v, |p, k, w| img[p] += (w * row[k] as f64) as f32);
            }
            return;
        }
        // The weights of `each`, fused: one read-modify-write per pixel and view.
        let last = (self.bins - 1) as f64;
        for v in 0..self.views {
            let row = &sino[v * self.bins..(v + 1) * self.bins];
            let cs = self.cos[v];
            self.rows(v, |r, c0, c1, base| {
                let out = &mut img[r * self.n + c0..=r * self.n + c1];
                for (col, o) in (c0..).zip(out.iter_mut()) {
                    let idx = base + col as f64 * cs;
                    if !(0.0..=last).contains(&idx) {
                        continue;
                    }
                    let k0 = (idx as usize).min(self.bins - 2);
                    let w = idx - k0 as f64;
                    let (a, b) = (row[k0] as f64, row[k0 + 1] as f64);
                    *o += ((1.0 - w) * a + w * b) as f32;
                }
            });
        }
    }
}

/// Planes [`Projector::back_planes`] takes at a time: the interpolation weights of a pixel
/// and view are computed once and applied to this many planes side by side (one vector).
pub const PLANES: usize = 8;

/// Image rows [`Projector::back_planes`] takes at a time over every view (their planes stay in
/// the second-level cache while the views go by).
const ROW_TILE: usize = 8;

impl Projector {
    /// `imgs[p] = A^T sinos[p]` for up to [`PLANES`] planes (each image overwritten): the
    /// same interpolation as [`back`](Self::back), in `f32` and with the weights of a pixel
    /// and view shared by the planes, which lie side by side in memory (a vector of
    /// [`PLANES`] lanes) while they are summed, a tile of rows at a time. A pixel of each
    /// image gets its views' terms in the same order as `back` gives them.
    ///
    /// # Panics
    ///
    /// If there are more than [`PLANES`] planes, a sinogram is not `views x bins`, an image
    /// not `n x n`, or the two counts differ.
    pub fn back_planes(&self, sinos: &[&[f32]], imgs: &mut [Vec<f32>]) {
        let (n, bins) = (self.n, self.bins);
        assert!(sinos.len() <= PLANES && sinos.len() == imgs.len());
        assert!(sinos.iter().all(|s| s.len() == self.views * bins));
        if bins < 2 {
            for (s, img) in sinos.iter().zip(imgs.iter_mut()) {
                img.resize(n * n, 0.0);
                self.back(s, img);
            }
            return;
        }
        // Interleaved: lane p of entry (v, k) is plane p's bin k of view v.
        let mut sino = vec![[0f32; PLANES]; self.views * bins];
        for (p, s) in sinos.iter().enumerate() {
            for (lanes, x) in sino.iter_mut().zip(s.iter()) {
                lanes[p] = *x;
            }
        }
        let mut img = vec![[0f32; PLANES]; n * n];
        for tile in (0..n).step_by(ROW_TILE) {
            let rows = tile..(tile + ROW_TILE).min(n);
            for v in 0..self.views {
                let row = &sino[v * bins..(v + 1) * bins];
                let cs = self.cos[v];
                self.rows_in(v, rows.clone(), |r, c0, c1, base| {
                    let out = &mut img[r * n + c0..=r * n + c1];
                    for (col, o) in (c0..).zip(out.iter_mut()) {
                        // Within [0, bins - 1] but for rounding, which the clamp absorbs.
                        let idx = (base + col as f64 * cs).max(0.0);
                        let k0 = (idx as usize).min(bins - 2);
                        let w = (idx - k0 as f64) as f32;
                        let (a, b, cur, w0) = (row[k0], row[k0 + 1], *o, 1.0 - w);
                        *o = std::array::from_fn(|p| cur[p] + (w0 * a[p] + w * b[p]));
                    }
                });
            }
        }
        for (p, out) in imgs.iter_mut().enumerate() {
            out.clear();
            out.extend(img.iter().map(|lanes| lanes[p]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_is_the_transpose_of_forward() {
        let p = Projector::new(17, 9, 20);
        let x: Vec<f32> = (0..17 * 17).map(|i| ((i * 37) % 11) as f32).collect();
        let y: Vec<f32> = (0..9 * 20).map(|i| ((i * 13) % 7) as f32).collect();
        let (mut ax, mut aty) = (vec![0.0; 9 * 20], vec![0.0; 17 * 17]);
        p.forward(&x, &mut ax);
        p.back(&y, &mut aty);
        let l: f64 = ax.iter().zip(&y).map(|(a, b)| (*a * *b) as f64).sum();
        let r: f64 = x.iter().zip(&aty).map(|(a, b)| (*a * *b) as f64).sum();
        assert!((l - r).abs() < 1e-3 * l.abs(), "{l} vs {r}");
    }

    #[test]
    fn back_planes_equals_back_plane_by_plane() {
        for (n, views, bins, planes) in [(17, 9, 20, 3), (40, 33, 41, PLANES), (9, 4, 1, 2)] {
            let p = Projector::new(n, views, bins);
            let sinos: Vec<Vec<f32>> = (0..planes)
                .map(|q| {
                    (0..views * bins)
                        .map(|i| ((i * 13 + q * 5) % 7) as f32 - 2.0)
                        .collect()
                })
                .collect();
            let refs: Vec<&[f32]> = sinos.iter().map(Vec::as_slice).collect();
            let mut imgs = vec![Vec::new(); planes];
            p.back_planes(&refs, &mut imgs);
            for (s, img) in sinos.iter().zip(&imgs) {
                let mut want = vec![0.0; n * n];
                p.back(s, &mut want);
                assert_eq!(img.len(), n * n);
                let scale = want.iter().fold(1f32, |m, x| m.max(x.abs()));
                for (x, y) in img.iter().zip(&want) {
                    assert!(
                        (x - y).abs() <= 1e-5 * scale,
                        "{n} {views} {bins}: {x} vs {y}"
                    );
                }
            }
        }
    }
}
