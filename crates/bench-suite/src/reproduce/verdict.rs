//! Verdicts that do not flip: each finding is decided from its quantity's range over the
//! repetitions, widened by a stated margin; a range that straddles a threshold is
//! "inconclusive on this machine" rather than whichever side one run happened to land on.

use offhost_bench::report::Row;

/// The relative margin a range must clear a threshold by (each side widened by it).
pub const MARGIN: f64 = 0.05;

/// What a finding says when its range straddles a threshold.
pub const INCONCLUSIVE: &str = "inconclusive on this machine";

/// A measured quantity: its median and the range its repetitions spanned (equal for a figure
/// measured once).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// The median (or the one figure).
    pub mid: f64,
    /// The lowest repetition.
    pub lo: f64,
    /// The highest repetition.
    pub hi: f64,
}

impl Measured {
    /// A figure measured once.
    pub fn point(x: f64) -> Measured {
        Measured {
            mid: x,
            lo: x,
            hi: x,
        }
    }

    /// A row's throughput (B/s) over its repetitions: the median's, and the rates of its
    /// slowest and fastest repetitions.
    pub fn rate(r: &Row) -> Measured {
        let mid = r.mb_per_s * 1e6;
        let at = |ns: f64| {
            if ns > 0.0 && r.one_way_ns_median > 0.0 {
                mid * r.one_way_ns_median / ns
            } else {
                mid
            }
        };
        Measured {
            mid,
            lo: at(r.one_way_ns_max),
            hi: at(r.one_way_ns_min),
        }
    }

    /// `self / other`: the median's ratio, and the widest the ranges allow.
    pub fn over(self, other: Measured) -> Measured {
        Measured {
            mid: self.mid / other.mid,
            lo: self.lo / other.hi,
            hi: self.hi / other.lo,
        }
    }

    /// The range widened by [`MARGIN`] on each side.
    fn widened(self) -> (f64, f64) {
        let (a, b) = (self.lo.min(self.hi), self.lo.max(self.hi));
        (a - MARGIN * a.abs(), b + MARGIN * b.abs())
    }

    /// "yes" when the widened range is all at or above `t`, "no" when all below it, else
    /// [`INCONCLUSIVE`] (a range that is not a number is inconclusive too).
    pub fn at_least(self, t: f64) -> &'static str {
        self.bands(&[(t, "yes")], "no")
    }

    /// "yes" when the widened range is all below `t`, "no" when all at or above it, else
    /// [`INCONCLUSIVE`].
    pub fn below(self, t: f64) -> &'static str {
        match self.at_least(t) {
            "yes" => "no",
            "no" => "yes",
            other => other,
        }
    }

    /// The verdict of the band the whole widened range falls in: `bands` are (lower bound,
    /// verdict) from the highest bound down, `rest` below the last; [`INCONCLUSIVE`] when the
    /// range spans two bands.
    pub fn bands(self, bands: &[(f64, &'static str)], rest: &'static str) -> &'static str {
        let (lo, hi) = self.widened();
        if !(lo.is_finite() && hi.is_finite()) {
            return INCONCLUSIVE;
        }
        let band = |x: f64| {
            bands
                .iter()
                .find(|(t, _)| x >= *t)
                .map_or(rest, |(_, v)| *v)
        };
        if band(lo) == band(hi) {
            band(lo)
        } else {
            INCONCLUSIVE
        }
    }

    /// The median with the range, when there is one: `1.52x (1.41-1.63)`.
    pub fn text(self, unit: &str) -> String {
        if self.lo == self.hi {
            format!("{}{unit}", super::md::ratio(self.mid))
        } else {
            format!(
                "{}{unit} ({}-{})",
                super::md::ratio(self.mid),
                super::md::ratio(self.lo),
                super::md::ratio(self.hi)
            )
        }
    }
}

/// "yes" when every verdict is, "no" when any is, else [`INCONCLUSIVE`] (conditions that
/// must all hold).
pub fn all_of(verdicts: &[&'static str]) -> &'static str {
    if verdicts.contains(&"no") {
        "no"
    } else if verdicts.iter().all(|v| *v == "yes") {
        "yes"
    } else {
        INCONCLUSIVE
    }
}

/// For pairs (a, b) measured once each: how many have `b` clearly above `a` and how many
/// clearly below (by [`MARGIN`] of the larger, and `floor` in absolute terms); the rest are
/// ties.
pub fn clearly_higher(pairs: &[(f64, f64)], floor: f64) -> (usize, usize) {
    let gap = |a: f64, b: f64| MARGIN * a.abs().max(b.abs()) + floor;
    let higher = pairs.iter().filter(|(a, b)| b - a > gap(*a, *b)).count();
    let lower = pairs.iter().filter(|(a, b)| a - b > gap(*a, *b)).count();
    (higher, lower)
}

/// "yes" when a majority of `n` pairs is clearly higher, "no" when a majority is clearly
/// lower, else [`INCONCLUSIVE`].
pub fn majority((higher, lower): (usize, usize), n: usize) -> &'static str {
    if higher * 2 > n {
        "yes"
    } else if lower * 2 > n {
        "no"
    } else {
        INCONCLUSIVE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(lo: f64, hi: f64) -> Measured {
        Measured {
            mid: (lo + hi) / 2.0,
            lo,
            hi,
        }
    }

    #[test]
    fn a_range_on_one_side_decides_and_one_across_a_threshold_does_not() {
        assert_eq!(m(1.8, 2.2).at_least(1.7), "yes");
        assert_eq!(m(1.0, 1.5).at_least(1.7), "no");
        assert_eq!(m(1.6, 1.8).at_least(1.7), INCONCLUSIVE);
        // The margin: a range just above the threshold is not enough.
        assert_eq!(Measured::point(1.71).at_least(1.7), INCONCLUSIVE);
        assert_eq!(Measured::point(1.71).below(1.7), INCONCLUSIVE);
        assert_eq!(Measured::point(1.5).below(1.7), "yes");
        assert_eq!(Measured::point(f64::NAN).at_least(1.0), INCONCLUSIVE);
        let bands = [(1.7, "yes"), (1.2, "partly")];
        assert_eq!(m(1.3, 1.5).bands(&bands, "no"), "partly");
        assert_eq!(m(1.3, 1.8).bands(&bands, "no"), INCONCLUSIVE);
        assert_eq!(m(0.5, 1.0).bands(&bands, "no"), "no");
    }

    #[test]
    fn ratios_take_the_widest_range_and_rows_their_repetitions() {
        let r = m(2.0, 4.0).over(m(1.0, 2.0));
        assert_eq!((r.lo, r.hi), (1.0, 4.0));
        let mut row = Row::new(
            "t",
            "x",
            "-",
            1000,
            &offhost_bench::stats::Summary::of(&[1000.0, 2000.0, 4000.0]).unwrap(),
        );
        row.mb_per_s = 0.5;
        let rate = Measured::rate(&row);
        assert_eq!(rate.mid, 0.5e6);
        assert!(rate.lo < rate.mid && rate.mid < rate.hi, "{rate:?}");
        assert_eq!(m(1.0, 2.0).text("x"), "1.50x (1.00-2.00)");
    }

    #[test]
    fn pairs_count_only_clear_differences() {
        let pairs = [(0.10, 0.20), (0.30, 0.305), (0.5, 0.3)];
        assert_eq!(clearly_higher(&pairs, 0.01), (1, 1));
        assert_eq!(majority((1, 1), 3), INCONCLUSIVE);
        assert_eq!(majority((2, 0), 3), "yes");
        assert_eq!(majority((0, 2), 3), "no");
    }
}
