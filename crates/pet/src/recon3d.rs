//! 3D reconstruction of a sinogram stack (OSEM over all segments) and the file job behind
//! `offhost pet recon` (2D or 3D, images written as PNG, Interfile `.hv` or NIfTI `.nii`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::GeometryError;
use crate::files::{read_sinogram, FileJobError};
use crate::joseph::{Footprint, Grid, Joseph};
use crate::osem::{attenuation_factors, osem, OsemConfig, OsemData, OsemTimes, Progress};
use crate::recon::{self, Method};
use crate::{image_hv, nema, nifti, projdata, Sinogram, Volume};

/// 3D OSEM of `sino` on STIR's default grid for its scanner ([`Grid::for_scanner`]);
/// `detector_pairs` marks offhost's simulated (arc-corrected) sinograms, whose bins are
/// weighted by the detector pairs they hold; `factors` are per-bin normalisation x
/// attenuation factors in the sinogram's order.
pub fn osem_3d(
    sino: &Sinogram,
    detector_pairs: bool,
    factors: Option<&[f32]>,
    cfg: &OsemConfig,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<(Volume, OsemTimes), GeometryError> {
    osem_3d_model(
        sino,
        detector_pairs,
        factors,
        cfg,
        Model::default(),
        progress,
    )
}

/// The system model of a 3D reconstruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Model {
    /// Weigh each bin by the ring pairs and (detector-pair data) the detector pairs it sums;
    /// without, every bin is one line (or tube), as STIR's ray-tracing matrix models it.
    pub physical: bool,
    /// How a bin's line is spread over the voxels.
    pub footprint: Footprint,
    /// STIR's OSEM updates: its subsets, and bins' ratios of measured to modelled counts
    /// as its (negative counts dropped, ratios capped: [`crate::recon::OsemData::stir`]).
    pub stir_updates: bool,
}

impl Default for Model {
    fn default() -> Self {
        Model {
            physical: true,
            footprint: Footprint::Joseph,
            stir_updates: false,
        }
    }
}

impl Model {
    /// STIR's `OSMAPOSL` with its ray-tracing matrix: no geometric weights, its footprint,
    /// its subsets and ratios.
    pub fn stir() -> Self {
        Model {
            physical: false,
            footprint: Footprint::RayTracing,
            stir_updates: true,
        }
    }
}

