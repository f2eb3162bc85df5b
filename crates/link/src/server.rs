//! The engine side: a listener accepting many sessions, and the echo service.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use offhost_proto::Side;

use crate::channel::Channel;
use crate::error::LinkError;
use crate::limits::{Counter, Held, Limits, Threads, WriteLimits};
use crate::mem::MemListener;
use crate::session::Session;
use crate::url::Endpoint;

enum Listener {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener, PathBuf),
    Mem(MemListener),
    Shm(Arc<offhost_shm::Listener>),
}

/// What a session is held to when it starts: a server's limits and its slot, or a host's.
pub(crate) struct Accepted {
    pub(crate) side: Side,
    pub(crate) limits: Limits,
    pub(crate) write: WriteLimits,
    pub(crate) slot: Option<Held>,
}

impl Accepted {
    /// A host's own session: default receive limits, no write limits, no slot.
    pub(crate) fn host(side: Side) -> Accepted {
        Accepted {
            side,
            limits: Limits::default(),
            write: WriteLimits::NONE,
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
    limits: Limits,
    sessions: Counter,
    threads: Threads,
    /// The shared-memory acceptor, started by the first `accept`.
    shm: Mutex<Option<ShmAcceptor>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("url", &self.url).finish()
    }
}

impl Server {
    /// Listens at `url`. TCP hosts are taken literally (use `127.0.0.1` for loopback; port 0
    /// picks a free port, see [`url`](Self::url)). A Unix socket is made owner-only; a stale
    /// socket file left by a dead server is replaced, a live one is an error.
    pub fn bind(url: &str) -> Result<Server, LinkError> {
        let (listener, url) = match Endpoint::parse(url)? {
            Endpoint::Tcp(addr) => {
                let l = std::net::TcpListener::bind(&addr)
                    .map_err(|e| LinkError::io(format!("bind tcp:{addr}"), e))?;
                let local = l
                    .local_addr()
                    .map_err(|e| LinkError::io("local address", e))?;
                (Listener::Tcp(l), format!("tcp:{local}"))
            }
            Endpoint::Unix(path) => {
                let ctx = || format!("bind unix:{}", path.display());
                if path.exists() && std::os::unix::net::UnixStream::connect(&path).is_err() {
                    std::fs::remove_file(&path).map_err(|e| LinkError::io(ctx(), e))?;
                }
                let l = std::os::unix::net::UnixListener::bind(&path)
                    .map_err(|e| LinkError::io(ctx(), e))?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                    .map_err(|e| LinkError::io(ctx(), e))?;
                let url = format!("unix:{}", path.display());
                (Listener::Unix(l, path), url)
            }
            Endpoint::Shm(addr) => (
                Listener::Shm(Arc::new(offhost_shm::Listener::bind(&addr)?)),
                format!("shm:{addr}"),
            ),
            Endpoint::Mem(name) => (
                Listener::Mem(MemListener::bind(&name)?),
                format!("mem:{name}"),
            ),
        };
        let limits = Limits::default();
        Ok(Server {
            listener,
            url,
            limits,
            sessions: Counter::new(),
            threads: Threads::new(limits.max_threads),
            shm: Mutex::new(None),
        })
    }

    /// Holds the sessions accepted from now on, and the services' threads, to `limits`.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
        self.threads = Threads::new(limits.max_threads);
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

    /// The URL hosts connect to (with the real port for `tcp:...:0`).
    pub fn url(&self) -> &str {
        &self.url
    }

    fn accepted(&self, slot: Held) -> Accepted {
        Accepted {
            side: Side::Server,
            limits: self.limits,
            write: WriteLimits::from(&self.limits),
            slot: Some(slot),
        }
    }

    fn over_sessions(&self) -> String {
        over_sessions(&self.limits)
    }

