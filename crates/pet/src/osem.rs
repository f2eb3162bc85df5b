//! 3D OSEM with the Joseph projector: ordered subsets of views, one sensitivity image per
//! subset, views of a subset shared among threads.
//!
//! Model: the mean of bin `i` is `f_i (A x)_i`, where `A` is [`Joseph`] and
//! `f_i = pairs(sinogram) x lors(view, bin) x factors_i`: the ring pairs the sinogram sums,
//! for detector-pair (arc-corrected) data the detector pairs the histogrammer puts into the
//! in-plane bin (else 1), and the optional per-bin factors (normalisation efficiencies times
//! attenuation factors). No additive term (randoms are already subtracted by the delayeds,
//! scatter is not modelled).
//!
//! Subset `s` of `S` holds the views `v` with `v mod S = s` (STIR's interleaving). A subset
//! iteration is `x_j <- x_j / sens_s,j sum_{i in s} f_i A_ij y_i / (f_i (A x)_i)`, with
//! `sens_s = sum_{i in s} f_i A_i`. Bins with `y_i = 0` add nothing to the sum, so only the
//! bins with counts are projected (forward and back) in the updates: the result is the same as
//! projecting every bin. Voxels outside the cylinder inscribed in the grid, or that no line of
//! the subset reaches, stay 0; negative values (net counts can be negative) are clamped to 0.

use std::time::Instant;

use crate::joseph::{Joseph, Line};

/// How to run OSEM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OsemConfig {
    /// Subsets (1 = MLEM); at most the number of views.
    pub subsets: usize,
    /// Full iterations (each runs every subset once).
    pub iterations: usize,
    /// Threads (0: the available cores).
    pub threads: usize,
}

/// Timings of an OSEM run, seconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OsemTimes {
    /// Computing the subsets' sensitivity images.
    pub sensitivity_s: f64,
    /// Each subset iteration, in order.
    pub subiterations_s: Vec<f64>,
}

/// What OSEM is told after each step: sensitivity images (`Sensitivity(done, subsets)`) or
/// subset iterations (`Subiteration(done, total)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Sensitivity images computed so far.
    Sensitivity(usize, usize),
    /// Subset iterations done so far.
    Subiteration(usize, usize),
}

/// The data OSEM reconstructs: measured net counts and the per-bin model factors.
pub struct OsemData<'a> {
    /// Counts in the order `[sinogram][view][bin]` (as [`Joseph::bins_len`]).
    pub counts: &'a [f32],
    /// Detector pairs per in-plane bin (`views x bins`), for detector-pair data; `None`: 1.
    pub lors: Option<&'a [f32]>,
    /// Per-bin factors (normalisation x attenuation), as `counts`; `None`: 1.
    pub factors: Option<&'a [f32]>,
    /// Weight each sinogram by the ring pairs it sums (the physical model of compressed data;
    /// `false` for comparisons with STIR's ray-tracing matrix, which traces one line a bin).
    pub ring_pairs: bool,
    /// Update as STIR's `OSMAPOSL` does where it differs from offhost's own OSEM:
    /// - each bin's ratio of measured to modelled counts as its `divide_and_truncate`: 0
    ///   where the count is 0 or less (net counts below 0 are dropped rather than
    ///   subtracted), at most [`MAX_QUOTIENT`]; offhost's own lets a negative count enter the
    ///   update as it is (the image is clamped at 0 after it);
    /// - its subsets ([`subset_views`]), which keep the views its projector's symmetries
    ///   relate together.
    pub stir: bool,
}

/// The views of subset `s` of `subsets` among `views`. offhost's own: `v = s mod subsets`.
/// STIR's (`stir`): the views whose basic view (STIR's `find_basic_view_segment_numbers`
/// with its 90 and 180 degree symmetries: `v`, `V/2 - v`, `v - V/2` or `V - v`, whichever
/// falls in `0 ..= V/4`) is `s mod subsets`; the two agree on half the views when `subsets`
/// divides `V/4`, as STIR asks.
pub fn subset_views(views: usize, subsets: usize, s: usize, stir: bool) -> Vec<usize> {
    let subsets = subsets.max(1);
    if !stir {
        return (s..views).step_by(subsets).collect();
    }
    let (v45, v90) = (views / 4, views / 2);
    let basic = |v: usize| match v {
        v if v >= v90 + v45 => views - v,
        v if v >= v90 => v - v90,
        v if v > v45 => v90 - v,
        v => v,
    };
    (0..views).filter(|&v| basic(v) % subsets == s).collect()
}

/// The largest ratio of measured to modelled counts of a bin under [`OsemData::stir`]
/// (STIR's `max_quotient`).
pub const MAX_QUOTIENT: f32 = 10_000.0;

