//! Listening sockets and the per-connection thread.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::conn::{serve_transmission_limited, End};
use crate::export::Export;
use crate::handshake::{greeting, read_client_flags, serve_options, Haggled, HandshakeError};
use crate::limits::{Deadlined, Limits, Refused, Timeouts};
use crate::tls::{Haggled2, NbdTls, TlsMode};
use crate::trace::Tracer;
use offhost_access::Source;

/// Default time a connection polls its socket before sleeping: none (polling showed no gain
/// on the shared 2-core machine; see docs/notes/nbd.md).
pub const DEFAULT_SPIN: Duration = Duration::ZERO;

/// Default worker threads per connection: one (the most CPU-efficient, and ahead of nbdkit on
/// a quiet machine; more threads help only when the cores are contended — docs/notes/nbd.md).
pub const DEFAULT_CONN_THREADS: usize = 1;

/// Connections the kernel queues before they are accepted (capped by `net.core.somaxconn`).
const LISTEN_BACKLOG: i32 = 4096;

/// Default listening address.
pub const DEFAULT_LISTEN: &str = "tcp:127.0.0.1:10809";

/// Where to listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    /// A TCP address `HOST:PORT` (port 0 picks a free one).
    Tcp(String),
    /// A Unix socket path.
    Unix(PathBuf),
}

/// What is wrong with a listening address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddrError {
    /// `unix:` with nothing after it.
    #[error("unix: needs a socket path")]
    NoPath,
    /// Neither a TCP address nor a Unix socket.
    #[error("`{0}` is not tcp:HOST:PORT, HOST:PORT or unix:PATH")]
    Form(String),
}

impl std::str::FromStr for ListenAddr {
    type Err = AddrError;
    fn from_str(s: &str) -> Result<Self, AddrError> {
        if let Some(p) = s.strip_prefix("unix:") {
            if p.is_empty() {
                return Err(AddrError::NoPath);
            }
            Ok(Self::Unix(p.into()))
        } else {
            let a = s.strip_prefix("tcp:").unwrap_or(s);
            if !a.contains(':') {
                return Err(AddrError::Form(s.to_owned()));
            }
            Ok(Self::Tcp(a.to_owned()))
        }
    }
}

/// Errors starting a server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The listening socket could not be created.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Address asked for.
        addr: String,
        /// Cause.
        source: io::Error,
    },
    /// No exports were given.
    #[error("no exports: give at least one --export NAME=SPEC")]
    NoExports,
    /// Two exports share a name.
    #[error("export `{0}` is declared twice")]
    DuplicateExport(String),
    /// Plain TCP without opting in.
    #[error("refusing to serve {0} without TLS: require TLS with a certificate directory (the setting tls_certificates), use a unix: socket, or allow plain tcp ({1})")]
    Insecure(String, #[source] offhost_units::Needs),
}

/// A connected socket of either family.
#[derive(Debug)]
pub enum Stream {
    /// TCP.
    Tcp(TcpStream),
    /// Unix domain.
    Unix(UnixStream),
}

impl Stream {
    fn try_clone(&self) -> io::Result<Self> {
        Ok(match self {
            Self::Tcp(s) => Self::Tcp(s.try_clone()?),
            Self::Unix(s) => Self::Unix(s.try_clone()?),
        })
    }
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.set_read_timeout(t),
            Self::Unix(s) => s.set_read_timeout(t),
        }
    }
    fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.set_write_timeout(t),
            Self::Unix(s) => s.set_write_timeout(t),
        }
    }
    pub(crate) fn shutdown(&self) {
        // The peer may be gone already; nothing to do about a failure here.
        let _ = match self {
            Self::Tcp(s) => s.shutdown(Shutdown::Both),
            Self::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }
}

impl Timeouts for Stream {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        Stream::set_read_timeout(self, t)
    }
    fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        Stream::set_write_timeout(self, t)
    }
}

/// The writing half of a connection: a write that fails (the client stopped reading for the
/// I/O timeout, or left) aborts the connection: the socket is shut down, so the reader and
/// every request of the connection end too, and its close resets the connection, dropping
/// what the client never read (a FIN would wait behind it for ever).
struct Writer(Stream);

impl Writer {
    fn failed(&self, e: &io::Error) {
        if e.kind() != io::ErrorKind::Interrupted {
            let fd = match &self.0 {
                Stream::Tcp(s) => std::os::fd::AsFd::as_fd(s),
                Stream::Unix(s) => std::os::fd::AsFd::as_fd(s),
            };
            let _ = rustix::net::sockopt::set_socket_linger(fd, Some(Duration::ZERO));
            self.0.shutdown();
        }
    }
}

