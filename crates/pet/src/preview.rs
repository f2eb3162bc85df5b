//! Live images that fit a period: the finest reconstruction that takes at most half the time
//! between two images, chosen as it goes.
//!
//! A full 2D FBP of the mMR's 127 rebinned planes at 344x344 takes about 1.6 s on two cores
//! (9 s before FBP took 8 planes at a time), too long for an image a second. A [`Level`]
//! coarsens it two ways: `mash` sums adjacent views and adjacent radial bins (an image of
//! `bins / mash` pixels a side, `mash^3` less work per plane), and `slab` sums adjacent
//! rebinned planes into thick slices (`slab` times fewer planes). The levels ([`LEVELS`]) go
//! from the full image down by at most a factor of 2 in work a step at the fine end, where
//! the times are long.
//!
//! [`Preview`] times each image in two parts, the rebinning (the same at every level) and the
//! reconstruction (in proportion to the level's work, [`Level::work`]), and predicts from them
//! what another level would take. It moves coarser, as far as it needs to, when an image took
//! more than half the period; finer, a step at a time, when the finer level is predicted to
//! take at most [`FINER_SHARE`] of the period and at most [`STEP_SHARE`] of it longer than the
//! last image. The second bound keeps the images evenly spaced: an image that takes longer
//! than the one before arrives that much later after it, so a refinement from a few
//! milliseconds straight to most of half a period would put one gap far over the period.

use std::time::{Duration, Instant};

use crate::geometry::Scanner;
use crate::recon::{self, Method};
use crate::sinogram::Sinogram;
use crate::volume::Volume;

/// A finer level is taken only when it is predicted to take at most this share of the period
/// (coarser ones are taken past a half: the margin keeps a level from flapping).
pub const FINER_SHARE: f64 = 0.4;

/// A finer level is taken only when it is predicted to take at most this share of the period
/// longer than the last image did (the gap it adds between two images).
pub const STEP_SHARE: f64 = 0.1;

/// How much a live image is coarsened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level {
    /// Views and radial bins summed in groups of this many.
    pub mash: usize,
    /// Rebinned planes summed in groups of this many.
    pub slab: usize,
}

/// The levels, finest first: each at most half the work of the one before at the fine end
/// (slabs of 2 and 4 planes between the full image and views and bins mashed by 2).
pub const LEVELS: [Level; 9] = [
    Level { mash: 1, slab: 1 },
    Level { mash: 1, slab: 2 },
    Level { mash: 1, slab: 4 },
    Level { mash: 2, slab: 1 },
    Level { mash: 2, slab: 2 },
    Level { mash: 2, slab: 4 },
    Level { mash: 4, slab: 4 },
    Level { mash: 4, slab: 8 },
    Level { mash: 4, slab: 16 },
];

impl Level {
    /// The reconstruction's work at this level relative to the full image: planes times
    /// views times image pixels, `1 / (slab * mash^3)`.
    pub fn work(self) -> f64 {
        1.0 / (self.slab.max(1) * self.mash.max(1).pow(3)) as f64
    }
}

/// `planes` (`views x bins` each, of scanner `s`) coarsened to `level`, with the scanner
/// whose views, bins and plane spacing they then have. Views and bins left over past a whole
/// group are dropped; a last group of planes may be partial. Values are means, not sums.
pub fn reduce(planes: &[Vec<f32>], s: &Scanner, level: Level) -> (Vec<Vec<f32>>, Scanner) {
    let m = level.mash.max(1);
    let (views, bins) = (s.views as usize, s.radial_bins as usize);
    let (v2, b2) = ((views / m).max(1), (bins / m).max(1));
    let slab = level.slab.max(1);
    let out: Vec<Vec<f32>> = planes
        .chunks(slab)
        .map(|group| {
            let mut o = vec![0f32; v2 * b2];
            for p in group {
                for (v, row) in p.chunks_exact(bins).take(v2 * m).enumerate() {
                    let orow = &mut o[(v / m) * b2..(v / m + 1) * b2];
                    for (b, x) in row.iter().take(b2 * m).enumerate() {
                        orow[b / m] += x;
                    }
                }
            }
            let scale = 1.0 / (group.len() * m * m) as f32;
            o.iter_mut().for_each(|x| *x *= scale);
            o
        })
        .collect();
    let mut t = s.clone();
    t.views = v2 as u32;
    t.radial_bins = b2 as u32;
    t.bin_size_mm = s.bin_size_mm * m as f64;
    t.ring_spacing_mm = s.ring_spacing_mm * slab as f64;
    (out, t)
}

