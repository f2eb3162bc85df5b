//! STIR's OSEM (`OSMAPOSL`) on a projection data file, for comparisons: the model of
//! [`crate::recon3d::osem_3d_model`] without its geometric weights (`physical = false`), no
//! normalisation, attenuation or additive term (ray-tracing matrix, one ray per bin, subset
//! sensitivities, offhost's `xy` size), and the correlation of two images on the first one's
//! grid.

use std::path::Path;
use std::process::Command;

use crate::image_hv;
use crate::volume::Volume;

/// What STIR's OSEM gave.
#[derive(Clone, Debug)]
pub struct StirOsem {
    /// The image.
    pub image: Volume,
    /// Wall-clock seconds of the sensitivity image (STIR's log).
    pub sensitivity_s: f64,
    /// Wall-clock seconds of each subset iteration (STIR's log).
    pub subiterations_s: Vec<f64>,
}

const PAR: &str = "OSMAPOSLParameters :=
objective function type := PoissonLogLikelihoodWithLinearModelForMeanAndProjData
PoissonLogLikelihoodWithLinearModelForMeanAndProjData Parameters :=
  input file := {input}
  maximum absolute segment number to process := -1
  projector pair type := Matrix
  Projector Pair Using Matrix Parameters :=
{matrix}  End Projector Pair Using Matrix Parameters :=
  recompute sensitivity := 1
  use subset sensitivities := 1
  xy output image size (in pixels) := {xy}
  sensitivity filename := {dir}/sens.hv
end PoissonLogLikelihoodWithLinearModelForMeanAndProjData Parameters :=
enforce initial positivity condition := 1
number of subsets := {subsets}
number of subiterations := {subiterations}
save estimates at subiteration intervals := {subiterations}
output filename prefix := {dir}/osem
END :=
";

/// STIR's ray-tracing matrix with one ray per bin tangentially (its defaults otherwise).
const MATRIX: &str = "    Matrix type := Ray Tracing
    Ray tracing matrix parameters :=
      number of rays in tangential direction to trace for each bin := 1
    End Ray tracing matrix parameters :=
";

const FORWARD_PAR: &str = "Forward Projector parameters:=
  type := Matrix
  Forward projector Using Matrix Parameters :=
{matrix}  End Forward Projector Using Matrix Parameters :=
End:=
";