/// Per-bin model factor `f_i` (without the projector).
struct Model<'a> {
    pairs: Vec<f32>,
    data: &'a OsemData<'a>,
}

impl Model<'_> {
    #[inline]
    fn factor(&self, sino: usize, plane_i: usize, i: usize) -> f32 {
        let mut f = self.pairs[sino];
        if let Some(l) = self.data.lors {
            f *= l[plane_i];
        }
        if let Some(x) = self.data.factors {
            f *= x[i];
        }
        f
    }
}

fn threads(cfg: &OsemConfig) -> usize {
    if cfg.threads > 0 {
        cfg.threads
    } else {
        std::thread::available_parallelism().map_or(1, |x| x.get())
    }
}

/// A thread's scratch for one bin's weights ([`Joseph::forward_back_bin`]).
type Scratch = Vec<(u32, f32)>;

/// Runs `per_bin(acc, line, scratch, sino, i, plane_i)` over every bin of `views` (split among
/// `threads`), each thread adding into an image of its own; returns their sum.
fn pass<F>(p: &Joseph, views: &[usize], threads: usize, per_bin: F) -> Vec<f32>
where
    F: Fn(&mut [f32], &Line, &mut Scratch, usize, usize, usize) + Sync,
{
    let len = p.grid().len();
    let (nv, nb, ns) = (p.views(), p.bins(), p.sinograms());
    let per_bin = &per_bin;
    let parts: Vec<Vec<f32>> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..threads.min(views.len()).max(1))
            .map(|t| {
                sc.spawn(move || {
                    let mut acc = vec![0f32; len];
                    let mut line = Line::default();
                    let mut scratch = Scratch::new();
                    for &v in views.iter().skip(t).step_by(threads) {
                        for b in 0..nb {
                            p.line(v, b, &mut line);
                            if line.is_empty() {
                                continue;
                            }
                            let plane_i = v * nb + b;
                            for sino in 0..ns {
                                let i = sino * nv * nb + plane_i;
                                per_bin(&mut acc, &line, &mut scratch, sino, i, plane_i);
                            }
                        }
                    }
                    acc
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("projection thread"))
            .collect()
    });
    let mut it = parts.into_iter();
    let mut sum = it.next().unwrap_or_else(|| vec![0f32; len]);
    for part in it {
        for (s, x) in sum.iter_mut().zip(part) {
            *s += x;
        }
    }
    sum
}

/// The voxels inside the cylinder inscribed in the grid.
fn fov(p: &Joseph) -> Vec<bool> {
    let g = p.grid();
    let n = g.n;
    let c = (n / 2) as f64;
    let plane: Vec<bool> = (0..n * n)
        .map(|i| {
            let (r, col) = ((i / n) as f64 - c, (i % n) as f64 - c);
            r * r + col * col <= c * c
        })
        .collect();
    plane.repeat(g.slices)
}

/// Runs OSEM from a uniform image; `progress` hears of every step. Returns the image
/// (`[slice][row][col]`) and the timings.
///
/// # Panics
/// When the data's lengths do not match the projector's (callers build both from one
/// sinogram).
pub fn osem(
    p: &Joseph,
    data: &OsemData<'_>,
    cfg: &OsemConfig,
    progress: &(dyn Fn(Progress) + Sync),
) -> (Vec<f32>, OsemTimes) {
    let nv = p.views();
    assert_eq!(
        data.counts.len(),
        p.bins_len(),
        "counts match the projector"
    );
    if let Some(f) = data.factors {
        assert_eq!(f.len(), p.bins_len(), "factors match the projector");
    }
    if let Some(l) = data.lors {
        assert_eq!(l.len(), nv * p.bins(), "LOR counts match the projector");
    }
    let subsets = cfg.subsets.clamp(1, nv.max(1));
    let threads = threads(cfg);
    let model = Model {
        pairs: if data.ring_pairs {
            p.pairs()
        } else {
            vec![1.0; p.sinograms()]
        },
        data,
    };
    let views_of = |s: usize| subset_views(nv, subsets, s, data.stir);
    let mut times = OsemTimes::default();
    let t = Instant::now();
    let sens: Vec<Vec<f32>> = (0..subsets)
        .map(|s| {
            let img = pass(p, &views_of(s), threads, |acc, line, _, sino, i, pi| {
                let f = model.factor(sino, pi, i);
                if f != 0.0 {
                    p.back_bin(acc, line, sino, f);
                }
            });
            progress(Progress::Sensitivity(s + 1, subsets));
            img
        })
        .collect();
    times.sensitivity_s = t.elapsed().as_secs_f64();
    let inside = fov(p);
    let mut x: Vec<f32> = inside.iter().map(|&m| f32::from(u8::from(m))).collect();
    let total = subsets * cfg.iterations;
    for k in 0..total {
        let t = Instant::now();
        let s = k % subsets;
        let xr = &x;
        let back = pass(
            p,
            &views_of(s),
            threads,
            |acc, line, scratch, sino, i, pi| {
                let y = data.counts[i];
                if y == 0.0 || (data.stir && y < 0.0) {
                    return;
                }
                let f = model.factor(sino, pi, i);
                if f == 0.0 {
                    return;
                }
                p.forward_back_bin(xr, acc, line, sino, scratch, |ax| {
                    let fp = f * ax;
                    let q = match data.stir {
                        // min(y / fp, MAX_QUOTIENT) without dividing by 0.
                        true if y > MAX_QUOTIENT * fp => MAX_QUOTIENT,
                        _ if fp > 0.0 => y / fp,
                        _ => return None,
                    };
                    Some(f * q)
                });
            },
        );
        for ((xj, (&bj, &sj)), &m) in x.iter_mut().zip(back.iter().zip(&sens[s])).zip(&inside) {
            *xj = if m && sj > 0.0 {
                (*xj * bj / sj).max(0.0)
            } else {
                0.0
            };
        }
        times.subiterations_s.push(t.elapsed().as_secs_f64());
        progress(Progress::Subiteration(k + 1, total));
    }
    (x, times)
}

