//! Budgets and deadlines of the NBD server: no client can take all its memory or hold a
//! connection for ever without doing anything.
//!
//! [`Limits`] is the one options type for them ([`Server::set_limits`]); `offhost nbd` takes a
//! flag for each field. Per server, connections past [`Limits::max_connections`] are refused
//! (every option answered with `NBD_REP_ERR_POLICY` and a message naming the limit and its
//! flag); a connection counts there only once it is past TLS (or, without TLS, at
//! `NBD_OPT_GO`), and until then among [`Limits::max_unproven`] (per source address or uid,
//! [`Limits::max_unproven_per_source`]), where the oldest silent one makes way for a newcomer
//! (`offhost_access::unproven`). Per connection, requests hold at most [`Limits::max_in_flight`] payload bytes at once
//! (as qemu bounds its requests in flight): past it the server stops reading the socket until
//! replies have gone out, so a client that pipelines reads and never reads the replies holds
//! one budget and the socket buffers, not one buffer per request. The whole handshake must end
//! within [`Limits::handshake_timeout`] (qemu's 10 s); a reply that cannot be written, or a
//! request whose bytes stop arriving, for [`Limits::io_timeout`] ends the connection; and
//! [`Limits::idle_timeout`] (an hour by default) ends one that sends no request for that long.
//!
//! [`Server::set_limits`]: crate::Server::set_limits

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use offhost_units::{Limit, OverLimit};

/// Default [`Limits::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;
/// Default [`Limits::max_in_flight`]: 64 MiB (two requests of the largest payload).
pub const DEFAULT_MAX_IN_FLIGHT: u64 = 64 << 20;
/// Default [`Limits::handshake_timeout`]: 10 s, as qemu.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default [`Limits::io_timeout`]: 30 s.
pub const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(30);
/// Default [`Limits::idle_timeout`]: an hour. A client that sends no request for that long
/// is dropped (TCP keepalive finds vanished ones sooner).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(3600);
/// Default [`Limits::max_unproven`].
pub const DEFAULT_MAX_UNPROVEN: usize = offhost_access::unproven::DEFAULT_MAX_UNPROVEN;
/// Default [`Limits::max_unproven_per_source`].
pub const DEFAULT_MAX_UNPROVEN_PER_SOURCE: usize =
    offhost_access::unproven::DEFAULT_MAX_UNPROVEN_PER_SOURCE;

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
    /// Connections not yet past TLS (or, without TLS, past the handshake), all sources
    /// together (`--max-unproven`); past it the oldest silent one is closed to make way. They
    /// do not count against `max_connections`.
    pub max_unproven: usize,
    /// The same from one IP address, or one uid on a Unix socket
    /// (`--max-unproven-per-source`).
    pub max_unproven_per_source: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            io_timeout: DEFAULT_IO_TIMEOUT,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            max_unproven: DEFAULT_MAX_UNPROVEN,
            max_unproven_per_source: DEFAULT_MAX_UNPROVEN_PER_SOURCE,
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

    /// The budget of connections not yet past TLS (or the handshake), within the handshake's
    /// deadline.
    pub fn unproven(&self) -> offhost_access::UnprovenLimits {
        offhost_access::UnprovenLimits {
            max_total: self.max_unproven,
            max_per_source: self.max_unproven_per_source,
            deadline: self.handshake_timeout,
        }
    }

    /// Why a connection past [`max_connections`](Self::max_connections) gets no slot.
    pub fn over_connections(&self) -> Refused {
        Refused::Connections {
            open: self.max_connections,
            over: self.connections_over(),
        }
    }

    /// The limit a connection past [`max_connections`](Self::max_connections) goes over.
    pub fn connections_over(&self) -> OverLimit {
        OverLimit::new(Limit::MaxConnections, self.max_connections)
    }
}

/// Why a connection past TLS (or, without TLS, at `NBD_OPT_GO`) was refused its connection
/// slot. The client is told with [`for_client`](Self::for_client).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// It was unproven while newer connections waited, and was closed to make way for them
    /// (`offhost_access::unproven`).
    #[error("the connection was closed to make way for newer ones")]
    MadeWay,
    /// The server serves as many connections as it may ([`Limits::max_connections`]).
    #[error("the server has {open} connections open, {over}")]
    Connections {
        /// Connections open.
        open: usize,
        /// `max_connections` and its value.
        #[source]
        over: OverLimit,
    },
}

impl Refused {
    /// The text the client gets with `NBD_REP_ERR_POLICY`: past a limit, also the flag that
    /// raises it on the server ([`OverLimit::for_peer`]).
    pub fn for_client(&self) -> String {
        match self {
            Refused::Connections { over, .. } => format!("{self} {}", over.for_peer()),
            Refused::MadeWay => self.to_string(),
        }
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
            _ => Err(deadline_passed()),
        }
    }
}

/// The error of a read or write after the handshake's deadline: it names the limit by its id
/// (the deadline is all the handshake's streams know).
pub(crate) fn deadline_passed() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!(
            "the handshake's deadline passed (its limit {})",
            Limit::HandshakeTimeout.id()
        ),
    )
}

/// A timeout of a socket read or write shows as `WouldBlock` (or `TimedOut`).
fn deadline_error(e: io::Error) -> io::Error {
    if matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    ) {
        deadline_passed()
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
