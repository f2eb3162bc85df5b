//! Annihilation points: samples of a [`Phantom`]'s activity inside the detector cylinder.
//!
//! The NEMA IEC phantom is sampled as a mixture (the uniform background from
//! [`NemaCells`] plus the spheres' excess activity); other phantoms by rejection from their
//! bounding box, clipped to the cylinder and to the phantom's [`Phantom::max_radius`].

use rand::Rng;

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
            let r = NEMA_SPHERES_MM[i] / 2.0;
            let (cx, cy) = nema_sphere_centre(i);
            loop {
                let d: [f64; 3] = std::array::from_fn(|_| rng.gen_range(-r..r));
                if d[0] * d[0] + d[1] * d[1] + d[2] * d[2] <= r * r {
                    return [cx + d[0], cy + d[1], d[2]];
                }
            }
        }
        let (x, y) = n.cells.sample(rng);
        [x, y, (rng.gen::<f64>() * 2.0 - 1.0) * hz]
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
}