/// Attenuation factors `exp(-integral of mu)` of every bin, from an attenuation image on the
/// projector's grid in `1/cm` (STIR's unit), views in parallel on `threads` (0: all cores).
pub fn attenuation_factors(p: &Joseph, mu_per_cm: &[f32], threads: usize) -> Vec<f32> {
    assert_eq!(
        mu_per_cm.len(),
        p.grid().len(),
        "attenuation image on the grid"
    );
    let (nv, nb, ns) = (p.views(), p.bins(), p.sinograms());
    let threads = self::threads(&OsemConfig {
        subsets: 1,
        iterations: 0,
        threads,
    });
    let mut out = vec![1f32; p.bins_len()];
    // Per view, each thread writes its own views' bins: [view][sino][bin], then reordered.
    let per_view: Vec<Vec<f32>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads.min(nv).max(1))
            .map(|t| {
                sc.spawn(move || {
                    let mut line = Line::default();
                    (t..nv)
                        .step_by(threads)
                        .map(|v| {
                            let mut o = vec![1f32; ns * nb];
                            for b in 0..nb {
                                p.line(v, b, &mut line);
                                for sino in 0..ns {
                                    let mm = p.forward_bin(mu_per_cm, &line, sino);
                                    o[sino * nb + b] = (-0.1 * mm).exp();
                                }
                            }
                            (v, o)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<(usize, Vec<f32>)> = hs
            .into_iter()
            .flat_map(|h| h.join().expect("projection thread"))
            .collect();
        all.sort_by_key(|x| x.0);
        all.into_iter().map(|x| x.1).collect()
    });
    for (v, o) in per_view.iter().enumerate() {
        for sino in 0..ns {
            let at = (sino * nv + v) * nb;
            out[at..at + nb].copy_from_slice(&o[sino * nb..(sino + 1) * nb]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::Scanner;
    use crate::joseph::Grid;
    use crate::layout::Layout;

    fn scanner() -> Scanner {
        Scanner::small_for_tests(3)
    }

    /// Noise-free data of a small hot cube on a warm cylinder: OSEM's data fit improves with
    /// every iteration and the hot voxel ends up hotter than the background by most of the
    /// true 4:1; attenuation factors divide out when the model knows them.
    #[test]
    fn osem_fits_noise_free_data() {
        let s = scanner();
        let l = Layout::new(&s).unwrap();
        let g = Grid::for_scanner(&s);
        let p = Joseph::new(&s, &l, g, true).unwrap();
        let n = g.n;
        let mut truth = vec![0f32; g.len()];
        let c = n / 2;
        for k in 0..g.slices {
            for r in 0..n {
                for col in 0..n {
                    let (dr, dc) = (r as f64 - c as f64, col as f64 - c as f64);
                    if dr * dr + dc * dc <= 64.0 {
                        truth[(k * n + r) * n + col] = 1.0;
                    }
                }
            }
        }
        let hot = (5 * n + c) * n + c + 3;
        for d in [0, 1, n, n + 1] {
            truth[hot + d] = 4.0;
            truth[hot + d + n * n] = 4.0;
        }
        let pairs = p.pairs();
        let mu: Vec<f32> = truth
            .iter()
            .map(|&v| if v > 0.0 { 0.096 } else { 0.0 })
            .collect();
        let att = attenuation_factors(&p, &mu, 2);
        assert!(att.iter().all(|&a| a > 0.0 && a <= 1.0));
        assert!(att.iter().any(|&a| a < 0.6), "attenuation through 64 mm");
        let mut y = vec![0f32; p.bins_len()];
        p.forward(&truth, &mut y);
        let plane = p.views() * p.bins();
        for (i, v) in y.iter_mut().enumerate() {
            *v *= pairs[i / plane] * att[i];
        }
        let data = OsemData {
            counts: &y,
            lors: None,
            factors: Some(&att),
            ring_pairs: true,
            stir: false,
        };
        let fit = |x: &[f32]| {
            let mut q = vec![0f32; p.bins_len()];
            p.forward(x, &mut q);
            q.iter()
                .enumerate()
                .map(|(i, &v)| (v * pairs[i / plane] * att[i] - y[i]).abs() as f64)
                .sum::<f64>()
        };
        let steps = std::sync::Mutex::new(Vec::new());
        let cfg = |it| OsemConfig {
            subsets: 4,
            iterations: it,
            threads: 2,
        };
        let (x1, _) = osem(&p, &data, &cfg(1), &|_| {});
        let (x5, times) = osem(&p, &data, &cfg(5), &|s| steps.lock().unwrap().push(s));
        assert_eq!(times.subiterations_s.len(), 20);
        let steps = steps.into_inner().unwrap();
        assert_eq!(steps[3], Progress::Sensitivity(4, 4));
        assert_eq!(steps[23], Progress::Subiteration(20, 20));
        assert!(fit(&x5) < 0.5 * fit(&x1), "{} vs {}", fit(&x5), fit(&x1));
        let bg = x5[(5 * n + c) * n + c - 4];
        assert!(x5[hot] > 2.5 * bg && bg > 0.5, "hot {} bg {bg}", x5[hot]);
        // Outside the inscribed cylinder nothing.
        assert_eq!(x5[0], 0.0);
    }

    /// Both subset rules split the views; STIR's keeps each view with those its symmetries
    /// relate (`V/2 - v`, `V/2 + v`, `V - v`) and agrees with offhost's in the first quadrant.
    #[test]
    fn stirs_subsets_hold_the_views_its_symmetries_relate() {
        for (views, subsets) in [(128, 16), (252, 21), (16, 4)] {
            for stir in [false, true] {
                let mut seen = vec![0; views];
                for s in 0..subsets {
                    let vs = subset_views(views, subsets, s, stir);
                    assert_eq!(vs.len(), views / subsets, "{views} {subsets} {stir} {s}");
                    vs.iter().for_each(|&v| seen[v] += 1);
                }
                assert!(seen.iter().all(|&n| n == 1), "{views} {subsets} {stir}");
            }
            for s in 0..subsets {
                let vs = subset_views(views, subsets, s, true);
                for &v in vs.iter().filter(|&&v| v > 0 && v <= views / 4) {
                    for r in [views / 2 - v, views / 2 + v, views - v] {
                        assert!(vs.contains(&r), "{views}/{subsets}: {v} without {r}");
                    }
                    assert!(subset_views(views, subsets, s, false).contains(&v));
                }
            }
        }
        // STIR's subset 1 of 16 over 128 views (its `OSMAPOSL` on the demo scanner).
        let one = subset_views(128, 16, 1, true);
        assert_eq!(&one[..4], &[1, 17, 47, 63]);
    }

    /// Under STIR's updates a bin of negative net counts is dropped (the image is the one of
    /// the same data with it set to 0); under offhost's it lowers the image along its line.
    #[test]
    fn stirs_updates_drop_negative_counts() {
        let s = scanner();
        let l = Layout::new(&s).unwrap();
        let g = Grid::for_scanner(&s);
        let p = Joseph::new(&s, &l, g, true).unwrap();
        let mut y = vec![2f32; p.bins_len()];
        let mut zeroed = y.clone();
        for i in (0..y.len()).step_by(7) {
            y[i] = -1.0;
            zeroed[i] = 0.0;
        }
        let cfg = OsemConfig {
            subsets: 4,
            iterations: 1,
            threads: 2,
        };
        let run = |counts: &[f32], stir: bool| {
            let data = OsemData {
                counts,
                lors: None,
                factors: None,
                ring_pairs: true,
                stir,
            };
            osem(&p, &data, &cfg, &|_| {}).0
        };
        assert_eq!(run(&y, true), run(&zeroed, true));
        let (ours, dropped) = (run(&y, false), run(&zeroed, false));
        let (a, b): (f64, f64) = (
            ours.iter().map(|&v| v as f64).sum(),
            dropped.iter().map(|&v| v as f64).sum(),
        );
        assert!(a < 0.99 * b, "{a} vs {b}");
    }
}
