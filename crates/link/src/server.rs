//! The engine side: a listener accepting many sessions, and the echo service.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use offhost_proto::Side;
use offhost_units::{Limit, OverLimit};

use crate::acceptor::{self, Acceptor};
use crate::channel::Channel;
use crate::error::LinkError;
use crate::limits::{Counter, DriverLimits, Held, Limits, Threads};
use crate::mem::MemListener;
use crate::options::LinkOptions;
use crate::session::Session;
use crate::url::Url;

enum Listener {
    Tcp(std::net::TcpListener),
    Tls(std::net::TcpListener, offhost_access::TlsServer),
    Unix(std::os::unix::net::UnixListener, PathBuf),
    Mem(MemListener),
    Shm(Arc<offhost_shm::Listener>),
}

/// What a session is held to when it starts: a server's limits and its slot, or a host's.
pub(crate) struct Accepted {
    pub(crate) side: Side,
    pub(crate) limits: Limits,
    pub(crate) write: DriverLimits,
    pub(crate) slot: Option<Held>,
}

impl Accepted {
    /// A host's own session: default receive limits, no write limits, no slot, and the
    /// peer deadline `peer_deadline`.
    pub(crate) fn host(side: Side, peer_deadline: Option<std::time::Duration>) -> Accepted {
        Accepted {
            side,
            limits: Limits::default(),
            write: DriverLimits::host(peer_deadline),
            slot: None,
        }
    }
}

/// Accepts host sessions at one URL; each session carries many channels.
///
/// Every session is held to the server's [`Limits`] ([`set_limits`](Self::set_limits)):
/// sessions past the limit are refused with a link error naming it, and a shared-memory
/// handshake runs on its own thread with its own deadline, so a host that connects and says
/// nothing never delays the others.
pub struct Server {
    listener: Listener,
    url: String,
    allow: offhost_access::AllowUids,
    limits: Limits,
    sessions: Counter,
    threads: Threads,
    /// The acceptor of `tls:` and `shm:`, started by the first `accept`.
    acceptor: Mutex<Option<Box<Acceptor>>>,
    /// Connections of `tls:` and `shm:` whose handshake has not ended.
    unproven: offhost_access::Unproven,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("url", &self.url).finish()
    }
}

fn bind_tcp(addr: &str, scheme: &str) -> Result<(std::net::TcpListener, String), LinkError> {
    if addr == crate::activation::SYSTEMD {
        return crate::activation::next_listener(scheme);
    }
    let l = std::net::TcpListener::bind(addr)
        .map_err(|e| LinkError::io(format!("bind {scheme}:{addr}"), e))?;
    // A longer listen queue than std's 128: the acceptor takes connections at once, but a
    // burst (or others' silent connections) must not fill the queue before it does.
    let _ = rustix::net::listen(&l, offhost_shm::LISTEN_BACKLOG);
    let local = l
        .local_addr()
        .map_err(|e| LinkError::io("local address", e))?;
    Ok((l, format!("{scheme}:{local}")))
}

impl Server {
    /// Listens at `url`: `unix:`, `shm:` and `mem:` as with [`bind_with`](Self::bind_with)
    /// and default options (peers of our own uid only), and `tcp:HOST:PORT` as written: plain
    /// TCP, with neither authentication nor encryption, because the caller spelled it out (a
    /// server reachable from other users or machines should use `tls:` through
    /// [`bind_with`](Self::bind_with)). TCP hosts are taken literally (use `127.0.0.1` for
    /// loopback; port 0 picks a free port, see [`url`](Self::url)).
    pub fn bind(url: &str) -> Result<Server, LinkError> {
        Self::bind_with(url, &LinkOptions::new().insecure(true))
    }

