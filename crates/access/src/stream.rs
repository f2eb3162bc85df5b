//! One TLS connection over a stream socket, split into a reading and a writing half that
//! different threads use at once.
//!
//! # How the halves share the connection
//!
//! rustls keeps one state for both directions (records, keys, alerts), so the halves share a
//! `rustls::Connection` behind a mutex, with the socket used only through non-blocking calls
//! (`MSG_DONTWAIT`). The mutex is held only while bytes move between memory, rustls and the
//! kernel, never while a half waits: a half that finds nothing to do lets go of the lock and
//! `poll`s the socket, so a reader waiting for input never keeps the writer from writing, nor
//! the other way round.
//!
//! - **Reading**: ciphertext is received in large chunks (one `recv` of up to
//!   [`SOCKET_BUFFER`]) into a buffer of ours and handed to rustls from there (rustls itself
//!   reads 4 KiB at a time); a record cut by a chunk boundary stays in rustls's deframer until
//!   the rest arrives. Plaintext is drained before more ciphertext is handed over, so rustls's
//!   plaintext buffer never fills. It is drained either by copying it out
//!   ([`TlsReader::read_nb`]) or where rustls holds it, a record at a time
//!   ([`TlsReader::read_in_place`], which the link's parser reads from). Anything rustls wants
//!   to send while reading (an alert, a key update) is written at once when the socket takes
//!   it, and by the writer otherwise; a reader that waits while such bytes are pending also
//!   waits for the socket to take them.
//! - **Writing**: a write encrypts the caller's bytes a piece at a time ([`WRITE_PIECE`], two
//!   full records) and sends each piece's records before encrypting the next, for as long as
//!   the socket takes them all (at most [`WRITE_CHUNK`] per call), letting go of the lock
//!   between pieces. So the peer decrypts the first records while the next are encrypted,
//!   and rustls never holds more than a piece of records: freeing a larger batch at once
//!   returns the memory to the system (glibc trims the heap above 128 KiB) and the next batch
//!   faults its pages in again, which made encrypting 256 KiB batches about twice as slow as
//!   64 KiB pieces. Two records, not four: with four, streams took about half again as much
//!   CPU per byte, likely because four full records with their headers are a little more than
//!   one loopback segment carries, so each send also put a segment of a hundred bytes on the
//!   wire and woke the peer for it (docs/notes/access.md, "Performance"). For the same
//!   reason a rest of at most [`WRITE_TAIL`] goes with the piece before it: a 64 KiB message
//!   with its frame headers otherwise went as two full pieces and a third of 25 bytes, its
//!   own record, send, segment and wake-up of the peer (docs/notes/engines.md). A write reports
//!   bytes as written only once their records have left for the kernel: when the socket takes
//!   only part of a piece, the call reports the pieces before it (or says `WouldBlock` if
//!   there were none), keeps the rest of the piece's records, and the next call (which, by the
//!   contract of a byte stream writer, offers the bytes not reported first) finishes sending
//!   them before it goes on. So nothing is ever left in a buffer that no caller knows about.
//! - **Ending**: [`TlsWriter::shutdown`] sends `close_notify` and shuts the socket's writing
//!   side; the reader reports the end of input on the peer's `close_notify` or on the end of
//!   the TCP stream (the protocols above have their own goodbye, so a cut stream is a peer
//!   gone, not data).
//!
//! The handshake runs first, on the whole socket, with a deadline ([`handshake`]).

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::net::{RecvFlags, SendFlags};

use crate::error::AccessError;

/// Ciphertext received from the socket in one call at most.
pub const SOCKET_BUFFER: usize = 256 * 1024;
/// Plaintext encrypted by one write at most: as much as a loopback TCP socket's send buffer
/// takes at most (4 MiB, autotuned), so that a large write goes from the writing thread as it
/// would on plain TCP, instead of a first MiB from there and the rest from the link's
/// flusher thread (a hand-over per batch: `bench rate --transport tls,tcp` at 64 KiB, three
/// runs each, 0.54-0.61 of TCP's throughput with 1 MiB, 0.63-0.64 with 16 MiB). The link
/// writes under its session's lock, so this also bounds how long a write holds it (about a
/// millisecond at 4 GB/s of AES-GCM).
pub const WRITE_CHUNK: usize = 4 * 1024 * 1024;
/// Plaintext encrypted, and its records sent, at a time within a write: two full records
/// ([`crate::config::RECORD_PLAINTEXT`] each), so the peer starts decrypting early.
pub const WRITE_PIECE: usize = 2 * crate::config::RECORD_PLAINTEXT;
/// The most plaintext a piece takes beyond [`WRITE_PIECE`] when that is all that is left of
/// a write, so that the end of a write does not go in a send, a TCP segment and a wake-up of
/// the peer of its own (a 64 KiB message with its frame headers is 64 KiB and a few bytes).
pub const WRITE_TAIL: usize = 4 * 1024;

