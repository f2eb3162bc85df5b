//! Reconstruction checks: simulated phantoms come back, and FBP agrees with scikit-image.

mod common;

use offhost_pet::recon::fbp;
use offhost_pet::recon::{self, Method};
use offhost_pet::Phantom;
use offhost_pet::Scanner;
use offhost_pet::{EnergyWindow, Histogrammer, Sinogram};
use offhost_pet::{SimConfig, Source};

fn simulate(phantom: Phantom, events: usize, seed: u64) -> Sinogram {
    let s = Scanner::demo();
    let cfg = SimConfig {
        phantom,
        seed,
        scatter_fraction: 0.0,
        singles_rate: 1.0e6,
        ..Default::default()
    };
    let mut src = Source::new(&s, cfg).unwrap();
    let mut h = Histogrammer::new(&s, EnergyWindow::kev(350.0, 650.0)).unwrap();
    let mut buf = Vec::new();
    let mut left = events;
    while left > 0 {
        let n = left.min(100_000);
        buf.clear();
        src.fill(&mut buf, n);
        h.add(&buf);
        left -= n;
    }
    let (sino, st) = h.finish();
    assert_eq!(st.events, events as u64);
    assert_eq!(
        sino.total(),
        st.accepted_prompts as i64 - st.accepted_delayeds as i64
    );
    sino
}

/// A 5 x 5 binomial blur (sigma about one pixel): comparisons are made at the resolution a
/// 3 mm-bin scanner can deliver, so both images are blurred alike.
fn blur(img: &[f32], n: usize) -> Vec<f32> {
    const K: [f32; 5] = [1.0 / 16.0, 4.0 / 16.0, 6.0 / 16.0, 4.0 / 16.0, 1.0 / 16.0];
    let pass = |src: &[f32], dx: isize, dy: isize| {
        let mut out = vec![0f32; n * n];
        for r in 0..n as isize {
            for c in 0..n as isize {
                let mut acc = 0.0;
                for (k, w) in K.iter().enumerate() {
                    let (rr, cc) = (r + dy * (k as isize - 2), c + dx * (k as isize - 2));
                    if (0..n as isize).contains(&rr) && (0..n as isize).contains(&cc) {
                        acc += w * src[(rr * n as isize + cc) as usize];
                    }
                }
                out[(r * n as isize + c) as usize] = acc;
            }
        }
        out
    };
    pass(&pass(img, 1, 0), 0, 1)
}

/// Pearson correlation and the normalised RMS error after the least-squares scale, inside
/// a disc of `radius` pixels.
fn compare(img: &[f32], truth: &[f32], n: usize, radius: f64) -> (f64, f64) {
    let (img, truth) = (&blur(img, n)[..], &blur(truth, n)[..]);
    let c = (n / 2) as f64;
    let idx: Vec<usize> = (0..n * n)
        .filter(|i| {
            let (r, q) = ((i / n) as f64 - c, (i % n) as f64 - c);
            r * r + q * q <= radius * radius
        })
        .collect();
    let m = idx.len() as f64;
    let (ma, mb) = (
        idx.iter().map(|&i| img[i] as f64).sum::<f64>() / m,
        idx.iter().map(|&i| truth[i] as f64).sum::<f64>() / m,
    );
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for &i in &idx {
        let (a, b) = (img[i] as f64 - ma, truth[i] as f64 - mb);
        sab += a * b;
        saa += a * a;
        sbb += b * b;
    }
    let corr = sab / (saa * sbb).sqrt();
    let k = idx.iter().map(|&i| (img[i] * truth[i]) as f64).sum::<f64>()
        / idx.iter().map(|&i| (img[i] * img[i]) as f64).sum::<f64>();
    let err = idx
        .iter()
        .map(|&i| (k * img[i] as f64 - truth[i] as f64).powi(2))
        .sum::<f64>();
    let norm = idx.iter().map(|&i| (truth[i] as f64).powi(2)).sum::<f64>();
    (corr, (err / norm).sqrt())
}

#[test]
fn shepp_logan_reconstructs_with_fbp_and_mlem() {
    let s = Scanner::demo();
    let phantom = Phantom::SheppLogan {
        half_size_mm: 110.0,
    };
    let sino = simulate(phantom, 1_000_000, 11);
    let truth = phantom.rasterize(0.0, s.radial_bins as usize, s.bin_size_mm);
    let planes = recon::planes(&sino, true);
    // The head is uniform along z: sum the central planes to beat the noise down.
    let mut plane = vec![0f32; s.plane_size()];
    for p in &planes[8..23] {
        plane.iter_mut().zip(p).for_each(|(a, b)| *a += b);
    }
    for (method, min_corr, max_err) in [(Method::Fbp, 0.90, 0.35), (Method::Mlem(15), 0.90, 0.35)] {
        let vol = recon::reconstruct_planes(&[plane.clone()], &s, method);
        let img = vol.slice(0).to_vec();
        let (corr, err) = compare(&img, &truth, vol.n, 45.0);
        eprintln!("{method:?}: correlation {corr:.3}, normalised error {err:.3}");
        assert!(corr > min_corr, "{method:?} correlation {corr}");
        assert!(err < max_err, "{method:?} normalised error {err}");
    }
}

