//! A small reader for the Interfile headers (`.hdr`) that come with PETLINK list-mode files.

use std::collections::HashMap;
use std::path::Path;

use crate::error::FormatError;
use crate::geometry::Scanner;

/// The fields of a PETLINK Interfile header that the readers use.
#[derive(Clone, Debug, PartialEq)]
pub struct PetlinkHeader {
    /// Scanner geometry from the header (detectors per ring = 2 x views).
    pub scanner: Scanner,
    /// Byte offset of the first list-mode word in the data file.
    pub data_offset: u64,
    /// Total list-mode words of the full acquisition, when given.
    pub total_words: Option<u64>,
    /// Data file name given by the header, when present.
    pub data_file: Option<String>,
    /// The header's segment table (sinograms per segment), when given.
    pub segment_table: Vec<u32>,
    /// Energy window in keV, when given.
    pub energy_window_kev: Option<(f64, f64)>,
}

/// Normalises an Interfile key: drops `!` and `%`, lowercases, collapses spaces.
fn norm_key(k: &str) -> String {
    let k = k.trim().trim_start_matches(['!', '%']);
    k.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The `key := value` lines of an Interfile header (`.hs`, `.hv`): keys normalised as
/// [`norm_key`] does with no space before `[` (`matrix size [1]` is `matrix size[1]`), each
/// value with the line it came from (the last one wins). Reads as its map.
pub(crate) struct Keys(HashMap<String, (usize, String)>);

impl Keys {
    /// The keys of header `text`.
    pub(crate) fn parse(text: &str) -> Keys {
        let mut map = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            if let Some((k, v)) = line.split_once(":=") {
                let k = norm_key(k).replace(" [", "[");
                map.insert(k, (i + 1, v.trim().to_string()));
            }
        }
        Keys(map)
    }

    /// The line and value of `key`, or an error naming the missing key.
    pub(crate) fn key(&self, key: &str) -> Result<&(usize, String), FormatError> {
        self.0.get(key).ok_or_else(|| FormatError::Interfile {
            line: 0,
            what: format!("missing key {key:?}"),
        })
    }

    /// `key`'s value as a finite number, or an error naming the key, its line and value.
    pub(crate) fn num(&self, key: &str) -> Result<f64, FormatError> {
        let (line, v) = self.key(key)?;
        v.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| FormatError::Interfile {
                line: *line,
                what: format!("{key:?} is not a number: {v:?}"),
            })
    }
}

impl std::ops::Deref for Keys {
    type Target = HashMap<String, (usize, String)>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

/// Centimetres to millimetres, rounded to a nanometre so decimal values compare exactly.
fn mm(cm: f64) -> f64 {
    (cm * 1e7).round() / 1e6
}

/// The most bytes an Interfile header may have (headers are a few KiB; the mMR's is 2).
pub const MAX_HEADER_BYTES: u64 = 1 << 20;

/// The text of the Interfile header at `path`, if it has at most [`MAX_HEADER_BYTES`]
/// (no more than that is read).
pub fn read_header(path: &Path) -> Result<String, FormatError> {
    let f = std::fs::File::open(path)?;
    offhost_engine::sandbox::read_text_within(f, MAX_HEADER_BYTES)?.ok_or_else(|| {
        FormatError::Interfile {
            line: 0,
            what: format!(
                "{}: more than the {MAX_HEADER_BYTES} bytes a header may have",
                path.display()
            ),
        }
    })
}

impl PetlinkHeader {
    /// Reads and parses a header file.
    pub fn read(path: &Path) -> Result<Self, FormatError> {
        Self::parse(&read_header(path)?)
    }