/// [`osem_3d`] with the system model chosen.
pub fn osem_3d_model(
    sino: &Sinogram,
    detector_pairs: bool,
    factors: Option<&[f32]>,
    cfg: &OsemConfig,
    model: Model,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<(Volume, OsemTimes), GeometryError> {
    let s = &sino.scanner;
    let grid = Grid::for_scanner(s);
    let p = Joseph::with_footprint(s, &sino.layout, grid, detector_pairs, model.footprint)?;
    let physical = model.physical;
    let counts: Vec<f32> = sino.data.iter().map(|&c| c as f32).collect();
    let lors = (physical && detector_pairs).then(|| recon::multiplicity(s));
    let data = OsemData {
        counts: &counts,
        lors: lors.as_deref(),
        factors,
        ring_pairs: physical,
        stir: model.stir_updates,
    };
    let (x, times) = osem(&p, &data, cfg, progress);
    Ok((volume(grid, x), times))
}

fn volume(g: Grid, data: Vec<f32>) -> Volume {
    Volume {
        n: g.n,
        slices: g.slices,
        pixel_mm: g.pixel_mm,
        slice_mm: g.slice_mm,
        data,
    }
}

/// `offhost pet recon`: a sinogram file into images.
#[derive(Debug, Clone, clap::Args)]
pub struct ReconJob {
    /// Sinogram file from `offhost pet hist` or STIR (.hs Interfile projection data, OHSINO01).
    pub sino: PathBuf,
    /// Output image, repeatable: X.hv (Interfile image, data in X.v), X.nii (NIfTI-1) or X.png
    /// (slices and a coronal maximum-intensity projection).
    #[arg(short, long)]
    pub out: Vec<PathBuf>,
    /// Output PNG (as `-o X.png`).
    #[arg(long)]
    pub png: Option<PathBuf>,
    /// fbp, fbp-hann, mlem (2D, per rebinned slice) or osem (3D, every segment).
    #[arg(long, default_value = "fbp")]
    pub method: String,
    /// 3D OSEM (as `--method osem`).
    #[arg(long = "3d")]
    pub three_d: bool,
    /// Iterations (MLEM; OSEM: full passes over the subsets).
    #[arg(long, default_value_t = 10)]
    pub iterations: usize,
    /// Subsets of views (OSEM).
    #[arg(long, default_value_t = 1)]
    pub subsets: usize,
    /// Normalisation: per-bin efficiency factors as Interfile projection data (.hs) of the
    /// sinogram's geometry (OSEM).
    #[arg(long)]
    pub norm: Option<PathBuf>,
    /// Attenuation factors (<= 1) as Interfile projection data (.hs) (OSEM).
    #[arg(long)]
    pub attenuation: Option<PathBuf>,
    /// Attenuation image (.hv, 1/cm) on the reconstruction's grid; its factors exp(-integral)
    /// are forward projected (OSEM).
    #[arg(long)]
    pub mu: Option<PathBuf>,
    /// Threads for OSEM (0: every core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Also print the NEMA NU 2 image quality (simulated NEMA IEC phantom).
    #[arg(long)]
    pub nema: bool,
    /// STIR's OSEM (for comparisons with its `OSMAPOSL`): every bin one line or tube (no
    /// ring-pair or detector-pair weights), spread over the voxels as its ray-tracing matrix
    /// does (unless `--projector` says otherwise), its subsets, negative counts dropped.
    #[arg(long)]
    pub stir_model: bool,
    /// How a bin's line is spread over the voxels (3D): joseph (the default) or
    /// ray-tracing (Siddon's lengths, STIR's tube; the default with `--stir-model`).
    #[arg(long, value_enum)]
    pub projector: Option<Footprint>,
}

/// Per-bin factors of `path` (Interfile projection data) checked against `sino`'s geometry.
fn factors_file(path: &Path, sino: &Sinogram) -> Result<Vec<f32>, FileJobError> {
    let (h, v) = projdata::read_f32(path).map_err(|source| FileJobError::Format {
        path: path.to_owned(),
        source,
    })?;
    let (a, b) = (&h.scanner, &sino.scanner);
    if (
        a.rings,
        a.views,
        a.radial_bins,
        a.span,
        a.max_ring_difference,
    ) != (
        b.rings,
        b.views,
        b.radial_bins,
        b.span,
        b.max_ring_difference,
    ) {
        return Err(FileJobError::Option(format!(
            "{}: {} rings, {} views, {} bins, span {}, max ring difference {}; the sinogram has {}, {}, {}, {}, {}",
            path.display(),
            a.rings, a.views, a.radial_bins, a.span, a.max_ring_difference,
            b.rings, b.views, b.radial_bins, b.span, b.max_ring_difference
        )));
    }
    Ok(v)
}

/// The normalisation and attenuation factors a job names, multiplied (`None` without any).
fn job_factors(
    job: &ReconJob,
    sino: &Sinogram,
    arc: bool,
) -> Result<Option<Vec<f32>>, FileJobError> {
    let mut f: Option<Vec<f32>> = None;
    let mut times = |g: Vec<f32>| match &mut f {
        Some(f) => f.iter_mut().zip(g).for_each(|(a, b)| *a *= b),
        None => f = Some(g),
    };
    for p in [&job.norm, &job.attenuation].into_iter().flatten() {
        times(factors_file(p, sino)?);
    }
    if let Some(mu) = &job.mu {
        let v = image_hv::read(mu).map_err(|source| FileJobError::Format {
            path: mu.clone(),
            source,
        })?;
        let g = Grid::for_scanner(&sino.scanner);
        if (v.n, v.slices) != (g.n, g.slices) {
            return Err(FileJobError::Option(format!(
                "{}: {} x {} x {} voxels; the reconstruction's grid is {} x {} x {}",
                mu.display(),
                v.n,
                v.n,
                v.slices,
                g.n,
                g.n,
                g.slices
            )));
        }
        let p = Joseph::new(&sino.scanner, &sino.layout, g, arc)?;
        times(attenuation_factors(&p, &v.data, job.threads));
    }
    Ok(f)
}

/// The image format an output's extension names: `hv`, `nii` or `png`.
fn image_kind(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_string_lossy().to_lowercase();
    ["hv", "nii", "png"].into_iter().find(|k| *k == ext)
}

/// Writes `v` to `path` by its extension: `.hv`, `.nii` or `.png`.
pub fn write_image(path: &Path, v: &Volume) -> Result<(), FileJobError> {
    match image_kind(path) {
        Some("hv") => image_hv::write(path, v)?,
        Some("nii") => nifti::write(path, v)?,
        Some(_) => v.write_png(path, 8)?,
        None => {
            return Err(FileJobError::Option(format!(
                "{}: an image is written as .hv, .nii or .png",
                path.display()
            )))
        }
    }
    Ok(())
}

/// Runs a [`ReconJob`]; `progress(done, total, what)` hears of each plane (2D) or each
/// sensitivity image and subset iteration (3D). Returns the text to print.
pub fn run(
    job: &ReconJob,
    progress: &(dyn Fn(usize, usize, &str) + Sync),
) -> Result<String, FileJobError> {
    let outs: Vec<PathBuf> = job.out.iter().chain(&job.png).cloned().collect();
    if outs.is_empty() {
        return Err(FileJobError::Option(
            "no output: give -o X.hv|X.nii|X.png or --png".into(),
        ));
    }
    // Every output is checked before the (long) reconstruction.
    if let Some(o) = outs.iter().find(|o| image_kind(o).is_none()) {
        return Err(FileJobError::Option(format!(
            "{}: an image is written as .hv, .nii or .png",
            o.display()
        )));
    }
    let three_d = job.three_d || job.method == "osem";
    let (s, flags) = read_sinogram(&job.sino)?;
    let t = Instant::now();
    let (vol, what) = if three_d {
        let f = job_factors(job, &s, flags.detector_pairs)?;
        let cfg = OsemConfig {
            subsets: job.subsets,
            iterations: job.iterations,
            threads: job.threads,
        };
        let base = match job.stir_model {
            true => Model::stir(),
            false => Model::default(),
        };
        let model = Model {
            footprint: job.projector.unwrap_or(base.footprint),
            ..base
        };
        let (v, times) = osem_3d_model(
            &s,
            flags.detector_pairs,
            f.as_deref(),
            &cfg,
            model,
            &|p| match p {
                Progress::Sensitivity(k, n) => progress(k, n, "sensitivity images"),
                Progress::Subiteration(k, n) => progress(k, n, "subset iterations"),
            },
        )?;
        let per =
            times.subiterations_s.iter().sum::<f64>() / times.subiterations_s.len().max(1) as f64;
        (
            v,
            format!(
                "3D OSEM ({} subsets x {} iterations; sensitivity {:.2} s, {:.3} s a subset iteration)",
                cfg.subsets.clamp(1, s.scanner.views as usize),
                cfg.iterations,
                times.sensitivity_s,
                per
            ),
        )
    } else {
        if job.norm.is_some() || job.attenuation.is_some() || job.mu.is_some() {
            return Err(FileJobError::Option(
                "--norm, --attenuation and --mu are used by 3D OSEM only (--3d)".into(),
            ));
        }
        let method = match job.method.as_str() {
            "fbp" => Method::Fbp,
            "fbp-hann" => Method::FbpHann,
            "mlem" => Method::Mlem(job.iterations),
            other => {
                return Err(FileJobError::Option(format!(
                    "--method {other}: expected fbp, fbp-hann, mlem or osem"
                )))
            }
        };
        let v = recon::reconstruct_telling(&s, method, flags.detector_pairs, &|k, n| {
            progress(k, n, "planes");
        });
        (v, format!("{method:?}"))
    };
    let secs = t.elapsed().as_secs_f64();
    for o in &outs {
        write_image(o, &vol)?;
    }
    let mut line = format!(
        "{what}: {} slices of {}x{} in {secs:.2} s -> {}",
        vol.slices,
        vol.n,
        vol.n,
        outs.iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    if job.nema {
        let q = nema::analyse(&vol, 4.0).map_err(|e| FileJobError::Option(e.to_string()))?;
        line = format!("{line}\n{}", nema::text(&q));
    }
    Ok(line)
}

/// `offhost pet nema`: NEMA NU 2 image quality of a reconstructed NEMA IEC phantom.
#[derive(Debug, Clone, clap::Args)]
pub struct NemaJob {
    /// Image (.hv Interfile, offhost's or STIR's) on a grid centred on the scanner.
    pub image: PathBuf,
    /// Activity ratio of the hot spheres to the background.
    #[arg(long, default_value_t = 4.0)]
    pub ratio: f64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs a [`NemaJob`]: the per-sphere figures as JSON and as text.
pub fn nema_file(job: &NemaJob) -> Result<(serde_json::Value, String), FileJobError> {
    let v = image_hv::read(&job.image).map_err(|source| FileJobError::Format {
        path: job.image.clone(),
        source,
    })?;
    let q = nema::analyse(&v, job.ratio).map_err(|e| FileJobError::Option(e.to_string()))?;
    Ok((serde_json::json!({ "spheres": q }), nema::text(&q)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outputs are checked before the sinogram is even read.
    #[test]
    fn bad_outputs_are_refused_first() {
        let job = |out: Vec<PathBuf>| ReconJob {
            sino: "/nonexistent.hs".into(),
            out,
            png: None,
            method: "osem".into(),
            three_d: true,
            iterations: 1,
            subsets: 1,
            norm: None,
            attenuation: None,
            mu: None,
            threads: 1,
            nema: false,
            stir_model: false,
            projector: None,
        };
        let e = run(&job(vec![]), &|_, _, _| {}).unwrap_err().to_string();
        assert!(e.contains("no output"), "{e}");
        let e = run(&job(vec!["a.hv".into(), "b.tif".into()]), &|_, _, _| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("b.tif: an image is written as"), "{e}");
        let e = run(&job(vec!["a.hv".into()]), &|_, _, _| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("nonexistent.hs"), "{e}");
    }
}
