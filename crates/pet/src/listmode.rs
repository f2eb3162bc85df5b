//! offhost's own compact list-mode format: one 16-byte record per coincidence.
//!
//! A file is a 32-byte header followed by records. All fields are little-endian.
//!
//! Header:
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0      | 8    | magic `OHPETLM1` |
//! | 8      | 2    | version (1) |
//! | 10     | 2    | record size in bytes (16) |
//! | 12     | 2    | rings |
//! | 14     | 2    | detectors per ring |
//! | 16     | 4    | ring spacing, mm (f32) |
//! | 20     | 4    | crystal radius, mm (f32) |
//! | 24     | 8    | record count, or `u64::MAX` while a stream is still open |
//!
//! Record:
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! | 0      | 2    | detector of photon A within its ring |
//! | 2      | 2    | detector of photon B within its ring |
//! | 4      | 1    | ring of photon A |
//! | 5      | 1    | ring of photon B |
//! | 6      | 2    | energy of photon A, units of 0.1 keV |
//! | 8      | 2    | energy of photon B, units of 0.1 keV |
//! | 10     | 2    | time of flight `t_A - t_B`, picoseconds (i16) |
//! | 12     | 4    | bit 31: delayed-window flag (1 = delayed, 0 = prompt); bits 0-30: time in microseconds since the start |

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::error::FormatError;
use crate::geometry::Scanner;

/// File magic.
pub const MAGIC: &[u8; 8] = b"OHPETLM1";
/// Header size in bytes.
pub const HEADER_LEN: usize = 32;
/// Record size in bytes.
pub const RECORD_LEN: usize = 16;
/// Record count written while a stream is still open.
pub const COUNT_UNKNOWN: u64 = u64::MAX;

/// One coincidence event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Event {
    /// Detector of photon A within its ring.
    pub det_a: u16,
    /// Detector of photon B within its ring.
    pub det_b: u16,
    /// Ring of photon A.
    pub ring_a: u8,
    /// Ring of photon B.
    pub ring_b: u8,
    /// Energy of photon A in units of 0.1 keV.
    pub energy_a: u16,
    /// Energy of photon B in units of 0.1 keV.
    pub energy_b: u16,
    /// Arrival time of A minus arrival time of B, in picoseconds.
    pub tof_ps: i16,
    /// Time since the start of the acquisition, in microseconds (31 bits).
    pub time_us: u32,
    /// True for a delayed-window (random) coincidence, false for a prompt.
    pub delayed: bool,
}

impl Event {
    /// Encodes the record.
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[0..2].copy_from_slice(&self.det_a.to_le_bytes());
        b[2..4].copy_from_slice(&self.det_b.to_le_bytes());
        b[4] = self.ring_a;
        b[5] = self.ring_b;
        b[6..8].copy_from_slice(&self.energy_a.to_le_bytes());
        b[8..10].copy_from_slice(&self.energy_b.to_le_bytes());
        b[10..12].copy_from_slice(&self.tof_ps.to_le_bytes());
        let t = (self.time_us & 0x7FFF_FFFF) | (u32::from(self.delayed) << 31);
        b[12..16].copy_from_slice(&t.to_le_bytes());
        b
    }

    /// Decodes a record.
    pub fn decode(b: &[u8; RECORD_LEN]) -> Event {
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let t = u32::from_le_bytes([b[12], b[13], b[14], b[15]]);
        Event {
            det_a: u16_at(0),
            det_b: u16_at(2),
            ring_a: b[4],
            ring_b: b[5],
            energy_a: u16_at(6),
            energy_b: u16_at(8),
            tof_ps: u16_at(10) as i16,
            time_us: t & 0x7FFF_FFFF,
            delayed: t >> 31 == 1,
        }
    }
}

/// The header of a list-mode file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Header {
    /// Rings of the scanner.
    pub rings: u16,
    /// Detectors per ring.
    pub detectors_per_ring: u16,
    /// Ring spacing in mm.
    pub ring_spacing_mm: f32,
    /// Crystal radius in mm.
    pub crystal_radius_mm: f32,
    /// Record count, or [`COUNT_UNKNOWN`].
    pub count: u64,
}

