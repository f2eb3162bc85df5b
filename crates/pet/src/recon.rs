//! Reconstruction of a sinogram stack: single-slice rebinning, geometric normalisation, then
//! 2D FBP or MLEM per slice (slices in parallel on the available cores); or 3D OSEM over all
//! segments with a ray-driven (Joseph) projector ([`osem`], [`Joseph`]).

pub use crate::fbp::{
    fbp, fbp_planes, fbp_with, filter, ramp_filter, ramp_filter_direct, ramp_kernel,
};
pub use crate::joseph::{Footprint, Grid, Joseph};
pub use crate::mlem::mlem;
pub use crate::osem::{
    attenuation_factors, osem, subset_views, OsemConfig, OsemData, OsemTimes, Progress,
    MAX_QUOTIENT,
};

use crate::geometry::Scanner;
use crate::lor;
use crate::sinogram::Sinogram;
use crate::volume::Volume;

/// Reconstruction method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Filtered backprojection (ramp filter).
    Fbp,
    /// Filtered backprojection with a Hann-apodised ramp (smoother, for display).
    FbpHann,
    /// MLEM with the given number of iterations.
    Mlem(usize),
}

/// Lines of response per in-plane bin (`views x bins`), counting each detector pair once.
pub fn multiplicity(s: &Scanner) -> Vec<f32> {
    let t = lor::build_table(s);
    let n = s.detectors_per_ring as usize;
    let mut m = vec![0f32; s.plane_size()];
    for a in 0..n {
        for b in a + 1..n {
            let v = t[a * n + b];
            if v != lor::OUTSIDE {
                m[(v & !lor::SWAP) as usize] += 1.0;
            }
        }
    }
    m
}

/// Rebinned, normalised 2D planes ready for reconstruction: each SSRB plane is divided by
/// the number of ring pairs it sums and, for detector-pair data, by the number of lines of
/// response per bin (`normalise_lors`; PETLINK data is already binned per sinogram bin).
pub fn planes(sino: &Sinogram, normalise_lors: bool) -> Vec<Vec<f32>> {
    let s = &sino.scanner;
    let mut planes = sino.ssrb();
    let mult = normalise_lors.then(|| multiplicity(s));
    let n = s.rings as i64;
    for (k, plane) in planes.iter_mut().enumerate() {
        let k = k as i64;
        let pairs = (0..n)
            .filter(|&a| {
                let b = k - a;
                (0..n).contains(&b) && (b - a).unsigned_abs() <= s.max_ring_difference as u64
            })
            .count()
            .max(1) as f32;
        for (i, v) in plane.iter_mut().enumerate() {
            let m = mult.as_ref().map_or(1.0, |m| m[i]);
            *v = if m > 0.0 { *v / (pairs * m) } else { 0.0 };
        }
    }
    planes
}

/// Reconstructs 2D planes (`views x bins` each) into a volume of `bins x bins` slices.
pub fn reconstruct_planes(planes: &[Vec<f32>], s: &Scanner, method: Method) -> Volume {
    reconstruct_planes_telling(planes, s, method, &|_| {})
}

/// Like [`reconstruct_planes`], telling `done` how many planes are finished each time one is
/// (from the threads that reconstruct them, in no order).
pub fn reconstruct_planes_telling(
    planes: &[Vec<f32>],
    s: &Scanner,
    method: Method,
    done: &(dyn Fn(usize) + Sync),
) -> Volume {
    let (views, bins) = (s.views as usize, s.radial_bins as usize);
    let finished = std::sync::atomic::AtomicUsize::new(0);
    let finished = &finished;
    let n = bins;
    let threads = std::thread::available_parallelism().map_or(1, |x| x.get());
    let mut out = vec![Vec::new(); planes.len()];
    std::thread::scope(|sc| {
        let chunk = planes.len().div_ceil(threads).max(1);
        for (ps, os) in planes.chunks(chunk).zip(out.chunks_mut(chunk)) {
            sc.spawn(move || {
                // Relaxed: a count for progress only.
                let mut tell = |k: usize| {
                    done(finished.fetch_add(k, std::sync::atomic::Ordering::Relaxed) + k);
                };
                let hann = match method {
                    Method::Fbp => false,
                    Method::FbpHann => true,
                    Method::Mlem(it) => {
                        for (p, o) in ps.iter().zip(os.iter_mut()) {
                            *o = crate::mlem::mlem(p, views, bins, n, it);
                            tell(1);
                        }
                        return;
                    }
                };
                let images = crate::fbp::fbp_planes(ps, views, bins, n, hann, &mut tell);
                for (o, img) in os.iter_mut().zip(images) {
                    *o = img;
                }
            });
        }
    });
    Volume {
        n,
        slices: planes.len(),
        pixel_mm: s.bin_size_mm,
        slice_mm: s.ring_spacing_mm / 2.0,
        data: out.concat(),
    }
}

/// Rebins, normalises and reconstructs a sinogram.
pub fn reconstruct(sino: &Sinogram, method: Method, normalise_lors: bool) -> Volume {
    reconstruct_planes(&planes(sino, normalise_lors), &sino.scanner, method)
}

/// Like [`reconstruct`], telling `done(finished, planes)` each time a plane is finished.
pub fn reconstruct_telling(
    sino: &Sinogram,
    method: Method,
    normalise_lors: bool,
    done: &(dyn Fn(usize, usize) + Sync),
) -> Volume {
    let planes = planes(sino, normalise_lors);
    let n = planes.len();
    reconstruct_planes_telling(&planes, &sino.scanner, method, &|k| done(k, n))
}
