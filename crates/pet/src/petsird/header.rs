//! The PETSIRD header: the protocol preamble, then `Header` (scanner information, optional
//! exam information). Kept: the model name, each module type's detecting element (its box and
//! element transforms) and module transforms, and the event energy bin edges; everything else
//! is read and skipped, so that the time blocks start where they should.

use std::io::BufRead;

use super::wire::Wire;
use crate::error::FormatError;

/// FNV-1a (64 bits) of the PETSIRD 0.12 protocol schema that the file's preamble carries; the
/// layout read here is that version's.
pub const SCHEMA_FNV: u64 = 0x5f30_ec72_bdbb_d883;

/// A rigid transformation: `[r00 r01 r02 t0, r10 r11 r12 t1, r20 r21 r22 t2]`.
pub type Transform = [f32; 12];

/// Applies a transformation to a point.
pub fn apply(t: &Transform, p: [f64; 3]) -> [f64; 3] {
    let m = |i: usize| f64::from(t[i]);
    let row = |r: usize| m(4 * r) * p[0] + m(4 * r + 1) * p[1] + m(4 * r + 2) * p[2] + m(4 * r + 3);
    [row(0), row(1), row(2)]
}

/// One type of detector module and its copies.
#[derive(Clone, Debug, PartialEq)]
pub struct ModuleType {
    /// The detecting element's box corners (mm).
    pub element_box: [[f32; 3]; 8],
    /// Where the elements sit in a module.
    pub elements: Vec<Transform>,
    /// Where the modules sit in the scanner.
    pub modules: Vec<Transform>,
}

/// What offhost keeps of a PETSIRD header.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// The scanner's model name.
    pub model_name: String,
    /// The module types.
    pub module_types: Vec<ModuleType>,
    /// Event energy bin edges (keV) per module type.
    pub energy_edges: Vec<Vec<f32>>,
    /// Number of TOF bins per module type pair (`[t1][t2]`), from the TOF bin edges.
    pub tof_bins: Vec<Vec<usize>>,
}

impl Header {
    /// Detection bins of module type `t` (modules x elements x energy bins).
    pub fn detection_bins(&self, t: usize) -> u64 {
        let m = &self.module_types[t];
        let e = self
            .energy_edges
            .get(t)
            .map_or(0, |e| e.len().saturating_sub(1));
        (m.modules.len() as u64) * (m.elements.len() as u64) * e as u64
    }
}

fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Reads the preamble (magic `yardl`, format version 1, the PETSIRD 0.12 schema) and the
/// header.
pub fn read<R: BufRead>(w: &mut Wire<R>) -> Result<Header, FormatError> {
    let mut magic = [0u8; 5];
    w.bytes(&mut magic, "yardl magic")?;
    if &magic != b"yardl" {
        return Err(FormatError::BadMagic {
            expected: "yardl".into(),
            found: String::from_utf8_lossy(&magic).into(),
        });
    }
    let mut v = [0u8; 4];
    w.bytes(&mut v, "format version")?;
    if u32::from_le_bytes(v) != 1 {
        return Err(FormatError::BadHeader {
            offset: 5,
            what: format!(
                "yardl binary format version {} (1 is read)",
                u32::from_le_bytes(v)
            ),
        });
    }
    let at = w.offset();
    let schema = w.string("protocol schema")?;
    if !schema.starts_with("{\"protocol\":{\"name\":\"PETSIRD\"") {
        return Err(FormatError::BadHeader {
            offset: at,
            what: "the yardl protocol is not PETSIRD".into(),
        });
    }
    if fnv(schema.as_bytes()) != SCHEMA_FNV {
        return Err(FormatError::BadHeader {
            offset: at,
            what: format!(
                "PETSIRD schema differs from version 0.12's (FNV-1a {:#x}, expected {SCHEMA_FNV:#x}): not read",
                fnv(schema.as_bytes())
            ),
        });
    }
    scanner(w)
}

fn transform<R: BufRead>(w: &mut Wire<R>) -> Result<Transform, FormatError> {
    let mut t = [0f32; 12];
    for x in &mut t {
        *x = w.f32("transform")?;
    }
    Ok(t)
}

fn box_shape<R: BufRead>(w: &mut Wire<R>) -> Result<[[f32; 3]; 8], FormatError> {
    let mut b = [[0f32; 3]; 8];
    for c in &mut b {
        for x in c {
            *x = w.f32("box corner")?;
        }
    }
    Ok(b)
}

/// Skips a solid volume whose shape is the union box | annulus.
fn skip_generic_volume<R: BufRead>(w: &mut Wire<R>) -> Result<(), FormatError> {
    let at = w.offset();
    match w.byte("shape")? {
        0 => w.skip(8 * 12, "box shape")?,
        1 => w.skip(4 * 5, "annulus shape")?,
        t => {
            return Err(FormatError::BadHeader {
                offset: at,
                what: format!("geometric shape tag {t} (0 box, 1 annulus)"),
            })
        }
    }
    w.u32("material id").map(drop)
}