    /// Waits for the next host session. A host past the session limit is refused (it is told
    /// why) and the wait goes on.
    pub fn accept(&self) -> Result<Session, LinkError> {
        loop {
            let fd: std::os::fd::OwnedFd = match &self.listener {
                Listener::Tcp(l) => {
                    let (s, _) = l.accept().map_err(|e| LinkError::io("accept tcp", e))?;
                    s.set_nodelay(true)
                        .map_err(|e| LinkError::io("set TCP_NODELAY", e))?;
                    s.into()
                }
                Listener::Unix(l, _) => {
                    let (s, _) = l.accept().map_err(|e| LinkError::io("accept unix", e))?;
                    s.into()
                }
                Listener::Shm(l) => return self.accept_shm(l),
                Listener::Mem(l) => {
                    let c = l.accept()?;
                    let slot = self.sessions.try_take(self.limits.max_sessions);
                    let refused = slot.is_none();
                    let accepted = match slot {
                        Some(slot) => self.accepted(slot),
                        None => Accepted::host(Side::Server),
                    };
                    let s = Session::over_limited(
                        Box::new(c.read),
                        Box::new(c.write),
                        "mem",
                        accepted,
                    )?;
                    if refused {
                        s.refuse(&self.over_sessions());
                        continue;
                    }
                    return Ok(s);
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

    fn accept_shm(&self, l: &Arc<offhost_shm::Listener>) -> Result<Session, LinkError> {
        let mut acc = self.shm.lock().unwrap_or_else(|e| e.into_inner());
        if acc.is_none() {
            *acc = Some(ShmAcceptor::start(
                Arc::clone(l),
                self.limits,
                self.sessions.clone(),
            )?);
        }
        let rx = Arc::clone(&acc.as_ref().expect("started above").ready);
        drop(acc);
        let rx = rx.lock().unwrap_or_else(|e| e.into_inner());
        rx.recv().map_err(|_| LinkError::SessionClosed)?
    }
}

fn over_sessions(limits: &Limits) -> String {
    format!(
        "the server has {} sessions open, its limit (raise it with --max-sessions)",
        limits.max_sessions
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

/// Accepts shared-memory hosts on its own thread and runs each handshake on another (at most
/// `max_handshakes` at once, each within `handshake_timeout`); sessions that are ready wait in
/// a channel for [`Server::accept`].
struct ShmAcceptor {
    ready: Arc<Mutex<Receiver<Result<Session, LinkError>>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ShmAcceptor {
    fn start(
        l: Arc<offhost_shm::Listener>,
        limits: Limits,
        sessions: Counter,
    ) -> Result<ShmAcceptor, LinkError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("offhost-shm-accept".into())
            .spawn(move || shm_accept_loop(&l, limits, &sessions, &tx, &s))
            .map_err(|e| LinkError::io("start the shared-memory acceptor thread", e))?;
        Ok(ShmAcceptor {
            ready: Arc::new(Mutex::new(rx)),
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for ShmAcceptor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn shm_accept_loop(
    l: &offhost_shm::Listener,
    limits: Limits,
    sessions: &Counter,
    ready: &Sender<Result<Session, LinkError>>,
    stop: &AtomicBool,
) {
    let handshakes = Counter::new();
    let poll = Duration::from_millis(100);
    while !stop.load(Ordering::Acquire) {
        // Hosts past the handshake limit wait in the listen queue.
        let Some(turn) = handshakes.try_take(limits.max_handshakes.max(1)) else {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        let pending = match l.accept_pending(Some(poll)) {
            Ok(Some(p)) => p,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!("shm accept: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let slot = sessions.try_take(limits.max_sessions);
        let ready = ready.clone();
        let handshake = move || {
            let _turn = turn;
            let Some(slot) = slot else {
                pending.refuse(&over_sessions(&limits), limits.handshake_timeout);
                return;
            };
            let session = match pending.finish(None, limits.handshake_timeout) {
                Ok(ep) => {
                    let (r, w) = crate::shm::halves(ep);
                    let accepted = Accepted {
                        side: Side::Server,
                        limits,
                        write: WriteLimits::from(&limits),
                        slot: Some(slot),
                    };
                    Session::over_limited(Box::new(r), Box::new(w), "shm", accepted)
                }
                Err(e) => {
                    tracing::info!("shm handshake: {e}");
                    return;
                }
            };
            // The server may be gone; the session then just closes.
            let _ = ready.send(session);
        };
        if let Err(e) = std::thread::Builder::new()
            .name("offhost-shm-handshake".into())
            .spawn(handshake)
        {
            // The connection (and its turn) went with the closure: the host sees it closed.
            tracing::warn!("shm accept: cannot start a handshake thread: {e}");
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Stop the acceptor first: it holds the listener.
        drop(self.shm.get_mut().unwrap_or_else(|e| e.into_inner()).take());
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
    let threads = server.threads();
    loop {
        let session = match server.accept() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("accept on {}: {e}", server.url());
                // Out of descriptors, say: let some close before trying again.
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let t = threads.clone();
        let s = session.clone();
        let spawned = threads.spawn("offhost-echo-session", move || loop {
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
                        let _ = ch.refuse(&e.to_string());
                    }
                }
                Err(e) => {
                    tracing::info!("session ended: {e}");
                    return;
                }
            }
        });
        if let Err(e) = spawned {
            session.refuse(&e.to_string());
        }
    }
}
