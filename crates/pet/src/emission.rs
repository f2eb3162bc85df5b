//! Annihilation points: samples of a [`Phantom`]'s activity inside the detector cylinder.
//!
//! The NEMA IEC phantom is sampled as a mixture (the uniform background from
//! [`NemaCells`] plus the spheres' excess activity); other phantoms by rejection from their
//! bounding box, clipped to the cylinder and to the phantom's [`Phantom::max_radius`].

use rand::distributions::Distribution;
use rand::Rng;
use rand_distr::WeightedAliasIndex;

use crate::crystal::Crystals;
use crate::nema_cells::NemaCells;
use crate::phantom::{nema_sphere_centre, Phantom, NEMA_SPHERES_MM};

/// Sphere sampling for the NEMA mixture.
#[derive(Clone, Debug)]
struct Nema {
    cells: NemaCells,
    /// Share of the activity that is the spheres' excess over the background.
    sphere_share: f64,
    /// Cumulative sphere volumes (diameter cubed), for picking a sphere.
    cumulative_d3: [f64; 6],
}

/// A sampler of annihilation points.
#[derive(Clone, Debug)]
pub struct Points {
    phantom: Phantom,
    /// Half-extents of the sampling box, clipped to the cylinder and the phantom.
    half: (f64, f64, f64),
    /// Points farther from the axis hold no activity (or lie outside the detector).
    max_radius: f64,
    nema: Option<Nema>,
}

impl Points {
    /// The sampler for `phantom` inside `cyl`.
    pub fn new(phantom: Phantom, cyl: &Crystals) -> Self {
        let max_radius = phantom.max_radius().min(cyl.radius);
        let (hx, hy, hz) = phantom.half_extent();
        let half = (hx.min(max_radius), hy.min(max_radius), hz.min(cyl.half_len));
        let nema = (phantom == Phantom::NemaIec && half.2 >= 18.5).then(|| {
            let mut cumulative_d3 = [0.0; 6];
            let mut acc = 0.0;
            for (c, d) in cumulative_d3.iter_mut().zip(NEMA_SPHERES_MM) {
                acc += d * d * d;
                *c = acc;
            }
            Nema {
                cells: NemaCells::new(),
                sphere_share: nema_sphere_share(half.2),
                cumulative_d3,
            }
        });
        Points {
            phantom,
            half,
            max_radius,
            nema,
        }
    }

    /// No sampled point is farther than this from the axis, mm.
    pub fn max_radius(&self) -> f64 {
        self.max_radius
    }

    /// An annihilation point, distributed as the activity inside the cylinder.
    #[inline]
    pub fn sample<R: Rng>(&self, rng: &mut R) -> [f64; 3] {
        if let Some(n) = &self.nema {
            return self.nema_point(n, rng);
        }
        let (hx, hy, hz) = self.half;
        let max = self.phantom.max_activity();
        let r2 = self.max_radius * self.max_radius;
        loop {
            let x = rng.gen_range(-hx..=hx);
            let y = rng.gen_range(-hy..=hy);
            let z = rng.gen_range(-hz..=hz);
            if x * x + y * y < r2 && rng.gen::<f64>() * max < self.phantom.activity(x, y, z) {
                return [x, y, z];
            }
        }
    }

    /// The NEMA phantom as a mixture: the uniform background (activity 1 in the body outside
    /// the lung insert, spheres included) plus the spheres' excess (3 more).
    #[inline]
    fn nema_point<R: Rng>(&self, n: &Nema, rng: &mut R) -> [f64; 3] {
        let hz = self.half.2;
        if rng.gen::<f64>() < n.sphere_share {
            let pick = rng.gen::<f64>() * n.cumulative_d3[5];
            let i = n.cumulative_d3.iter().position(|&c| pick < c).unwrap_or(5);
            return sphere_point(i, rng);
        }
        let (x, y) = n.cells.sample(rng);
        [x, y, (rng.gen::<f64>() * 2.0 - 1.0) * hz]
    }
}

/// Annihilation points drawn in proportion to the activity times a bound `W(r)` that grows
/// with the distance `r` from the axis, each returned with the bound of the piece it came
/// from (a bound at least `W` of every point of that piece).
///
/// A photon sampler that accepts a point and direction with probability `w / W` for an
/// acceptance width `w <= W(r)` ([`crate::photons`]) then samples exactly as with one bound
/// for all points, but a point near the axis, where `w` is small, is proposed with its own
/// small bound instead of the one for the phantom's edge: far fewer draws are wasted.
/// The NEMA phantom's pieces are its background cells (drawn in proportion to their area
/// times their bound; a point that falls outside the background starts the draw again from
/// the choice of piece) and its six spheres (the excess activity times the volume times the
/// bound); other phantoms are one piece with the bound at their largest radius.
#[derive(Clone, Debug)]
pub struct Weighted {
    pieces: Pieces,
}