struct State {
    conn: rustls::Connection,
    /// Ciphertext received and not yet handed to rustls: `inbuf[start..end]`.
    inbuf: Vec<u8>,
    start: usize,
    end: usize,
    /// The socket's input ended.
    eof: bool,
    /// The connection failed for good (a TLS error); every later call reports it.
    failed: Option<String>,
}

struct Shared {
    state: Mutex<State>,
    fd: OwnedFd,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The reading half of a TLS connection.
pub struct TlsReader {
    shared: Arc<Shared>,
    timeout: Option<Duration>,
}

/// The writing half of a TLS connection.
pub struct TlsWriter {
    shared: Arc<Shared>,
    /// Bytes of the caller's stream encrypted by an earlier call whose records have not all
    /// left yet (reported once they have).
    owed: usize,
    shut: bool,
}

impl std::fmt::Debug for TlsReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsReader").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for TlsWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsWriter")
            .field("owed", &self.owed)
            .finish_non_exhaustive()
    }
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("tls: {e}"))
}

/// The socket as rustls's output: non-blocking sends.
struct SockOut<'a>(&'a OwnedFd);

impl io::Write for SockOut<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(rustix::net::send(
            self.0,
            buf,
            SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
        )?)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        Ok(rustix::net::sendmsg(
            self.0,
            bufs,
            &mut rustix::net::SendAncillaryBuffer::default(),
            SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
        )?)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl State {
    /// Sends what rustls has to send, without waiting: `WouldBlock` when the socket took
    /// only part of it.
    fn flush(&mut self, fd: &OwnedFd) -> io::Result<()> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut SockOut(fd)) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn check(&self) -> io::Result<()> {
        match &self.failed {
            Some(why) => Err(io::Error::new(io::ErrorKind::InvalidData, why.clone())),
            None => Ok(()),
        }
    }

    /// Hands received ciphertext to rustls and processes it; false when there was none left.
    fn process(&mut self, fd: &OwnedFd) -> io::Result<bool> {
        if self.start == self.end {
            return Ok(false);
        }
        let mut input = Sliced(&self.inbuf[self.start..self.end]);
        let n = self.conn.read_tls(&mut input)?;
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        let r = self.conn.process_new_packets();
        // An alert rustls queued, or a key update's answer: out now if the socket takes it.
        match self.flush(fd) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if r.is_ok() => return Err(e),
            Err(_) => {}
        }
        if let Err(e) = r {
            let e = tls_error(e);
            self.failed = Some(e.to_string());
            return Err(e);
        }
        Ok(true)
    }

    /// Makes plaintext ready without waiting, if it can: hands the ciphertext received to
    /// rustls, and receives more from the socket once none is left.
    fn pump(&mut self, fd: &OwnedFd) -> io::Result<Ready> {
        self.check()?;
        loop {
            match self.conn.reader().into_first_chunk() {
                Ok([]) => return Ok(Ready::End), // the peer's close_notify
                Ok(_) => return Ok(Ready::Data),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(Ready::End),
                Err(e) => return Err(e),
            }
            if self.process(fd)? {
                continue;
            }
            if self.eof {
                return Ok(Ready::End);
            }
            match rustix::net::recv(fd, &mut self.inbuf[..], RecvFlags::DONTWAIT) {
                Ok((0, _)) => self.eof = true,
                Ok((n, _)) => {
                    self.start = 0;
                    self.end = n;
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => return Ok(Ready::Nothing),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Reads plaintext into `buf` without waiting: `Ok(0)` at the end of the input,
    /// `WouldBlock` when none is there.
    fn read(&mut self, fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
        match self.pump(fd)? {
            Ready::Data => io::Read::read(&mut self.conn.reader(), buf),
            Ready::End => Ok(0),
            Ready::Nothing => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    /// See [`TlsReader::read_in_place`].
    fn read_in_place(
        &mut self,
        fd: &OwnedFd,
        budget: usize,
        sink: &mut dyn FnMut(&[u8]) -> bool,
    ) -> io::Result<usize> {
        let mut fed = 0;
        loop {
            match self.pump(fd)? {
                Ready::Data => {
                    let chunk = self.conn.reader().into_first_chunk()?;
                    let n = chunk.len();
                    let more = sink(chunk);
                    io::BufRead::consume(&mut self.conn.reader(), n);
                    fed += n;
                    if !more || fed >= budget {
                        return Ok(fed);
                    }
                }
                Ready::End => return Ok(fed),
                Ready::Nothing if fed == 0 => return Err(io::ErrorKind::WouldBlock.into()),
                Ready::Nothing => return Ok(fed),
            }
        }
    }
}

/// What [`State::pump`] found.
enum Ready {
    /// Plaintext is ready.
    Data,
    /// The input ended (the peer's `close_notify`, or the end of the TCP stream).
    End,
    /// Nothing yet.
    Nothing,
}

/// Where the piece of a write that starts at `done` ends, when the write goes to `limit`:
/// [`WRITE_PIECE`] on, or at `limit` when no more than [`WRITE_TAIL`] would be left after it.
fn piece_end(done: usize, limit: usize) -> usize {
    let end = limit.min(done + WRITE_PIECE);
    if limit - end <= WRITE_TAIL {
        limit
    } else {
        end
    }
}

/// The bytes `start..end` of `bufs` taken one after another, as slices of at most
/// [`COPY_SLICE`] bytes into `out`.
fn slices_between<'a>(bufs: &[&'a [u8]], start: usize, end: usize, out: &mut Vec<io::IoSlice<'a>>) {
    out.clear();
    let mut at = 0;
    for b in bufs {
        let (lo, hi) = (at, at + b.len());
        at = hi;
        if hi <= start || b.is_empty() {
            continue;
        }
        if lo >= end {
            break;
        }
        let part = &b[start.max(lo) - lo..end.min(hi) - lo];
        out.extend(part.chunks(COPY_SLICE).map(io::IoSlice::new));
    }
}

/// The most bytes one `memcpy` moves between rustls's buffers and ours: under glibc's
/// `rep movsb` threshold (2 KiB and up, by CPU), so every copy takes the vector loop. rustls
/// copies plaintext into a record after its 5-byte header and ciphertext into its deframer
/// wherever the last record ended, so most of its copies go to addresses that are not 16-byte
/// aligned, and `rep movsb` to such an address runs about 16 times slower on some CPUs
/// (3.5 against 57 GB/s for 64 KiB on the AMD EPYC of the development machine; see
/// `docs/notes/link.md`, "Aligned frames"). The vector loop does not care (50-68 GB/s at
/// 1-2 KiB, aligned or not).
pub const COPY_SLICE: usize = 2048;

/// Received ciphertext as rustls's input (`read_tls`), copied out [`COPY_SLICE`] bytes at a
/// time.
#[derive(Debug)]
pub struct Sliced<'a>(pub &'a [u8]);

/// Writes `bytes` into rustls as slices of [`COPY_SLICE`] bytes (so rustls copies them into
/// its records with the vector loop); returns how many it took.
pub fn write_sliced(writer: &mut rustls::Writer<'_>, bytes: &[u8]) -> io::Result<usize> {
    let mut slices = Vec::new();
    slices_between(&[bytes], 0, bytes.len(), &mut slices);
    write_slices(writer, &slices)
}

/// Writes `slices` into rustls: one as it is, several with `write_vectored`.
fn write_slices(writer: &mut rustls::Writer<'_>, slices: &[io::IoSlice<'_>]) -> io::Result<usize> {
    match slices {
        [one] => io::Write::write(writer, one),
        many => io::Write::write_vectored(writer, many),
    }
}

impl io::Read for Sliced<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.0.len());
        for (to, from) in buf[..n]
            .chunks_mut(COPY_SLICE)
            .zip(self.0[..n].chunks(COPY_SLICE))
        {
            to.copy_from_slice(from);
        }
        self.0 = &self.0[n..];
        Ok(n)
    }
}

