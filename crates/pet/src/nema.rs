//! Image quality of the NEMA IEC body phantom as NEMA NU 2 prescribes: contrast recovery of
//! the hot spheres and background variability.
//!
//! On the slice through the spheres' centres (`z = 0`, [`crate::Phantom::NemaIec`]) a circular
//! ROI of each sphere's inner diameter is drawn on the sphere (`C_H`, its mean). Twelve
//! background ROIs of each sphere size are drawn on that slice and on the slices nearest
//! `z = -2, -1, +1, +2` cm (60 per size); `C_B` is the mean and `SD_B` the standard deviation
//! (`n - 1`) of those 60 ROI means. Then `CR = (C_H / C_B - 1) / (a_H / a_B - 1)` (the
//! phantom's ratio `a_H / a_B` is 4) and `BV = SD_B / C_B`, both in percent. ROIs weigh each
//! voxel by the fraction of it inside the circle (4 x 4 sub-samples). The twelve background
//! centres (concentric for every size) keep the largest ROI 15 mm or more from the body's
//! edge, from every sphere and from the lung insert (a unit test checks it).

use serde::Serialize;

use crate::phantom::{nema_sphere_centre, NEMA_SPHERES_MM};
use crate::volume::Volume;

/// Centres of the twelve background ROIs, mm (`x` right, `y` up, as [`crate::Phantom`]).
pub const BACKGROUND_ROIS_MM: [(f64, f64); 12] = [
    (-112.0, -2.0),
    (-94.0, -36.0),
    (102.0, -28.0),
    (112.0, 8.0),
    (90.0, 38.0),
    (84.0, 76.0),
    (46.0, 68.0),
    (40.0, 106.0),
    (2.0, 98.0),
    (-34.0, 108.0),
    (-38.0, 70.0),
    (-72.0, 86.0),
];

/// The figures of one sphere.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SphereQuality {
    /// Sphere diameter, mm.
    pub diameter_mm: f64,
    /// Mean of the sphere's ROI.
    pub sphere_mean: f64,
    /// Mean of the 60 background ROIs of its size.
    pub background_mean: f64,
    /// Contrast recovery, percent.
    pub contrast_recovery_pct: f64,
    /// Background variability, percent.
    pub background_variability_pct: f64,
}

/// Why an image cannot be analysed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("NEMA analysis: {0}")]
pub struct NemaError(String);

/// Mean of the circular ROI of diameter `d` mm centred at `(x, y)` mm on slice `k`.
fn roi_mean(v: &Volume, k: usize, (x, y): (f64, f64), d: f64) -> f64 {
    let n = v.n;
    let p = v.pixel_mm;
    let c = (n / 2) as f64;
    let r2 = (d / 2.0) * (d / 2.0);
    let s = v.slice(k);
    let (mut sum, mut w) = (0.0, 0.0);
    let reach = (d / 2.0 / p).ceil() as i64 + 1;
    let (ci, cj) = ((x / p + c).round() as i64, (c - y / p).round() as i64);
    for j in cj - reach..=cj + reach {
        for i in ci - reach..=ci + reach {
            if i < 0 || j < 0 || i >= n as i64 || j >= n as i64 {
                continue;
            }
            let mut f = 0.0;
            for a in 0..4 {
                for b in 0..4 {
                    let px = (i as f64 - c + (b as f64 - 1.5) / 4.0) * p - x;
                    let py = (c - j as f64 - (a as f64 - 1.5) / 4.0) * p - y;
                    if px * px + py * py <= r2 {
                        f += 1.0 / 16.0;
                    }
                }
            }
            if f > 0.0 {
                sum += f * s[j as usize * n + i as usize] as f64;
                w += f;
            }
        }
    }
    if w > 0.0 {
        sum / w
    } else {
        0.0
    }
}

