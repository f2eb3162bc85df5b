//! Activity phantoms: the NEMA IEC body phantom and the Shepp-Logan head.
//!
//! Both are analytic, so the simulator samples them exactly and tests can rasterise the
//! true activity to compare with a reconstruction.

/// Sphere diameters of the NEMA IEC body phantom, mm.
pub const NEMA_SPHERES_MM: [f64; 6] = [10.0, 13.0, 17.0, 22.0, 28.0, 37.0];

/// Modified Shepp-Logan ellipses (Toft): value, semi-axes a, b, centre x, y, angle (degrees),
/// in units of the head's half-size.
const SHEPP_LOGAN: [[f64; 6]; 10] = [
    [1.0, 0.69, 0.92, 0.0, 0.0, 0.0],
    [-0.8, 0.6624, 0.874, 0.0, -0.0184, 0.0],
    [-0.2, 0.11, 0.31, 0.22, 0.0, -18.0],
    [-0.2, 0.16, 0.41, -0.22, 0.0, 18.0],
    [0.1, 0.21, 0.25, 0.0, 0.35, 0.0],
    [0.1, 0.046, 0.046, 0.0, 0.1, 0.0],
    [0.1, 0.046, 0.046, 0.0, -0.1, 0.0],
    [0.1, 0.046, 0.023, -0.08, -0.605, 0.0],
    [0.1, 0.023, 0.023, 0.0, -0.606, 0.0],
    [0.1, 0.023, 0.046, 0.06, -0.605, 0.0],
];

/// An activity distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Phantom {
    /// NEMA IEC body phantom: a 294 x 224 mm D-shaped body (background 1), six hot spheres
    /// (activity 4) on a 57.2 mm radius circle in the plane `z = 0`, and a cold 50 mm lung
    /// insert along the axis. The body outline is the standard's shape to within a few mm.
    NemaIec,
    /// The modified Shepp-Logan head, 2 x `half_size_mm` across, extruded along `z` over
    /// `|z| <= half_size_mm`.
    SheppLogan {
        /// Half-size of the head in mm (the outer ellipse is 0.69 x 0.92 of it).
        half_size_mm: f64,
    },
    /// A uniform cylinder (for tests and calibration).
    Cylinder {
        /// Radius in mm.
        radius_mm: f64,
    },
}

impl Phantom {
    /// Looks a phantom up by name: `nema`, `shepp-logan`, `cylinder`.
    pub fn by_name(name: &str) -> Option<Self> {
        match name {
            "nema" | "nema-iec" => Some(Phantom::NemaIec),
            "shepp-logan" | "shepp" => Some(Phantom::SheppLogan {
                half_size_mm: 110.0,
            }),
            "cylinder" => Some(Phantom::Cylinder { radius_mm: 100.0 }),
            _ => None,
        }
    }

    /// Half-extents of a box holding all activity `(x, y, z)` in mm (z unbounded phantoms
    /// report a large value; callers clip to the scanner).
    pub fn half_extent(&self) -> (f64, f64, f64) {
        match *self {
            Phantom::NemaIec => (147.0, 147.0, 90.0),
            Phantom::SheppLogan { half_size_mm: h } => (0.69 * h, 0.92 * h, h),
            Phantom::Cylinder { radius_mm: r } => (r, r, 1e9),
        }
    }

    /// Largest distance from the scanner axis of any activity, mm (bounds the photons'
    /// acceptance in the simulator).
    pub fn max_radius(&self) -> f64 {
        match *self {
            Phantom::NemaIec => 147.0,
            // The outer ellipse (0.69 x 0.92, centred) holds every other one.
            Phantom::SheppLogan { half_size_mm: h } => 0.92 * h,
            Phantom::Cylinder { radius_mm: r } => r,
        }
    }

    /// Largest activity anywhere.
    pub fn max_activity(&self) -> f64 {
        match self {
            Phantom::NemaIec => 4.0,
            Phantom::SheppLogan { .. } => 1.0,
            Phantom::Cylinder { .. } => 1.0,
        }
    }