/// Waits at most `timeout` (`None`: for ever) for `events` on `fd`; true if any came.
fn poll(fd: &OwnedFd, events: PollFlags, timeout: Option<Duration>) -> io::Result<bool> {
    let fd = fd.as_fd();
    let mut fds = [PollFd::new(&fd, events)];
    let ts = timeout.map(|t| {
        Timespec::try_from(t).unwrap_or(Timespec {
            tv_sec: 3600,
            tv_nsec: 0,
        })
    });
    match rustix::event::poll(&mut fds, ts.as_ref()) {
        Ok(n) => Ok(n > 0),
        Err(rustix::io::Errno::INTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Runs the TLS handshake of `conn` on the connected socket `fd`, blocking, for at most
/// `timeout`, then splits the connection into its two halves.
pub fn handshake(
    fd: OwnedFd,
    conn: impl Into<rustls::Connection>,
    timeout: Duration,
) -> Result<(TlsReader, TlsWriter), AccessError> {
    handshake_observed(fd, conn, timeout, &mut || {})
}

/// As [`handshake`], calling `progressed` once when the peer's first handshake message has
/// been taken (a server's: the whole ClientHello), so that a server can tell a peer that
/// talks from one that holds its connection silent or trickles bytes
/// ([`Ticket::progressed`](crate::Ticket::progressed)).
pub fn handshake_observed(
    fd: OwnedFd,
    conn: impl Into<rustls::Connection>,
    timeout: Duration,
    progressed: &mut dyn FnMut(),
) -> Result<(TlsReader, TlsWriter), AccessError> {
    let mut told = false;
    let mut st = State {
        conn: conn.into(),
        inbuf: vec![0; SOCKET_BUFFER],
        start: 0,
        end: 0,
        eof: false,
        failed: None,
    };
    let deadline = Instant::now() + timeout;
    let fail = |e: io::Error| AccessError::Handshake(e);
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| AccessError::Handshake(io::ErrorKind::TimedOut.into()))
    };
    while st.conn.is_handshaking() || st.conn.wants_write() {
        match st.flush(&fd) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                poll(&fd, PollFlags::OUT, Some(left()?)).map_err(fail)?;
                continue;
            }
            Err(e) => return Err(fail(e)),
        }
        if !st.conn.is_handshaking() {
            break;
        }
        if st.process(&fd).map_err(fail)? {
            if !told && st.conn.handshake_kind().is_some() {
                told = true;
                progressed();
            }
            continue;
        }
        if st.eof {
            return Err(fail(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the peer closed the connection during the handshake",
            )));
        }
        match rustix::net::recv(&fd, &mut st.inbuf[..], RecvFlags::DONTWAIT) {
            Ok((0, _)) => st.eof = true,
            Ok((n, _)) => {
                st.start = 0;
                st.end = n;
            }
            Err(rustix::io::Errno::AGAIN) => {
                poll(&fd, PollFlags::IN, Some(left()?)).map_err(fail)?;
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(fail(e.into())),
        }
    }
    // Records larger than rustls's default send buffer are fine: writes are bounded by
    // WRITE_CHUNK instead.
    st.conn.set_buffer_limit(None);
    let shared = Arc::new(Shared {
        state: Mutex::new(st),
        fd,
    });
    Ok((
        TlsReader {
            shared: shared.clone(),
            timeout: None,
        },
        TlsWriter {
            shared,
            owed: 0,
            shut: false,
        },
    ))
}

