//! `pet-sim`: a Monte Carlo source of coincidence events.
//!
//! Each true event is an annihilation point sampled from a [`Phantom`] within the scanner's
//! axial field of view ([`crate::emission`]), two back-to-back 511 keV photons in a uniformly
//! random direction, and their intersections with the detector cylinder
//! ([`crate::crystal`]); only directions in which both photons are detected are drawn
//! ([`crate::photons`] samples them exactly). A `scatter_fraction` of true events
//! Compton-scatters one photon at the annihilation point (angle from the Klein-Nishina
//! distribution, energy `511 / (2 - cos theta)` keV); the unscattered photon is drawn
//! detected, the scattered one is drawn again until it is too. Random coincidences pair two
//! uncorrelated singles (two independent annihilations, one detected photon each); their rate
//! is `window * singles_rate^2`, and the same rate of them is emitted again as a
//! delayed-window stream. Energies are blurred with a Gaussian of the given FWHM, time of
//! flight with the given timing resolution (randoms get a flat time difference across the
//! window). Event time stamps follow a Poisson process at `rate` events per second of
//! acquisition time. The stream is a pure function of the seed (xoshiro256++; normal and
//! exponential variates by the ziggurat method).

use rand::{Rng, SeedableRng};
use rand_distr::{Exp1, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use crate::crystal::{Crystals, Hit};
use crate::emission::Points;
use crate::error::GeometryError;
use crate::geometry::Scanner;
use crate::listmode::Event;
use crate::phantom::Phantom;
use crate::photons::{azimuth, two_uniforms, Photons};

const C_MM_PER_PS: f64 = 0.299_792_458;

/// Parameters of a simulation.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// The activity distribution.
    pub phantom: Phantom,
    /// Seed of the random stream.
    pub seed: u64,
    /// Detected coincidences per second of acquisition time (prompts + delayeds).
    pub rate: f64,
    /// Fraction of true events with one scattered photon.
    pub scatter_fraction: f64,
    /// Singles rate of the whole scanner per second (sets the randoms rate).
    pub singles_rate: f64,
    /// Coincidence window, ns.
    pub window_ns: f64,
    /// Energy resolution, FWHM as a fraction of the energy.
    pub energy_fwhm: f64,
    /// Timing resolution, FWHM in ps.
    pub tof_fwhm_ps: f64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            phantom: Phantom::NemaIec,
            seed: 1,
            rate: 4.0e6,
            scatter_fraction: 0.3,
            singles_rate: 1.0e7,
            window_ns: 4.0,
            energy_fwhm: 0.12,
            tof_fwhm_ps: 400.0,
        }
    }
}

impl SimConfig {
    /// Randoms per second in the prompt window (and again in the delayed window).
    pub fn randoms_rate(&self) -> f64 {
        self.window_ns * 1e-9 * self.singles_rate * self.singles_rate
    }
}

/// What the source has emitted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SimCounts {
    /// Unscattered true coincidences.
    pub trues: u64,
    /// Trues with one scattered photon.
    pub scatters: u64,
    /// Random coincidences in the prompt window.
    pub randoms: u64,
    /// Coincidences in the delayed window.
    pub delayeds: u64,
}

impl SimCounts {
    /// All events emitted.
    pub fn total(&self) -> u64 {
        self.trues + self.scatters + self.randoms + self.delayeds
    }
}

/// A deterministic event source.
pub struct Source {
    cfg: SimConfig,
    photons: Photons,
    p_true: f64,
    /// `(R - r_max)^2`: the square of the least in-plane distance from an emission point to
    /// the cylinder.
    side2: f64,
    rng: Xoshiro256PlusPlus,
    time_us: f64,
    counts: SimCounts,
}

