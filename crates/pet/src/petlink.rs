//! Reader for Siemens PETLINK 32-bit list-mode files (as written by the Biograph mMR).
//!
//! Each little-endian 32-bit word is one of:
//!
//! | bits 31..  | meaning |
//! |------------|---------|
//! | `0P` + 30  | coincidence event: `P` = 1 prompt, 0 delayed; bits 0-29 a span-1 bin address |
//! | `100` + 29 | elapsed-time tag, bits 0-28 = milliseconds |
//! | `101`      | dead-time / singles tag |
//! | `110`      | motion / bed tag |
//! | `1110`     | monitoring tag |
//! | `1111`     | control tag |
//!
//! A bin address `a` decodes to `tang = a % projections`, `view = (a / projections) % views`,
//! `sinogram = a / (projections * views)` in the span-1 layout of [`Layout`].

use std::io::Read;
use std::path::Path;

use serde::Serialize;

use crate::error::FormatError;
use crate::geometry::Scanner;
use crate::interfile::PetlinkHeader;
use crate::layout::Layout;

/// One decoded PETLINK word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Word {
    /// A coincidence event.
    Event {
        /// True for a prompt, false for a delayed coincidence.
        prompt: bool,
        /// Span-1 bin address.
        bin: u32,
    },
    /// Elapsed time in milliseconds.
    Time(u32),
    /// Dead-time or singles tag.
    DeadTime,
    /// Motion or bed tag.
    Motion,
    /// Monitoring tag.
    Monitor,
    /// Control tag.
    Control,
}

impl Word {
    /// Classifies a raw word.
    #[inline]
    pub fn decode(w: u32) -> Word {
        if w >> 31 == 0 {
            Word::Event {
                prompt: (w >> 30) & 1 == 1,
                bin: w & 0x3FFF_FFFF,
            }
        } else {
            match w >> 29 {
                0b100 => Word::Time(w & 0x1FFF_FFFF),
                0b101 => Word::DeadTime,
                0b110 => Word::Motion,
                _ if w >> 28 == 0b1110 => Word::Monitor,
                _ => Word::Control,
            }
        }
    }
}

/// Decoded sinogram coordinates of a bin address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BinCoords {
    /// Radial (tangential) position.
    pub tang: u32,
    /// View.
    pub view: u32,
    /// Span-1 sinogram index.
    pub sinogram: u32,
}

/// Decodes a bin address with the scanner's projections and views.
#[inline]
pub fn bin_coords(bin: u32, scanner: &Scanner) -> BinCoords {
    let (p, v) = (scanner.radial_bins, scanner.views);
    BinCoords {
        tang: bin % p,
        view: (bin / p) % v,
        sinogram: bin / (p * v),
    }
}

/// Word counts of a PETLINK file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PetlinkStats {
    /// 32-bit words read.
    pub words: u64,
    /// Coincidence events (prompts + delayeds).
    pub events: u64,
    /// Prompt events.
    pub prompts: u64,
    /// Delayed events.
    pub delayeds: u64,
    /// Elapsed-time tags.
    pub time_tags: u64,
    /// Dead-time / singles tags.
    pub deadtime_tags: u64,
    /// Motion / bed tags.
    pub motion_tags: u64,
    /// Monitoring tags.
    pub monitor_tags: u64,
    /// Control tags.
    pub control_tags: u64,
    /// First elapsed-time tag (ms).
    pub first_time_ms: Option<u32>,
    /// Last elapsed-time tag (ms).
    pub last_time_ms: Option<u32>,
    /// Last minus first time tag (ms), 0 without time tags.
    pub duration_ms: u64,
}

impl PetlinkStats {
    /// Counts one word.
    #[inline]
    pub fn add(&mut self, w: Word) {
        self.words += 1;
        match w {
            Word::Event { prompt, .. } => {
                self.events += 1;
                if prompt {
                    self.prompts += 1
                } else {
                    self.delayeds += 1
                }
            }
            Word::Time(ms) => {
                self.time_tags += 1;
                self.first_time_ms.get_or_insert(ms);
                self.last_time_ms = Some(ms);
                self.duration_ms = u64::from(ms.saturating_sub(self.first_time_ms.unwrap_or(ms)));
            }
            Word::DeadTime => self.deadtime_tags += 1,
            Word::Motion => self.motion_tags += 1,
            Word::Monitor => self.monitor_tags += 1,
            Word::Control => self.control_tags += 1,
        }
    }
}

/// Streams the words of a PETLINK file in chunks, checking each against the header.
pub struct PetlinkReader<R> {
    inner: R,
    offset: u64,
    max_bin: u32,
    max_words: Option<u64>,
    words: u64,
    pending: Vec<u8>,
}

impl PetlinkReader<std::io::BufReader<std::fs::File>> {
    /// Opens a data file with its header (geometry, data offset and declared word count).
    pub fn open(path: &Path, header: &PetlinkHeader) -> Result<Self, FormatError> {
        Self::from_file(std::fs::File::open(path)?, header)
    }

    /// Like [`open`](Self::open), for a file already open.
    pub fn from_file(mut f: std::fs::File, header: &PetlinkHeader) -> Result<Self, FormatError> {
        let len = f.metadata()?.len();
        if header.data_offset > len {
            return Err(FormatError::Mismatch {
                offset: len,
                what: format!(
                    "header data offset {} is beyond the end of the file",
                    header.data_offset
                ),
            });
        }
        if let Some(total) = header.total_words {
            // The file may be an excerpt (shorter than declared), never longer.
            let declared_end = total
                .checked_mul(4)
                .and_then(|b| b.checked_add(header.data_offset));
            if declared_end.is_some_and(|end| len > end) {
                return Err(FormatError::Mismatch {
                    offset: declared_end.unwrap_or(len),
                    what: format!(
                        "the file holds {} words, more than the header's total listmode word counts of {total}",
                        (len - header.data_offset) / 4
                    ),
                });
            }
        }
        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(header.data_offset))?;
        Self::new(
            std::io::BufReader::with_capacity(1 << 20, f),
            header,
            header.data_offset,
        )
    }
}