impl TlsReader {
    /// The certificate the peer presented in the handshake (DER, verified against the CA),
    /// if it presented one.
    pub fn peer_certificate(&self) -> Option<Vec<u8>> {
        let st = self.shared.lock();
        st.conn.peer_certificates()?.first().map(|c| c.to_vec())
    }

    /// A second descriptor of the connection's socket (`dup`): the socket stays open until
    /// it is closed too, e.g. to drain what the peer still sends after the session ended, so
    /// that the kernel does not reset the connection and discard our last records.
    pub fn try_clone_fd(&self) -> io::Result<OwnedFd> {
        self.shared.fd.try_clone()
    }

    /// Reads plaintext without waiting: `Ok(0)` at the end of the input, `WouldBlock` when
    /// none is ready.
    pub fn read_nb(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let sh = &*self.shared;
        let r = sh.lock().read(&sh.fd, buf);
        r
    }

    /// Hands the plaintext that is ready to `sink` where rustls holds it, a record's worth at
    /// a time, without waiting and without copying it out, until about `budget` bytes were
    /// handed over or `sink` returns false; returns how many were: `Ok(0)` at the end of the
    /// input, `WouldBlock` when none is ready. `sink` runs with the connection locked, so it
    /// must not use either half of this connection (the writer waits for it meanwhile).
    pub fn read_in_place(
        &mut self,
        budget: usize,
        sink: &mut dyn FnMut(&[u8]) -> bool,
    ) -> io::Result<usize> {
        let sh = &*self.shared;
        let r = sh.lock().read_in_place(&sh.fd, budget, sink);
        r
    }

