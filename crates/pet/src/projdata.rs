//! Sinograms as STIR reads them: Interfile projection data, a `.hs` text header in STIR's
//! dialect and a raw data file beside it (`X.hs` names `X.s`).
//!
//! What is written:
//!
//! - header keys as STIR's own `write_basic_interfile_PDFS_header` writes them: `!INTERFILE`,
//!   `name of data file`, `originating system` (the scanner's name), `!number format` and
//!   `!number of bytes per pixel`, `number of dimensions := 4`, the four `matrix axis label`s
//!   and `!matrix size`s, `minimum` / `maximum ring difference per segment`, the
//!   `Scanner parameters` block (rings, detectors per ring, inner ring diameter = 2 x the
//!   crystal radius, depth of interaction 0, ring spacing, bin size, bins, one block per ring
//!   and bucket) and `applied corrections`;
//! - data in STIR's default storage order `Segment_View_AxialPos_TangPos` (segment, then view,
//!   then axial position, then tangential position fastest), segments in increasing number
//!   (`-K .. +K`, as STIR writes them), little-endian `float` (4 bytes) when every count is
//!   exact in `f32` (|count| <= 2^24), else `signed integer` (4 bytes).
//!
//! The mapping from offhost's [`Layout`]: a segment keeps its ring differences
//! (`ring_b - ring_a`, the same sign STIR gives the PETLINK addresses it decodes with the
//! segment order 0, -1, +1, ...); the axial position is the sinogram's index inside its segment
//! (increasing `ring_a + ring_b`); the view is offhost's view; the tangential position `t`
//! (STIR's `-bins/2 .. bins/2 - 1`, stored from the lowest) is offhost's radial bin
//! `t + bins/2`. For PETLINK data these are the mMR's own view and tangential indices, and the
//! span-11 files equal STIR's `lm_to_projdata` output bin for bin (`docs/notes/pet.md`).
//! Sinograms of offhost's simulator bin lines uniformly in their distance from the axis
//! (`lor`), so they are written as arc-corrected data (`applied corrections := {arc
//! correction}`, `effective central bin size (cm)`); that flag is how [`read`] knows to
//! normalise them by lines of response. Their view and tangential directions follow `lor` and
//! are not checked against STIR's.
//!
//! The reader takes what STIR writes: either storage order, segments in any order (matched by
//! their ring differences, which must form one of offhost's layouts), `float`, `signed integer`
//! (2 or 4 bytes) or `unsigned integer` (2 bytes), either byte order, `data offset in bytes`.
//! Counts must be whole numbers that fit an `i32`. Sizes are checked against the data file's
//! length before anything is allocated.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::FormatError;
use crate::geometry::Scanner;
use crate::layout::{Layout, Segment};
use crate::sinofile::SinoFlags;
use crate::sinogram::Sinogram;

/// Largest count a `float` holds exactly.
const F32_EXACT: i32 = 1 << 24;

/// The data file beside header `hs`: the same name with extension `.s`.
pub fn data_path(hs: &Path) -> PathBuf {
    hs.with_extension("s")
}

/// Whether `path` names an Interfile projection data header (extension `.hs`).
pub fn is_header(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("hs"))
}

/// Segments in the order they are written: increasing segment number.
fn file_order(layout: &Layout) -> Vec<Segment> {
    let mut segs = layout.segments().to_vec();
    segs.sort_by_key(|s| s.number);
    segs
}

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

/// How the data file holds its numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Number {
    F32,
    I32,
    I16,
    U16,
}

impl Number {
    fn bytes(self) -> usize {
        match self {
            Number::F32 | Number::I32 => 4,
            Number::I16 | Number::U16 => 2,
        }
    }
}

/// A parsed projection data header.
#[derive(Clone, Debug)]
pub struct ProjHeader {
    /// The scanner, its span inferred from segment 0.
    pub scanner: Scanner,
    /// Data file name as the header gives it.
    pub data_file: String,
    /// Byte offset of the data in the data file.
    pub data_offset: u64,
    /// Marked arc-corrected (offhost's detector-pair sinograms).
    pub arc_corrected: bool,
    number: Number,
    big_endian: bool,
    /// View before axial position (`Segment_View_AxialPos_TangPos`).
    view_major: bool,
    /// Segment numbers of offhost's layout in file order.
    segment_order: Vec<i32>,
}