/// Analyses a reconstruction of the simulated NEMA IEC phantom (grid centred on the axis,
/// slices centred on `z = 0`); `ratio` is the spheres' activity over the background's.
pub fn analyse(v: &Volume, ratio: f64) -> Result<Vec<SphereQuality>, NemaError> {
    if v.slices == 0 || v.n < 2 {
        return Err(NemaError("empty image".into()));
    }
    let half_fov = (v.n / 2) as f64 * v.pixel_mm;
    if half_fov < 147.0 {
        return Err(NemaError(format!(
            "the image's field of view ({:.0} mm across) does not hold the phantom's body (294 mm)",
            2.0 * half_fov
        )));
    }
    let mid = (v.slices as f64 - 1.0) / 2.0;
    let slice_at = |z_mm: f64| -> Result<usize, NemaError> {
        let k = (mid + z_mm / v.slice_mm).round();
        if k < 0.0 || k >= v.slices as f64 {
            return Err(NemaError(format!(
                "no slice at z = {z_mm} mm ({} slices of {} mm)",
                v.slices, v.slice_mm
            )));
        }
        Ok(k as usize)
    };
    let centre = slice_at(0.0)?;
    let slices = [
        slice_at(-20.0)?,
        slice_at(-10.0)?,
        centre,
        slice_at(10.0)?,
        slice_at(20.0)?,
    ];
    let mut out = Vec::new();
    for (i, &d) in NEMA_SPHERES_MM.iter().enumerate() {
        let ch = roi_mean(v, centre, nema_sphere_centre(i), d);
        let means: Vec<f64> = slices
            .iter()
            .flat_map(|&k| BACKGROUND_ROIS_MM.iter().map(move |&at| (k, at)))
            .map(|(k, at)| roi_mean(v, k, at, d))
            .collect();
        let m = means.len() as f64;
        let cb = means.iter().sum::<f64>() / m;
        let sd = (means.iter().map(|x| (x - cb) * (x - cb)).sum::<f64>() / (m - 1.0)).sqrt();
        if cb <= 0.0 {
            return Err(NemaError("the background's mean is not positive".into()));
        }
        out.push(SphereQuality {
            diameter_mm: d,
            sphere_mean: ch,
            background_mean: cb,
            contrast_recovery_pct: 100.0 * (ch / cb - 1.0) / (ratio - 1.0),
            background_variability_pct: 100.0 * sd / cb,
        });
    }
    Ok(out)
}

/// The figures as text, one line a sphere.
pub fn text(rows: &[SphereQuality]) -> String {
    rows.iter()
        .map(|r| {
            format!(
                "sphere {:>2.0} mm: contrast recovery {:5.1} %, background variability {:4.1} %",
                r.diameter_mm, r.contrast_recovery_pct, r.background_variability_pct
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phantom::{nema_background, Phantom};

    #[test]
    fn background_rois_keep_15_mm_from_edges_spheres_and_lung() {
        let r = 18.5;
        for (a, &(x, y)) in BACKGROUND_ROIS_MM.iter().enumerate() {
            for k in 0..360 {
                let t = (k as f64).to_radians();
                for rr in [0.0, r / 2.0, r, r + 15.0] {
                    let (px, py) = (x + rr * t.cos(), y + rr * t.sin());
                    assert!(nema_background(px, py), "ROI {a} at {rr} mm, {k} deg");
                }
            }
            for (i, d) in NEMA_SPHERES_MM.iter().enumerate() {
                let (sx, sy) = nema_sphere_centre(i);
                assert!(
                    ((x - sx).hypot(y - sy)) >= r + d / 2.0 + 15.0,
                    "ROI {a} sphere {i}"
                );
            }
            for &(u, v) in &BACKGROUND_ROIS_MM[a + 1..] {
                assert!((x - u).hypot(y - v) >= 2.0 * r, "ROIs {a} overlap");
            }
        }
    }

    /// The true activity, rasterised, recovers the spheres' contrast (less for the smaller
    /// ones) with no background variability.
    #[test]
    fn the_true_activity_recovers_its_contrast() {
        let (n, slices, p, h) = (128, 31, 3.068, 3.0);
        let data: Vec<f32> = (0..slices)
            .flat_map(|k| {
                let z = (k as f64 - 15.0) * h;
                Phantom::NemaIec.rasterize(z, n, p)
            })
            .collect();
        let v = Volume {
            n,
            slices,
            pixel_mm: p,
            slice_mm: h,
            data,
        };
        let q = analyse(&v, 4.0).unwrap();
        // Voxels of 3 mm straddling the spheres' edges: 91 % for the largest, 68 % for the
        // smallest, growing with size.
        assert!(q[5].contrast_recovery_pct > 88.0, "{q:?}");
        assert!(q[0].contrast_recovery_pct > 60.0, "{q:?}");
        assert!(q
            .windows(2)
            .all(|w| w[0].contrast_recovery_pct < w[1].contrast_recovery_pct));
        assert!(
            q.iter().all(|r| r.background_variability_pct < 1e-6),
            "{q:?}"
        );
        let bad = Volume { n: 64, ..v };
        assert!(analyse(&bad, 4.0).is_err());
    }
}
