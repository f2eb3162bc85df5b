//! 2D filtered backprojection with the ramp (Ram-Lak) filter.
//!
//! The filter is the band-limited ramp in its spatial form, `h(0) = 1/2`,
//! `h(k) = -2 / (pi k)^2` for odd `k`, 0 for even `k`, applied by direct convolution. This is
//! the same filter scikit-image's `iradon` builds (`filter_name="ramp"`) from the same spatial
//! kernel, so the two agree to rounding; the backprojection is [`Projector::back`] scaled by
//! `pi / (2 views)`.

use crate::projector::{Projector, PLANES};

/// The ramp kernel for offsets `0..len`.
pub fn ramp_kernel(len: usize) -> Vec<f64> {
    (0..len)
        .map(|k| match k {
            0 => 0.5,
            k if k % 2 == 1 => -2.0 / (std::f64::consts::PI * k as f64).powi(2),
            _ => 0.0,
        })
        .collect()
}

/// Filters each view of a `views x bins` sinogram with the ramp filter.
///
/// The convolution runs through an FFT of length `max(64, 2^ceil(log2(2 bins)))` with the
/// transform of the spatial kernel wrapped circularly, as `iradon` does; since the padding is
/// at least twice the data, this equals the direct linear convolution with [`ramp_kernel`].
pub fn ramp_filter(sino: &[f32], views: usize, bins: usize) -> Vec<f32> {
    filter(sino, views, bins, false)
}

/// [`ramp_filter`], optionally apodised by a Hann window (`0.5 + 0.5 cos(2 pi f)` over the
/// padded frequencies, as `iradon`'s `filter_name="hann"`), which trades resolution for noise.
pub fn filter(sino: &[f32], views: usize, bins: usize, hann: bool) -> Vec<f32> {
    use rustfft::num_complex::Complex;
    let size = (2 * bins).next_power_of_two().max(64);
    let mut planner = rustfft::FftPlanner::<f64>::new();
    let fwd = planner.plan_fft_forward(size);
    let inv = planner.plan_fft_inverse(size);
    let h = ramp_kernel(size / 2 + 1);
    let mut kernel: Vec<Complex<f64>> = (0..size)
        .map(|k| Complex::new(h[k.min(size - k)], 0.0))
        .collect();
    fwd.process(&mut kernel);
    if hann {
        for (k, c) in kernel.iter_mut().enumerate() {
            let f = k.min(size - k) as f64 / size as f64;
            *c *= 0.5 + 0.5 * (2.0 * std::f64::consts::PI * f).cos();
        }
    }
    let mut out = vec![0f32; views * bins];
    let mut buf = vec![Complex::new(0.0, 0.0); size];
    for v in 0..views {
        for (i, c) in buf.iter_mut().enumerate() {
            *c = Complex::new(
                if i < bins {
                    sino[v * bins + i] as f64
                } else {
                    0.0
                },
                0.0,
            );
        }
        fwd.process(&mut buf);
        for (c, k) in buf.iter_mut().zip(&kernel) {
            *c *= k.re;
        }
        inv.process(&mut buf);
        for (o, c) in out[v * bins..(v + 1) * bins].iter_mut().zip(&buf) {
            *o = (c.re / size as f64) as f32;
        }
    }
    out
}

/// Direct (quadratic) form of [`ramp_filter`], kept as its reference in tests.
pub fn ramp_filter_direct(sino: &[f32], views: usize, bins: usize) -> Vec<f32> {
    let h = ramp_kernel(bins);
    let mut out = vec![0f32; views * bins];
    for v in 0..views {
        let p = &sino[v * bins..(v + 1) * bins];
        let o = &mut out[v * bins..(v + 1) * bins];
        for (i, oi) in o.iter_mut().enumerate() {
            let mut acc = 0.0f64;
            for (j, &pj) in p.iter().enumerate() {
                acc += pj as f64 * h[i.abs_diff(j)];
            }
            *oi = acc as f32;
        }
    }
    out
}

/// Reconstructs one `views x bins` sinogram into an `n x n` image (pixel = bin size).
pub fn fbp(sino: &[f32], views: usize, bins: usize, n: usize) -> Vec<f32> {
    fbp_with(sino, views, bins, n, false)
}

/// [`fbp`] with the ramp optionally apodised by a Hann window.
pub fn fbp_with(sino: &[f32], views: usize, bins: usize, n: usize, hann: bool) -> Vec<f32> {
    assert_eq!(sino.len(), views * bins, "sinogram is views x bins");
    let filtered = filter(sino, views, bins, hann);
    let p = Projector::new(n, views, bins);
    let mut img = vec![0f32; n * n];
    p.back(&filtered, &mut img);
    let scale = (std::f64::consts::PI / (2.0 * views as f64)) as f32;
    img.iter_mut().for_each(|x| *x *= scale);
    img
}

/// [`fbp_with`] of several planes (`views x bins` each) into `n x n` images, their
/// backprojections 8 at a time (`Projector::back_planes`); `done(k)` is told
/// each time `k` more planes are finished.
pub fn fbp_planes(
    sinos: &[Vec<f32>],
    views: usize,
    bins: usize,
    n: usize,
    hann: bool,
    done: &mut dyn FnMut(usize),
) -> Vec<Vec<f32>> {
    let p = Projector::new(n, views, bins);
    let scale = (std::f64::consts::PI / (2.0 * views as f64)) as f32;
    let mut out = Vec::with_capacity(sinos.len());
    for group in sinos.chunks(PLANES) {
        let filtered: Vec<Vec<f32>> = group
            .iter()
            .map(|s| {
                assert_eq!(s.len(), views * bins, "sinogram is views x bins");
                filter(s, views, bins, hann)
            })
            .collect();
        let refs: Vec<&[f32]> = filtered.iter().map(Vec::as_slice).collect();
        let mut imgs = vec![Vec::new(); group.len()];
        p.back_planes(&refs, &mut imgs);
        for img in &mut imgs {
            img.iter_mut().for_each(|x| *x *= scale);
        }
        out.extend(imgs);
        done(group.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fft_filter_equals_direct_convolution() {
        let (views, bins) = (3, 37);
        let sino: Vec<f32> = (0..views * bins)
            .map(|i| ((i * 7919) % 23) as f32)
            .collect();
        let a = ramp_filter(&sino, views, bins);
        let b = ramp_filter_direct(&sino, views, bins);
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() < 1e-3, "{x} vs {y}");
        }
    }

    #[test]
    fn planes_together_equal_planes_alone() {
        let (views, bins, n) = (24, 33, 33);
        let sinos: Vec<Vec<f32>> = (0..11)
            .map(|q| {
                (0..views * bins)
                    .map(|i| ((i * 31 + q * 7) % 17) as f32)
                    .collect()
            })
            .collect();
        let mut told = 0;
        let together = fbp_planes(&sinos, views, bins, n, true, &mut |k| told += k);
        assert_eq!((together.len(), told), (11, 11));
        for (s, img) in sinos.iter().zip(&together) {
            let alone = fbp_with(s, views, bins, n, true);
            let scale = alone.iter().fold(1f32, |m, x| m.max(x.abs()));
            for (x, y) in img.iter().zip(&alone) {
                assert!((x - y).abs() <= 1e-5 * scale, "{x} vs {y}");
            }
        }
    }
}