/// Live images at a level that fits the period.
#[derive(Clone, Debug)]
pub struct Preview {
    level: usize,
    period: Duration,
    /// The last image's level and time.
    last: Option<(usize, Duration)>,
    images: u64,
}

/// The time of the last image, in the part every level shares (`fixed`) and the part in
/// proportion to its level's work (`scaled`).
#[derive(Clone, Copy, Debug)]
struct Took {
    fixed: f64,
    scaled: f64,
}

impl Took {
    /// The whole time.
    fn total(self) -> f64 {
        self.fixed + self.scaled
    }

    /// What level `to` is predicted to take, the last image having been at `from`.
    fn at(self, from: Level, to: Level) -> f64 {
        self.fixed + self.scaled * to.work() / from.work()
    }
}

impl Preview {
    /// Images every `period`, starting at a middle level.
    pub fn new(period: Duration) -> Preview {
        Preview {
            level: 5,
            period,
            last: None,
            images: 0,
        }
    }

    /// The level the next image is made at.
    pub fn level(&self) -> Level {
        LEVELS[self.level]
    }

    /// An image of `sino` (FBP with a Hann window) at the current level; the time it took
    /// moves the level for the next one.
    pub fn image(&mut self, sino: &Sinogram, normalise_lors: bool) -> Volume {
        let t = Instant::now();
        let planes = recon::planes(sino, normalise_lors);
        let (planes, s) = reduce(&planes, &sino.scanner, self.level());
        let rebinned = t.elapsed();
        let vol = recon::reconstruct_planes(&planes, &s, Method::FbpHann);
        let took = t.elapsed();
        self.images += 1;
        self.last = Some((self.level, took));
        let took = Took {
            fixed: rebinned.as_secs_f64(),
            scaled: (took - rebinned).as_secs_f64(),
        };
        self.level = next_level(self.level, took, self.period.as_secs_f64());
        vol
    }

    /// What the images were: how many, the level of the last and how long it took.
    pub fn describe(&self) -> String {
        let Some((level, last)) = self.last else {
            return "no live image".into();
        };
        let at = LEVELS[level];
        format!(
            "{} live images (FBP-Hann; the last with views and bins mashed by {} and planes summed by {}, the finest that fits half the {:.2} s period without widening a gap by a tenth of it, took {:.3} s)",
            self.images,
            at.mash,
            at.slab,
            self.period.as_secs_f64(),
            last.as_secs_f64()
        )
    }
}