    /// Listens at `url` with `options`:
    /// - `tls:HOST:PORT`: every session starts with a TLS handshake in which the client must
    ///   present a certificate signed by the CA of the certificate directory;
    /// - `tcp:HOST:PORT`: refused ([`LinkError::Insecure`]) unless `options.insecure`;
    /// - `tls:systemd`, `tcp:systemd`: as above, on the next listening socket systemd passed
    ///   this process (socket activation: `LISTEN_FDS`), instead of binding one;
    /// - `unix:PATH`: the socket file is made owner-only; a stale socket file left by a dead
    ///   server is replaced, a live one is an error; `shm:ADDR` likewise;
    /// - on `unix:` and `shm:`, a peer whose uid (`SO_PEERCRED`) is neither ours nor in
    ///   `options.allow_uids` is turned away at accept.
    pub fn bind_with(url: &str, options: &LinkOptions) -> Result<Server, LinkError> {
        let allow = offhost_access::AllowUids::with(options.allow_uids.iter().copied());
        let (listener, url) = match Url::parse(url)? {
            Url::Tcp(addr) => {
                if !options.insecure {
                    return Err(LinkError::Insecure(
                        format!("tcp:{addr}"),
                        offhost_units::Needs::new(offhost_units::Setting::Insecure),
                    ));
                }
                let (l, url) = bind_tcp(&addr, "tcp")?;
                (Listener::Tcp(l), url)
            }
            Url::Tls(addr) => {
                let config = crate::tls::server_config(&options.cert_dir(url)?)?;
                let (l, url) = bind_tcp(&addr, "tls")?;
                (Listener::Tls(l, config), url)
            }
            Url::Unix(path) => {
                let ctx = || format!("bind unix:{}", path.display());
                if path.exists() && std::os::unix::net::UnixStream::connect(&path).is_err() {
                    std::fs::remove_file(&path).map_err(|e| LinkError::io(ctx(), e))?;
                }
                let l = std::os::unix::net::UnixListener::bind(&path)
                    .map_err(|e| LinkError::io(ctx(), e))?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                    .map_err(|e| LinkError::io(ctx(), e))?;
                (
                    Listener::Unix(l, path.clone()),
                    format!("unix:{}", path.display()),
                )
            }
            Url::Shm(addr) => {
                let mut l = offhost_shm::Listener::bind(&addr)?;
                l.set_allowed_uids(options.allow_uids.clone());
                (Listener::Shm(Arc::new(l)), format!("shm:{addr}"))
            }
            Url::Mem(name) => (
                Listener::Mem(MemListener::bind(&name)?),
                format!("mem:{name}"),
            ),
        };
        let limits = Limits::default();
        Ok(Server {
            listener,
            url,
            allow,
            limits,
            sessions: Counter::new(),
            threads: Threads::new(limits.max_threads),
            acceptor: Mutex::new(None),
            unproven: offhost_access::Unproven::new(limits.unproven()),
        })
    }