impl Source {
    /// A source for a scanner.
    pub fn new(scanner: &Scanner, cfg: SimConfig) -> Result<Self, GeometryError> {
        scanner.validate()?;
        let r = cfg.randoms_rate();
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        if !(cfg.rate.is_finite() && cfg.rate > 0.0) || 2.0 * r >= cfg.rate {
            return Err(GeometryError::Invalid(format!(
                "rate {} must be positive and above twice the randoms rate {r}",
                cfg.rate
            )));
        }
        let all_ok = ok(cfg.scatter_fraction)
            && cfg.scatter_fraction <= 1.0
            && ok(cfg.singles_rate)
            && ok(cfg.energy_fwhm)
            && ok(cfg.tof_fwhm_ps)
            && ok(cfg.window_ns);
        if !all_ok {
            return Err(GeometryError::Invalid(
                "scatter fraction must be in [0, 1]; singles rate, resolutions and window finite and non-negative".into(),
            ));
        }
        let cyl = Crystals::new(scanner);
        let points = Points::new(cfg.phantom, &cyl);
        Ok(Source {
            p_true: 1.0 - 2.0 * r / cfg.rate,
            side2: (cyl.radius - points.max_radius()).max(0.0).powi(2),
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed),
            photons: Photons::new(cyl, &points),
            cfg,
            time_us: 0.0,
            counts: SimCounts::default(),
        })
    }

    /// Counts emitted so far.
    pub fn counts(&self) -> SimCounts {
        self.counts
    }

    /// Acquisition time reached, seconds.
    pub fn time_s(&self) -> f64 {
        self.time_us * 1e-6
    }

    /// Appends `n` events to `out`.
    pub fn fill(&mut self, out: &mut Vec<Event>, n: usize) {
        out.reserve(n);
        for _ in 0..n {
            let e = self.next_event();
            out.push(e);
        }
    }

    /// Writes `out.len() / 16` events as list-mode records into `out`.
    pub fn fill_records(&mut self, out: &mut [u8]) {
        for rec in out.chunks_exact_mut(crate::listmode::RECORD_LEN) {
            rec.copy_from_slice(&self.next_event().encode());
        }
    }

    #[inline]
    fn gauss(&mut self) -> f64 {
        self.rng.sample::<f64, _>(StandardNormal)
    }

    fn energy(&mut self, kev: f64) -> u16 {
        let sigma = self.cfg.energy_fwhm / 2.354_82;
        let e = kev * (1.0 + sigma * self.gauss());
        // Round half up by truncation of a non-negative value (no libm call).
        ((e * 10.0).clamp(0.0, 65535.0) + 0.5) as u16
    }

    /// Klein-Nishina scattering angle cosine for 511 keV photons (rejection from the
    /// uniform, both numbers from one 64-bit draw).
    fn kn_cos(&mut self) -> f64 {
        loop {
            let (x, y) = two_uniforms(&mut self.rng);
            let c = x * 2.0 - 1.0;
            let p = 1.0 / (2.0 - c);
            let f = p * p * (p + 1.0 / p - (1.0 - c * c));
            if y * 2.0 < f {
                return c;
            }
        }
    }

    /// `u` tilted by `theta` (`cos theta = cos_t`) at a uniformly random azimuth about it.
    #[cfg(test)]
    fn rotate(&mut self, u: [f64; 3], cos_t: f64) -> [f64; 3] {
        // An orthonormal basis around u, then tilt by theta at a random azimuth.
        let w = if u[2].abs() < 0.9 {
            [0.0, 0.0, 1.0]
        } else {
            [1.0, 0.0, 0.0]
        };
        let mut v = [
            u[1] * w[2] - u[2] * w[1],
            u[2] * w[0] - u[0] * w[2],
            u[0] * w[1] - u[1] * w[0],
        ];
        let n = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
        v.iter_mut().for_each(|x| *x /= n);
        let k = [
            u[1] * v[2] - u[2] * v[1],
            u[2] * v[0] - u[0] * v[2],
            u[0] * v[1] - u[1] * v[0],
        ];
        let sin_t = (1.0 - cos_t * cos_t).max(0.0).sqrt();
        let (ca, sa) = azimuth(&mut self.rng);
        std::array::from_fn(|i| cos_t * u[i] + sin_t * (ca * v[i] + sa * k[i]))
    }

    fn clamp_tof(ps: f64) -> i16 {
        // Round half up by truncation of a non-negative value (no libm call).
        let shifted = ps.clamp(i16::MIN as f64, i16::MAX as f64) - i16::MIN as f64 + 0.5;
        (shifted as i32 + i16::MIN as i32) as i16
    }

    /// A true coincidence with one photon scattered: photon B drawn detected, photon A
    /// (scattered) drawn until it is detected too. Returns A, B and A's energy in keV.
    ///
    /// A leaves along `w = -u_B` tilted by `theta` at a uniform azimuth. B's direction is
    /// `(e sin_B, cos_B)` with `e` its in-plane unit vector, so `v = (e_y, -e_x, 0)` and
    /// `k = w x v = (-cos_B e_x, -cos_B e_y, sin_B)` complete an orthonormal basis about `w`
    /// without a square root. A's axial component is known before the rest of it: A
    /// reaches the side of the cylinder only if its `|cot|` is at most
    /// `(h -+ p_z) / (R - r_max)` (the in-plane distance is at least `R - r_max`), so a
    /// draw that fails that test is redrawn before A is traced. Every test is a condition
    /// on independent draws, so the order in which they are made does not bias the events.
    fn scattered(&mut self) -> (Hit, Hit, f64) {
        let h = self.photons.crystals().half_len;
        loop {
            let c = self.kn_cos();
            let b = self.photons.single(&mut self.rng);
            let (ca, sa) = azimuth(&mut self.rng);
            let sin_t = (1.0 - c * c).max(0.0).sqrt();
            let (ex, ey) = b.e;
            let (cos_b, sin_b) = (b.u[2], b.sin);
            let uz = -c * cos_b + sin_t * sa * sin_b;
            let lim = if uz >= 0.0 { h - b.p[2] } else { h + b.p[2] };
            let lim2 = lim * lim;
            // A hair of slack, so that rounding never rejects a photon `reach` would keep.
            if uz * uz * (self.side2 + lim2) > lim2 * (1.0 + 1e-9) {
                continue;
            }
            let ua = [
                -c * ex * sin_b + sin_t * (ca * ey - sa * cos_b * ex),
                -c * ey * sin_b + sin_t * (-ca * ex - sa * cos_b * ey),
                uz,
            ];
            let Some(a) = self.photons.crystals().reach(b.p, ua) else {
                continue;
            };
            let hb = self.photons.hit_of(&b);
            if a.det == hb.det && a.ring == hb.ring {
                continue;
            }
            return (a, hb, 511.0 / (2.0 - c));
        }
    }

    fn next_event(&mut self) -> Event {
        let dt: f64 = self.rng.sample::<f64, _>(Exp1) / self.cfg.rate;
        self.time_us += dt * 1e6;
        let time_us = (self.time_us as u64 & 0x7FFF_FFFF) as u32;
        let kind: f64 = self.rng.gen();
        if kind < self.p_true {
            let sigma_tof = self.cfg.tof_fwhm_ps / 2.354_82;
            let scatter = self.rng.gen::<f64>() < self.cfg.scatter_fraction;
            let (a, b, ea) = if scatter {
                self.counts.scatters += 1;
                self.scattered()
            } else {
                self.counts.trues += 1;
                let (a, b) = self.photons.pair(&mut self.rng);
                (a, b, 511.0)
            };
            let tof = (a.dist - b.dist) / C_MM_PER_PS + sigma_tof * self.gauss();
            return Event {
                det_a: a.det,
                det_b: b.det,
                ring_a: a.ring,
                ring_b: b.ring,
                energy_a: self.energy(ea),
                energy_b: self.energy(511.0),
                tof_ps: Self::clamp_tof(tof),
                time_us,
                delayed: false,
            };
        }
        let delayed = kind >= self.p_true + (1.0 - self.p_true) / 2.0;
        let (a, b) = loop {
            let a = self.photons.single(&mut self.rng);
            let b = self.photons.single(&mut self.rng);
            let (a, b) = (self.photons.hit_of(&a), self.photons.hit_of(&b));
            if a.det != b.det {
                break (a, b);
            }
        };
        let half_window_ps = self.cfg.window_ns * 500.0;
        let tof = (self.rng.gen::<f64>() * 2.0 - 1.0) * half_window_ps;
        if delayed {
            self.counts.delayeds += 1;
        } else {
            self.counts.randoms += 1;
        }
        Event {
            det_a: a.det,
            det_b: b.det,
            ring_a: a.ring,
            ring_b: b.ring,
            energy_a: self.energy(511.0),
            energy_b: self.energy(511.0),
            tof_ps: Self::clamp_tof(tof),
            time_us,
            delayed,
        }
    }
}