impl Header {
    /// Header for a scanner.
    pub fn for_scanner(s: &Scanner) -> Self {
        Header {
            rings: s.rings as u16,
            detectors_per_ring: s.detectors_per_ring as u16,
            ring_spacing_mm: s.ring_spacing_mm as f32,
            crystal_radius_mm: s.crystal_radius_mm as f32,
            count: COUNT_UNKNOWN,
        }
    }

    /// Encodes the header.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(MAGIC);
        b[8..10].copy_from_slice(&1u16.to_le_bytes());
        b[10..12].copy_from_slice(&(RECORD_LEN as u16).to_le_bytes());
        b[12..14].copy_from_slice(&self.rings.to_le_bytes());
        b[14..16].copy_from_slice(&self.detectors_per_ring.to_le_bytes());
        b[16..20].copy_from_slice(&self.ring_spacing_mm.to_le_bytes());
        b[20..24].copy_from_slice(&self.crystal_radius_mm.to_le_bytes());
        b[24..32].copy_from_slice(&self.count.to_le_bytes());
        b
    }

    /// Decodes and checks a header.
    pub fn decode(b: &[u8]) -> Result<Header, FormatError> {
        if b.len() < HEADER_LEN {
            return Err(FormatError::Truncated {
                what: "header",
                offset: 0,
                have: b.len(),
                need: HEADER_LEN,
            });
        }
        if &b[0..8] != MAGIC {
            return Err(FormatError::BadMagic {
                expected: String::from_utf8_lossy(MAGIC).into(),
                found: String::from_utf8_lossy(&b[0..8]).into(),
            });
        }
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let f32_at = |i: usize| f32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let bad = |offset: u64, what: String| Err(FormatError::BadHeader { offset, what });
        if u16_at(8) != 1 {
            return bad(8, format!("unsupported version {}", u16_at(8)));
        }
        if u16_at(10) as usize != RECORD_LEN {
            return bad(
                10,
                format!("record size {} is not {RECORD_LEN}", u16_at(10)),
            );
        }
        let h = Header {
            rings: u16_at(12),
            detectors_per_ring: u16_at(14),
            ring_spacing_mm: f32_at(16),
            crystal_radius_mm: f32_at(20),
            count: u64::from_le_bytes(b[24..32].try_into().expect("8 bytes")),
        };
        if h.rings == 0 || h.rings > 256 {
            return bad(12, format!("ring count {} is not in 1..=256", h.rings));
        }
        if h.detectors_per_ring < 2 {
            return bad(14, format!("detectors per ring {}", h.detectors_per_ring));
        }
        Ok(h)
    }

    /// Checks one record against the header; `offset` is the record's byte offset.
    pub fn check(&self, e: &Event, offset: u64) -> Result<(), FormatError> {
        let n = self.detectors_per_ring;
        if e.det_a >= n || e.det_b >= n {
            return Err(FormatError::Mismatch {
                offset,
                what: format!(
                    "detector {} or {} is not below the header's {n} detectors per ring",
                    e.det_a, e.det_b
                ),
            });
        }
        if u16::from(e.ring_a.max(e.ring_b)) >= self.rings {
            return Err(FormatError::Mismatch {
                offset,
                what: format!(
                    "ring {} or {} is not below the header's {} rings",
                    e.ring_a, e.ring_b, self.rings
                ),
            });
        }
        Ok(())
    }
}

/// Writes a list-mode file; the record count is patched into the header on [`finish`](Self::finish).
pub struct Writer<W: Write + Seek> {
    inner: W,
    header: Header,
    count: u64,
    buf: Vec<u8>,
}

impl Writer<std::io::BufWriter<std::fs::File>> {
    /// Creates a file.
    pub fn create(path: &Path, scanner: &Scanner) -> Result<Self, FormatError> {
        let f = std::fs::File::create(path)?;
        Self::new(std::io::BufWriter::with_capacity(1 << 20, f), scanner)
    }
}

impl<W: Write + Seek> Writer<W> {
    /// Starts a stream: writes the header with an unknown count.
    pub fn new(mut inner: W, scanner: &Scanner) -> Result<Self, FormatError> {
        let header = Header::for_scanner(scanner);
        inner.write_all(&header.encode())?;
        Ok(Writer {
            inner,
            header,
            count: 0,
            buf: Vec::new(),
        })
    }

