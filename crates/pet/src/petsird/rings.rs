//! A PETSIRD scanner as offhost's ring scanner, when it is one: one module type, every
//! detecting element's centre (module transform after element transform, applied to the
//! element box's centre) on one cylinder, the centres in equally spaced rings of the same
//! number of crystals, equally spaced in angle and aligned from ring to ring. Anything else is
//! an error saying which condition fails; nothing is guessed.
//!
//! Ring `r` is the `r`-th lowest `z`; detector `d` is the crystal at angle
//! `theta_0 + 2 pi d / N`, `theta_0` the angle of detection bin 0's crystal (offhost places
//! detector `d` at `2 pi d / N`, so its images are turned by `-theta_0`). The sinogram
//! sampling is the demo scanner's rule: `N/2` views and `N/2` radial bins of `pi R / N`.

use super::header::{apply, Header};
use crate::error::GeometryError;
use crate::geometry::Scanner;
use crate::listmode::Event;

/// Most detecting elements a ring scanner may have (256 rings x 65534).
const MAX_CRYSTALS: u64 = 256 * 65_534;
/// Most detection bins (crystals x energy bins) mapped.
const MAX_BINS: u64 = 1 << 28;
/// Positions agree within this many millimetres.
const TOL_MM: f64 = 0.01;

/// Detection bins of module type 0 -> ring, detector and energy.
#[derive(Clone, Debug)]
pub struct RingMap {
    /// `(ring, detector, energy in 0.1 keV)` per detection bin.
    bins: Vec<(u8, u16, u16)>,
}

fn not_rings(what: String) -> GeometryError {
    GeometryError::Invalid(format!("PETSIRD geometry not expressible as rings: {what}"))
}

