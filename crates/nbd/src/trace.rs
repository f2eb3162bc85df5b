//! Device-side request tracing (`[ION]`, section 6): every request is recorded as the server
//! sees it, so a client's I/O behaviour is measured from the disk's side without touching the
//! client.
//!
//! File format: text, one request per line, fields separated by single spaces, after a header
//! line starting with `#`:
//!
//! `conn export command offset length arrival_ns data_ns service_ns reply_ns error`
//!
//! - `arrival_ns`: when the bytes of the request header reached the server (the socket read
//!   that delivered them, since the server started); requests a client pipelines arrive
//!   together and then wait their turn, which is how a client's queue depth shows;
//! - `data_ns`: time moving the payload: receiving a write's data, or sending a read's reply
//!   (header and data, until the socket accepted the last byte); 0 for other commands;
//! - `service_ns`: time the backend spent on the request;
//! - `reply_ns`: when the reply had been handed to the socket (since the server started);
//! - `error`: the NBD error number sent (0 = success).
//!
//! Command overhead, as in the paper's figure 7, is `reply_ns - arrival_ns - data_ns` for
//! writes (whose `arrival_ns` precedes the payload) and the same for reads.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

/// Header line of a trace file.
pub const HEADER: &str = "# offhost-nbd trace v1: conn export command offset length arrival_ns data_ns service_ns reply_ns error";

/// One traced request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Connection number (in accept order).
    pub conn: u32,
    /// Export name (spaces are replaced by `_`).
    pub export: String,
    /// Command name (`read`, `write`, ...).
    pub command: String,
    /// Byte offset.
    pub offset: u64,
    /// Byte length.
    pub length: u32,
    /// Header received, ns since server start.
    pub arrival_ns: u64,
    /// Payload transfer time, ns.
    pub data_ns: u64,
    /// Backend time, ns.
    pub service_ns: u64,
    /// Reply sent, ns since server start.
    pub reply_ns: u64,
    /// NBD error number (0 = success).
    pub error: u32,
}

impl Record {
    /// Formats the record as one trace line (without newline).
    pub fn to_line(&self) -> String {
        format!(
            "{} {} {} {} {} {} {} {} {} {}",
            self.conn,
            self.export.replace(char::is_whitespace, "_"),
            self.command,
            self.offset,
            self.length,
            self.arrival_ns,
            self.data_ns,
            self.service_ns,
            self.reply_ns,
            self.error
        )
    }

    /// Parses one trace line.
    pub fn parse(line: &str) -> Result<Self, TraceError> {
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() != 10 {
            return Err(TraceError::Fields(f.len()));
        }
        let n = |i: usize| -> Result<u64, TraceError> {
            f[i].parse::<u64>().map_err(|_| TraceError::NotANumber {
                field: i + 1,
                text: f[i].to_owned(),
            })
        };
        Ok(Self {
            conn: n(0)? as u32,
            export: f[1].to_owned(),
            command: f[2].to_owned(),
            offset: n(3)?,
            length: u32::try_from(n(4)?).map_err(|_| TraceError::Length)?,
            arrival_ns: n(5)?,
            data_ns: n(6)?,
            service_ns: n(7)?,
            reply_ns: n(8)?,
            error: n(9)? as u32,
        })
    }
}

/// What is wrong with a trace line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// Not the ten space-separated fields of a record.
    #[error("expected 10 fields, found {0}")]
    Fields(usize),
    /// A numeric field holds something else.
    #[error("field {field} `{text}` is not a number")]
    NotANumber {
        /// 1-based field number.
        field: usize,
        /// The field as written.
        text: String,
    },
    /// The length field does not fit 32 bits.
    #[error("length exceeds 32 bits")]
    Length,
}

/// A trace being written; shared by all connections.
#[derive(Debug)]
pub struct Tracer {
    start: Instant,
    out: Mutex<BufWriter<File>>,
}

impl Tracer {
    /// Creates (truncates) the trace file.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let mut w = BufWriter::new(File::create(path)?);
        writeln!(w, "{HEADER}")?;
        w.flush()?;
        Ok(Self {
            start: Instant::now(),
            out: Mutex::new(w),
        })
    }

    /// Nanoseconds since the tracer started.
    pub fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.start).as_nanos() as u64
    }

    /// Appends a record. Trace write failures are logged once per call and otherwise ignored:
    /// tracing must never take the disk down.
    pub fn record(&self, r: &Record) {
        let mut w = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = writeln!(w, "{}", r.to_line()) {
            tracing::warn!("trace write failed: {e}");
        }
    }

    /// Flushes buffered records to the file.
    pub fn flush(&self) {
        let mut w = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = w.flush() {
            tracing::warn!("trace flush failed: {e}");
        }
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_round_trip_and_errors() {
        let r = Record {
            conn: 3,
            export: "my disk".into(),
            command: "read".into(),
            offset: 4096,
            length: 512,
            arrival_ns: 10,
            data_ns: 20,
            service_ns: 5,
            reply_ns: 40,
            error: 0,
        };
        let back = Record::parse(&r.to_line()).unwrap();
        assert_eq!(back.export, "my_disk");
        assert_eq!(back.reply_ns, 40);
        assert_eq!(
            Record::parse("1 d read x 1 2 3 4 5 0"),
            Err(TraceError::NotANumber {
                field: 4,
                text: "x".into()
            })
        );
        assert_eq!(Record::parse("1 2 3"), Err(TraceError::Fields(3)));
        let long = format!("1 d read 0 {} 2 3 4 5 0", 1u64 << 32);
        assert_eq!(Record::parse(&long), Err(TraceError::Length));
    }
}