    /// Parses header text.
    pub fn parse(text: &str) -> Result<Self, FormatError> {
        let mut map: HashMap<String, (usize, String)> = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            if let Some((k, v)) = line.split_once(":=") {
                map.insert(norm_key(k), (i + 1, v.trim().to_string()));
            }
        }
        let get = |key: &str| map.get(key);
        let num = |key: &str| -> Result<f64, FormatError> {
            let (line, v) = get(key).ok_or_else(|| FormatError::Interfile {
                line: 0,
                what: format!("missing key {key:?}"),
            })?;
            v.parse::<f64>().map_err(|_| FormatError::Interfile {
                line: *line,
                what: format!("{key:?} is not a number: {v:?}"),
            })
        };
        let opt_num = |key: &str| -> Result<Option<f64>, FormatError> {
            if get(key).is_some() {
                num(key).map(Some)
            } else {
                Ok(None)
            }
        };
        let int = |key: &str| -> Result<u32, FormatError> {
            let v = num(key)?;
            if v < 0.0 || v.fract() != 0.0 || v > u32::MAX as f64 {
                return Err(FormatError::Interfile {
                    line: get(key).map(|x| x.0).unwrap_or(0),
                    what: format!("{key:?} must be a non-negative integer, got {v}"),
                });
            }
            Ok(v as u32)
        };
        // Offsets and counts: non-negative integers below 2^53 (exact in the header's f64).
        let count = |key: &str| -> Result<Option<u64>, FormatError> {
            let Some(v) = opt_num(key)? else {
                return Ok(None);
            };
            if v < 0.0 || v.fract() != 0.0 || v > (1u64 << 53) as f64 {
                return Err(FormatError::Interfile {
                    line: get(key).map(|x| x.0).unwrap_or(0),
                    what: format!("{key:?} must be an integer from 0 to 2^53, got {v}"),
                });
            }
            Ok(Some(v as u64))
        };
        let views = int("number of views")?;
        let detectors_per_ring = views.checked_mul(2).ok_or_else(|| FormatError::Interfile {
            line: get("number of views").map(|x| x.0).unwrap_or(0),
            what: format!(
                "\"number of views\" {views} is too large (2 x views detectors per ring)"
            ),
        })?;
        let scanner = Scanner {
            name: get("originating system")
                .map(|x| x.1.clone())
                .unwrap_or_else(|| "petlink".into()),
            rings: int("number of rings")?,
            detectors_per_ring,
            ring_spacing_mm: mm(num("distance between rings (cm)")?),
            crystal_radius_mm: mm(num("gantry crystal radius (cm)")?),
            radial_bins: int("number of projections")?,
            views,
            bin_size_mm: mm(num("bin size (cm)")?),
            max_ring_difference: int("maximum ring difference")?,
            span: match count("axial compression")? {
                None => 1,
                Some(v) => u32::try_from(v).unwrap_or(u32::MAX),
            },
        };
        scanner.validate().map_err(|e| FormatError::Interfile {
            line: 0,
            what: e.to_string(),
        })?;
        let segment_table = match get("segment table") {
            None => Vec::new(),
            Some((line, v)) => v
                .trim_matches(['{', '}', ' '])
                .split(',')
                .map(|x| {
                    x.trim().parse::<u32>().map_err(|_| FormatError::Interfile {
                        line: *line,
                        what: format!("bad segment table entry {x:?}"),
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        let lo = opt_num("energy window lower level (kev) [1]")?;
        let hi = opt_num("energy window upper level (kev) [1]")?;
        Ok(PetlinkHeader {
            scanner,
            data_offset: count("data offset in bytes")?.unwrap_or(0),
            total_words: count("total listmode word counts")?,
            data_file: get("name of data file").map(|x| x.1.clone()),
            segment_table,
            energy_window_kev: lo.zip(hi),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_past_its_bound_is_refused_without_reading_it_all() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big.hdr");
        std::fs::write(&p, vec![b'!'; MAX_HEADER_BYTES as usize + 1]).unwrap();
        let e = PetlinkHeader::read(&p).unwrap_err();
        assert!(e.to_string().contains("bytes a header may have"), "{e}");
        std::fs::write(&p, "!INTERFILE :=\n").unwrap();
        assert_eq!(read_header(&p).unwrap(), "!INTERFILE :=\n");
    }

    #[test]
    fn missing_key_is_named() {
        let e = PetlinkHeader::parse("number of rings:=64\n").unwrap_err();
        assert!(e.to_string().contains("number of views"), "{e}");
    }

    #[test]
    fn bad_number_names_line() {
        let e = PetlinkHeader::parse("a:=1\n%number of views:=abc\n").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
    }
}