/// Normalises a key: drops `!` and `%`, lowercases, collapses spaces, none before `[`.
fn norm_key(k: &str) -> String {
    let k = k.trim().trim_start_matches(['!', '%']);
    k.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
        .replace(" [", "[")
}

/// Centimetres to millimetres, rounded to a nanometre so decimal values compare exactly.
fn mm(cm: f64) -> f64 {
    (cm * 1e7).round() / 1e6
}

fn bad(line: usize, what: String) -> FormatError {
    FormatError::Interfile { line, what }
}

/// Parses header text.
pub fn parse_header(text: &str) -> Result<ProjHeader, FormatError> {
    let mut map: HashMap<String, (usize, String)> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        if let Some((k, v)) = line.split_once(":=") {
            map.insert(norm_key(k), (i + 1, v.trim().to_string()));
        }
    }
    let get = |key: &str| -> Result<&(usize, String), FormatError> {
        map.get(key)
            .ok_or_else(|| bad(0, format!("missing key {key:?}")))
    };
    let text_of = |key: &str| map.get(key).map(|x| x.1.to_lowercase());
    let num = |key: &str| -> Result<f64, FormatError> {
        let (line, v) = get(key)?;
        v.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| bad(*line, format!("{key:?} is not a number: {v:?}")))
    };
    let int = |key: &str, max: u32| -> Result<u32, FormatError> {
        let v = num(key)?;
        if v < 0.0 || v.fract() != 0.0 || v > f64::from(max) {
            return Err(bad(
                get(key)?.0,
                format!("{key:?} must be an integer from 0 to {max}, got {v}"),
            ));
        }
        Ok(v as u32)
    };
    let ints = |key: &str| -> Result<(usize, Vec<i64>), FormatError> {
        let (line, v) = get(key)?;
        let items = v
            .trim_matches(['{', '}', ' '])
            .split(',')
            .map(|x| x.trim().parse::<i64>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| bad(*line, format!("{key:?} is not a list of integers: {v:?}")))?;
        Ok((*line, items))
    };
    if !map.contains_key("interfile") {
        return Err(bad(
            1,
            "not an Interfile header (no \"!INTERFILE\" key)".into(),
        ));
    }
    let dims = int("number of dimensions", 16)?;
    if dims != 4 {
        return Err(bad(
            get("number of dimensions")?.0,
            format!("{dims} dimensions: only 4 (non-TOF projection data) are read"),
        ));
    }
    let label = |i: u32| text_of(&format!("matrix axis label[{i}]")).unwrap_or_default();
    let view_major = match [label(4), label(3), label(2), label(1)] {
        [s, v, a, t] if s == "segment" && v == "view" && a == "axial coordinate" && t == "tangential coordinate" => true,
        [s, a, v, t] if s == "segment" && v == "view" && a == "axial coordinate" && t == "tangential coordinate" => false,
        other => {
            return Err(bad(
                get("matrix axis label[4]").map(|x| x.0).unwrap_or(0),
                format!("matrix axis labels [4]..[1] {other:?}: expected segment, view or axial coordinate, the other, tangential coordinate"),
            ))
        }
    };
    let (nf, nb) = (
        text_of("number format").unwrap_or_default(),
        int("number of bytes per pixel", 8)?,
    );
    let number = match (nf.as_str(), nb) {
        ("float", 4) => Number::F32,
        ("signed integer", 4) => Number::I32,
        ("signed integer", 2) => Number::I16,
        ("unsigned integer", 2) => Number::U16,
        _ => {
            return Err(bad(
                get("number format")?.0,
                format!("number format {nf:?} with {nb} bytes is not read (float 4, signed integer 2 or 4, unsigned integer 2)"),
            ))
        }
    };
    let big_endian = match text_of("imagedata byte order").as_deref() {
        None | Some("littleendian") => false,
        Some("bigendian") => true,
        Some(o) => {
            return Err(bad(
                get("imagedata byte order")?.0,
                format!("byte order {o:?}: expected LITTLEENDIAN or BIGENDIAN"),
            ))
        }
    };
    if let Some((line, v)) = map.get("image scaling factor[1]") {
        if v.parse::<f64>().ok() != Some(1.0) {
            return Err(bad(
                *line,
                format!("image scaling factor {v:?}: only 1 is read"),
            ));
        }
    }
    let arc_corrected = text_of("applied corrections").is_some_and(|c| c.contains("arc correct"));
    let (line_min, mins) = ints("minimum ring difference per segment")?;
    let (_, maxs) = ints("maximum ring difference per segment")?;
    let (line_ax, axial) = ints("matrix size[2]")?;
    let nseg = int("matrix size[4]", 1 << 16)? as usize;
    if mins.len() != nseg || maxs.len() != nseg || axial.len() != nseg {
        return Err(bad(
            line_min,
            format!(
                "{nseg} segments but {} minimum, {} maximum ring differences and {} axial sizes",
                mins.len(),
                maxs.len(),
                axial.len()
            ),
        ));
    }
    let seg0 = mins
        .iter()
        .zip(&maxs)
        .find(|(lo, hi)| **lo == -**hi)
        .ok_or_else(|| bad(line_min, "no segment 0 (ring differences -h..h)".into()))?;
    let mrd = maxs
        .iter()
        .chain(&mins)
        .map(|v| v.unsigned_abs())
        .max()
        .unwrap_or(0);
    let small = |v: u64, what: &str| {
        u32::try_from(v).map_err(|_| bad(line_min, format!("{what} {v} is too large")))
    };
    let bin_key = if arc_corrected && map.contains_key("effective central bin size (cm)") {
        "effective central bin size (cm)"
    } else {
        "default bin size (cm)"
    };
    let radius_cm = num("inner ring diameter (cm)")? / 2.0
        + map
            .get("average depth of interaction (cm)")
            .map_or(Ok(0.0), |_| num("average depth of interaction (cm)"))?;
    let scanner = Scanner {
        name: map
            .get("originating system")
            .map_or_else(|| "interfile".into(), |x| x.1.clone()),
        rings: int("number of rings", 1 << 16)?,
        detectors_per_ring: int("number of detectors per ring", 1 << 20)?,
        ring_spacing_mm: mm(num("distance between rings (cm)")?),
        crystal_radius_mm: mm(radius_cm),
        radial_bins: int("matrix size[1]", u32::MAX)?,
        views: int("matrix size[3]", u32::MAX)?,
        bin_size_mm: mm(num(bin_key)?),
        max_ring_difference: small(mrd, "maximum ring difference")?,
        span: small(2 * seg0.1.unsigned_abs() + 1, "span")?,
    };
    let layout = Layout::new(&scanner).map_err(|e| bad(line_min, e.to_string()))?;
    let mut segment_order = Vec::with_capacity(nseg);
    for i in 0..nseg {
        let (lo, hi, n) = (mins[i], maxs[i], axial[i]);
        let seg = layout
            .segments()
            .iter()
            .find(|s| i64::from(s.min_rd) == lo && i64::from(s.max_rd) == hi)
            .ok_or_else(|| {
                bad(line_min, format!(
                    "segment with ring differences {lo}..{hi} is not one of offhost's span-{} layout of {} rings (max ring difference {mrd})",
                    scanner.span, scanner.rings
                ))
            })?;
        if i64::from(seg.count) != n {
            return Err(bad(
                line_ax,
                format!(
                    "segment {lo}..{hi} has {n} axial positions; {} rings give {}",
                    scanner.rings, seg.count
                ),
            ));
        }
        if segment_order.contains(&seg.number) {
            return Err(bad(line_min, format!("segment {lo}..{hi} appears twice")));
        }
        segment_order.push(seg.number);
    }
    if segment_order.len() != layout.segments().len() {
        return Err(bad(
            line_min,
            format!(
                "{} segments; the span-{} layout has {}",
                segment_order.len(),
                scanner.span,
                layout.segments().len()
            ),
        ));
    }
    let data_offset = match map.get("data offset in bytes[1]") {
        Some(_) => u64::from(int("data offset in bytes[1]", u32::MAX)?),
        None => 0,
    };
    Ok(ProjHeader {
        scanner,
        data_file: get("name of data file")?.1.clone(),
        data_offset,
        arc_corrected,
        number,
        big_endian,
        view_major,
        segment_order,
    })
}