fn skip_bin_edges<R: BufRead>(w: &mut Wire<R>) -> Result<Vec<f32>, FormatError> {
    w.vec("bin edges", 4, |w| w.f32("bin edge"))
}

fn scanner<R: BufRead>(w: &mut Wire<R>) -> Result<Header, FormatError> {
    let model_name = w.string("model name")?;
    // scanner geometry: replicated modules
    let module_types = w.vec("replicated modules", 1, |w| {
        let element_box = box_shape(w)?;
        w.u32("material id")?;
        let elements = w.vec("element transforms", 48, transform)?;
        w.skip_vec("non-detecting elements", 1, |w| {
            skip_generic_volume(w)?;
            w.skip_vec("transforms", 48, |w| w.skip(48, "transform"))
        })?;
        let modules = w.vec("module transforms", 48, transform)?;
        Ok(ModuleType {
            element_box,
            elements,
            modules,
        })
    })?;
    if w.has("non-detecting volumes")? {
        w.skip_vec("non-detecting volumes", 1, skip_generic_volume)?;
    }
    w.skip_vec("bulk materials", 1, |w| {
        w.u32("material id")?;
        w.skip_string("material name")?;
        w.f32("density")?;
        w.skip_vec("atoms", 2, |w| {
            w.u32("mass number").and(w.u32("atomic number")).map(drop)
        })?;
        w.skip_vec("mass fractions", 4, |w| w.skip(4, "mass fraction"))
    })?;
    if w.has("gantry alignment")? {
        w.skip(48, "gantry alignment")?;
    }
    w.skip_string("collimator type")?;
    let tof_bins = w.vec("TOF bin edges", 1, |w| {
        w.vec("TOF bin edges", 1, |w| {
            skip_bin_edges(w).map(|e| e.len().saturating_sub(1))
        })
    })?;
    w.skip_vec("TOF resolution", 1, |w| {
        w.skip_vec("TOF resolution", 4, |w| w.skip(4, "f32"))
    })?;
    let energy_edges = w.vec("event energy bin edges", 1, skip_bin_edges)?;
    w.skip_vec("energy resolution at 511", 4, |w| w.skip(4, "f32"))?;
    w.ivar("singles histogram level")?;
    w.skip_vec("module singles unit LUTs", 1, |w| {
        w.skip_vec("singles unit LUT", 1, |w| w.ivar("singles unit").map(drop))
    })?;
    w.skip_vec("singles histogram energy bin edges", 1, |w| {
        skip_bin_edges(w).map(drop)
    })?;
    for what in [
        "single event policy",
        "prompt event policy",
        "delayed event policy",
        "triple event policy",
        "quadruple event policy",
    ] {
        w.ivar(what)?;
    }
    // detection efficiencies
    w.skip_string("method description")?;
    w.f32("calibration factor")?;
    w.skip_vec("detection bin efficiencies", 1, |w| {
        w.skip_vec("efficiencies", 4, |w| w.skip(4, "f32"))
    })?;
    w.skip_vec("module pair SGID LUT", 1, |w| {
        w.skip_vec("LUT", 1, |w| {
            w.skip_vec("LUT", 1, |w| {
                w.skip_vec("LUT", 1, |w| w.ivar("sgid").map(drop))
            })
        })
    })?;
    w.skip_vec("module pair efficiencies", 1, |w| {
        w.skip_vec("module pair efficiencies", 1, |w| {
            w.skip_vec("module pair efficiencies", 1, |w| {
                w.skip_vec("values", 1, |w| {
                    w.skip_vec("values", 4, |w| w.skip(4, "f32"))
                })?;
                w.ivar("sgid").map(drop)
            })
        })
    })?;
    if w.has("exam information")? {
        skip_exam(w)?;
    }
    Ok(Header {
        model_name,
        module_types,
        energy_edges,
        tof_bins,
    })
}

fn skip_code_sequence<R: BufRead>(w: &mut Wire<R>) -> Result<(), FormatError> {
    for _ in 0..5 {
        w.skip_string("DICOM code sequence")?;
    }
    Ok(())
}

fn skip_exam<R: BufRead>(w: &mut Wire<R>) -> Result<(), FormatError> {
    for _ in 0..5 {
        w.skip_string("exam identifier")?;
    }
    w.ivar("start of study")?;
    if w.has("start of acquisition")? {
        w.ivar("start of acquisition")?;
    }
    // patient: id, sex, size, weight, body mass index
    w.skip_string("patient id")?;
    w.skip_string("patient sex")?;
    w.skip(12, "patient size, weight, BMI")?;
    for _ in 0..3 {
        skip_code_sequence(w)?;
    }
    w.skip_vec("radiopharmaceuticals", 1, |w| {
        w.f32("volume")?;
        w.ivar("start")?;
        w.ivar("stop")?;
        w.f32("total dose")?;
        w.skip_string("event uid")?;
        w.f32("specific activity")?;
        skip_code_sequence(w)?;
        skip_code_sequence(w)
    })?;
    w.skip_vec("external signals", 1, |w| {
        w.ivar("signal type")?;
        w.skip_string("signal description")?;
        w.u32("signal id").map(drop)
    })
}
