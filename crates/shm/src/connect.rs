//! Setting up a link: [`Listener`] (the engine side) and [`connect`] (the host side) over a Unix
//! socket, and [`pair`] for two endpoints in one process.
//!
//! An address is a file-system path, or `@name` for a Linux abstract socket, which has no file
//! at all and so leaves nothing behind however the listener exits. A path socket is created
//! owner-only (0600) and removed when the [`Listener`] is dropped; if the listening process is
//! killed, the file stays until the next [`Listener::bind`] at that path, which replaces a
//! socket that nobody listens on any more.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{Config, Mode};
use crate::control::{self, Verdict};
use crate::endpoint::{Endpoint, Side};
use crate::error::ShmError;
use crate::segment;
use crate::shared::Shared;

fn socket_addr(addr: &str) -> Result<SocketAddr, ShmError> {
    match addr.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes()),
        None => SocketAddr::from_pathname(addr),
    }
    .map_err(ShmError::std_io("socket address"))
}

/// Connects to the engine listening at `addr`, creates a segment for `config` and hands it over.
/// Returns the host end once the engine has validated the segment.
pub fn connect(addr: &str, config: &Config) -> Result<Endpoint, ShmError> {
    let sock = UnixStream::connect_addr(&socket_addr(addr)?)
        .map_err(ShmError::std_io("connect to the engine"))?;
    control::check_peer_uid(&sock)?;
    let seg = segment::create(config)?;
    sock.set_read_timeout(Some(control::HANDSHAKE_TIMEOUT))
        .map_err(ShmError::std_io("set_read_timeout"))?;
    control::send_hello(&sock, std::os::fd::AsFd::as_fd(&seg.fd))?;
    control::recv_verdict(&sock)?;
    sock.set_read_timeout(None)
        .map_err(ShmError::std_io("set_read_timeout"))?;
    let mut ep = Endpoint::new(Shared::new(seg, sock, Side::Host, config.mode, config.spin));
    ep.receiver().set_event_limit(config.event_limit);
    Ok(ep)
}

/// Two connected endpoints in this process (host, engine), on the same rings and pool as a
/// cross-process link; the control connection is a socket pair.
pub fn pair(config: &Config) -> Result<(Endpoint, Endpoint), ShmError> {
    let (a, b) = UnixStream::pair().map_err(ShmError::std_io("socketpair"))?;
    let seg = segment::create(config)?;
    let fd = seg
        .fd
        .try_clone()
        .map_err(ShmError::std_io("dup segment fd"))?;
    let mut host = Endpoint::new(Shared::new(seg, a, Side::Host, config.mode, config.spin));
    let seg = segment::attach(fd)?;
    let mut engine = Endpoint::new(Shared::new(seg, b, Side::Engine, config.mode, config.spin));
    host.receiver().set_event_limit(config.event_limit);
    engine.receiver().set_event_limit(config.event_limit);
    Ok((host, engine))
}

/// Connections the kernel queues for a [`Listener`] before it accepts them (capped by
/// `net.core.somaxconn`).
pub const LISTEN_BACKLOG: i32 = 4096;

/// The engine side: listens for hosts and attaches to the segments they hand over.
#[derive(Debug)]
pub struct Listener {
    inner: UnixListener,
    path: Option<PathBuf>,
    /// Uids admitted besides our own.
    allowed: Vec<u32>,
    /// The event limit of the endpoints it accepts.
    event_limit: Option<crate::EventLimit>,
}

impl Listener {
    /// Listens at `addr` (a path, or `@name` for an abstract socket).
    pub fn bind(addr: &str) -> Result<Listener, ShmError> {
        let sa = socket_addr(addr)?;
        let inner = match UnixListener::bind_addr(&sa) {
            Ok(l) => l,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && !addr.starts_with('@') => {
                // A socket file left by a listener that was killed: replace it if dead.
                if UnixStream::connect(addr).is_ok() {
                    return Err(ShmError::Io {
                        op: "bind: another engine listens there",
                        source: e,
                    });
                }
                std::fs::remove_file(addr).map_err(ShmError::std_io("remove stale socket"))?;
                UnixListener::bind_addr(&sa).map_err(ShmError::std_io("bind"))?
            }
            Err(e) => {
                return Err(ShmError::Io {
                    op: "bind",
                    source: e,
                })
            }
        };
        // A longer listen queue than std's 128: hosts that connect in a burst (or others'
        // silent connections) must not fill it before the acceptor takes them.
        let _ = rustix::net::listen(&inner, LISTEN_BACKLOG);
        let path = if addr.starts_with('@') {
            None
        } else {
            std::fs::set_permissions(addr, std::fs::Permissions::from_mode(0o600))
                .map_err(ShmError::std_io("chmod socket"))?;
            Some(PathBuf::from(addr))
        };
        Ok(Listener {
            inner,
            path,
            allowed: Vec::new(),
            event_limit: None,
        })
    }

    /// Admits hosts running as these uids besides our own (`SO_PEERCRED` is checked on every
    /// connection; anyone else is refused before anything is read).
    pub fn set_allowed_uids(&mut self, uids: Vec<u32>) {
        self.allowed = uids;
    }

    /// Gives the endpoints accepted from now on `limit` for their receivers' waits
    /// ([`Receiver::set_event_limit`](crate::Receiver::set_event_limit)).
    pub fn set_event_limit(&mut self, limit: Option<crate::EventLimit>) {
        self.event_limit = limit;
    }