/// Paces a producer at a fixed number of events per second of wall-clock time.
#[derive(Debug)]
pub struct Pacer {
    rate: f64,
    start: std::time::Instant,
    emitted: u64,
}

impl Pacer {
    /// A pacer for `rate` events per second.
    pub fn new(rate: f64) -> Self {
        Pacer {
            rate,
            start: std::time::Instant::now(),
            emitted: 0,
        }
    }

    /// Sleeps until `n` more events may be emitted, then counts them. A rate that is not a
    /// positive number does not wait; a time past what a `Duration` holds waits as long as
    /// one can.
    pub fn wait(&mut self, n: u64) {
        self.wait_while(n, &|| false);
    }

    /// The most of `n` events that are due within `PACE_HORIZON` (100 ms) from now, at least one:
    /// a producer at a low rate emits a few events at a time instead of waiting for a whole
    /// buffer's worth (4096 events at one per second would be an hour).
    pub fn take(&self, n: u64) -> u64 {
        if self.rate.is_nan() || self.rate <= 0.0 {
            return n;
        }
        let horizon = (self.start.elapsed() + PACE_HORIZON).as_secs_f64() * self.rate;
        let due = if horizon >= u64::MAX as f64 {
            u64::MAX
        } else {
            horizon as u64
        };
        n.min(due.saturating_sub(self.emitted)).max(1)
    }