    /// Activity concentration at a point (mm).
    pub fn activity(&self, x: f64, y: f64, z: f64) -> f64 {
        match *self {
            Phantom::NemaIec => nema(x, y, z),
            Phantom::SheppLogan { half_size_mm: h } => {
                if z.abs() > h {
                    return 0.0;
                }
                let (u, v) = (x / h, y / h);
                let mut a = 0.0;
                for [val, ea, eb, cx, cy, deg] in SHEPP_LOGAN {
                    let (s, c) = deg.to_radians().sin_cos();
                    let (dx, dy) = (u - cx, v - cy);
                    let (p, q) = (dx * c + dy * s, -dx * s + dy * c);
                    if (p / ea).powi(2) + (q / eb).powi(2) <= 1.0 {
                        a += val;
                    }
                }
                a.max(0.0)
            }
            Phantom::Cylinder { radius_mm: r } => {
                if x * x + y * y <= r * r {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }

    /// Rasterises the activity of the plane `z` on an `n x n` grid of `pixel_mm` pixels
    /// centred on the axis; row 0 is the top (`+y`), column 0 the left (`-x`). Each pixel
    /// is the mean of 4 x 4 sub-samples.
    pub fn rasterize(&self, z: f64, n: usize, pixel_mm: f64) -> Vec<f32> {
        let c = (n as f64) / 2.0;
        let mut out = vec![0f32; n * n];
        for i in 0..n {
            for j in 0..n {
                let mut s = 0.0;
                for si in 0..4 {
                    for sj in 0..4 {
                        let x = (j as f64 + (sj as f64 + 0.5) / 4.0 - c) * pixel_mm;
                        let y = (c - i as f64 - (si as f64 + 0.5) / 4.0) * pixel_mm;
                        s += self.activity(x, y, z);
                    }
                }
                out[i * n + j] = (s / 16.0) as f32;
            }
        }
        out
    }
}

/// Unit vectors at 30, 90, ..., 330 degrees: the directions of the sphere centres.
const SPHERE_DIRS: [(f64, f64); 6] = [
    (0.866_025_403_784_438_6, 0.5),
    (0.0, 1.0),
    (-0.866_025_403_784_438_6, 0.5),
    (-0.866_025_403_784_438_6, -0.5),
    (0.0, -1.0),
    (0.866_025_403_784_438_6, -0.5),
];

/// Centre of NEMA sphere `i` (0 = smallest) in the plane `z = 0`: on a 57.2 mm circle at
/// `30 + 60 i` degrees.
pub fn nema_sphere_centre(i: usize) -> (f64, f64) {
    let (c, s) = SPHERE_DIRS[i];
    (57.2 * c, 57.2 * s)
}

/// Whether `(x, y)` is inside the NEMA body outline and outside the lung insert (where the
/// background activity is 1).
pub fn nema_background(x: f64, y: f64) -> bool {
    let inside = if y >= 0.0 {
        x * x + y * y <= 147.0 * 147.0
    } else {
        let ax = x.abs();
        y >= -77.0 && ax <= 147.0 && (ax <= 70.0 || (ax - 70.0).powi(2) + y * y <= 77.0 * 77.0)
    };
    inside && x * x + y * y > 25.0 * 25.0
}

fn nema(x: f64, y: f64, z: f64) -> f64 {
    if z.abs() > 90.0 || !nema_background(x, y) {
        return 0.0;
    }
    if z.abs() > 18.5 {
        return 1.0;
    }
    for (i, d) in NEMA_SPHERES_MM.iter().enumerate() {
        let (cx, cy) = nema_sphere_centre(i);
        let r = d / 2.0;
        if (x - cx).powi(2) + (y - cy).powi(2) + z * z <= r * r {
            return 4.0;
        }
    }
    1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nema_features() {
        let p = Phantom::NemaIec;
        assert_eq!(p.activity(0.0, 0.0, 0.0), 0.0, "lung insert is cold");
        let (cx, cy) = nema_sphere_centre(5);
        assert_eq!(p.activity(cx, cy, 0.0), 4.0);
        assert_eq!(p.activity(cx, cy, 30.0), 1.0, "spheres lie in z = 0");
        assert_eq!(p.activity(0.0, 140.0, 0.0), 1.0);
        assert_eq!(p.activity(0.0, -100.0, 0.0), 0.0);
        assert_eq!(p.activity(140.0, -10.0, 0.0), 1.0);
    }

    #[test]
    fn no_activity_beyond_the_max_radius() {
        let phantoms = [
            Phantom::NemaIec,
            Phantom::SheppLogan {
                half_size_mm: 100.0,
            },
            Phantom::Cylinder { radius_mm: 80.0 },
        ];
        for p in phantoms {
            let r = p.max_radius() + 1e-6;
            for i in 0..3600 {
                let a = (i as f64 / 10.0).to_radians();
                for dr in [0.0, 1.0, 30.0] {
                    let (x, y) = ((r + dr) * a.cos(), (r + dr) * a.sin());
                    assert_eq!(p.activity(x, y, 0.0), 0.0, "{p:?} at {x}, {y}");
                }
            }
            // and the bound is reached (within 1 mm)
            let r = p.max_radius() - 1.0;
            let hit = (0..3600).any(|i| {
                let a = (i as f64 / 10.0).to_radians();
                p.activity(r * a.cos(), r * a.sin(), 0.0) > 0.0
            });
            assert!(hit, "{p:?}");
        }
    }

    #[test]
    fn shepp_logan_is_non_negative_with_bright_skull() {
        let p = Phantom::SheppLogan {
            half_size_mm: 100.0,
        };
        assert!((p.activity(0.0, 90.0, 0.0) - 1.0).abs() < 1e-9);
        assert!((p.activity(0.0, 0.0, 0.0) - 0.2).abs() < 1e-9);
        let img = p.rasterize(0.0, 64, 4.0);
        assert!(img.iter().all(|&v| v >= 0.0));
    }
}