/// Decodes the data (`bytes`, starting at the header's data offset) into a sinogram.
pub fn decode(h: &ProjHeader, bytes: &[u8]) -> Result<Sinogram, FormatError> {
    let need = data_len(h)?;
    if (bytes.len() as u64) < need {
        return Err(FormatError::Truncated {
            what: "projection data",
            offset: h.data_offset,
            have: bytes.len(),
            need: need as usize,
        });
    }
    // Allocated only once the data are known to be there.
    let mut s = Sinogram::new(&h.scanner).map_err(|e| FormatError::BadHeader {
        offset: 0,
        what: e.to_string(),
    })?;
    let (views, bins) = (h.scanner.views as usize, h.scanner.radial_bins as usize);
    let w = h.number.bytes();
    let mut at = 0usize;
    for &num in &h.segment_order {
        let g = *s
            .layout
            .segments()
            .iter()
            .find(|g| g.number == num)
            .expect("segment of the layout");
        let (outer, inner) = if h.view_major {
            (views, g.count as usize)
        } else {
            (g.count as usize, views)
        };
        for o in 0..outer {
            for i in 0..inner {
                let (v, a) = if h.view_major { (o, i) } else { (i, o) };
                let row = ((g.first as usize + a) * views + v) * bins;
                for d in &mut s.data[row..row + bins] {
                    let c = &bytes[at..at + w];
                    *d = value(h, c).ok_or_else(|| FormatError::Mismatch {
                        offset: h.data_offset + at as u64,
                        what: "value is not a whole count within i32".into(),
                    })?;
                    at += w;
                }
            }
        }
    }
    Ok(s)
}