/// The simulated NEMA IEC phantom (no scatter) reconstructed in 3D (OSEM over every segment
/// of a span-3 stack) recovers the hot spheres' contrast better, by NEMA NU 2's measure, than
/// 2D MLEM of the rebinned slices of the same data.
#[test]
fn osem_3d_recovers_nema_contrast_better_than_2d_mlem() {
    let s = Scanner::demo().with_span(3);
    let cfg = SimConfig {
        phantom: Phantom::NemaIec,
        seed: 7,
        scatter_fraction: 0.0,
        ..Default::default()
    };
    let mut src = Source::new(&s, cfg).unwrap();
    let mut h = Histogrammer::new(&s, EnergyWindow::kev(435.0, 650.0)).unwrap();
    let mut buf = Vec::new();
    for _ in 0..10 {
        buf.clear();
        src.fill(&mut buf, 150_000);
        h.add(&buf);
    }
    let (sino, _) = h.finish();
    let cfg = recon::OsemConfig {
        subsets: 8,
        iterations: 2,
        threads: 0,
    };
    let (v3, _) = offhost_pet::recon3d::osem_3d(&sino, true, None, &cfg, &|_| {}).unwrap();
    let v2 = recon::reconstruct(&sino, Method::Mlem(10), true);
    let q3 = offhost_pet::nema::analyse(&v3, 4.0).unwrap();
    let q2 = offhost_pet::nema::analyse(&v2, 4.0).unwrap();
    let mean = |q: &[offhost_pet::nema::SphereQuality]| {
        q.iter().map(|r| r.contrast_recovery_pct).sum::<f64>() / q.len() as f64
    };
    eprintln!("3D OSEM {:?}", offhost_pet::nema::text(&q3));
    eprintln!("2D MLEM {:?}", offhost_pet::nema::text(&q2));
    assert!(
        mean(&q3) > mean(&q2) + 10.0,
        "{} vs {}",
        mean(&q3),
        mean(&q2)
    );
    for (a, b) in q3.iter().zip(&q2).skip(3) {
        assert!(
            a.contrast_recovery_pct > b.contrast_recovery_pct,
            "{a:?} vs {b:?}"
        );
    }
}

const IRADON_PY: &str = r#"
import sys, numpy as np
from skimage.transform import iradon
views, bins = int(sys.argv[2]), int(sys.argv[3])
sino = np.fromfile(sys.argv[1], dtype='<f4').reshape(views, bins).astype(np.float64)
theta = np.arange(views) * 180.0 / views
img = iradon(sino.T, theta=theta, output_size=bins, filter_name='ramp',
             interpolation='linear', circle=False)
img.astype('<f8').tofile(sys.argv[4])
"#;

#[test]
fn fbp_agrees_with_scikit_image_iradon() {
    let s = Scanner::demo();
    let sino = simulate(Phantom::NemaIec, 200_000, 5);
    let planes = recon::planes(&sino, true);
    let plane = &planes[s.rings as usize - 1];
    let (views, bins) = (s.views as usize, s.radial_bins as usize);
    let dir = tempfile::tempdir().unwrap();
    let (inp, out) = (dir.path().join("sino.f32"), dir.path().join("img.f64"));
    let bytes: Vec<u8> = plane.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&inp, bytes).unwrap();
    common::python(
        IRADON_PY,
        &[
            inp.to_str().unwrap(),
            &views.to_string(),
            &bins.to_string(),
            out.to_str().unwrap(),
        ],
    );
    let reference: Vec<f64> = std::fs::read(&out)
        .unwrap()
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let ours = fbp(plane, views, bins, bins);
    assert_eq!(reference.len(), ours.len());
    let diff: f64 = ours
        .iter()
        .zip(&reference)
        .map(|(a, b)| (*a as f64 - b).powi(2))
        .sum();
    let norm: f64 = reference.iter().map(|b| b * b).sum();
    let rel = (diff / norm).sqrt();
    eprintln!("FBP vs iradon: relative RMS difference {rel:.2e}");
    // Same filter, same interpolation: only f32 rounding separates them.
    assert!(rel < 1e-3, "relative RMS difference {rel}");
    assert!(norm > 0.0);
}