impl Write for Writer {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.write(b).inspect_err(|e| self.failed(e))
    }
    fn write_vectored(&mut self, b: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.0.write_vectored(b).inspect_err(|e| self.failed(e))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for Stream {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.read(b),
            Self::Unix(s) => s.read(b),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.write(b),
            Self::Unix(s) => s.write(b),
        }
    }
    fn write_vectored(&mut self, b: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.write_vectored(b),
            Self::Unix(s) => s.write_vectored(b),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

/// A bound NBD server.
pub struct Server {
    listener: Listener,
    exports: Arc<Vec<Arc<Export>>>,
    tracer: Option<Arc<Tracer>>,
    next_conn: Arc<AtomicU32>,
    opts: ConnOptions,
    tls: Arc<NbdTls>,
    allow: offhost_access::AllowUids,
    limits: Limits,
    /// Connections being served now (past TLS, or past the handshake without it).
    live: Arc<AtomicUsize>,
    /// Connections that have not reached that point yet.
    unproven: offhost_access::Unproven,
}

/// Bytes a client sends at once after the greeting (its flags and its first option's
/// header): a connection leaves the lobby for its own thread once they are there.
const FIRST_WORDS: u64 = 20;

/// Per-connection tuning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnOptions {
    /// How long a connection polls its socket before sleeping (0 = never polls).
    pub spin: Duration,
    /// Worker threads taking turns at the socket (at least 1).
    pub threads: usize,
}