    /// True when plaintext, or the end of the input, is ready now (looks without waiting).
    pub fn ready_nb(&mut self) -> io::Result<bool> {
        let sh = &*self.shared;
        let r = sh.lock().pump(&sh.fd);
        Ok(!matches!(r?, Ready::Nothing))
    }

    /// Waits at most `timeout` (`None`: for ever) for input on the socket, without holding
    /// the connection; true if some may be there. While bytes rustls has to send are pending,
    /// it also sends them when the socket has room.
    pub fn wait(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        let sh = &*self.shared;
        let pending = {
            let st = sh.lock();
            if st.start < st.end || st.eof || st.failed.is_some() {
                return Ok(true);
            }
            st.conn.wants_write()
        };
        let events = if pending {
            PollFlags::IN | PollFlags::OUT
        } else {
            PollFlags::IN
        };
        let fd = sh.fd.as_fd();
        let mut fds = [PollFd::new(&fd, events)];
        let ts = timeout.map(|t| {
            Timespec::try_from(t).unwrap_or(Timespec {
                tv_sec: 3600,
                tv_nsec: 0,
            })
        });
        let n = match rustix::event::poll(&mut fds, ts.as_ref()) {
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => 0,
            Err(e) => return Err(e.into()),
        };
        let got = fds[0].revents();
        if got.contains(PollFlags::OUT) {
            let mut st = sh.lock();
            match st.flush(&sh.fd) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n > 0 && !(got - PollFlags::OUT).is_empty())
    }

    /// Sets how long a blocking [`read`](io::Read::read) waits before `TimedOut` (`None`: for
    /// ever).
    pub fn set_timeout(&mut self, timeout: Option<Duration>) {
        self.timeout = timeout;
    }
}

impl io::Read for TlsReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let deadline = self.timeout.map(|t| Instant::now() + t);
        loop {
            match self.read_nb(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return r,
            }
            let left = match deadline {
                None => None,
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(l) if !l.is_zero() => Some(l),
                    _ => return Err(io::ErrorKind::TimedOut.into()),
                },
            };
            self.wait(left)?;
        }
    }
}

impl TlsWriter {
    /// Writes a prefix of `buf` without waiting (see the module doc: bytes count as written
    /// once their records left); `WouldBlock` when none could be. The next call must offer the
    /// bytes not reported as written, first. Reports at most [`WRITE_CHUNK`] bytes, plus the
    /// piece an earlier call encrypted but could not send (at most [`WRITE_PIECE`] and
    /// [`WRITE_TAIL`]).
    pub fn write_nb(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored_nb(&[buf])
    }

