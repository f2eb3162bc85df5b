//! One request: checking it against the export, running it on the backend, and sending its
//! reply (simple or structured), with the trace record when tracing.

use std::io::{self, BufWriter, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use crate::export::Export;
use crate::proto::*;
use crate::trace::{Record, Tracer};

/// Output half of a connection, shared by the reader and the request threads.
pub(crate) struct Out<W: Write> {
    pub(crate) w: Mutex<BufWriter<W>>,
}

/// Everything a request needs.
pub(crate) struct Ctx<'a, W: Write> {
    pub(crate) export: &'a Export,
    pub(crate) structured: bool,
    pub(crate) out: &'a Out<W>,
    pub(crate) tracer: Option<&'a Tracer>,
    pub(crate) conn: u32,
}

/// What a request produced.
pub(crate) enum Outcome {
    /// Success without data.
    Done,
    /// Success with read data (the buffer holds exactly the requested length).
    Data(Vec<u8>),
    /// Failure with a message for humans.
    Fail(Errno, String),
}

impl<W: Write> Ctx<'_, W> {
    /// Sends the reply for `req`; flushes the socket unless `hold` says another complete request
    /// is buffered (always when tracing).
    pub(crate) fn reply(
        &self,
        req: &Request,
        outcome: &Outcome,
        hold: Option<&AtomicBool>,
        arrival: Instant,
        data_ns: u64,
        service_ns: u64,
    ) -> io::Result<()> {
        let mut head = Vec::with_capacity(64);
        let mut payload: &[u8] = &[];
        let errno = match outcome {
            Outcome::Fail(e, msg) => {
                if self.structured {
                    encode_error_chunk(&mut head, req.handle, *e, msg);
                } else {
                    encode_simple_reply(&mut head, *e as u32, req.handle);
                }
                *e as u32
            }
            Outcome::Data(d) => {
                if self.structured {
                    encode_chunk_header(
                        &mut head,
                        REPLY_FLAG_DONE,
                        REPLY_TYPE_OFFSET_DATA,
                        req.handle,
                        8 + d.len() as u32,
                    );
                    head.extend_from_slice(&req.offset.to_be_bytes());
                } else {
                    encode_simple_reply(&mut head, 0, req.handle);
                }
                payload = d;
                0
            }
            Outcome::Done => {
                encode_simple_reply(&mut head, 0, req.handle);
                0
            }
        };
        let t0;
        {
            let mut w = self.out.w.lock().unwrap_or_else(|e| e.into_inner());
            // The data phase starts once this reply owns the socket (not while it waits for
            // other workers' replies). The clock is read only for the trace.
            t0 = self.tracer.is_some().then(Instant::now);
            w.write_all(&head)?;
            w.write_all(payload)?;
            // Ordering: Acquire pairs with the Release stores in conn.rs `take_locked`.
            let held = hold.is_some_and(|m| m.load(Ordering::Acquire));
            if !held || self.tracer.is_some() {
                w.flush()?;
            }
        }
        if let Some(t) = self.tracer {
            let now = Instant::now();
            let data_ns = if req.command == Command::Read {
                t0.map_or(0, |t0| now.duration_since(t0).as_nanos() as u64)
            } else {
                data_ns
            };
            t.record(&Record {
                conn: self.conn,
                export: self.export.name.clone(),
                command: req.command.name().to_owned(),
                offset: req.offset,
                length: req.length,
                arrival_ns: t.ns(arrival),
                data_ns,
                service_ns,
                reply_ns: t.ns(now),
                error: errno,
            });
        }
        Ok(())
    }

    /// Checks a request against the export; `Some` is the error to send.
    pub(crate) fn check(&self, req: &Request) -> Option<Outcome> {
        let e = self.export;
        let size = e.backend.size();
        let mut allowed = CMD_FLAG_FUA;
        match req.command {
            Command::Read if self.structured => allowed |= CMD_FLAG_DF,
            Command::WriteZeroes => allowed |= CMD_FLAG_NO_HOLE,
            _ => {}
        }
        let fail = |e: Errno, m: String| Some(Outcome::Fail(e, m));
        if req.flags & !allowed != 0 {
            return fail(
                Errno::Inval,
                format!(
                    "flags {:#x} are not valid for {}",
                    req.flags & !allowed,
                    req.command.name()
                ),
            );
        }
        let ranged = matches!(
            req.command,
            Command::Read | Command::Write | Command::Trim | Command::WriteZeroes
        );
        if !ranged {
            return None;
        }
        let what = req.command.name();
        let (off, len) = (req.offset, u64::from(req.length));
        if req.length == 0 {
            return fail(Errno::Inval, format!("{what} of length 0 at offset {off}"));
        }
        if matches!(req.command, Command::Read | Command::Write) && req.length > e.max_payload {
            return fail(
                Errno::Inval,
                format!(
                    "{what} of {len} bytes exceeds the maximum payload of {} bytes",
                    e.max_payload
                ),
            );
        }
        let min = u64::from(e.min_block);
        if off % min != 0 || len % min != 0 {
            return fail(
                Errno::Inval,
                format!("{what} of {len} bytes at offset {off} is not aligned to {min} bytes"),
            );
        }
        if req.command != Command::Read && e.readonly {
            return fail(
                Errno::Perm,
                format!("{what} on read-only export `{}`", e.name),
            );
        }
        if off.checked_add(len).is_none_or(|end| end > size) {
            let errno = if req.command == Command::Read {
                Errno::Inval
            } else {
                Errno::NoSpc
            };
            return fail(
                errno,
                format!("{what} of {len} bytes at offset {off} goes beyond the end ({size} bytes)"),
            );
        }
        None
    }

    /// Runs a checked request on the backend. `payload` holds a write's data, or is the buffer
    /// a read fills; a write leaves it in place for reuse.
    pub(crate) fn execute(&self, req: &Request, payload: &mut Vec<u8>) -> Outcome {
        let b = &self.export.backend;
        let fua = req.flags & CMD_FLAG_FUA != 0;
        let len = u64::from(req.length);
        let r = match req.command {
            Command::Read => {
                let mut buf = std::mem::take(payload);
                buf.resize(req.length as usize, 0);
                match b.read(req.offset, &mut buf) {
                    Ok(()) => return Outcome::Data(buf),
                    Err(e) => Err(e),
                }
            }
            Command::Write => b.write(req.offset, payload, fua),
            Command::Trim => b.trim(req.offset, len, fua),
            Command::WriteZeroes => b.write_zeroes(req.offset, len, fua),
            Command::Flush => b.flush(),
            other => {
                return Outcome::Fail(
                    Errno::Inval,
                    format!("command {} is not supported", other.name()),
                )
            }
        };
        match r {
            Ok(()) => Outcome::Done,
            Err(e) => Outcome::Fail(e, format!("{} failed on the backend", req.command.name())),
        }
    }
}
