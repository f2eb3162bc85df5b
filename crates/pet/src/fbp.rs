//! 2D filtered backprojection with the ramp (Ram-Lak) filter.
//!
//! The filter is the band-limited ramp in its spatial form, `h(0) = 1/2`,
//! `h(k) = -2 / (pi k)^2` for odd `k`, 0 for even `k`, applied by direct convolution. This is
//! the same filter scikit-image's `iradon` builds (`filter_name="ramp"`) from the same spatial
//! kernel, so the two agree to rounding; the backprojection is [`Projector::back`] scaled by
//! `pi / (2 views)`.

use crate::projector::Projector;

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
    assert_eq!(sino.len(), views * bins, "sinogram is views x bins");
    let filtered = ramp_filter(sino, views, bins);
    let p = Projector::new(n, views, bins);
    let mut img = vec![0f32; n * n];
    p.back(&filtered, &mut img);
    let scale = (std::f64::consts::PI / (2.0 * views as f64)) as f32;
    img.iter_mut().for_each(|x| *x *= scale);
    img
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
}