    /// Holds the sessions accepted from now on, and the services' threads, to `limits`.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
        self.threads = Threads::new(limits.max_threads);
        self.unproven = offhost_access::Unproven::new(limits.unproven());
    }

    /// What the table of unproven `tls:` and `shm:` connections holds and has done
    /// (evictions, expiries).
    pub fn unproven(&self) -> offhost_access::UnprovenStats {
        self.unproven.stats()
    }

    /// The limits sessions are held to.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The budget of threads services start for this server's peers (under
    /// [`Limits::max_threads`]).
    pub fn threads(&self) -> Threads {
        self.threads.clone()
    }

    /// Sessions open now.
    pub fn sessions(&self) -> usize {
        self.sessions.held()
    }

    /// The URL hosts connect to (with the real port for `tcp:...:0` and `tls:...:0`).
    pub fn url(&self) -> &str {
        &self.url
    }

    fn accepted(&self, slot: Held) -> Accepted {
        Accepted {
            side: Side::Server,
            limits: self.limits,
            write: DriverLimits::from(&self.limits),
            slot: Some(slot),
        }
    }

    fn over_sessions(&self) -> String {
        over_sessions(&self.limits)
    }

    /// Waits for the next host session. A peer that is turned away (another uid on `unix:` or
    /// `shm:`, no or a wrong certificate on `tls:`) is logged, and a host past the session
    /// limit is refused (it is told why); either way the wait goes on. Errors are those of the
    /// listening socket.
    pub fn accept(&self) -> Result<Session, LinkError> {
        let turned_away = |what: &str, e: &dyn std::fmt::Display| {
            tracing::warn!("{}: turned away {what}: {e}", self.url);
        };
        loop {
            let fd: std::os::fd::OwnedFd = match &self.listener {
                Listener::Tcp(l) => {
                    let (s, _) = l.accept().map_err(|e| LinkError::io("accept tcp", e))?;
                    // What fails on one peer's socket turns that peer away: errors here
                    // are the listening socket's.
                    if let Err(e) = crate::tcp::tune(&s) {
                        turned_away("a tcp peer", &e);
                        continue;
                    }
                    s.into()
                }
                Listener::Tls(..) | Listener::Shm(_) => return self.accept_in_background(),
                Listener::Unix(l, _) => {
                    let (s, _) = l.accept().map_err(|e| LinkError::io("accept unix", e))?;
                    // Before a session slot is taken: a refused peer holds nothing.
                    if let Err(e) = self.allow.check(&s) {
                        turned_away("a unix peer", &e);
                        continue;
                    }
                    s.into()
                }
                Listener::Mem(l) => {
                    let c = l.accept()?;
                    match self.start_or_refuse(Box::new(c.read), Box::new(c.write), "mem")? {
                        Some(s) => return Ok(s),
                        None => continue,
                    }
                }
            };
            let transport = if matches!(self.listener, Listener::Tcp(_)) {
                "tcp"
            } else {
                "unix"
            };
            let Some(slot) = self.sessions.try_take(self.limits.max_sessions) else {
                refuse_socket(fd, &self.over_sessions());
                continue;
            };
            let (r, w) =
                crate::wire::sock_pair(fd).map_err(|e| LinkError::io("duplicate socket", e))?;
            return Session::over_limited(Box::new(r), Box::new(w), transport, self.accepted(slot));
        }
    }

    /// Starts the session of a connection whose transport carries the refusal itself (`mem:`,
    /// `tls:`): with a session slot, or, when none is left, refused over the session (its
    /// peer's calls fail with the reason) and `None`.
    fn start_or_refuse(
        &self,
        read: Box<dyn crate::wire::WireRead>,
        write: Box<dyn crate::wire::WireWrite>,
        transport: &'static str,
    ) -> Result<Option<Session>, LinkError> {
        let slot = self.sessions.try_take(self.limits.max_sessions);
        let refused = slot.is_none();
        let accepted = match slot {
            Some(slot) => self.accepted(slot),
            None => Accepted::host(Side::Server, self.limits.peer_deadline),
        };
        let s = Session::over_limited(read, write, transport, accepted)?;
        if refused {
            s.refuse(&self.over_sessions());
            return Ok(None);
        }
        Ok(Some(s))
    }

    /// Accepts sessions for ever and runs `serve` on each, on a thread named `name` under
    /// the server's thread budget ([`threads`](Self::threads)), which `serve` gets too (for
    /// its channels' threads). A session that finds no thread is refused with the reason; an
    /// accept that fails (out of descriptors, say) is logged and tried again 50 ms later.
    pub fn serve_each<F>(&self, name: &str, serve: F) -> !
    where
        F: Fn(Session, &Threads) + Send + Sync + 'static,
    {
        let threads = self.threads();
        let serve = Arc::new(serve);
        loop {
            let session = match self.accept() {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("accept on {}: {e}", self.url);
                    // Let some descriptors close before trying again.
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            let (f, s, t) = (Arc::clone(&serve), session.clone(), threads.clone());
            if let Err(e) = threads.spawn(name, move || f(s, &t)) {
                session.refuse(&e.for_peer());
            }
        }
    }

    /// The next session of a `tls:` or `shm:` listener, whose handshakes run on the
    /// background acceptor (started by the first call).
    fn accept_in_background(&self) -> Result<Session, LinkError> {
        let mut acc = self.acceptor.lock().unwrap_or_else(|e| e.into_inner());
        if acc.is_none() {
            let sessions = self.sessions.clone();
            let unproven = self.unproven.clone();
            let (name, ready_bytes, next) = match &self.listener {
                Listener::Shm(l) => (
                    "offhost-shm-accept",
                    // A host's first message is its hello: a few bytes and a descriptor.
                    1,
                    acceptor::shm_connections(Arc::clone(l), self.limits, sessions, unproven),
                ),
                Listener::Tls(l, config) => {
                    let l = l
                        .try_clone()
                        .and_then(|l| l.set_nonblocking(true).map(|()| l))
                        .map_err(|e| LinkError::io("share the tls listener", e))?;
                    (
                        "offhost-tls-accept",
                        offhost_access::unproven::SHOWN_PROGRESS,
                        acceptor::tls_connections(
                            l,
                            config.clone(),
                            self.limits,
                            sessions,
                            unproven,
                        ),
                    )
                }
                _ => unreachable!("only tls: and shm: accept in the background"),
            };
            *acc = Some(Box::new(Acceptor::start(
                name,
                self.limits,
                ready_bytes,
                next,
            )?));
        }
        let acc = acc.as_ref().expect("started above");
        // Holding the lock while waiting: callers of accept take turns, as on a socket.
        acc.next()
    }
}

