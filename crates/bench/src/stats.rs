//! Summaries of repeated measurements.

use serde::Serialize;

/// Order statistics of a set of samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Smallest sample.
    pub min: f64,
    /// Median (50th percentile).
    pub median: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Largest sample.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
}

impl Summary {
    /// Summarises `samples` (reordered in place). Returns `None` when there are none or any
    /// is not a number.
    pub fn of(samples: &mut [f64]) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|s| s.is_nan()) {
            return None;
        }
        samples.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
        let n = samples.len();
        Some(Summary {
            n,
            min: samples[0],
            median: percentile(samples, 50.0),
            p99: percentile(samples, 99.0),
            max: samples[n - 1],
            mean: samples.iter().sum::<f64>() / n as f64,
        })
    }
}

/// The `p`-th percentile of sorted `samples` by the nearest-rank method.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_p99_by_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let s = Summary::of(&mut v).unwrap();
        assert_eq!((s.min, s.median, s.p99, s.max), (1.0, 50.0, 99.0, 100.0));
        assert_eq!(s.mean, 50.5);
        let mut one = [7.0];
        let s = Summary::of(&mut one).unwrap();
        assert_eq!((s.median, s.p99), (7.0, 7.0));
    }

    #[test]
    fn empty_or_nan_has_no_summary() {
        assert!(Summary::of(&mut []).is_none());
        assert!(Summary::of(&mut [1.0, f64::NAN]).is_none());
    }
}