#[derive(Clone, Debug)]
enum Pieces {
    Nema {
        cells: NemaCells,
        /// Half the axial extent of the background, mm.
        half_z: f64,
        /// Background cell `i` (index `i`) or sphere `k` (index `cells + k`), in proportion
        /// to its mass times its bound.
        pick: WeightedAliasIndex<f64>,
        /// The bound of each piece, in the same order.
        bound: Vec<f64>,
    },
    One {
        points: Points,
        bound: f64,
    },
}

impl Points {
    /// The sampler of `self`'s points weighted by `bound` (which must not decrease with the
    /// radius it is given).
    pub fn weighted(&self, bound: impl Fn(f64) -> f64) -> Weighted {
        let Some(n) = &self.nema else {
            return Weighted {
                pieces: Pieces::One {
                    points: self.clone(),
                    bound: bound(self.max_radius),
                },
            };
        };
        let mut bounds: Vec<f64> = (0..n.cells.len())
            .map(|i| bound(n.cells.far_radius(i).min(self.max_radius)))
            .collect();
        bounds.extend((0..NEMA_SPHERES_MM.len()).map(|k| {
            let (cx, cy) = nema_sphere_centre(k);
            bound((cx.hypot(cy) + NEMA_SPHERES_MM[k] / 2.0).min(self.max_radius))
        }));
        // Mass of each piece times its bound: a background cell's over its whole area (the
        // points outside the background are drawn and rejected), activity 1, length 2 hz;
        // a sphere's excess activity 3 over its volume.
        let cell_mass = crate::nema_cells::CELL_MM * crate::nema_cells::CELL_MM * 2.0 * self.half.2;
        let sphere_mass = |d: f64| 3.0 * 4.0 / 3.0 * std::f64::consts::PI * (d / 2.0).powi(3);
        let weights = bounds
            .iter()
            .enumerate()
            .map(|(i, b)| match i.checked_sub(n.cells.len()) {
                None => cell_mass * b,
                Some(k) => sphere_mass(NEMA_SPHERES_MM[k]) * b,
            })
            .collect();
        Weighted {
            pieces: Pieces::Nema {
                cells: n.cells.clone(),
                half_z: self.half.2,
                pick: WeightedAliasIndex::new(weights).expect("positive piece weights"),
                bound: bounds,
            },
        }
    }
}

impl Weighted {
    /// A point and its piece's bound.
    #[inline]
    pub fn sample<R: Rng>(&self, rng: &mut R) -> ([f64; 3], f64) {
        let (cells, half_z, pick, bound) = match &self.pieces {
            Pieces::Nema {
                cells,
                half_z,
                pick,
                bound,
            } => (cells, *half_z, pick, bound),
            Pieces::One { points, bound } => return (points.sample(rng), *bound),
        };
        loop {
            let i = pick.sample(rng);
            match i.checked_sub(cells.len()) {
                None => {
                    // Outside the background: draw the piece again.
                    if let Some((x, y)) = cells.sample_in(i, rng) {
                        let z = (rng.gen::<f64>() * 2.0 - 1.0) * half_z;
                        return ([x, y, z], bound[i]);
                    }
                }
                Some(k) => return (sphere_point(k, rng), bound[i]),
            }
        }
    }
}

/// A point uniform in NEMA sphere `k`.
#[inline]
fn sphere_point<R: Rng>(k: usize, rng: &mut R) -> [f64; 3] {
    let r = NEMA_SPHERES_MM[k] / 2.0;
    let (cx, cy) = nema_sphere_centre(k);
    loop {
        let d: [f64; 3] = std::array::from_fn(|_| rng.gen_range(-r..r));
        if d[0] * d[0] + d[1] * d[1] + d[2] * d[2] <= r * r {
            return [cx + d[0], cy + d[1], d[2]];
        }
    }
}