impl Default for ConnOptions {
    fn default() -> Self {
        Self {
            spin: DEFAULT_SPIN,
            threads: DEFAULT_CONN_THREADS,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Listener::Unix(_, p) = &self.listener {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Server {
    /// Binds the listening socket. A stale Unix socket file at the path is replaced.
    pub fn bind(
        addr: &ListenAddr,
        exports: Vec<Export>,
        tracer: Option<Tracer>,
    ) -> Result<Self, ServerError> {
        if exports.is_empty() {
            return Err(ServerError::NoExports);
        }
        for (i, e) in exports.iter().enumerate() {
            if exports[..i].iter().any(|o| o.name == e.name) {
                return Err(ServerError::DuplicateExport(e.name.clone()));
            }
        }
        let listener = match addr {
            ListenAddr::Tcp(a) => {
                let l = TcpListener::bind(a).map_err(|source| ServerError::Bind {
                    addr: a.clone(),
                    source,
                })?;
                // Connections are accepted at once, but a burst must not fill std's 128.
                let _ = rustix::net::listen(&l, LISTEN_BACKLOG);
                Listener::Tcp(l)
            }
            ListenAddr::Unix(p) => {
                if std::fs::symlink_metadata(p)
                    .map(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()))
                    .unwrap_or(false)
                    && UnixStream::connect(p).is_err()
                {
                    let _ = std::fs::remove_file(p);
                }
                let bind_err = |source| ServerError::Bind {
                    addr: p.display().to_string(),
                    source,
                };
                let l = UnixListener::bind(p).map_err(bind_err)?;
                let _ = rustix::net::listen(&l, LISTEN_BACKLOG);
                // Owner-only whatever the umask (peers are checked by uid too).
                std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                    .map_err(bind_err)?;
                Listener::Unix(l, p.clone())
            }
        };
        Ok(Self {
            listener,
            exports: Arc::new(exports.into_iter().map(Arc::new).collect()),
            tracer: tracer.map(Arc::new),
            next_conn: Arc::new(AtomicU32::new(0)),
            opts: ConnOptions::default(),
            tls: Arc::new(NbdTls::off()),
            allow: offhost_access::AllowUids::own(),
            limits: Limits::default(),
            live: Arc::new(AtomicUsize::new(0)),
            unproven: offhost_access::Unproven::new(Limits::default().unproven()),
        })
    }

    /// Serves with `tls` (`NBD_OPT_STARTTLS`; see [`NbdTls`](crate::NbdTls)).
    pub fn set_tls(&mut self, tls: NbdTls) {
        self.tls = Arc::new(tls);
    }

    /// Admits Unix-socket clients running as these uids besides our own (`SO_PEERCRED`).
    pub fn set_allowed_uids(&mut self, uids: Vec<u32>) {
        self.allow = offhost_access::AllowUids::with(uids);
    }

    /// Refuses to serve plain TCP (a TCP listener whose TLS is not `require`) unless
    /// `insecure`: call before [`serve`](Self::serve) on a server that faces other users.
    pub fn check_insecure(&self, insecure: bool) -> Result<(), ServerError> {
        match &self.listener {
            Listener::Tcp(_) if self.tls.mode() != TlsMode::Require && !insecure => {
                Err(ServerError::Insecure(
                    self.local_addr(),
                    offhost_units::Needs::new(offhost_units::Setting::Insecure),
                ))
            }
            _ => Ok(()),
        }
    }

    /// Holds connections from now on to `limits` (connections, bytes in flight, deadlines).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
        self.unproven = offhost_access::Unproven::new(limits.unproven());
    }

    /// What the table of connections not yet past TLS (or the handshake) holds and has done.
    pub fn unproven(&self) -> offhost_access::UnprovenStats {
        self.unproven.stats()
    }

    /// The limits connections are held to.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Connections being served now (past TLS, or past the handshake without it).
    pub fn connections(&self) -> usize {
        // Ordering: Acquire pairs with the AcqRel RMWs of `Slot`; a count for reporting, stronger
        // than needed.
        self.live.load(Ordering::Acquire)
    }

    /// Sets how long a connection polls its socket before sleeping (0 = never polls).
    pub fn set_spin(&mut self, spin: Duration) {
        self.opts.spin = spin;
    }

    /// Sets the worker threads per connection (at least 1).
    pub fn set_conn_threads(&mut self, n: usize) {
        self.opts.threads = n.max(1);
    }

    /// The address clients connect to, as `tcp:HOST:PORT` or `unix:PATH`.
    pub fn local_addr(&self) -> String {
        match &self.listener {
            Listener::Tcp(l) => match l.local_addr() {
                Ok(a) => format!("tcp:{a}"),
                Err(_) => "tcp:?".into(),
            },
            Listener::Unix(_, p) => format!("unix:{}", p.display()),
        }
    }

    /// The exports served.
    pub fn exports(&self) -> &[Arc<Export>] {
        &self.exports
    }

    /// Writes the trace's buffered records to its file (a no-op without a trace), so a
    /// running server's trace can be read.
    pub fn flush_trace(&self) {
        if let Some(t) = &self.tracer {
            t.flush();
        }
    }

    /// Accepts connections forever, one thread per connection. A connection is *unproven*
    /// until it is past TLS (or past the handshake, without TLS): it holds a place among
    /// [`Limits::max_unproven`] (per source address or uid [`Limits::max_unproven_per_source`];
    /// the oldest silent one is closed to make way), and only then one of
    /// [`Limits::max_connections`]; past those, it is refused (see `refuse_handshake`). A
    /// failing connection never affects the others.
    pub fn serve(&self) -> io::Result<()> {
        let lobby = self.lobby()?;
        loop {
            let accepted = match &self.listener {
                Listener::Tcp(l) => l.accept().map(|(s, peer)| {
                    let _ = s.set_nodelay(true);
                    // A client that vanished is found out even with no --idle-timeout.
                    if let Err(e) = offhost_access::tcp::keepalive(&s) {
                        tracing::warn!("NBD connection: no keepalive: {e}");
                    }
                    (Stream::Tcp(s), Ok(Source::ip(peer.ip())))
                }),
                Listener::Unix(l, _) => l.accept().map(|(s, _)| {
                    let uid = offhost_access::peer::peer_uid(&s).map(Source::Uid);
                    (Stream::Unix(s), uid)
                }),
            };
            let (stream, source) = match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Running out of descriptors or a reset before accept: keep listening.
                    tracing::warn!("accept failed: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            };
            // Before anything is held: a refused peer holds nothing.
            if let Stream::Unix(s) = &stream {
                if let Err(e) = self.allow.check(s) {
                    tracing::warn!("turned away a unix client: {e}");
                    continue;
                }
            }
            let source = match source {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("turned away a client: {e}");
                    continue;
                }
            };
            let fd = match &stream {
                Stream::Tcp(s) => std::os::fd::AsFd::as_fd(s),
                Stream::Unix(s) => std::os::fd::AsFd::as_fd(s),
            };
            // The greeting fits an empty socket buffer: sent without waiting, so that the
            // client says its first words while it waits in the lobby.
            let greeted = rustix::net::send(
                fd,
                &greeting(),
                rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL,
            );
            if !matches!(greeted, Ok(18)) {
                continue;
            }
            let Ok(watch) = fd.try_clone_to_owned() else {
                continue;
            };
            if let Err(e) = lobby.admit(source, watch, (stream, source)) {
                tracing::warn!("NBD lobby: {e}");
            }
        }
    }

    /// The lobby of this server's connections: each leaves it for a thread of its own, under
    /// the unproven budget, once the client has said its first words.
    fn lobby(&self) -> io::Result<offhost_access::Lobby<(Stream, Source)>> {
        let limits = self.limits;
        let unproven = self.unproven.clone();
        let live = Arc::clone(&self.live);
        let exports = self.exports.clone();
        let tracer = self.tracer.clone();
        let (opts, tls) = (self.opts, self.tls.clone());
        let next_conn = Arc::clone(&self.next_conn);
        let ready = move |(stream, source): (Stream, Source)| {
            let fd = match &stream {
                Stream::Tcp(s) => std::os::fd::AsFd::as_fd(s),
                Stream::Unix(s) => std::os::fd::AsFd::as_fd(s),
            };
            let ticket = match unproven.admit(source, fd) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!("turned away a client: {e}");
                    return;
                }
            };
            // Relaxed: only a unique number is needed.
            let id = next_conn.fetch_add(1, Ordering::Relaxed);
            let (exports, tracer, tls) = (exports.clone(), tracer.clone(), tls.clone());
            let admission = Admission {
                ticket: Some(ticket),
                slot: None,
                live: Arc::clone(&live),
                limits,
            };
            let spawned = std::thread::Builder::new()
                .name(format!("nbd-conn-{id}"))
                .spawn(move || {
                    let conn = Conn {
                        exports: &exports,
                        tracer: tracer.as_deref(),
                        id,
                        opts,
                        tls: &tls,
                        limits: &limits,
                    };
                    conn.serve(stream, admission)
                });
            if let Err(e) = spawned {
                // The stream went with the closure: the client sees the connection close.
                tracing::warn!("cannot start a thread for connection {id}: {e}");
            }
        };
        let lobby_limits = offhost_access::LobbyLimits::in_front_of(
            limits.max_unproven,
            limits.max_unproven_per_source,
            limits.handshake_timeout,
            FIRST_WORDS,
        );
        offhost_access::Lobby::start("nbd-lobby", lobby_limits, ready)
    }
}

