//! offhost's ray-tracing projector against STIR's own (`forward_project` with its ray-tracing
//! matrix, one ray per bin) on the files offhost writes: the same image projected by both
//! gives the same sinograms, bin for bin, up to STIR's unit (the voxel's width).
//!
//! Only where `OFFHOST_STIR_FORWARD_PROJECT` names STIR's `forward_project` (built from its
//! public source, `docs/notes/pet.md`); otherwise the test says so and passes.

use std::path::Path;

use offhost_pet::recon::{Footprint, Grid, Joseph};
use offhost_pet::sinofile::SinoFlags;
use offhost_pet::{projdata, Scanner, Sinogram, Volume};
use rand::{Rng, SeedableRng};

/// STIR's and offhost's projections of one random image (inside the field of view) over
/// `scanner`'s sinograms: the largest difference over the largest value.
fn compare(exe: &Path, dir: &Path, scanner: &Scanner, arc: bool) -> f64 {
    let sino = Sinogram::new(scanner).unwrap();
    let hs = dir.join("template.hs");
    let flags = SinoFlags {
        last: true,
        detector_pairs: arc,
    };
    projdata::write(&hs, &sino, flags).unwrap();
    let g = Grid::for_scanner(scanner);
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
    let c = (g.n / 2) as f64;
    let data: Vec<f32> = (0..g.len())
        .map(|i| {
            let (row, col) = ((i / g.n) % g.n, i % g.n);
            let (y, x) = (row as f64 - c, col as f64 - c);
            match x * x + y * y <= (c - 2.0) * (c - 2.0) {
                true => rng.gen::<f32>(),
                false => 0.0,
            }
        })
        .collect();
    let img = Volume {
        n: g.n,
        slices: g.slices,
        pixel_mm: g.pixel_mm,
        slice_mm: g.slice_mm,
        data,
    };
    let stir = offhost_pet::stir::forward_project(exe, &img, &hs, dir).unwrap();
    let p = Joseph::with_footprint(scanner, &sino.layout, g, arc, Footprint::RayTracing).unwrap();
    let mut ours = vec![0f32; p.bins_len()];
    p.forward(&img.data, &mut ours);
    assert_eq!(ours.len(), stir.len());
    // STIR's weights are lengths in voxel widths, offhost's in mm.
    let unit = g.pixel_mm as f32;
    let top = ours.iter().fold(0f32, |m, &x| m.max(x));
    let worst = (ours.iter().zip(&stir))
        .map(|(&o, &s)| (o - s * unit).abs())
        .fold(0f32, f32::max);
    (worst / top) as f64
}

#[test]
fn stirs_ray_tracing_projection_equals_offhosts() {
    let Some(exe) = std::env::var_os("OFFHOST_STIR_FORWARD_PROJECT") else {
        eprintln!("OFFHOST_STIR_FORWARD_PROJECT not set: STIR's projector not compared");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    // Span 1 (tubes two slices wide) and span 5 (one slice) of offhost's simulated,
    // arc-corrected data; span 5 as not arc-corrected (PETLINK's and STIR's own geometry).
    // Not arc-corrected, STIR places bin `b` at `R sin(b pi / N)` and offhost at
    // `R sin(b d / R)` with the header's bin size `d` (3.068 mm for the demo's 3.06796): lines
    // up to a few micrometres apart, 6e-4 of the largest value at most.
    for (span, arc, tol) in [(1, true, 1e-4), (5, true, 1e-4), (5, false, 2e-3)] {
        let s = Scanner::demo().with_span(span);
        let worst = compare(Path::new(&exe), tmp.path(), &s, arc);
        assert!(
            worst < tol,
            "span {span}, arc-corrected {arc}: {worst} of the largest value"
        );
    }
}