impl RingMap {
    /// The ring scanner of `h` and its detection-bin map, or why there is none.
    pub fn new(h: &Header) -> Result<(Scanner, RingMap), GeometryError> {
        if h.module_types.len() != 1 {
            return Err(not_rings(format!(
                "{} module types (one is read)",
                h.module_types.len()
            )));
        }
        let m = &h.module_types[0];
        let n_cr = (m.modules.len() as u64) * (m.elements.len() as u64);
        if n_cr == 0 || n_cr > MAX_CRYSTALS {
            return Err(not_rings(format!(
                "{n_cr} detecting elements (1 to {MAX_CRYSTALS})"
            )));
        }
        let edges = h.energy_edges.first().map_or(&[][..], |e| &e[..]);
        if edges.len() < 2 {
            return Err(not_rings("no event energy bins for module type 0".into()));
        }
        let mut c0 = [0f64; 3];
        for c in &m.element_box {
            for i in 0..3 {
                c0[i] += f64::from(c[i]) / 8.0;
            }
        }
        let pts: Vec<[f64; 3]> = m
            .modules
            .iter()
            .flat_map(|mt| m.elements.iter().map(move |et| apply(mt, apply(et, c0))))
            .collect();
        let radius = |p: &[f64; 3]| p[0].hypot(p[1]);
        let (rmin, rmax) = pts
            .iter()
            .map(radius)
            .fold((f64::MAX, 0f64), |(a, b), r| (a.min(r), b.max(r)));
        if rmax - rmin > TOL_MM + 1e-4 * rmax || rmin <= 0.0 {
            return Err(not_rings(format!(
                "crystal centres lie at radii {rmin:.3} to {rmax:.3} mm (more than one layer, or not a cylinder)"
            )));
        }
        let mut zs: Vec<f64> = pts.iter().map(|p| p[2]).collect();
        zs.sort_by(f64::total_cmp);
        zs.dedup_by(|a, b| (*a - *b).abs() <= TOL_MM);
        let rings = zs.len();
        if rings > 256 {
            return Err(not_rings(format!(
                "{rings} axial positions (at most 256 rings)"
            )));
        }
        let spacing = if rings > 1 { zs[1] - zs[0] } else { 0.0 };
        for (i, w) in zs.windows(2).enumerate() {
            if ((w[1] - w[0]) - spacing).abs() > TOL_MM {
                return Err(not_rings(format!(
                    "rings {i} and {} are {:.3} mm apart, rings 0 and 1 {spacing:.3} mm",
                    i + 1,
                    w[1] - w[0]
                )));
            }
        }
        if !n_cr.is_multiple_of(rings as u64) {
            return Err(not_rings(format!("{n_cr} crystals in {rings} rings")));
        }
        let n = n_cr / rings as u64;
        if !(4..=65_534).contains(&n) || !n.is_multiple_of(2) {
            return Err(not_rings(format!(
                "{n} crystals per ring (even, 4 to 65534)"
            )));
        }
        let two_pi = std::f64::consts::TAU;
        let theta0 = pts[0][1].atan2(pts[0][0]);
        let mut seen = vec![false; n_cr as usize];
        let mut crystal = Vec::with_capacity(pts.len());
        for (k, p) in pts.iter().enumerate() {
            let ring = zs
                .iter()
                .position(|z| (z - p[2]).abs() <= TOL_MM)
                .expect("every z is near a ring");
            let step = (p[1].atan2(p[0]) - theta0).rem_euclid(two_pi) * n as f64 / two_pi;
            let d = step.round();
            if (step - d).abs() > 0.01 {
                return Err(not_rings(format!(
                    "crystal {k} lies {step:.3} steps of 2 pi / {n} from crystal 0 (not on the ring's grid)"
                )));
            }
            let d = (d as u64 % n) as usize;
            let slot = ring * n as usize + d;
            if std::mem::replace(&mut seen[slot], true) {
                return Err(not_rings(format!(
                    "two crystals at ring {ring}, detector {d} (crystal {k})"
                )));
            }
            crystal.push((ring as u8, d as u16));
        }
        let kev10 = |i: usize| {
            ((f64::from(edges[i]) + f64::from(edges[i + 1])) * 5.0)
                .round()
                .clamp(0.0, 65535.0) as u16
        };
        let n_en = edges.len() - 1;
        if (n_en as u64).saturating_mul(n_cr) > MAX_BINS {
            return Err(not_rings(format!(
                "{n_cr} crystals x {n_en} energy bins exceed {MAX_BINS} detection bins"
            )));
        }
        let bins = crystal
            .iter()
            .flat_map(|&(r, d)| (0..n_en).map(move |e| (r, d, kev10(e))))
            .collect();
        let r = (rmin + rmax) / 2.0;
        let box_z = m
            .element_box
            .iter()
            .map(|c| f64::from(c[2]))
            .fold((f64::MAX, f64::MIN), |(a, b), z| (a.min(z), b.max(z)));
        let scanner = Scanner {
            name: if h.model_name.is_empty() {
                "petsird".into()
            } else {
                h.model_name.clone()
            },
            rings: rings as u32,
            detectors_per_ring: n as u32,
            ring_spacing_mm: if rings > 1 {
                spacing
            } else {
                (box_z.1 - box_z.0).max(TOL_MM)
            },
            crystal_radius_mm: r,
            radial_bins: (n / 2) as u32,
            views: (n / 2) as u32,
            bin_size_mm: std::f64::consts::PI * r / n as f64,
            max_ring_difference: rings as u32 - 1,
            span: 1,
        };
        scanner.validate()?;
        Ok((scanner, RingMap { bins }))
    }

    /// Detection bins of module type 0.
    pub fn len(&self) -> usize {
        self.bins.len()
    }

    /// Whether there are no detection bins.
    pub fn is_empty(&self) -> bool {
        self.bins.is_empty()
    }

    /// The event of two detection bins, or `None` when a bin is past the scanner's.
    pub fn event(&self, bins: [u32; 2], delayed: bool, time_ms: u32) -> Option<Event> {
        let (ra, da, ea) = *self.bins.get(bins[0] as usize)?;
        let (rb, db, eb) = *self.bins.get(bins[1] as usize)?;
        Some(Event {
            det_a: da,
            det_b: db,
            ring_a: ra,
            ring_b: rb,
            energy_a: ea,
            energy_b: eb,
            tof_ps: 0,
            time_us: time_ms.saturating_mul(1000) & 0x7FFF_FFFF,
            delayed,
        })
    }
}
