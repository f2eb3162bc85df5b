//! The linear timing model of PARKBENCH and `[DS-link]` (section 8.4): t(n) = t0 + n / r_inf,
//! fitted by least squares, with n_1/2 = t0 * r_inf, the message length that reaches half the
//! asymptotic bandwidth. Optionally two segments with a breakpoint between short and long
//! messages.
//!
//! Sizes span decades (4 B to 1 MiB), so an ordinary fit would be decided by the largest
//! messages alone and would say nothing about t0. The fit therefore minimises *relative*
//! residuals, sum(((t_i - model_i) / t_i)^2): ordinary least squares with weights 1 / t_i^2.

use serde::Serialize;
use std::fmt::Write as _;

use crate::report::Row;

/// Why a fit could not be made.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum FitError {
    /// Fewer points than the fit needs.
    #[error("need at least {need} points with distinct sizes, got {got}")]
    TooFewPoints {
        /// Points needed.
        need: usize,
        /// Points given.
        got: usize,
    },
    /// A time or size that is zero, negative or not finite.
    #[error("point {index} is not a positive finite (size, time) pair")]
    BadPoint {
        /// Index of the offending point.
        index: usize,
    },
    /// Time does not grow with size, so there is no finite asymptotic bandwidth.
    #[error("time does not grow with size (slope {slope_ns_per_byte} ns/B): no finite r_inf")]
    NoGrowth {
        /// Fitted slope.
        slope_ns_per_byte: f64,
    },
}

/// A fitted line t(n) = t0 + n / r_inf.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fit {
    /// Zero-byte latency t0, ns (may be negative when the data do not support a start-up cost).
    pub t0_ns: f64,
    /// Asymptotic bandwidth r_inf, 10^6 bytes per second.
    pub r_inf_mb_per_s: f64,
    /// Half-performance length n_1/2 = t0 * r_inf, bytes.
    pub n_half_bytes: f64,
    /// Root mean square of the relative residuals (0.05 = 5 %).
    pub rms_rel_residual: f64,
    /// Points used.
    pub points: usize,
}

impl Fit {
    /// The model's time for `n` bytes, ns.
    pub fn time_ns(&self, n: f64) -> f64 {
        self.t0_ns + n * 1e3 / self.r_inf_mb_per_s
    }
}

/// A fit in two segments: sizes up to `breakpoint_bytes` and sizes above it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TwoSegmentFit {
    /// Largest size of the short-message segment, bytes.
    pub breakpoint_bytes: f64,
    /// Fit of the short messages.
    pub short: Fit,
    /// Fit of the long messages.
    pub long: Fit,
    /// Root mean square of the relative residuals over all points.
    pub rms_rel_residual: f64,
}

