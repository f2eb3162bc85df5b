//! Summaries of repeated timings: median, p99, minimum, maximum and outliers. Every bench
//! summarises its samples here (one statistics and percentile implementation).
//!
//! Warm-up samples are never passed here; every sample given is kept, and outliers are
//! counted and reported rather than dropped.

use serde::Serialize;

/// A sample counts as an outlier when it exceeds this multiple of the median.
pub const OUTLIER_FACTOR: f64 = 3.0;

/// Order statistics of a set of samples (timings in ns, or rates).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    /// Number of samples.
    pub samples: usize,
    /// Median (the mean of the two middle samples when there is an even number).
    pub median: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Samples above [`OUTLIER_FACTOR`] times the median (kept in every statistic).
    pub outliers: usize,
}

impl Summary {
    /// Summarises `samples`; `None` when there are none or any is not finite.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|s| !s.is_finite()) {
            return None;
        }
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let p99 = percentile(&v, 0.99);
        let outliers = v.iter().filter(|&&s| s > OUTLIER_FACTOR * median).count();
        Some(Summary {
            samples: n,
            median,
            p99,
            min: v[0],
            max: v[n - 1],
            outliers,
        })
    }
}

/// The median of `samples`; `None` when there are none or any is not finite.
pub fn median(samples: &[f64]) -> Option<f64> {
    Summary::of(samples).map(|s| s.median)
}

/// The nearest-rank percentile `q` (0..=1) of `sorted` (ascending, not empty).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    let rank = (q * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_p99_and_outliers() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        v.push(1000.0);
        let s = Summary::of(&v).unwrap();
        assert_eq!(s.samples, 101);
        assert_eq!(s.median, 51.0);
        assert_eq!(s.p99, 100.0);
        assert_eq!(s.max, 1000.0);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.outliers, 1);
        assert_eq!(Summary::of(&[2.0, 4.0]).unwrap().median, 3.0);
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&[7.0], 0.99), 7.0);
    }

    #[test]
    fn empty_or_nan_is_none() {
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
        assert!(median(&[f64::INFINITY]).is_none());
    }
}