/// The reason a session past the limit is refused with: text for the peer, which names the
/// flag that raises the limit here.
pub(crate) fn over_sessions(limits: &Limits) -> String {
    let over = OverLimit::new(Limit::MaxSessions, limits.max_sessions);
    format!(
        "the server has {} sessions open, {over} {}",
        limits.max_sessions,
        over.for_peer()
    )
}

/// Tells a host over its socket that its session is refused (a link error frame with
/// `reason`), without waiting for it; the socket lingers so that the refusal reaches the host
/// even if it keeps sending (see `linger.rs`).
fn refuse_socket(fd: std::os::fd::OwnedFd, reason: &str) {
    let mut conn = offhost_proto::Connection::new(offhost_proto::Config::new(Side::Server));
    conn.refuse_link(reason);
    let mut bytes = Vec::new();
    conn.poll_transmit(&mut bytes);
    // Best effort: a socket buffer takes these few bytes at once, or the host reads nothing.
    let _ = rustix::net::send(
        &fd,
        &bytes,
        rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL,
    );
    crate::linger::close(fd);
}

impl Drop for Server {
    fn drop(&mut self) {
        // Stop the acceptor first: it holds the listener.
        drop(
            self.acceptor
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        if let Listener::Unix(_, path) = &self.listener {
            // Best effort: the file may already be gone.
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Echoes every message of `ch` back on it until the peer ends the stream, then ends it too.
/// Returns the number of messages echoed.
pub fn echo_channel(ch: &Channel) -> Result<u64, LinkError> {
    let mut n = 0;
    let mut buf = Vec::new();
    while let Some(m) = ch.recv_message_into(&mut buf)? {
        match m {
            // Forward a loan as it came: zero copies both ways.
            crate::Arrived::Loan(l) => ch.send_loan(l)?,
            crate::Arrived::Copied => ch.send(&buf)?,
        }
        n += 1;
    }
    ch.close()?;
    Ok(n)
}

/// Serves echo on every channel of every session accepted by `server`, a thread per session
/// and per channel under the server's thread budget ([`Server::threads`]), for ever. A
/// session or channel that finds no thread is refused with the reason; a failing session or
/// channel is logged and the server goes on.
pub fn serve_echo(server: &Server) -> Result<(), LinkError> {
    server.serve_each("offhost-echo-session", |s, t| loop {
        match s.accept() {
            Ok(ch) => {
                let ch = Arc::new(ch);
                let c = Arc::clone(&ch);
                let spawned = t.spawn("offhost-echo", move || {
                    if let Err(e) = echo_channel(&c) {
                        tracing::info!("echo on channel {:?}: {e}", c.name());
                    }
                });
                if let Err(e) = spawned {
                    let _ = ch.refuse(&e.for_peer());
                }
            }
            Err(e) => {
                tracing::info!("session ended: {e}");
                return;
            }
        }
    })
}

/// Serves echo to the first session `server` accepts, a thread per channel, and returns once
/// it has ended (`offhost echo --once`): the number of channels it opened.
pub fn serve_echo_once(server: &Server) -> Result<usize, LinkError> {
    let session = server.accept()?;
    let mut n = 0;
    std::thread::scope(|s| {
        while let Ok(ch) = session.accept() {
            n += 1;
            s.spawn(move || {
                if let Err(e) = echo_channel(&ch) {
                    tracing::info!("echo on channel {:?}: {e}", ch.name());
                }
            });
        }
    });
    Ok(n)
}