    /// [`write_nb`](Self::write_nb) for the bytes of `bufs` one after another, without
    /// joining them first: rustls encrypts each record from the pieces it spans.
    pub fn write_vectored_nb(&mut self, bufs: &[&[u8]]) -> io::Result<usize> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let sh = &*self.shared;
        let mut st = sh.lock();
        st.check()?;
        st.flush(&sh.fd)?;
        // Everything of the earlier call has left: those bytes are written now.
        let mut done = std::mem::take(&mut self.owed);
        if total < done {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a tls write must offer the bytes it was not told were written",
            ));
        }
        let limit = total.min(done + WRITE_CHUNK);
        let mut piece: Vec<io::IoSlice<'_>> = Vec::new();
        while done < limit {
            if done > 0 {
                // Let the reading half in between pieces; a failure it met is the next call's.
                drop(st);
                st = sh.lock();
                if st.failed.is_some() {
                    break;
                }
            }
            let end = piece_end(done, limit);
            slices_between(bufs, done, end, &mut piece);
            let n = write_slices(&mut st.conn.writer(), &piece)?;
            match st.flush(&sh.fd) {
                Ok(()) if n == 0 => break, // rustls took nothing (it never should)
                Ok(()) => done += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.owed = n;
                    return if done > 0 { Ok(done) } else { Err(e) };
                }
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    /// Waits at most `timeout` (`None`: for ever) for room in the socket, without holding the
    /// connection.
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        poll(&self.shared.fd, PollFlags::OUT, timeout)
    }

    /// Sends `close_notify` (waiting at most a second for room) and shuts the socket's
    /// writing side. Later writes fail.
    pub fn shutdown(&mut self) {
        if std::mem::replace(&mut self.shut, true) {
            return;
        }
        let sh = &*self.shared;
        let give_up = Instant::now() + Duration::from_secs(1);
        {
            let mut st = sh.lock();
            st.conn.send_close_notify();
        }
        loop {
            let r = sh.lock().flush(&sh.fd);
            match r {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let left = give_up.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    let _ = poll(&sh.fd, PollFlags::OUT, Some(left));
                }
                _ => break,
            }
        }
        // The peer may be gone already; nothing to do about a failure here.
        let _ = rustix::net::shutdown(&sh.fd, rustix::net::Shutdown::Write);
    }

    /// Shuts down both directions of the socket (a hard disconnect: wakes a reader blocked
    /// on it).
    pub fn abort(&self) {
        let _ = rustix::net::shutdown(&self.shared.fd, rustix::net::Shutdown::Both);
    }
}

impl io::Write for TlsWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.shut {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        loop {
            match self.write_nb(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.wait(None)?;
                }
                r => return r,
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        loop {
            let r = {
                let sh = &*self.shared;
                let mut st = sh.lock();
                st.check().and_then(|()| st.flush(&sh.fd))
            };
            match r {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.wait(None)?;
                }
                r => return r,
            }
        }
    }
}

/// Both halves as one stream (for a protocol phase run by one thread, like the NBD option
/// haggling after `NBD_OPT_STARTTLS`), split again with [`into_halves`](Self::into_halves).
#[derive(Debug)]
pub struct TlsStream {
    reader: TlsReader,
    writer: TlsWriter,
}

impl TlsStream {
    /// Joins two halves of one connection.
    pub fn new(reader: TlsReader, writer: TlsWriter) -> TlsStream {
        TlsStream { reader, writer }
    }

    /// The two halves.
    pub fn into_halves(self) -> (TlsReader, TlsWriter) {
        (self.reader, self.writer)
    }

    /// Sets how long a blocking read waits (see [`TlsReader::set_timeout`]).
    pub fn set_read_timeout(&mut self, timeout: Option<Duration>) {
        self.reader.set_timeout(timeout);
    }
}

impl io::Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reader.read(buf)
    }
}

impl io::Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ends of the pieces a write of `len` bytes is cut into.
    fn pieces(len: usize) -> Vec<usize> {
        let (mut done, mut ends) = (0, Vec::new());
        while done < len {
            done = piece_end(done, len);
            ends.push(done);
        }
        ends
    }

    #[test]
    fn a_short_rest_goes_with_the_last_piece() {
        // A 64 KiB message with its frame header: two sends, not three.
        let p = WRITE_PIECE;
        assert_eq!(pieces(65536 + 16), [p, 65552]);
        assert_eq!(pieces(3 * p + WRITE_TAIL), [p, 2 * p, 3 * p + WRITE_TAIL]);
        // More than the tail left: a piece of its own.
        assert_eq!(
            pieces(2 * p + WRITE_TAIL + 1),
            [p, 2 * p, 2 * p + WRITE_TAIL + 1]
        );
        assert_eq!(pieces(1000), [1000]);
        assert_eq!(pieces(p), [p]);
    }
}
