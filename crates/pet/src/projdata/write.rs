//! Writing Interfile projection data: the header text and the data in STIR's order.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{data_path, file_order};
use crate::error::FormatError;
use crate::sinofile::SinoFlags;
use crate::sinogram::Sinogram;

/// Largest count a `float` holds exactly.
const F32_EXACT: i32 = 1 << 24;
/// Centimetres, with enough digits that millimetres come back exactly.
fn cm(mm: f64) -> String {
    format!("{}", (mm / 10.0 * 1e9).round() / 1e9)
}

fn list(v: impl Iterator<Item = String>) -> String {
    format!("{{ {} }}", v.collect::<Vec<_>>().join(","))
}

/// Whether the data are written as `float` (all counts exact in `f32`) or `signed integer`.
fn fits_f32(s: &Sinogram) -> bool {
    s.data.iter().all(|v| v.unsigned_abs() <= F32_EXACT as u32)
}

/// The header text for sinogram `s` whose data file is called `data_name` (written by
/// [`write_to`]; `detector_pairs` sinograms are marked arc-corrected).
pub fn header(s: &Sinogram, flags: SinoFlags, data_name: &str) -> String {
    let sc = &s.scanner;
    let segs = file_order(&s.layout);
    let (format, bytes) = if fits_f32(s) {
        ("float", 4)
    } else {
        ("signed integer", 4)
    };
    let corrections = if flags.detector_pairs {
        "{arc correction}"
    } else {
        "{None}"
    };
    let mut h = String::new();
    let mut kv = |k: &str, v: &str| {
        h.push_str(k);
        h.push_str(" := ");
        h.push_str(v);
        h.push('\n');
    };
    kv("!INTERFILE", "");
    kv("!imaging modality", "PT");
    kv("name of data file", data_name);
    kv("originating system", &sc.name);
    kv("!version of keys", "STIR6.0");
    kv("!GENERAL DATA", "");
    kv("!GENERAL IMAGE DATA", "");
    kv("!type of data", "PET");
    kv("imagedata byte order", "LITTLEENDIAN");
    kv("!PET STUDY (General)", "");
    kv("!PET data type", "Emission");
    kv("applied corrections", corrections);
    kv("!number format", format);
    kv("!number of bytes per pixel", &bytes.to_string());
    kv("number of dimensions", "4");
    kv("matrix axis label [4]", "segment");
    kv("!matrix size [4]", &segs.len().to_string());
    kv("matrix axis label [3]", "view");
    kv("!matrix size [3]", &sc.views.to_string());
    kv("matrix axis label [2]", "axial coordinate");
    kv(
        "!matrix size [2]",
        &list(segs.iter().map(|g| g.count.to_string())),
    );
    kv("matrix axis label [1]", "tangential coordinate");
    kv("!matrix size [1]", &sc.radial_bins.to_string());
    kv(
        "minimum ring difference per segment",
        &list(segs.iter().map(|g| g.min_rd.to_string())),
    );
    kv(
        "maximum ring difference per segment",
        &list(segs.iter().map(|g| g.max_rd.to_string())),
    );
    kv("Scanner parameters", "");
    kv("Scanner type", &sc.name);
    kv("Number of rings", &sc.rings.to_string());
    kv(
        "Number of detectors per ring",
        &sc.detectors_per_ring.to_string(),
    );
    kv("Inner ring diameter (cm)", &cm(2.0 * sc.crystal_radius_mm));
    kv("Average depth of interaction (cm)", "0");
    kv("Distance between rings (cm)", &cm(sc.ring_spacing_mm));
    kv("Default bin size (cm)", &cm(sc.bin_size_mm));
    kv("View offset (degrees)", "0");
    kv(
        "Maximum number of non-arc-corrected bins",
        &sc.radial_bins.to_string(),
    );
    kv(
        "Default number of arc-corrected bins",
        &sc.radial_bins.to_string(),
    );
    kv("Number of blocks per bucket in transaxial direction", "1");
    kv("Number of blocks per bucket in axial direction", "1");
    kv(
        "Number of crystals per block in axial direction",
        &sc.rings.to_string(),
    );
    kv(
        "Number of crystals per block in transaxial direction",
        &sc.detectors_per_ring.to_string(),
    );
    kv("Number of detector layers", "1");
    kv(
        "Number of crystals per singles unit in axial direction",
        &sc.rings.to_string(),
    );
    kv(
        "Number of crystals per singles unit in transaxial direction",
        &sc.detectors_per_ring.to_string(),
    );
    kv("end scanner parameters", "");
    if flags.detector_pairs {
        kv("effective central bin size (cm)", &cm(sc.bin_size_mm));
    }
    kv("number of time frames", "1");
    kv("start vertical bed position (mm)", "0");
    kv("start horizontal bed position (mm)", "0");
    kv("!END OF INTERFILE", "");
    h
}

/// The data file's bytes: STIR's order (see the module docs), `float` or `signed integer` as
/// [`header`] says.
pub fn data(s: &Sinogram) -> Vec<u8> {
    let (views, bins) = (s.scanner.views as usize, s.scanner.radial_bins as usize);
    let float = fits_f32(s);
    let mut out = Vec::with_capacity(4 * s.data.len());
    for g in file_order(&s.layout) {
        for v in 0..views {
            for a in 0..g.count as usize {
                let row = ((g.first as usize + a) * views + v) * bins;
                for &c in &s.data[row..row + bins] {
                    let b = if float {
                        (c as f32).to_le_bytes()
                    } else {
                        c.to_le_bytes()
                    };
                    out.extend_from_slice(&b);
                }
            }
        }
    }
    out
}

/// Writes the header to `hs` and the data to `data`, the data file being called `data_name`
/// in the header (a name relative to the header's directory).
pub fn write_to(
    hs: &mut impl Write,
    data_out: &mut impl Write,
    data_name: &str,
    s: &Sinogram,
    flags: SinoFlags,
) -> std::io::Result<()> {
    data_out.write_all(&data(s))?;
    data_out.flush()?;
    hs.write_all(header(s, flags, data_name).as_bytes())?;
    hs.flush()
}

/// Writes `s` as `hs` and its data file [`data_path`]`(hs)`; returns the data file's path.
pub fn write(hs: &Path, s: &Sinogram, flags: SinoFlags) -> Result<PathBuf, FormatError> {
    let dp = data_path(hs);
    let name = dp
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| FormatError::BadHeader {
            offset: 0,
            what: format!("{} has no usable file name", hs.display()),
        })?
        .to_owned();
    let mut d = std::io::BufWriter::new(std::fs::File::create(&dp)?);
    let mut h = std::fs::File::create(hs)?;
    write_to(&mut h, &mut d, &name, s, flags)?;
    Ok(dp)
}