/// Runs STIR's `forward_project` (the binary `exe`) on `image` with its ray-tracing matrix over
/// the geometry of the projection data `template` (a `.hs`), working in `work`; returns the
/// projections in offhost's order (`[sinogram][view][bin]`, as [`crate::projdata::read_f32`]
/// gives them), in STIR's unit (lengths in voxel widths).
pub fn forward_project(
    exe: &Path,
    image: &Volume,
    template: &Path,
    work: &Path,
) -> Result<Vec<f32>, String> {
    let (img, par, out) = (
        work.join("forward_image.hv"),
        work.join("forward.par"),
        work.join("forward.hs"),
    );
    image_hv::write(&img, image).map_err(|e| format!("{}: {e}", img.display()))?;
    std::fs::write(&par, FORWARD_PAR.replace("{matrix}", MATRIX))
        .map_err(|e| format!("{}: {e}", par.display()))?;
    let run = Command::new(exe)
        .current_dir(work)
        .arg(&out)
        .arg(&img)
        .arg(template)
        .arg(&par)
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    if !run.status.success() {
        let err = String::from_utf8_lossy(&run.stderr);
        let tail: Vec<&str> = err.lines().rev().take(5).collect();
        return Err(format!("forward_project failed ({}): {tail:?}", run.status));
    }
    let (_, data) =
        crate::projdata::read_f32(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(data)
}

/// Runs `stir_dir/bin/OSMAPOSL` on `hs` with `subsets` x `iterations` into an image of
/// `xy x xy` voxels a slice (offhost's grid: the bins of a view), working in `work` (its log
/// `work/osem.log`); `threads` sets `OMP_NUM_THREADS` (0: STIR's default).
pub fn osem(
    stir_dir: &Path,
    hs: &Path,
    (subsets, iterations): (usize, usize),
    xy: usize,
    threads: usize,
    work: &Path,
) -> Result<StirOsem, String> {
    let subiterations = subsets * iterations;
    let par = PAR
        .replace("{matrix}", MATRIX)
        .replace("{input}", &hs.display().to_string())
        .replace("{dir}", &work.display().to_string())
        .replace("{subsets}", &subsets.to_string())
        .replace("{xy}", &xy.to_string())
        .replace("{subiterations}", &subiterations.to_string());
    let par_path = work.join("osem.par");
    std::fs::write(&par_path, par).map_err(|e| format!("{}: {e}", par_path.display()))?;
    let exe = stir_dir.join("bin/OSMAPOSL");
    let mut cmd = Command::new(&exe);
    cmd.arg(&par_path).current_dir(work);
    if threads > 0 {
        cmd.env("OMP_NUM_THREADS", threads.to_string());
    }
    let out = cmd
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::write(work.join("osem.log"), &log);
    if !out.status.success() {
        let tail: Vec<&str> = log.lines().rev().take(5).collect();
        return Err(format!("OSMAPOSL failed ({}): {:?}", out.status, tail));
    }
    let (sensitivity_s, subiterations_s) = times(&log);
    let image = image_hv::read(&work.join(format!("osem_{subiterations}.hv")))
        .map_err(|e| format!("STIR's image: {e}"))?;
    Ok(StirOsem {
        image,
        sensitivity_s,
        subiterations_s,
    })
}

/// The wall-clock times of STIR's `distributable_computation` lines: those between
/// "Computing sensitivity" and "Done computing sensitivity" add up to the sensitivity, each
/// other one is a subset iteration.
fn times(log: &str) -> (f64, Vec<f64>) {
    let (mut sens, mut its, mut inside) = (0.0, Vec::new(), false);
    for l in log.lines() {
        if l.contains("Done computing sensitivity") {
            inside = false;
        } else if l.contains("Computing sensitivity") {
            inside = true;
        }
        if let Some(w) = l
            .split("wall-clock ")
            .nth(1)
            .filter(|_| l.contains("distributable_computation"))
        {
            if let Ok(s) = w.trim().trim_end_matches('s').parse::<f64>() {
                if inside {
                    sens += s;
                } else {
                    its.push(s);
                }
            }
        }
    }
    (sens, its)
}

/// `b` sampled at the centres of `a`'s voxels (bilinear in each slice, nearest slice; both
/// grids centred on the scanner), then the Pearson correlation with `a` over the voxels of the
/// cylinder inscribed in both fields of view; `smooth` first blurs both images in each slice
/// with a 5 x 5 binomial kernel (standard deviation 1 voxel). `None` when nothing overlaps.
pub fn correlation(a: &Volume, b: &Volume, smooth: bool) -> Option<f64> {
    let (na, nb) = (a.n, b.n);
    let (ca, cb) = ((na / 2) as f64, (nb / 2) as f64);
    let radius = (ca * a.pixel_mm).min(cb * b.pixel_mm) - b.pixel_mm;
    let (a_img, b_img) = if smooth {
        (blur(a), blur(b))
    } else {
        (a.data.clone(), b.data.clone())
    };
    let (mut sx, mut sy, mut sxx, mut syy, mut sxy, mut n) = (0f64, 0f64, 0f64, 0f64, 0f64, 0f64);
    for k in 0..a.slices {
        let z = (k as f64 - (a.slices as f64 - 1.0) / 2.0) * a.slice_mm;
        let kb = (z / b.slice_mm + (b.slices as f64 - 1.0) / 2.0).round();
        if kb < 0.0 || kb >= b.slices as f64 {
            continue;
        }
        let sb = &b_img[kb as usize * nb * nb..(kb as usize + 1) * nb * nb];
        for j in 0..na {
            for i in 0..na {
                let (x, y) = ((i as f64 - ca) * a.pixel_mm, (ca - j as f64) * a.pixel_mm);
                if x * x + y * y > radius * radius {
                    continue;
                }
                let (fi, fj) = (x / b.pixel_mm + cb, cb - y / b.pixel_mm);
                let (i0, j0) = (fi.floor() as usize, fj.floor() as usize);
                if i0 + 1 >= nb || j0 + 1 >= nb {
                    continue;
                }
                let (wi, wj) = (fi - i0 as f64, fj - j0 as f64);
                let at = |r: usize, c: usize| sb[r * nb + c] as f64;
                let vb = (1.0 - wj) * ((1.0 - wi) * at(j0, i0) + wi * at(j0, i0 + 1))
                    + wj * ((1.0 - wi) * at(j0 + 1, i0) + wi * at(j0 + 1, i0 + 1));
                let va = a_img[(k * na + j) * na + i] as f64;
                sx += va;
                sy += vb;
                sxx += va * va;
                syy += vb * vb;
                sxy += va * vb;
                n += 1.0;
            }
        }
    }
    let cov = sxy / n - sx / n * sy / n;
    let (vx, vy) = (sxx / n - (sx / n).powi(2), syy / n - (sy / n).powi(2));
    (n > 1.0 && vx > 0.0 && vy > 0.0).then(|| cov / (vx * vy).sqrt())
}

/// Each slice blurred by a 5 x 5 binomial kernel (zero outside).
fn blur(v: &Volume) -> Vec<f32> {
    const K: [f32; 5] = [1.0 / 16.0, 4.0 / 16.0, 6.0 / 16.0, 4.0 / 16.0, 1.0 / 16.0];
    let n = v.n;
    let mut out = v.data.clone();
    let mut tmp = vec![0f32; n * n];
    for s in out.chunks_mut(n * n) {
        for (stride_in, stride_out) in [(1usize, n), (n, 1usize)] {
            // Along one axis (stride_in), for every line (stride_out).
            for line in 0..n {
                for p in 0..n {
                    let mut acc = 0.0;
                    for (d, k) in K.iter().enumerate() {
                        let q = p as i64 + d as i64 - 2;
                        if (0..n as i64).contains(&q) {
                            acc += k * s[line * stride_out + q as usize * stride_in];
                        }
                    }
                    tmp[line * stride_out + p * stride_in] = acc;
                }
            }
            s.copy_from_slice(&tmp);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stirs_times_and_correlates_across_grids() {
        let log = "INFO: Computing sensitivity\n\
                   INFO: Computation times for distributable_computation, CPU 1s, wall-clock 2.5s\n\
                   INFO: Done computing sensitivity\n\
                   INFO: Computation times for distributable_computation, CPU 1s, wall-clock 0.75s\n\
                   INFO: Computation times for distributable_computation, CPU 1s, wall-clock 1.25s\n";
        assert_eq!(times(log), (2.5, vec![0.75, 1.25]));
        // A smooth image sampled on two grids correlates almost perfectly; its mirror image
        // does not.
        let make = |n: usize, p: f64, mirror: bool| {
            let c = (n / 2) as f64;
            let data = (0..3 * n * n)
                .map(|i| {
                    let (j, k) = ((i / n) % n, i % n);
                    let (x, y) = ((k as f64 - c) * p, (c - j as f64) * p);
                    let y = if mirror { -y } else { y };
                    (-((x - 20.0).powi(2) + (y - 30.0).powi(2)) / 400.0).exp() as f32
                })
                .collect();
            Volume {
                n,
                slices: 3,
                pixel_mm: p,
                slice_mm: 2.0,
                data,
            }
        };
        let a = make(64, 2.0, false);
        let r = correlation(&a, &make(80, 1.7, false), false).unwrap();
        assert!(r > 0.99, "{r}");
        let m = correlation(&a, &make(80, 1.7, true), true).unwrap();
        assert!(m < 0.5, "{m}");
    }
}