/// Share of the NEMA phantom's activity (axially clipped to `|z| <= hz`) that is the
/// spheres' excess over the background.
fn nema_sphere_share(hz: f64) -> f64 {
    use std::f64::consts::PI;
    let area = PI * 147.0 * 147.0 / 2.0 + 140.0 * 77.0 + PI * 77.0 * 77.0 / 2.0 - PI * 25.0 * 25.0;
    let background = area * 2.0 * hz;
    let spheres: f64 = NEMA_SPHERES_MM
        .iter()
        .map(|d| 4.0 / 3.0 * PI * (d / 2.0).powi(3))
        .sum();
    3.0 * spheres / (background + 3.0 * spheres)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::Scanner;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn nema_mixture_sampling_matches_the_activity() {
        // The share of annihilations inside the largest sphere, and in the upper half of
        // the body, against plain rejection sampling of the activity function.
        let s = Scanner::demo();
        let pts = Points::new(Phantom::NemaIec, &Crystals::new(&s));
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(98);
        let n = 400_000;
        let (cx, cy) = nema_sphere_centre(5);
        let in_sphere =
            |p: [f64; 3]| (p[0] - cx).powi(2) + (p[1] - cy).powi(2) + p[2] * p[2] <= 18.5 * 18.5;
        let mut fast = [0.0; 3];
        for _ in 0..n {
            let p = pts.sample(&mut rng);
            assert!(Phantom::NemaIec.activity(p[0], p[1], p[2]) > 0.0);
            assert!(p[2].abs() <= 48.0);
            fast[0] += in_sphere(p) as u32 as f64 / n as f64;
            fast[1] += (p[1] > 50.0) as u32 as f64 / n as f64;
            fast[2] += (p[2] > 20.0) as u32 as f64 / n as f64;
        }
        let mut slow = [0.0; 3];
        let mut accepted = 0;
        while accepted < n {
            let x = rng.gen_range(-147.0..147.0);
            let y = rng.gen_range(-147.0..147.0);
            let z = rng.gen_range(-48.0..48.0);
            if rng.gen::<f64>() * 4.0 < Phantom::NemaIec.activity(x, y, z) {
                accepted += 1;
                slow[0] += in_sphere([x, y, z]) as u32 as f64 / n as f64;
                slow[1] += (y > 50.0) as u32 as f64 / n as f64;
                slow[2] += (z > 20.0) as u32 as f64 / n as f64;
            }
        }
        for k in 0..3 {
            let sigma = ((fast[k] * (1.0 - fast[k]) + slow[k] * (1.0 - slow[k])) / n as f64).sqrt();
            assert!(
                (fast[k] - slow[k]).abs() < 5.0 * sigma + 1e-4,
                "measure {k}: {} vs {}",
                fast[k],
                slow[k]
            );
        }
    }

    #[test]
    fn other_phantoms_stay_inside_their_radius() {
        let s = Scanner::demo();
        let cyl = Crystals::new(&s);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        for ph in [
            Phantom::Cylinder { radius_mm: 100.0 },
            Phantom::SheppLogan {
                half_size_mm: 110.0,
            },
        ] {
            let pts = Points::new(ph, &cyl);
            for _ in 0..10_000 {
                let p = pts.sample(&mut rng);
                assert!(ph.activity(p[0], p[1], p[2]) > 0.0);
                assert!(p[0].hypot(p[1]) <= pts.max_radius());
                assert!(p[2].abs() <= cyl.half_len);
            }
        }
    }

    #[test]
    fn weighted_points_thinned_by_their_bound_follow_the_activity() {
        // Points drawn in proportion to activity times bound, each kept with probability
        // (least bound) / (its bound), are distributed as the activity: shares inside the
        // largest sphere, beyond 100 mm of the axis, above y = 50 and above z = 20 against
        // the plain sampler's.
        let s = Scanner::demo();
        let pts = Points::new(Phantom::NemaIec, &Crystals::new(&s));
        let bound = |r: f64| 1.0 + r * r / 1000.0;
        let weighted = pts.weighted(bound);
        let least = bound(0.0);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(99);
        let n = 300_000;
        let (cx, cy) = nema_sphere_centre(5);
        let measures = |p: [f64; 3]| {
            [
                (p[0] - cx).powi(2) + (p[1] - cy).powi(2) + p[2] * p[2] <= 18.5 * 18.5,
                p[0].hypot(p[1]) > 100.0,
                p[1] > 50.0,
                p[2] > 20.0,
            ]
        };
        let (mut thinned, mut plain) = ([0.0; 4], [0.0; 4]);
        let mut kept = 0;
        while kept < n {
            let (p, b) = weighted.sample(&mut rng);
            assert!(b >= bound(p[0].hypot(p[1])) - 1e-9, "{p:?}: bound {b}");
            if rng.gen::<f64>() * b < least {
                kept += 1;
                for (t, m) in thinned.iter_mut().zip(measures(p)) {
                    *t += m as u32 as f64 / n as f64;
                }
            }
        }
        for _ in 0..n {
            for (t, m) in plain.iter_mut().zip(measures(pts.sample(&mut rng))) {
                *t += m as u32 as f64 / n as f64;
            }
        }
        for k in 0..4 {
            let (a, b) = (thinned[k], plain[k]);
            let sigma = ((a * (1.0 - a) + b * (1.0 - b)) / n as f64).sqrt();
            assert!(
                (a - b).abs() < 5.0 * sigma + 1e-4,
                "measure {k}: {a} vs {b}"
            );
        }
    }
}
