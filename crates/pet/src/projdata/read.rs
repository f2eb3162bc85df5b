//! Reading Interfile projection data: the header's keys, then the data in either storage
//! order, checked against the data file's length before anything is allocated.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::error::FormatError;
use crate::geometry::Scanner;
use crate::layout::Layout;
use crate::sinofile::SinoFlags;
use crate::sinogram::Sinogram;

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

/// Centimetres to millimetres, rounded to a nanometre so decimal values compare exactly.
fn mm(cm: f64) -> f64 {
    (cm * 1e7).round() / 1e6
}

fn bad(line: usize, what: String) -> FormatError {
    FormatError::Interfile { line, what }
}

/// Parses header text.
pub fn parse_header(text: &str) -> Result<ProjHeader, FormatError> {
    let map = crate::interfile::Keys::parse(text);
    let get = |key: &str| map.key(key);
    let text_of = |key: &str| map.get(key).map(|x| x.1.to_lowercase());
    let num = |key: &str| map.num(key);
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
    check_len(h, bytes)?;
    // Allocated only once the data are known to be there.
    let mut s = Sinogram::new(&h.scanner).map_err(|e| FormatError::BadHeader {
        offset: 0,
        what: e.to_string(),
    })?;
    let layout = s.layout.clone();
    decode_into(h, &layout, bytes, &mut s.data, |c| {
        value(h, c).ok_or("value is not a whole count within i32")
    })?;
    Ok(s)
}

/// Decodes the data as real numbers in offhost's order (`[sinogram][view][bin]`): factors
/// such as normalisation or attenuation; every value must be finite.
pub fn decode_f32(h: &ProjHeader, bytes: &[u8]) -> Result<Vec<f32>, FormatError> {
    check_len(h, bytes)?;
    let layout = Layout::new(&h.scanner).map_err(|e| FormatError::BadHeader {
        offset: 0,
        what: e.to_string(),
    })?;
    let mut out = vec![0f32; data_len(h)? as usize / h.number.bytes()];
    decode_into(h, &layout, bytes, &mut out, |c| {
        real(h, c)
            .filter(|v| v.is_finite())
            .ok_or("value is not a finite number")
    })?;
    Ok(out)
}

fn check_len(h: &ProjHeader, bytes: &[u8]) -> Result<(), FormatError> {
    let need = data_len(h)?;
    if (bytes.len() as u64) < need {
        return Err(FormatError::Truncated {
            what: "projection data",
            offset: h.data_offset,
            have: bytes.len(),
            need: need as usize,
        });
    }
    Ok(())
}

fn decode_into<T>(
    h: &ProjHeader,
    layout: &Layout,
    bytes: &[u8],
    out: &mut [T],
    conv: impl Fn(&[u8]) -> Result<T, &'static str>,
) -> Result<(), FormatError> {
    let (views, bins) = (h.scanner.views as usize, h.scanner.radial_bins as usize);
    let w = h.number.bytes();
    let mut at = 0usize;
    for &num in &h.segment_order {
        let g = *layout
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
                for d in &mut out[row..row + bins] {
                    let c = &bytes[at..at + w];
                    *d = conv(c).map_err(|what| FormatError::Mismatch {
                        offset: h.data_offset + at as u64,
                        what: what.into(),
                    })?;
                    at += w;
                }
            }
        }
    }
    Ok(())
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

fn real(h: &ProjHeader, c: &[u8]) -> Option<f32> {
    match h.number {
        Number::F32 => {
            let b: [u8; 4] = c.try_into().ok()?;
            Some(if h.big_endian {
                f32::from_be_bytes(b)
            } else {
                f32::from_le_bytes(b)
            })
        }
        _ => value(h, c).map(|v| v as f32),
    }
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
    let (h, bytes) = read_raw(hs)?;
    let s = decode(&h, &bytes)?;
    Ok((
        s,
        SinoFlags {
            last: true,
            detector_pairs: h.arc_corrected,
        },
    ))
}

/// Reads header `hs` and its data as real numbers ([`decode_f32`]): per-bin factors.
pub fn read_f32(hs: &Path) -> Result<(ProjHeader, Vec<f32>), FormatError> {
    let (h, bytes) = read_raw(hs)?;
    let v = decode_f32(&h, &bytes)?;
    Ok((h, v))
}

fn read_raw(hs: &Path) -> Result<(ProjHeader, Vec<u8>), FormatError> {
    let h = parse_header(&crate::interfile::read_header(hs)?)?;
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
    Ok((h, bytes))
}
