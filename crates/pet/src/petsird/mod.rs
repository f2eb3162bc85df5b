//! PETSIRD list mode (the Emission Tomography Standardization Initiative's raw data format,
//! version 0.12, yardl binary encoding): a reader of the header and the time blocks, the
//! counts of `offhost pet stat`, and the mapping of a ring scanner's detection bins to
//! offhost's rings and detectors for `offhost pet hist`.
//!
//! A file is the yardl preamble (`yardl`, format version 1, the protocol's JSON schema, which
//! must be PETSIRD 0.12's), the header ([`Header`]: scanner geometry as replicated modules
//! with their transforms, energy and TOF bin edges, ...), then a stream of time blocks: event
//! blocks (singles, prompts and delayeds per pair of module types, triples, quadruples),
//! external signals, bed and gantry movements, dead time, singles histograms. Prompt and
//! delayed coincidences are read; the other blocks are read and skipped.
//!
//! [`PetsirdWriter`] writes offhost events (`offhost pet sim -o X.petsird`) as PETSIRD with
//! offhost's ring geometry (module docs of `writer`); [`petlink_to_petsird`] converts PETLINK
//! (`offhost pet convert`). Not done: TOF in sinograms (the TOF index is read and dropped).

mod convert;
mod header;
mod rings;
mod wire;
mod writer;

use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::Serialize;

pub use convert::{petlink_to_petsird, Converted};
pub use header::{Header, ModuleType, Transform, SCHEMA_FNV};
pub use rings::RingMap;
pub use wire::{Out, Wire};
pub use writer::PetsirdWriter;

use crate::error::FormatError;

/// A coincidence of an event time block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coincidence {
    /// Module types of the two detections.
    pub types: (u32, u32),
    /// Detection bins of the two detections (within their module types).
    pub bins: [u32; 2],
    /// TOF bin.
    pub tof: u32,
    /// From the delayed window.
    pub delayed: bool,
}

/// What a time block was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block {
    /// Events, with the block's start and stop in ms.
    Events {
        /// Start, ms.
        start: u32,
        /// Stop, ms.
        stop: u32,
    },
    /// Any other kind (external signal, bed or gantry movement, dead time, singles histogram).
    Other(u8),
}

/// Counts of a PETSIRD file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PetsirdStats {
    /// Time blocks of any kind.
    pub time_blocks: u64,
    /// Event time blocks.
    pub event_blocks: u64,
    /// Prompts and delayeds.
    pub events: u64,
    /// Prompt coincidences.
    pub prompts: u64,
    /// Delayed coincidences.
    pub delayeds: u64,
    /// Single events.
    pub singles: u64,
    /// First event block's start to the last one's stop, ms.
    pub duration_ms: u64,
}

/// Reads a PETSIRD stream.
pub struct PetsirdReader<R> {
    wire: Wire<R>,
    header: Header,
    /// Items left in the current block of the time-block stream.
    left_in_chunk: u64,
    ended: bool,
    singles: u64,
}

impl PetsirdReader<BufReader<std::fs::File>> {
    /// Opens a file and reads its header.
    pub fn open(path: &Path) -> Result<Self, FormatError> {
        let f = std::fs::File::open(path)?;
        let len = f.metadata()?.len();
        Self::new(BufReader::with_capacity(1 << 16, f), len)
    }
}