/// Where a connection stands: unproven (its ticket), then served (its connection slot).
struct Admission {
    ticket: Option<offhost_access::Ticket>,
    slot: Option<Slot>,
    live: Arc<AtomicUsize>,
    limits: Limits,
}

impl Admission {
    /// The connection is past TLS (or the handshake): it leaves the unproven and takes a
    /// connection slot, or the reason it gets none. Asking again once admitted is a no-op.
    fn prove(&mut self) -> Result<(), Refused> {
        if self.slot.is_some() {
            return Ok(());
        }
        if let Some(t) = self.ticket.take() {
            if !t.proven() {
                return Err(Refused::MadeWay);
            }
        }
        match Slot::take(&self.live, self.limits.max_connections) {
            Some(slot) => {
                self.slot = Some(slot);
                Ok(())
            }
            None => Err(self.limits.over_connections()),
        }
    }

    /// The client has shown progress (its flags after the greeting).
    fn progressed(&self) {
        if let Some(t) = &self.ticket {
            t.progressed();
        }
    }
}

/// One unit of a count of things held at once, given back when dropped.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(count: &Arc<AtomicUsize>, max: usize) -> Option<Slot> {
        count
            // Ordering: AcqRel/Acquire on the connection count: only the RMW's atomicity bounds it,
            // the orderings are stronger than needed.
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(Arc::clone(count)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Ordering: AcqRel: gives back the connection's slot; a count, stronger than needed.
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What one connection is served with.
struct Conn<'a> {
    exports: &'a [Arc<Export>],
    tracer: Option<&'a Tracer>,
    id: u32,
    opts: ConnOptions,
    tls: &'a NbdTls,
    limits: &'a Limits,
}

impl Conn<'_> {
    /// Serves one connection from handshake to close: the handshake by its deadline (the
    /// connection admitted once past TLS, or at `NBD_OPT_GO` without it), then requests with
    /// their byte budget, I/O timeout and idle timeout.
    fn serve(&self, mut stream: Stream, mut admission: Admission) {
        let (exports, tracer, id, opts, tls, limits) = (
            self.exports,
            self.tracer,
            self.id,
            self.opts,
            self.tls,
            self.limits,
        );
        let deadline = Instant::now() + limits.handshake_timeout;
        let haggled = {
            let mut s = Deadlined::new(&mut stream, deadline);
            read_client_flags(&mut s).and_then(|no_zeroes| {
                admission.progressed();
                serve_options(&mut s, exports, no_zeroes, tls.haggle(), &mut || {
                    admission.prove()
                })
                .map(|h| (no_zeroes, h))
            })
        };
        let haggled = match haggled {
            Ok((_, Haggled::Go(neg))) => Ok(Haggled2::Plain(stream, neg)),
            Ok((no_zeroes, Haggled::StartTls)) => {
                let admit = &mut || admission.prove();
                crate::tls::upgrade(stream, tls, exports, no_zeroes, deadline, admit)
            }
            Err(e) => {
                stream.shutdown();
                Err(e)
            }
        };
        // Past the handshake: the ticket is gone, the slot held until the end.
        let _admission = admission;
        serve_haggled(haggled, tracer, id, opts, limits);
    }
}