    /// As [`wait`](Self::wait), sleeping at most `PACE_SLICE` (50 ms) at a time and giving up
    /// (counting nothing, `false`) once `stop` says so; `true` when the `n` events may go.
    pub fn wait_while(&mut self, n: u64, stop: &dyn Fn() -> bool) -> bool {
        let emitted = self.emitted.saturating_add(n);
        if !(self.rate.is_nan() || self.rate <= 0.0) {
            let due = std::time::Duration::try_from_secs_f64(emitted as f64 / self.rate)
                .unwrap_or(std::time::Duration::MAX);
            loop {
                let now = self.start.elapsed();
                if due <= now {
                    break;
                }
                if stop() {
                    return false;
                }
                std::thread::sleep((due - now).min(PACE_SLICE));
            }
        }
        self.emitted = emitted;
        true
    }
}

/// How far ahead a paced producer takes events ([`Pacer::take`]).
pub const PACE_HORIZON: std::time::Duration = std::time::Duration::from_millis(100);

/// The longest a paced producer sleeps before it looks whether it should stop.
pub const PACE_SLICE: std::time::Duration = std::time::Duration::from_millis(50);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_pacer_takes_a_few_events_and_hears_a_stop() {
        let mut p = Pacer::new(1.0);
        // One event per second: not a buffer's worth at once.
        assert_eq!(p.take(4096), 1);
        assert!(p.wait_while(1, &|| false), "the first event is due at 1 s");
        // The next is due a second later; a stop ends the wait within a slice.
        let t = std::time::Instant::now();
        assert!(!p.wait_while(1, &|| t.elapsed() > PACE_SLICE));
        // A fast one takes the whole buffer.
        assert_eq!(Pacer::new(1e9).take(4096), 4096);
    }

    #[test]
    fn same_seed_same_stream_other_seed_other_stream() {
        let s = Scanner::demo();
        let run = |seed| {
            let mut src = Source::new(
                &s,
                SimConfig {
                    seed,
                    ..Default::default()
                },
            )
            .unwrap();
            let mut v = Vec::new();
            src.fill(&mut v, 2000);
            v
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn mix_of_event_kinds_follows_the_rates() {
        let s = Scanner::demo();
        let cfg = SimConfig::default();
        let mut src = Source::new(&s, cfg.clone()).unwrap();
        let mut v = Vec::new();
        src.fill(&mut v, 40_000);
        let c = src.counts();
        assert_eq!(c.total(), 40_000);
        let frac_d = c.delayeds as f64 / 40_000.0;
        let expect_d = cfg.randoms_rate() / cfg.rate;
        assert!((frac_d - expect_d).abs() < 0.01, "{frac_d} vs {expect_d}");
        assert_eq!(v.iter().filter(|e| e.delayed).count() as u64, c.delayeds);
        let sf = c.scatters as f64 / (c.trues + c.scatters) as f64;
        assert!((sf - cfg.scatter_fraction).abs() < 0.02, "{sf}");
        // time stamps follow the rate: 40k events at 4 M/s is about 10 ms
        let t = v.last().unwrap().time_us as f64;
        assert!((t - 10_000.0).abs() < 500.0, "{t}");
        assert!(v
            .iter()
            .all(|e| (e.ring_a as u32) < s.rings && (e.det_a as u32) < s.detectors_per_ring));
    }

    #[test]
    fn scattered_events_match_brute_force_sampling() {
        // Ring difference and transaxial detector distance of scattered coincidences
        // against isotropic emission, Klein-Nishina scattering of A, and both photons traced.
        let s = Scanner::demo();
        let mut src = Source::new(&s, SimConfig::default()).unwrap();
        let points = Points::new(Phantom::NemaIec, &Crystals::new(&s));
        let n = 60_000;
        let key = |a: Hit, b: Hit| {
            let dd = (a.det as i32 - b.det as i32).rem_euclid(256);
            (
                a.ring.abs_diff(b.ring) as usize,
                dd.min(256 - dd) as usize / 8,
            )
        };
        let (mut fast, mut slow) = ([[0f64; 16]; 2], [[0f64; 16]; 2]);
        for _ in 0..n {
            let (a, b, _) = src.scattered();
            let (r, d) = key(a, b);
            fast[0][r] += 1.0 / n as f64;
            fast[1][d.min(15)] += 1.0 / n as f64;
        }
        let mut got = 0;
        while got < n {
            let p = points.sample(&mut src.rng);
            let c: f64 = src.rng.gen_range(-1.0..1.0);
            let (ex, ey) = azimuth(&mut src.rng);
            let sin = (1.0 - c * c).sqrt();
            let ub = [ex * sin, ey * sin, c];
            let cos_t = src.kn_cos();
            let ua = src.rotate(ub.map(|x| -x), cos_t);
            let cyl = src.photons.crystals();
            if let (Some(a), Some(b)) = (cyl.reach(p, ua), cyl.reach(p, ub)) {
                if a.det == b.det && a.ring == b.ring {
                    continue;
                }
                let (r, d) = key(a, b);
                slow[0][r] += 1.0 / n as f64;
                slow[1][d.min(15)] += 1.0 / n as f64;
                got += 1;
            }
        }
        for k in 0..2 {
            for i in 0..16 {
                let (f, w) = (fast[k][i], slow[k][i]);
                let sigma = ((f * (1.0 - f) + w * (1.0 - w)) / n as f64).sqrt();
                assert!((f - w).abs() <= 5.0 * sigma + 2e-4, "{k} {i}: {f} vs {w}");
            }
        }
    }

    #[test]
    fn rejects_impossible_rates() {
        let cfg = SimConfig {
            rate: 1000.0,
            ..Default::default()
        };
        assert!(Source::new(&Scanner::demo(), cfg).is_err());
    }
}
