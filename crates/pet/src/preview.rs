//! Live images that fit a period: the finest reconstruction that takes at most half the time
//! between two images, chosen as it goes.
//!
//! A full 2D FBP of the mMR's 127 rebinned planes at 344x344 takes about 1.6 s on two cores
//! (9 s before FBP took 8 planes at a time), too long for an image a second. A [`Level`] coarsens it two ways: `mash` sums adjacent
//! views and adjacent radial bins (an image of `bins / mash` pixels a side, `mash^3` less
//! work per plane), and `slab` sums adjacent rebinned planes into thick slices (`slab` times
//! fewer planes). [`Preview`] times each image and moves one level coarser when an image took
//! more than half the period, one finer when it took less than an eighth, so the images keep
//! the period on whatever cores the engine has and are as fine as that allows.

use std::time::{Duration, Instant};

use crate::geometry::Scanner;
use crate::recon::{self, Method};
use crate::sinogram::Sinogram;
use crate::volume::Volume;

/// How much a live image is coarsened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level {
    /// Views and radial bins summed in groups of this many.
    pub mash: usize,
    /// Rebinned planes summed in groups of this many.
    pub slab: usize,
}

/// The levels, finest first.
pub const LEVELS: [Level; 7] = [
    Level { mash: 1, slab: 1 },
    Level { mash: 2, slab: 1 },
    Level { mash: 2, slab: 2 },
    Level { mash: 2, slab: 4 },
    Level { mash: 4, slab: 4 },
    Level { mash: 4, slab: 8 },
    Level { mash: 4, slab: 16 },
];

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
    last: Option<Duration>,
    images: u64,
}

impl Preview {
    /// Images every `period`, starting at a middle level.
    pub fn new(period: Duration) -> Preview {
        Preview {
            level: 3,
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
        let vol = recon::reconstruct_planes(&planes, &s, Method::FbpHann);
        let took = t.elapsed();
        self.images += 1;
        self.last = Some(took);
        if took > self.period / 2 && self.level + 1 < LEVELS.len() {
            self.level += 1;
        } else if took < self.period / 8 && self.level > 0 {
            self.level -= 1;
        }
        vol
    }

    /// What the images were: how many, the level of the last and how long it took.
    pub fn describe(&self) -> String {
        let Some(last) = self.last else {
            return "no live image".into();
        };
        let at = LEVELS[self.level];
        format!(
            "{} live images (FBP-Hann, views and bins mashed by {}, planes summed by {}: the finest that takes at most half the {:.2} s period; the last took {:.3} s)",
            self.images,
            at.mash,
            at.slab,
            self.period.as_secs_f64(),
            last.as_secs_f64()
        )
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
        // No time at all: every image is faster than an eighth of it, so it refines.
        let mut p = Preview::new(Duration::from_secs(3600));
        p.image(&sino, true);
        assert_eq!(p.level, 2);
        // A period no image can keep: it coarsens.
        let mut p = Preview::new(Duration::ZERO);
        p.image(&sino, true);
        assert_eq!(p.level, 4);
        assert!(
            p.describe().starts_with("1 live images"),
            "{}",
            p.describe()
        );
    }
}