    /// The socket file, when the address is a path.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Waits for a host, attaches to its segment and returns the engine end. Waits follow the
    /// mode the host wrote in the segment header. A host that sends a bad segment gets the
    /// reason back and this returns the error; the listener stays usable.
    pub fn accept(&self) -> Result<Endpoint, ShmError> {
        self.accept_with(None)
    }

    /// As [`Listener::accept`], but waits with `mode` (and its spin budget) when given.
    pub fn accept_with(&self, mode: Option<(Mode, Duration)>) -> Result<Endpoint, ShmError> {
        let pending = loop {
            if let Some(p) = self.accept_pending(None)? {
                break p;
            }
        };
        pending.finish(mode, control::HANDSHAKE_TIMEOUT)
    }

    /// Accepts the next host's connection without its handshake (so that the handshake can run
    /// on another thread, with its own deadline, while this one accepts the next host): waits
    /// up to `timeout` (`None`: for ever) and returns `None` when none came. A peer running as
    /// another user (not ours, nor admitted by [`Listener::set_allowed_uids`]) is refused here.
    pub fn accept_pending(&self, timeout: Option<Duration>) -> Result<Option<Pending>, ShmError> {
        if let Some(t) = timeout {
            let ms = i32::try_from(t.as_millis()).unwrap_or(i32::MAX);
            let mut fds = [rustix::event::PollFd::new(
                &self.inner,
                rustix::event::PollFlags::IN,
            )];
            let ts = rustix::time::Timespec {
                tv_sec: i64::from(ms / 1000),
                tv_nsec: i64::from(ms % 1000) * 1_000_000,
            };
            match rustix::event::poll(&mut fds, Some(&ts)) {
                Ok(0) | Err(rustix::io::Errno::INTR) => return Ok(None),
                Ok(_) => {}
                Err(e) => return Err(ShmError::io("poll the listener")(e)),
            }
            self.inner
                .set_nonblocking(true)
                .map_err(ShmError::std_io("set_nonblocking"))?;
            let r = self.inner.accept();
            self.inner
                .set_nonblocking(false)
                .map_err(ShmError::std_io("set_nonblocking"))?;
            return match r {
                Ok((sock, _)) => Pending::new(sock, &self.allowed, self.event_limit).map(Some),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
                Err(e) => Err(ShmError::std_io("accept")(e)),
            };
        }
        let (sock, _) = self.inner.accept().map_err(ShmError::std_io("accept"))?;
        Pending::new(sock, &self.allowed, self.event_limit).map(Some)
    }
}

/// A host's connection whose handshake has not run yet (see [`Listener::accept_pending`]).
#[derive(Debug)]
pub struct Pending {
    sock: UnixStream,
    event_limit: Option<crate::EventLimit>,
}

impl Pending {
    /// Checks the peer's uid (ours or one of `allowed`) before anything is read.
    fn new(
        sock: UnixStream,
        allowed: &[u32],
        event_limit: Option<crate::EventLimit>,
    ) -> Result<Pending, ShmError> {
        // An accepted socket does not inherit the listener's non-blocking flag on Linux.
        control::check_peer_uid_allowing(&sock, allowed)?;
        Ok(Pending { sock, event_limit })
    }

    /// Runs the handshake within `timeout`: receives the host's segment, attaches to it and
    /// returns the engine end (waits follow `mode` when given, else the host's choice). A
    /// host that sends a bad segment gets the reason back and this returns the error.
    pub fn finish(
        self,
        mode: Option<(Mode, Duration)>,
        timeout: Duration,
    ) -> Result<Endpoint, ShmError> {
        let sock = self.sock;
        sock.set_read_timeout(Some(timeout.max(Duration::from_millis(1))))
            .map_err(ShmError::std_io("set_read_timeout"))?;
        sock.set_write_timeout(Some(timeout.max(Duration::from_millis(1))))
            .map_err(ShmError::std_io("set_write_timeout"))?;
        let seg = match control::recv_hello(&sock).and_then(|fd| Ok(segment::attach(fd)?)) {
            Ok(seg) => seg,
            Err(e) => {
                control::send_verdict(&sock, Verdict::Refuse(&e));
                return Err(e);
            }
        };
        control::send_verdict(&sock, Verdict::Accept);
        sock.set_read_timeout(None)
            .map_err(ShmError::std_io("set_read_timeout"))?;
        sock.set_write_timeout(None)
            .map_err(ShmError::std_io("set_write_timeout"))?;
        let (mode, spin) = mode.unwrap_or_else(|| {
            (
                Mode::from_wire(seg.header.mode).unwrap_or(Mode::Adaptive),
                Duration::from_nanos(seg.header.spin_ns.min(1_000_000_000)),
            )
        });
        let mut ep = Endpoint::new(Shared::new(seg, sock, Side::Engine, mode, spin));
        ep.receiver().set_event_limit(self.event_limit);
        Ok(ep)
    }

    /// Refuses the host within `timeout`: takes its hello (and drops its segment) and answers
    /// with `reason`, which the host's [`connect`] returns as its error.
    pub fn refuse(self, reason: &str, timeout: Duration) {
        let sock = self.sock;
        let t = Some(timeout.max(Duration::from_millis(1)));
        if sock.set_read_timeout(t).is_ok() && sock.set_write_timeout(t).is_ok() {
            drop(control::recv_hello(&sock));
            control::send_verdict(&sock, Verdict::Refuse(&reason));
        }
    }
}

impl std::os::fd::AsFd for Pending {
    /// The host's control socket: for its credentials, or to shut it down from another
    /// thread (which ends a [`Pending::finish`] that waits on it).
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.sock)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
    }
}