/// Weighted sums for the relative least-squares line; returns (a, b, sum of squared
/// relative residuals).
fn solve(points: &[(f64, f64)]) -> (f64, f64, f64) {
    let (mut sw, mut swx, mut swy, mut swxx, mut swxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(x, y) in points {
        let w = 1.0 / (y * y);
        sw += w;
        swx += w * x;
        swy += w * y;
        swxx += w * x * x;
        swxy += w * x * y;
    }
    let det = sw * swxx - swx * swx;
    let b = (sw * swxy - swx * swy) / det;
    let a = (swy - b * swx) / sw;
    let ss = points
        .iter()
        .map(|&(x, y)| ((y - a - b * x) / y).powi(2))
        .sum();
    (a, b, ss)
}

fn check(points: &[(f64, f64)], need: usize) -> Result<(), FitError> {
    if let Some(index) = points
        .iter()
        .position(|&(x, y)| !(x.is_finite() && y.is_finite() && x > 0.0 && y > 0.0))
    {
        return Err(FitError::BadPoint { index });
    }
    let mut xs: Vec<f64> = points.iter().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    if xs.len() < need {
        return Err(FitError::TooFewPoints {
            need,
            got: xs.len(),
        });
    }
    Ok(())
}

/// Fits t(n) = t0 + n / r_inf to `(size_bytes, time_ns)` points.
pub fn fit_linear(points: &[(f64, f64)]) -> Result<Fit, FitError> {
    check(points, 2)?;
    let (a, b, ss) = solve(points);
    if !b.is_finite() || b <= 0.0 {
        return Err(FitError::NoGrowth {
            slope_ns_per_byte: b,
        });
    }
    let r_inf = 1e3 / b; // bytes/ns -> 10^6 bytes/s
    Ok(Fit {
        t0_ns: a,
        r_inf_mb_per_s: r_inf,
        n_half_bytes: a / b,
        rms_rel_residual: (ss / points.len() as f64).sqrt(),
        points: points.len(),
    })
}

/// Fits two lines, splitting the points sorted by size at the breakpoint that minimises the
/// total squared relative residual; each segment keeps at least two distinct sizes.
pub fn fit_two_segments(points: &[(f64, f64)]) -> Result<TwoSegmentFit, FitError> {
    check(points, 4)?;
    let mut sorted = points.to_vec();
    sorted.sort_by(|p, q| p.0.total_cmp(&q.0));
    let mut best: Option<(f64, TwoSegmentFit)> = None;
    for split in 2..=sorted.len() - 2 {
        // Never split between two points of the same size.
        if sorted[split - 1].0 == sorted[split].0 {
            continue;
        }
        let (lo, hi) = sorted.split_at(split);
        let (Ok(short), Ok(long)) = (fit_linear(lo), fit_linear(hi)) else {
            continue;
        };
        let ss = short.rms_rel_residual.powi(2) * lo.len() as f64
            + long.rms_rel_residual.powi(2) * hi.len() as f64;
        if best.as_ref().is_none_or(|(b, _)| ss < *b) {
            let fit = TwoSegmentFit {
                breakpoint_bytes: lo[lo.len() - 1].0,
                short,
                long,
                rms_rel_residual: (ss / sorted.len() as f64).sqrt(),
            };
            best = Some((ss, fit));
        }
    }
    best.map(|(_, f)| f).ok_or(FitError::NoGrowth {
        slope_ns_per_byte: f64::NAN,
    })
}

/// The fit of one bench, transport and mode's rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitRow {
    /// Bench name.
    pub bench: String,
    /// Transport.
    pub transport: String,
    /// Mode.
    pub mode: String,
    /// Zero-byte time, ns.
    pub t0_ns: f64,
    /// Asymptotic bandwidth, MB/s.
    pub r_inf_mb_per_s: f64,
    /// Half-performance length, bytes.
    pub n_half_bytes: f64,
    /// RMS relative residual of the fit.
    pub rms_rel_residual: f64,
    /// Two-segment fit, when there are at least six sizes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub two_segment: Option<TwoSegmentFit>,
    /// Why no fit, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The (size, median one-way ns) points of one bench, transport and mode among `rows`.
pub fn points(rows: &[Row], bench: &str, transport: &str, mode: &str) -> Vec<(f64, f64)> {
    rows.iter()
        .filter(|r| r.bench == bench && r.transport == transport && r.mode == mode)
        .map(|r| (r.size as f64, r.one_way_ns_median))
        .collect()
}

/// Fits every (bench, transport, mode) series of `rows`, in sorted order; a series that
/// cannot be fitted says why.
pub fn series_fits(rows: &[Row]) -> Vec<FitRow> {
    let mut keys: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| (r.bench.as_str(), r.transport.as_str(), r.mode.as_str()))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .map(|(bench, transport, mode)| {
            let pts = points(rows, bench, transport, mode);
            let two = (pts.len() >= 6)
                .then(|| fit_two_segments(&pts).ok())
                .flatten();
            let (f, error) = match fit_linear(&pts) {
                Ok(f) => (f, None),
                Err(e) => (
                    Fit {
                        t0_ns: f64::NAN,
                        r_inf_mb_per_s: f64::NAN,
                        n_half_bytes: f64::NAN,
                        rms_rel_residual: f64::NAN,
                        points: pts.len(),
                    },
                    Some(e.to_string()),
                ),
            };
            FitRow {
                bench: bench.into(),
                transport: transport.into(),
                mode: mode.into(),
                t0_ns: f.t0_ns,
                r_inf_mb_per_s: f.r_inf_mb_per_s,
                n_half_bytes: f.n_half_bytes,
                rms_rel_residual: f.rms_rel_residual,
                two_segment: two,
                error,
            }
        })
        .collect()
}

