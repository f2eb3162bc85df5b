//! Budgets and deadlines of the NBD server: no client can take all its memory or hold a
//! connection for ever without doing anything.
//!
//! [`Limits`] is the one options type for them ([`Server::set_limits`]); `offhost nbd` takes a
//! flag for each field. Per server, connections past [`Limits::max_connections`] are refused
//! (every option answered with `NBD_REP_ERR_POLICY` and a message naming the limit and its
//! flag). Per connection, requests hold at most [`Limits::max_in_flight`] payload bytes at once
//! (as qemu bounds its requests in flight): past it the server stops reading the socket until
//! replies have gone out, so a client that pipelines reads and never reads the replies holds
//! one budget and the socket buffers, not one buffer per request. The whole handshake must end
//! within [`Limits::handshake_timeout`] (qemu's 10 s); a reply that cannot be written, or a
//! request whose bytes stop arriving, for [`Limits::io_timeout`] ends the connection; and
//! [`Limits::idle_timeout`], when set, ends one that sends no request for that long.
//!
//! [`Server::set_limits`]: crate::Server::set_limits

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

/// Default [`Limits::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;
/// Default [`Limits::max_in_flight`]: 64 MiB (two requests of the largest payload).
pub const DEFAULT_MAX_IN_FLIGHT: u64 = 64 << 20;
/// Default [`Limits::handshake_timeout`]: 10 s, as qemu.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default [`Limits::io_timeout`]: 30 s.
pub const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections being refused at once (each within a short deadline); more are closed at once.
pub const MAX_REFUSING: usize = 8;
/// Deadline of a refusal's handshake.
pub const REFUSAL_TIMEOUT: Duration = Duration::from_secs(2);

/// What clients may make the server hold, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once (`--max-connections`).
    pub max_connections: usize,
    /// Payload bytes of one connection's requests in flight (`--max-in-flight`). A request
    /// larger than this runs alone.
    pub max_in_flight: u64,
    /// Deadline of the whole handshake (`--handshake-timeout`).
    pub handshake_timeout: Duration,
    /// How long a reply may wait to be written, or a request's bytes to arrive, before the
    /// connection ends (`--io-timeout`).
    pub io_timeout: Duration,
    /// How long a connection may send no request before it ends (`--idle-timeout`); `None`:
    /// for ever.
    pub idle_timeout: Option<Duration>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            io_timeout: DEFAULT_IO_TIMEOUT,
            idle_timeout: None,
        }
    }
}

impl Limits {
    /// The part the transmission phase enforces.
    pub fn conn(&self) -> ConnLimits {
        ConnLimits {
            max_in_flight: self.max_in_flight,
            idle_timeout: self.idle_timeout,
        }
    }

    /// The message a refused connection gets.
    pub fn over_connections(&self) -> String {
        format!(
            "the server has {} connections open, its limit (raise it with --max-connections)",
            self.max_connections
        )
    }
}

/// The limits of one connection's transmission phase (see [`crate::conn`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Payload bytes of requests in flight.
    pub max_in_flight: u64,
    /// Longest wait for the next request; `None`: for ever.
    pub idle_timeout: Option<Duration>,
}

impl Default for ConnLimits {
    fn default() -> Self {
        Limits::default().conn()
    }
}

/// A socket whose every read and write may wait only until a deadline.
pub trait Timeouts {
    /// Sets the longest a read may wait (`None`: for ever).
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()>;
    /// Sets the longest a write may wait (`None`: for ever).
    fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()>;
}

/// A stream whose reads and writes all end by `deadline` (an error `TimedOut` after it).
pub struct Deadlined<'a, S> {
    s: &'a mut S,
    deadline: Instant,
}

impl<'a, S: Timeouts> Deadlined<'a, S> {
    /// Wraps `s` until `deadline`.
    pub fn new(s: &'a mut S, deadline: Instant) -> Self {
        Deadlined { s, deadline }
    }

    fn left(&self) -> io::Result<Duration> {
        match self.deadline.checked_duration_since(Instant::now()) {
            Some(d) if !d.is_zero() => Ok(d),
            _ => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the handshake's deadline passed (raise it with --handshake-timeout)",
            )),
        }
    }
}

/// A timeout of a socket read or write shows as `WouldBlock` (or `TimedOut`).
fn deadline_error(e: io::Error) -> io::Error {
    if matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    ) {
        io::Error::new(
            io::ErrorKind::TimedOut,
            "the handshake's deadline passed (raise it with --handshake-timeout)",
        )
    } else {
        e
    }
}

impl<S: Timeouts + Read> Read for Deadlined<'_, S> {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.s.set_read_timeout(Some(left))?;
        self.s.read(b).map_err(deadline_error)
    }
}

impl<S: Timeouts + Write> Write for Deadlined<'_, S> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.s.set_write_timeout(Some(left))?;
        self.s.write(b).map_err(deadline_error)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.s.flush()
    }
}

/// Whether an I/O error is a socket timeout.
pub(crate) fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}
