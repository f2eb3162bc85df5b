//! The transmission phase of one connection.
//!
//! The reader parses requests from a buffered socket. Requests on exports whose backend never
//! blocks are served inline, and their replies are left in the output buffer while more
//! requests are already buffered, so one `write` carries many replies (the reply socket is
//! flushed before the reader would block). Requests on backends that may block (modelled
//! latency, waiting for data) run on their own scoped threads and reply when done, so replies
//! leave out of order and later requests overtake slow ones. At most [`MAX_IN_FLIGHT`] such
//! requests run at once per connection; `NBD_CMD_DISC` waits for all of them.

use std::cell::Cell;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use crate::export::Export;
use crate::proto::*;
use crate::trace::{Record, Tracer};

/// Blocking requests running at once per connection.
pub const MAX_IN_FLIGHT: usize = 64;

/// Output half of a connection, shared by the reader and the request threads.
struct Out<W: Write> {
    w: Mutex<BufWriter<W>>,
}

/// Everything a request needs.
struct Ctx<'a, W: Write> {
    export: &'a Export,
    structured: bool,
    out: &'a Out<W>,
    tracer: Option<&'a Tracer>,
    conn: u32,
}

/// What a request produced.
enum Outcome {
    /// Success without data.
    Done,
    /// Success with read data (the buffer holds exactly the requested length).
    Data(Vec<u8>),
    /// Failure with a message for humans.
    Fail(Errno, String),
}

impl<W: Write> Ctx<'_, W> {
    /// Sends the reply for `req`; flushes the socket when `flush` or when tracing.
    fn reply(
        &self,
        req: &Request,
        outcome: &Outcome,
        flush: bool,
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
        let t0 = Instant::now();
        {
            let mut w = self.out.w.lock().unwrap_or_else(|e| e.into_inner());
            w.write_all(&head)?;
            w.write_all(payload)?;
            if flush || self.tracer.is_some() {
                w.flush()?;
            }
        }
        if let Some(t) = self.tracer {
            let now = Instant::now();
            let data_ns = if req.command == Command::Read {
                now.duration_since(t0).as_nanos() as u64
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
    fn check(&self, req: &Request) -> Option<Outcome> {
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
        if off.checked_add(len).map_or(true, |end| end > size) {
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
    fn execute(&self, req: &Request, payload: &mut Vec<u8>) -> Outcome {
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

/// Discards `n` bytes of a request payload the server will not use.
fn drain<R: Read>(r: &mut R, n: u64) -> io::Result<()> {
    let got = io::copy(&mut r.take(n), &mut io::sink())?;
    if got < n {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// Counts blocking requests in flight.
struct Gate {
    n: Mutex<usize>,
    cv: Condvar,
}

impl Gate {
    fn enter(&self) {
        let mut n = self.n.lock().unwrap_or_else(|e| e.into_inner());
        while *n >= MAX_IN_FLIGHT {
            n = self.cv.wait(n).unwrap_or_else(|e| e.into_inner());
        }
        *n += 1;
    }
    fn leave(&self) {
        *self.n.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        self.cv.notify_one();
    }
}

/// A reader that remembers when its last `read` returned data: a request's arrival is when
/// its bytes reached the server, even if they wait in the buffer behind earlier requests.
struct Timed<'a, R> {
    inner: R,
    last: &'a Cell<Option<Instant>>,
}

impl<R: Read> Read for Timed<'_, R> {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(b)?;
        self.last.set(Some(Instant::now()));
        Ok(n)
    }
}

/// How the transmission phase ended.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// The client sent `NBD_CMD_DISC`.
    Disconnect,
    /// The client closed the socket.
    Closed,
    /// The client broke the protocol (bad magic); the server dropped the connection.
    Violation(String),
}

/// Serves requests until the client disconnects. `reader` and `writer` are the two halves of
/// the connection's socket.
pub fn serve_transmission<R: Read, W: Write + Send>(
    reader: R,
    writer: W,
    export: &Export,
    structured: bool,
    tracer: Option<&Tracer>,
    conn: u32,
) -> io::Result<End> {
    let filled = Cell::new(None);
    let mut rd = BufReader::with_capacity(
        256 * 1024,
        Timed {
            inner: reader,
            last: &filled,
        },
    );
    let out = Out {
        w: Mutex::new(BufWriter::with_capacity(256 * 1024, writer)),
    };
    let ctx = Ctx {
        export,
        structured,
        out: &out,
        tracer,
        conn,
    };
    let gate = Gate {
        n: Mutex::new(0),
        cv: Condvar::new(),
    };
    let blocking = export.backend.may_block();
    let end = std::thread::scope(|scope| -> io::Result<End> {
        let mut spare: Vec<u8> = Vec::new();
        loop {
            if rd.buffer().len() < REQUEST_LEN {
                // About to block on the socket: send every reply still buffered.
                ctx.out
                    .w
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .flush()?;
            }
            let mut h = [0u8; REQUEST_LEN];
            match rd.read_exact(&mut h) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(End::Closed),
                Err(e) => return Err(e),
            }
            let arrival = filled.get().unwrap_or_else(Instant::now);
            let req = match parse_request(&h) {
                Ok(r) => r,
                Err(e) => return Ok(End::Violation(e.to_string())),
            };
            if req.command == Command::Disc {
                return Ok(End::Disconnect);
            }
            let problem = ctx.check(&req);
            let mut data_ns = 0;
            let mut payload = std::mem::take(&mut spare);
            if req.command == Command::Write {
                let t0 = Instant::now();
                if problem.is_some() {
                    drain(&mut rd, u64::from(req.length))?;
                } else {
                    payload.resize(req.length as usize, 0);
                    rd.read_exact(&mut payload)?;
                }
                data_ns = t0.elapsed().as_nanos() as u64;
            }
            if let Some(fail) = problem {
                spare = payload;
                ctx.reply(&req, &fail, false, arrival, data_ns, 0)?;
                continue;
            }
            if blocking {
                gate.enter();
                let (ctx, gate) = (&ctx, &gate);
                scope.spawn(move || {
                    let mut payload = payload;
                    let t = Instant::now();
                    let outcome = ctx.execute(&req, &mut payload);
                    let service = t.elapsed().as_nanos() as u64;
                    if let Err(e) = ctx.reply(&req, &outcome, true, arrival, data_ns, service) {
                        tracing::debug!("conn {}: reply failed: {e}", ctx.conn);
                    }
                    gate.leave();
                });
            } else {
                let t = Instant::now();
                let outcome = ctx.execute(&req, &mut payload);
                let service = t.elapsed().as_nanos() as u64;
                ctx.reply(&req, &outcome, false, arrival, data_ns, service)?;
                spare = match outcome {
                    Outcome::Data(buf) => buf,
                    _ => payload,
                };
            }
            // Keep at most a 1 MiB buffer around between requests.
            if spare.capacity() > 1 << 20 {
                spare = Vec::new();
            }
        }
    })?;
    // Every request thread has finished (the scope joined them): send what is left.
    out.w.lock().unwrap_or_else(|e| e.into_inner()).flush()?;
    Ok(end)
}