    /// Appends events.
    pub fn write_events(&mut self, events: &[Event]) -> Result<(), FormatError> {
        self.buf.clear();
        for e in events {
            self.buf.extend_from_slice(&e.encode());
        }
        self.inner.write_all(&self.buf)?;
        self.count += events.len() as u64;
        Ok(())
    }

    /// Records written so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Patches the record count into the header and flushes; returns the inner writer.
    pub fn finish(mut self) -> Result<W, FormatError> {
        self.header.count = self.count;
        self.inner.flush()?;
        self.inner.seek(SeekFrom::Start(0))?;
        self.inner.write_all(&self.header.encode())?;
        self.inner.seek(SeekFrom::End(0))?;
        self.inner.flush()?;
        Ok(self.inner)
    }
}

/// Reads a list-mode file in chunks, checking every record against the header.
pub struct Reader<R> {
    inner: R,
    header: Header,
    offset: u64,
    read: u64,
    buf: Vec<u8>,
}

impl Reader<std::io::BufReader<std::fs::File>> {
    /// Opens a file and reads its header.
    pub fn open(path: &Path) -> Result<Self, FormatError> {
        let f = std::fs::File::open(path)?;
        Self::new(std::io::BufReader::with_capacity(1 << 20, f))
    }
}

impl<R: Read> Reader<R> {
    /// Reads the header from a stream.
    pub fn new(mut inner: R) -> Result<Self, FormatError> {
        let mut h = Vec::with_capacity(HEADER_LEN);
        (&mut inner).take(HEADER_LEN as u64).read_to_end(&mut h)?;
        let header = Header::decode(&h)?;
        Ok(Reader {
            inner,
            header,
            offset: HEADER_LEN as u64,
            read: 0,
            buf: Vec::new(),
        })
    }

    /// The file header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Reads up to `max` events into `out` (cleared first); returns how many, 0 at the end.
    ///
    /// Errors name the byte offset of a partial trailing record, of a record that does not
    /// fit the header's geometry, or where the data disagrees with the header's count.
    pub fn read_events(&mut self, out: &mut Vec<Event>, max: usize) -> Result<usize, FormatError> {
        out.clear();
        self.buf.resize(max * RECORD_LEN, 0);
        let mut filled = 0;
        while filled < self.buf.len() {
            let n = self.inner.read(&mut self.buf[filled..])?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        let whole = filled / RECORD_LEN * RECORD_LEN;
        if whole != filled {
            return Err(FormatError::Truncated {
                what: "record",
                offset: self.offset + whole as u64,
                have: filled - whole,
                need: RECORD_LEN,
            });
        }
        for (i, c) in self.buf[..whole].chunks_exact(RECORD_LEN).enumerate() {
            let e = Event::decode(c.try_into().expect("16 bytes"));
            self.header
                .check(&e, self.offset + (i * RECORD_LEN) as u64)?;
            out.push(e);
        }
        self.offset += whole as u64;
        self.read += out.len() as u64;
        let declared = self.header.count;
        if declared != COUNT_UNKNOWN {
            if self.read > declared {
                // `declared` is below `read`, a count of records that were read: no overflow.
                return Err(FormatError::Mismatch {
                    offset: HEADER_LEN as u64 + declared * RECORD_LEN as u64,
                    what: format!("header declares {declared} records but more data follows"),
                });
            }
            if out.is_empty() && self.read < declared {
                return Err(FormatError::Mismatch {
                    offset: self.offset,
                    what: format!(
                        "header declares {declared} records but the data ends after {}",
                        self.read
                    ),
                });
            }
        }
        Ok(out.len())
    }

    /// Reads every remaining event.
    pub fn read_all(&mut self) -> Result<Vec<Event>, FormatError> {
        let mut all = Vec::new();
        let mut chunk = Vec::new();
        while self.read_events(&mut chunk, 1 << 16)? > 0 {
            all.extend_from_slice(&chunk);
        }
        Ok(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips() {
        let e = Event {
            det_a: 511,
            det_b: 3,
            ring_a: 63,
            ring_b: 0,
            energy_a: 5110,
            energy_b: 4300,
            tof_ps: -1234,
            time_us: 0x7FFF_FFFF,
            delayed: true,
        };
        assert_eq!(Event::decode(&e.encode()), e);
    }
}
