//! 2D maximum-likelihood expectation maximisation (MLEM) with the matched projector.

use crate::projector::Projector;

/// Runs `iterations` of MLEM on one `views x bins` sinogram (negative counts, which randoms
/// subtraction can leave, are clamped to zero); returns an `n x n` image. Pixels outside the
/// inscribed circle are kept at zero.
pub fn mlem(sino: &[f32], views: usize, bins: usize, n: usize, iterations: usize) -> Vec<f32> {
    assert_eq!(sino.len(), views * bins, "sinogram is views x bins");
    let p = Projector::new(n, views, bins);
    let y: Vec<f32> = sino.iter().map(|&v| v.max(0.0)).collect();
    let mut sens = vec![0f32; n * n];
    p.back(&vec![1.0; views * bins], &mut sens);
    let c = (n / 2) as f64;
    let r2 = c * c;
    let mask: Vec<bool> = (0..n * n)
        .map(|i| {
            let (row, col) = ((i / n) as f64 - c, (i % n) as f64 - c);
            row * row + col * col <= r2 && sens[i] > 0.0
        })
        .collect();
    let total: f64 = y.iter().map(|&v| v as f64).sum();
    let inside = mask.iter().filter(|&&m| m).count().max(1);
    let start = (total / inside as f64 / views as f64).max(1e-6) as f32;
    let mut x: Vec<f32> = mask.iter().map(|&m| if m { start } else { 0.0 }).collect();
    let mut proj = vec![0f32; views * bins];
    let mut corr = vec![0f32; n * n];
    for _ in 0..iterations {
        p.forward(&x, &mut proj);
        for (q, &yv) in proj.iter_mut().zip(&y) {
            *q = if *q > 0.0 { yv / *q } else { 0.0 };
        }
        p.back(&proj, &mut corr);
        for i in 0..n * n {
            if mask[i] {
                x[i] *= corr[i] / sens[i];
            }
        }
    }
    x
}