/// Serves the transmission phase of a connection whose handshake ended with `haggled`.
fn serve_haggled(
    haggled: Result<Haggled2, HandshakeError>,
    tracer: Option<&Tracer>,
    id: u32,
    opts: ConnOptions,
    limits: &Limits,
) {
    let end = match haggled {
        Ok(Haggled2::Plain(stream, neg)) => {
            let end = serve_plain(&stream, &neg, tracer, id, opts, limits);
            stream.shutdown();
            end
        }
        Ok(Haggled2::Tls(mut r, mut w, neg)) => {
            log_negotiated(id, &neg);
            let end = serve_transmission_limited(
                &mut r,
                &mut w,
                &neg.export,
                neg.structured,
                tracer,
                id,
                opts.threads,
                &limits.conn(),
            );
            w.shutdown();
            w.abort();
            end
        }
        Err(HandshakeError::Aborted) => {
            tracing::debug!("conn {id}: client aborted the handshake");
            return;
        }
        Err(e) => {
            tracing::info!("conn {id}: {e}");
            return;
        }
    };
    match end {
        Ok(End::Violation(why)) => tracing::info!("conn {id}: dropped: {why}"),
        Ok(End::Idle) => tracing::info!("conn {id}: dropped: idle past --idle-timeout"),
        Ok(end) => tracing::debug!("conn {id}: {end:?}"),
        Err(e) => tracing::debug!("conn {id}: i/o error: {e}"),
    }
    if let Some(t) = tracer {
        t.flush();
    }
}

fn log_negotiated(id: u32, neg: &crate::handshake::Negotiated) {
    tracing::debug!(
        "conn {id}: export `{}` structured={}",
        neg.export.name,
        neg.structured
    );
}

/// The transmission phase on a plain socket: a read or write waits at most the I/O timeout
/// (and reads no longer than the idle timeout, which the connection counts in them).
fn serve_plain(
    stream: &Stream,
    neg: &crate::handshake::Negotiated,
    tracer: Option<&Tracer>,
    id: u32,
    opts: ConnOptions,
    limits: &Limits,
) -> io::Result<End> {
    let read_timeout = limits
        .idle_timeout
        .map_or(limits.io_timeout, |t| t.min(limits.io_timeout));
    stream.set_read_timeout(Some(read_timeout.max(Duration::from_millis(1))))?;
    stream.set_write_timeout(Some(limits.io_timeout.max(Duration::from_millis(1))))?;
    log_negotiated(id, neg);
    let writer = Writer(stream.try_clone()?);
    let reader = SpinReader {
        stream,
        spin: opts.spin,
    };
    serve_transmission_limited(
        reader,
        writer,
        &neg.export,
        neg.structured,
        tracer,
        id,
        opts.threads,
        &limits.conn(),
    )
}

/// The reading half of a connection: before sleeping in `read`, it polls the socket for up to
/// `spin` (non-blocking `recv`), so a client that answers quickly finds the server awake. On a
/// loaded machine a wake-up costs far more than a few microseconds of polling (`[SUN-T]`'s
/// polled against interrupt-driven drivers).
pub struct SpinReader<'a> {
    stream: &'a Stream,
    spin: Duration,
}

impl Read for SpinReader<'_> {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        if !self.spin.is_zero() && !b.is_empty() {
            let fd = match self.stream {
                Stream::Tcp(s) => std::os::fd::AsFd::as_fd(s),
                Stream::Unix(s) => std::os::fd::AsFd::as_fd(s),
            };
            let deadline = std::time::Instant::now() + self.spin;
            loop {
                match rustix::net::recv(fd, &mut *b, rustix::net::RecvFlags::DONTWAIT) {
                    Ok((_, n)) => return Ok(n.min(b.len())),
                    Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(e.into()),
                }
                if std::time::Instant::now() >= deadline {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        let mut r: &Stream = self.stream;
        r.read(b)
    }
}

impl Read for &Stream {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match *self {
            Stream::Tcp(ref s) => {
                let mut r: &TcpStream = s;
                r.read(b)
            }
            Stream::Unix(ref s) => {
                let mut r: &UnixStream = s;
                r.read(b)
            }
        }
    }
}