/// The level after an image at `level` that took `took`, for images `period` seconds apart.
fn next_level(level: usize, took: Took, period: f64) -> usize {
    let at = LEVELS[level];
    if took.total() > period / 2.0 {
        // Coarser, as far as it takes to fit the share a finer step may reach (the coarsest
        // when none does).
        return (level + 1..LEVELS.len())
            .find(|&l| took.at(at, LEVELS[l]) <= FINER_SHARE * period)
            .unwrap_or(LEVELS.len() - 1);
    }
    match level.checked_sub(1) {
        Some(finer) => {
            let predicted = took.at(at, LEVELS[finer]);
            let step = predicted - took.total();
            if predicted <= FINER_SHARE * period && step <= STEP_SHARE * period {
                finer
            } else {
                level
            }
        }
        None => level,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_means_groups_of_views_bins_and_planes() {
        let mut s = Scanner::demo();
        s.views = 4;
        s.radial_bins = 6;
        let p: Vec<f32> = (0..24).map(|x| x as f32).collect();
        let planes = vec![p.clone(), p.iter().map(|x| x + 100.0).collect(), p];
        let (out, t) = reduce(&planes, &s, Level { mash: 2, slab: 2 });
        assert_eq!((t.views, t.radial_bins), (2, 3));
        assert_eq!(t.bin_size_mm, s.bin_size_mm * 2.0);
        assert_eq!(t.ring_spacing_mm, s.ring_spacing_mm * 2.0);
        assert_eq!(out.len(), 2);
        // Bins 0,1 of views 0,1: 0+1+6+7 over both planes (+400 on the second), over 8.
        assert_eq!(out[0][0], (14.0 + 14.0 + 400.0) / 8.0);
        // The last group holds one plane.
        assert_eq!(out[1][0], 14.0 / 4.0);
        assert_eq!(out[1][5], (16.0 + 17.0 + 22.0 + 23.0) / 4.0);
    }

    #[test]
    fn slow_images_move_to_a_coarser_level_and_fast_ones_back() {
        let sino = Sinogram::new(&Scanner::demo()).unwrap();
        // A period of an hour: the finer level fits it with room, so it refines one step.
        let mut p = Preview::new(Duration::from_secs(3600));
        p.image(&sino, true);
        assert_eq!(p.level, 4);
        // A period no image can keep: it coarsens.
        let mut p = Preview::new(Duration::ZERO);
        p.image(&sino, true);
        assert_eq!(p.level, LEVELS.len() - 1);
        assert!(
            p.describe().starts_with("1 live images"),
            "{}",
            p.describe()
        );
    }

    #[test]
    fn levels_halve_the_work_at_most_at_the_fine_end() {
        for w in LEVELS.windows(2) {
            let ratio = w[0].work() / w[1].work();
            assert!(ratio > 1.0, "{:?} is not less work than {:?}", w[1], w[0]);
            if w[0].work() >= LEVELS[3].work() {
                assert!(ratio <= 2.0, "{:?} -> {:?}: {ratio}", w[1], w[0]);
            }
        }
    }

    #[test]
    fn refining_is_one_step_that_keeps_the_gap_and_coarsening_goes_as_far_as_needed() {
        let took = |fixed, scaled| Took { fixed, scaled };
        // {2,2} in 0.03 s: {2,1} is predicted at 0.05 s, 0.02 s longer: taken.
        assert_eq!(next_level(4, took(0.01, 0.02), 1.0), 3);
        // {1,2} in 0.16 s: {1,1} would fit (0.31 s) but arrive 0.15 s later than this image did.
        assert_eq!(next_level(1, took(0.01, 0.15), 1.0), 1);
        // The same at a period of 2 s: the step is 7.5 % of it.
        assert_eq!(next_level(1, took(0.01, 0.15), 2.0), 0);
        // The full image in 0.7 s: {1,2} is predicted at 0.375 s.
        assert_eq!(next_level(0, took(0.05, 0.65), 1.0), 1);
        // In 2 s: {1,2} 1.05 s, {1,4} 0.575 s, {2,1} 0.34 s.
        assert_eq!(next_level(0, took(0.1, 1.9), 1.0), 3);
        // Slower than any level can make up for: the coarsest.
        assert_eq!(next_level(0, took(0.9, 0.1), 1.0), LEVELS.len() - 1);
        // At the coarsest and finest ends there is no further step.
        assert_eq!(
            next_level(LEVELS.len() - 1, took(5.0, 1.0), 1.0),
            LEVELS.len() - 1
        );
        assert_eq!(next_level(0, took(0.01, 0.01), 1.0), 0);
    }
}