/// Bytes of data the header implies (its bins are within [`crate::MAX_SINOGRAM_BINS`]).
fn data_len(h: &ProjHeader) -> Result<u64, FormatError> {
    let bins = Layout::new(&h.scanner)
        .and_then(|l| l.bins(&h.scanner))
        .map_err(|e| FormatError::BadHeader {
            offset: 0,
            what: e.to_string(),
        })?;
    Ok(bins as u64 * h.number.bytes() as u64)
}

fn value(h: &ProjHeader, c: &[u8]) -> Option<i32> {
    let b2 = |c: &[u8]| -> [u8; 2] {
        if h.big_endian {
            [c[1], c[0]]
        } else {
            [c[0], c[1]]
        }
    };
    let b4 = |c: &[u8]| -> [u8; 4] {
        if h.big_endian {
            [c[3], c[2], c[1], c[0]]
        } else {
            [c[0], c[1], c[2], c[3]]
        }
    };
    match h.number {
        Number::I32 => Some(i32::from_le_bytes(b4(c))),
        Number::I16 => Some(i32::from(i16::from_le_bytes(b2(c)))),
        Number::U16 => Some(i32::from(u16::from_le_bytes(b2(c)))),
        Number::F32 => {
            let f = f32::from_le_bytes(b4(c));
            (f.fract() == 0.0 && f.abs() <= i32::MAX as f32 / 2.0).then_some(f as i32)
        }
    }
}