impl<R: BufRead> PetsirdReader<R> {
    /// Reads the header from `r`, `len` bytes long in all.
    pub fn new(r: R, len: u64) -> Result<Self, FormatError> {
        let mut wire = Wire::new(r, len);
        let header = header::read(&mut wire)?;
        Ok(PetsirdReader {
            wire,
            header,
            left_in_chunk: 0,
            ended: false,
            singles: 0,
        })
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Byte offset of the next time block (or of the stream's next count).
    pub fn offset(&self) -> u64 {
        self.wire.offset()
    }

    /// Single events seen so far (counted, not kept).
    pub fn singles(&self) -> u64 {
        self.singles
    }

    /// Reads the next time block, appending its prompts and delayeds to `out`; `None` at the
    /// end of the stream (which must be the end of the file).
    pub fn next_block(&mut self, out: &mut Vec<Coincidence>) -> Result<Option<Block>, FormatError> {
        if self.ended {
            return Ok(None);
        }
        let w = &mut self.wire;
        if self.left_in_chunk == 0 {
            self.left_in_chunk = w.uvar("time block count")?;
            if self.left_in_chunk == 0 {
                self.ended = true;
                if !w.at_end()? {
                    return Err(w.bad("data after the end of the time-block stream"));
                }
                return Ok(None);
            }
        }
        self.left_in_chunk -= 1;
        let at = w.offset();
        let tag = w.byte("time block tag")?;
        let start = w.u32("time interval start")?;
        let stop = w.u32("time interval stop")?;
        match tag {
            0 => {
                let n1 = w.len("single events", 1)?;
                for _ in 0..n1 {
                    let n = w.len("single events", 2)?;
                    for _ in 0..n {
                        w.u32("detection bin")?;
                        w.u32("time offset")?;
                    }
                    self.singles += n as u64;
                }
                for delayed in [false, true] {
                    let what = if delayed {
                        "delayed events"
                    } else {
                        "prompt events"
                    };
                    let n1 = w.len(what, 1)?;
                    for t1 in 0..n1 as u32 {
                        let n2 = w.len(what, 1)?;
                        for t2 in 0..n2 as u32 {
                            let n = w.len(what, 3)?;
                            out.reserve(n);
                            w.triples(n, "coincidence", |a, b, tof| {
                                out.push(Coincidence {
                                    types: (t1, t2),
                                    bins: [a, b],
                                    tof,
                                    delayed,
                                })
                            })?;
                        }
                    }
                }
                let triple = |w: &mut Wire<R>| {
                    w.skip_vec("triple events", 5, |w| {
                        (0..5).try_for_each(|_| w.u32("triple event").map(drop))
                    })
                };
                w.skip_vec("triple events", 1, |w| {
                    w.skip_vec("triple events", 1, |w| {
                        w.skip_vec("triple events", 1, triple)
                    })
                })?;
                w.skip_vec("quadruple events", 1, |w| {
                    w.skip_vec("quadruple events", 1, |w| {
                        w.skip_vec("quadruple events", 1, |w| {
                            w.skip_vec("quadruple events", 1, triple)
                        })
                    })
                })?;
                Ok(Some(Block::Events { start, stop }))
            }
            1 => {
                w.u32("signal id")?;
                w.skip_vec("signal values", 4, |w| w.skip(4, "f32"))?;
                Ok(Some(Block::Other(1)))
            }
            2 => w.skip(48, "bed transform").map(|()| Some(Block::Other(2))),
            3 => {
                w.skip_vec("gantry transforms", 48, |w| w.skip(48, "transform"))?;
                Ok(Some(Block::Other(3)))
            }
            4 => {
                w.skip_vec("singles alive time fractions", 1, |w| {
                    w.skip_vec("fractions", 4, |w| w.skip(4, "f32"))
                })?;
                w.skip_vec("module pair alive time fractions", 1, |w| {
                    w.skip_vec("module pair alive time fractions", 1, |w| {
                        let nd = w.len("array dimensions", 1)?;
                        let mut items = 1u64;
                        for _ in 0..nd {
                            let d = w.uvar("array dimension")?;
                            items = items.checked_mul(d).filter(|&n| n <= w.left()).ok_or_else(
                                || w.bad("alive time fraction array larger than the file"),
                            )?;
                        }
                        for _ in 0..items {
                            w.skip_vec("fractions", 1, |w| {
                                w.skip_vec("fractions", 4, |w| w.skip(4, "f32"))
                            })?;
                        }
                        Ok(())
                    })
                })?;
                Ok(Some(Block::Other(4)))
            }
            5 => {
                for what in ["singles per unit", "singles per detection bin"] {
                    w.skip_vec(what, 1, |w| w.skip_vec(what, 1, |w| w.uvar(what).map(drop)))?;
                }
                Ok(Some(Block::Other(5)))
            }
            t => Err(FormatError::BadHeader {
                offset: at,
                what: format!("time block tag {t} (0..=5)"),
            }),
        }
    }
}

/// Counts the time blocks and events of PETSIRD file `path`.
pub fn stat(path: &Path) -> Result<(Header, PetsirdStats), FormatError> {
    let mut r = PetsirdReader::open(path)?;
    let mut st = PetsirdStats::default();
    let mut buf = Vec::new();
    let (mut first, mut last) = (None, 0u32);
    while let Some(b) = r.next_block(&mut buf)? {
        st.time_blocks += 1;
        if let Block::Events { start, stop } = b {
            st.event_blocks += 1;
            first.get_or_insert(start);
            last = last.max(stop);
        }
        let d = buf.iter().filter(|c| c.delayed).count() as u64;
        st.delayeds += d;
        st.prompts += buf.len() as u64 - d;
        buf.clear();
    }
    st.events = st.prompts + st.delayeds;
    st.singles = r.singles;
    st.duration_ms = first.map_or(0, |f| u64::from(last.saturating_sub(f)));
    Ok((r.header, st))
}