impl<R: Read> PetlinkReader<R> {
    /// Wraps a reader positioned at the first word (`offset` = its byte offset in the file).
    pub fn new(inner: R, header: &PetlinkHeader, offset: u64) -> Result<Self, FormatError> {
        let layout =
            Layout::new(&header.scanner.with_span(1)).map_err(|e| FormatError::BadHeader {
                offset: 0,
                what: e.to_string(),
            })?;
        let max_bin = layout
            .bins(&header.scanner)
            .ok()
            .and_then(|b| u32::try_from(b).ok())
            .filter(|&b| b <= 1 << 30)
            .ok_or_else(|| FormatError::BadHeader {
                offset: 0,
                what: "sinogram too large for 30-bit bin addresses".into(),
            })?;
        Ok(PetlinkReader {
            inner,
            offset,
            max_bin,
            max_words: header.total_words,
            words: 0,
            pending: Vec::new(),
        })
    }

    /// Byte offset of the next word.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads up to `max` words into `out` (cleared first); returns the number read, 0 at the end.
    ///
    /// Errors name the byte offset of the offending word: a trailing partial word, an event
    /// whose bin address lies outside the header's span-1 sinogram, or more words than the
    /// header declares.
    pub fn read_words(&mut self, out: &mut Vec<u32>, max: usize) -> Result<usize, FormatError> {
        out.clear();
        self.pending.resize(max * 4, 0);
        let mut filled = 0;
        while filled < self.pending.len() {
            let n = self.inner.read(&mut self.pending[filled..])?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        let whole = filled / 4 * 4;
        if filled != whole {
            return Err(FormatError::Truncated {
                what: "word",
                offset: self.offset + whole as u64,
                have: filled - whole,
                need: 4,
            });
        }
        for (i, c) in self.pending[..whole].chunks_exact(4).enumerate() {
            let w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            let at = self.offset + 4 * i as u64;
            if w >> 31 == 0 && (w & 0x3FFF_FFFF) >= self.max_bin {
                return Err(FormatError::Mismatch {
                    offset: at,
                    what: format!(
                        "event bin address {} is outside the header's sinogram ({} bins)",
                        w & 0x3FFF_FFFF,
                        self.max_bin
                    ),
                });
            }
            out.push(w);
        }
        self.offset += whole as u64;
        self.words += out.len() as u64;
        if let Some(m) = self.max_words {
            if self.words > m {
                return Err(FormatError::Mismatch {
                    offset: self.offset - 4 * (self.words - m),
                    what: format!("more words than the header's total of {m}"),
                });
            }
        }
        Ok(out.len())
    }
}

/// Counts the words of a PETLINK file.
pub fn stat(path: &Path, header: &PetlinkHeader) -> Result<PetlinkStats, FormatError> {
    let mut r = PetlinkReader::open(path, header)?;
    let mut stats = PetlinkStats::default();
    let mut buf = Vec::new();
    while r.read_words(&mut buf, 1 << 16)? > 0 {
        for &w in &buf {
            stats.add(Word::decode(w));
        }
    }
    Ok(stats)
}

/// Finds the header beside a data file: `FILE.hdr`, or any `*.hdr` in the same directory
/// whose `name of data file` names it.
pub fn find_header(data: &Path) -> Option<std::path::PathBuf> {
    find_header_with(
        data,
        |p| crate::interfile::read_header(p).ok(),
        |dir| {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            let rd = std::fs::read_dir(dir).ok()?;
            Some(
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect(),
            )
        },
    )
    .map(|(p, _)| p)
}

/// [`find_header`] through given file access: `read` returns a file's text, `list` the names
/// in a directory (`""` for the current one). Returns the header's path and text.
pub fn find_header_with(
    data: &Path,
    read: impl Fn(&Path) -> Option<String>,
    list: impl Fn(&Path) -> Option<Vec<String>>,
) -> Option<(std::path::PathBuf, String)> {
    let direct = data.with_extension("l.hdr");
    if let Some(text) = read(&direct) {
        return Some((direct, text));
    }
    let name = data.file_name()?.to_str()?;
    let dir = data.parent().unwrap_or(Path::new(""));
    for entry in list(dir)? {
        let p = dir.join(&entry);
        if p.extension().is_some_and(|x| x == "hdr") {
            if let Some(text) = read(&p) {
                if let Ok(h) = PetlinkHeader::parse(&text) {
                    if h.data_file.as_deref() == Some(name) {
                        return Some((p, text));
                    }
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_word_kinds() {
        assert_eq!(
            Word::decode(0x4000_0005),
            Word::Event {
                prompt: true,
                bin: 5
            }
        );
        assert_eq!(
            Word::decode(7),
            Word::Event {
                prompt: false,
                bin: 7
            }
        );
        assert_eq!(Word::decode(0x8000_0010), Word::Time(16));
        assert_eq!(Word::decode(0xA000_0000), Word::DeadTime);
        assert_eq!(Word::decode(0xC000_0000), Word::Motion);
        assert_eq!(Word::decode(0xE000_0000), Word::Monitor);
        assert_eq!(Word::decode(0xF000_0000), Word::Control);
    }
}