/// A blank line, then one line per fit.
pub fn fits_text(fits: &[FitRow]) -> String {
    let mut s = String::from("\n");
    for r in fits {
        let _ = match &r.error {
            Some(e) => writeln!(s, "fit {} {} {}: {e}", r.bench, r.transport, r.mode),
            None => writeln!(
                s,
                "fit {} {} {}: t0 {:.0} ns, r_inf {:.1} MB/s, n_1/2 {:.0} B (rms residual {:.1} %)",
                r.bench,
                r.transport,
                r.mode,
                r.t0_ns,
                r.r_inf_mb_per_s,
                r.n_half_bytes,
                100.0 * r.rms_rel_residual
            ),
        };
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn synth(t0: f64, r_mb: f64, noise: f64, seed: u64) -> Vec<(f64, f64)> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut v = Vec::new();
        for k in 2..=20 {
            let n = f64::from(1u32 << k);
            for _ in 0..5 {
                let t = t0 + n * 1e3 / r_mb;
                v.push((n, t * (1.0 + rng.gen_range(-noise..noise))));
            }
        }
        v
    }

    /// With +-5 % multiplicative noise the fit recovers t0 and r_inf within 5 %.
    #[test]
    fn recovers_t0_and_r_inf_from_noisy_data() {
        for (seed, (t0, r)) in [(200.0, 5000.0), (187_000.0, 16.6), (50.0, 20_000.0)]
            .into_iter()
            .enumerate()
        {
            let f = fit_linear(&synth(t0, r, 0.05, seed as u64)).unwrap();
            assert!((f.t0_ns / t0 - 1.0).abs() < 0.05, "t0 {f:?}");
            assert!((f.r_inf_mb_per_s / r - 1.0).abs() < 0.05, "r_inf {f:?}");
            let n_half = t0 * r / 1e3;
            assert!((f.n_half_bytes / n_half - 1.0).abs() < 0.1, "n_half {f:?}");
            assert!(f.rms_rel_residual < 0.05);
        }
    }

    #[test]
    fn exact_data_is_exact() {
        let f = fit_linear(&synth(1000.0, 1000.0, 1e-12, 1)).unwrap();
        assert!((f.t0_ns - 1000.0).abs() < 1e-3);
        assert!((f.n_half_bytes - 1000.0).abs() < 1e-3);
        assert!((f.time_ns(1000.0) - 2000.0).abs() < 1e-3);
    }

    /// Short messages at 100 ns + 1 GB/s, long ones at 5 us + 10 GB/s: the breakpoint
    /// lands where the regimes change and each segment is recovered within 5 %.
    #[test]
    fn two_segments_find_the_break() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut pts = Vec::new();
        for k in 2..=20 {
            let n = f64::from(1u32 << k);
            let t = if n <= 4096.0 {
                100.0 + n
            } else {
                5000.0 + n / 10.0
            };
            pts.push((n, t * (1.0 + rng.gen_range(-0.02..0.02))));
        }
        let f = fit_two_segments(&pts).unwrap();
        assert_eq!(f.breakpoint_bytes, 4096.0);
        assert!(
            (f.short.r_inf_mb_per_s / 1000.0 - 1.0).abs() < 0.05,
            "{f:?}"
        );
        assert!(
            (f.long.r_inf_mb_per_s / 10_000.0 - 1.0).abs() < 0.05,
            "{f:?}"
        );
        assert!((f.long.t0_ns / 5000.0 - 1.0).abs() < 0.05, "{f:?}");
        let one = fit_linear(&pts).unwrap();
        assert!(f.rms_rel_residual < one.rms_rel_residual);
    }

    /// One fit per series, in sorted order; a series too short to fit says why.
    #[test]
    fn series_of_rows_are_fitted_apart() {
        let mut rows = Vec::new();
        for (t, t0) in [("b", 300.0), ("a", 100.0)] {
            for n in [8usize, 64, 4096] {
                let s = crate::stats::Summary::of(&[t0 + n as f64]).unwrap();
                rows.push(Row::new("x", t, "-", n, &s));
            }
        }
        rows.push(Row::new(
            "x",
            "c",
            "-",
            8,
            &crate::stats::Summary::of(&[1.0]).unwrap(),
        ));
        let f = series_fits(&rows);
        let names: Vec<&str> = f.iter().map(|r| r.transport.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert!((f[0].t0_ns - 100.0).abs() < 1e-6 && (f[1].t0_ns - 300.0).abs() < 1e-6);
        assert!(
            f[2].error.as_deref().unwrap().contains("at least 2"),
            "{f:?}"
        );
        let text = fits_text(&f);
        assert!(text.starts_with("\nfit x a -: t0 100 ns"), "{text}");
    }

    #[test]
    fn bad_input_is_refused() {
        assert_eq!(
            fit_linear(&[(8.0, 1.0)]),
            Err(FitError::TooFewPoints { need: 2, got: 1 })
        );
        assert_eq!(
            fit_linear(&[(8.0, 1.0), (8.0, 2.0)]),
            Err(FitError::TooFewPoints { need: 2, got: 1 })
        );
        assert_eq!(
            fit_linear(&[(8.0, 1.0), (16.0, f64::NAN)]),
            Err(FitError::BadPoint { index: 1 })
        );
        assert!(matches!(
            fit_linear(&[(8.0, 2.0), (16.0, 1.0)]),
            Err(FitError::NoGrowth { .. })
        ));
        assert!(fit_two_segments(&[(8.0, 1.0), (16.0, 2.0), (32.0, 3.0)]).is_err());
    }
}