/// Reads header `hs` and its data file; the flags say `last` and, for arc-corrected data,
/// `detector_pairs`.
pub fn read(hs: &Path) -> Result<(Sinogram, SinoFlags), FormatError> {
    let h = parse_header(&std::fs::read_to_string(hs)?)?;
    let dp = hs.parent().unwrap_or(Path::new("")).join(&h.data_file);
    let mut f = std::fs::File::open(&dp).map_err(|e| {
        FormatError::Io(std::io::Error::new(
            e.kind(),
            format!("data file {}: {e}", dp.display()),
        ))
    })?;
    let len = f.metadata()?.len();
    // The size the header implies, checked against the file before anything is allocated.
    let need = data_len(&h)?;
    let have = len.saturating_sub(h.data_offset);
    if have < need {
        return Err(FormatError::Truncated {
            what: "projection data",
            offset: h.data_offset.min(len),
            have: have as usize,
            need: need as usize,
        });
    }
    f.seek(SeekFrom::Start(h.data_offset))?;
    let mut bytes = vec![0u8; need as usize];
    f.read_exact(&mut bytes)?;
    let s = decode(&h, &bytes)?;
    Ok((
        s,
        SinoFlags {
            last: true,
            detector_pairs: h.arc_corrected,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(scanner: &Scanner) -> Sinogram {
        let mut s = Sinogram::new(scanner).unwrap();
        for (i, d) in s.data.iter_mut().enumerate() {
            *d = ((i * 7919) % 1001) as i32 - 300;
        }
        s
    }

    fn round_trip(s: &Sinogram, flags: SinoFlags) -> (Sinogram, SinoFlags) {
        let h = parse_header(&header(s, flags, "x.s")).unwrap();
        let d = decode(&h, &data(s)).unwrap();
        (
            d,
            SinoFlags {
                last: true,
                detector_pairs: h.arc_corrected,
            },
        )
    }

    #[test]
    fn round_trips_span1_odd_spans_and_ssrb() {
        let demo = Scanner::demo();
        for span in [1, 3, 5, demo.ssrb_span()] {
            let s = filled(&demo.with_span(span));
            for pairs in [false, true] {
                let fl = SinoFlags {
                    last: true,
                    detector_pairs: pairs,
                };
                let (d, f) = round_trip(&s, fl);
                assert_eq!(f, fl);
                assert_eq!(d.data, s.data, "span {span}");
                assert_eq!(d.scanner.with_span(1), s.scanner.with_span(1));
                assert_eq!(d.scanner.span, span);
            }
        }
    }

    #[test]
    fn header_has_stirs_segment_lists_for_the_mmr_span11() {
        let s = Sinogram::new(&Scanner::mmr().with_span(11)).unwrap();
        let h = header(&s, SinoFlags::default(), "m.s");
        assert!(
            h.contains("!matrix size [2] := { 27,49,71,93,115,127,115,93,71,49,27 }"),
            "{h}"
        );
        assert!(h.contains(
            "minimum ring difference per segment := { -60,-49,-38,-27,-16,-5,6,17,28,39,50 }"
        ));
        assert!(h.contains(
            "maximum ring difference per segment := { -50,-39,-28,-17,-6,5,16,27,38,49,60 }"
        ));
        assert!(h.contains("!number format := float"));
        assert!(h.contains("applied corrections := {None}"));
    }

    /// The first value of each storage order is segment -K's first axial position and view.
    #[test]
    fn data_are_view_major_in_increasing_segment_order() {
        let sc = Scanner::demo().with_span(5);
        let mut s = Sinogram::new(&sc).unwrap();
        let last = s
            .layout
            .segments()
            .iter()
            .find(|g| g.number == -3)
            .copied()
            .unwrap();
        let (views, bins) = (sc.views as usize, sc.radial_bins as usize);
        // Segment -3, axial 1, view 0, bin 2: the file's value number count(axial) * 0 + 1 row.
        s.data[((last.first as usize + 1) * views) * bins + 2] = 5;
        let b = data(&s);
        let at = (bins + 2) * 4;
        assert_eq!(f32::from_le_bytes(b[at..at + 4].try_into().unwrap()), 5.0);
    }

    #[test]
    fn large_counts_are_written_as_integers() {
        let mut s = Sinogram::new(&Scanner::demo().with_span(31)).unwrap();
        s.data[3] = (1 << 24) + 1;
        let h = header(&s, SinoFlags::default(), "x.s");
        assert!(h.contains("!number format := signed integer"));
        assert_eq!(round_trip(&s, SinoFlags::default()).0.data, s.data);
    }

    #[test]
    fn foreign_segments_and_bad_values_are_errors() {
        let s = Sinogram::new(&Scanner::demo().with_span(3)).unwrap();
        let h = header(&s, SinoFlags::default(), "x.s");
        let e = parse_header(&h.replace("{ -15,", "{ -14,"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not one of offhost's span-3 layout"), "{e}");
        let e = parse_header(&h.replace("!matrix size [4] := 11", "!matrix size [4] := 12"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("12 segments but 11"), "{e}");
        let p = parse_header(&h).unwrap();
        let mut d = data(&s);
        d[40..44].copy_from_slice(&0.5f32.to_le_bytes());
        let e = decode(&p, &d).unwrap_err().to_string();
        assert!(e.contains("byte offset 40"), "{e}");
        let e = decode(&p, &d[..100]).unwrap_err().to_string();
        assert!(e.contains("truncated projection data"), "{e}");
    }
}
