//! Accepting off the caller's thread, for transports whose handshake takes round trips
//! (`shm:` and `tls:`): a thread accepts connections and runs each handshake on a thread of
//! its own, at most `max_handshakes` at once and each within `handshake_timeout`, so that a
//! host that connects and then says nothing holds one handshake turn for a bounded time and
//! never the accept loop. Sessions that are ready wait in a channel for `Server::accept`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use offhost_proto::Side;

use crate::error::LinkError;
use crate::limits::{Counter, Limits, WriteLimits};
use crate::server::{over_sessions, Accepted};
use crate::session::Session;

/// A connection whose handshake is still to run: it runs on its own thread and yields the
/// session, or nothing when the host was turned away (which it logs).
pub(crate) type Handshake = Box<dyn FnOnce() -> Option<Result<Session, LinkError>> + Send>;

/// Waits up to the given time for the next connection; `Ok(None)` when none came.
pub(crate) type NextConnection =
    Box<dyn FnMut(Duration) -> Result<Option<Handshake>, LinkError> + Send>;

/// The background acceptor of one server.
pub(crate) struct Acceptor {
    /// Not shared: the server calls [`next`](Self::next) under the lock it keeps this in.
    ready: Receiver<Result<Session, LinkError>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Acceptor {
    /// Starts the accept thread (named `name`), which takes connections from `next`.
    pub(crate) fn start(
        name: &str,
        limits: Limits,
        mut next: NextConnection,
    ) -> Result<Acceptor, LinkError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let handshake_name = format!("{name}-handshake");
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || accept_loop(&mut next, &handshake_name, limits, &tx, &s))
            .map_err(|e| LinkError::io(format!("start the {name} thread"), e))?;
        Ok(Acceptor {
            ready: rx,
            stop,
            thread: Some(thread),
        })
    }

    /// Waits for the next session that is ready.
    pub(crate) fn next(&self) -> Result<Session, LinkError> {
        self.ready.recv().map_err(|_| LinkError::SessionClosed)?
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        // Ordering: Release pairs with the Acquire load in the accept loop; it publishes nothing
        // else (a stop flag), so Relaxed would do.
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(
    next: &mut NextConnection,
    handshake_name: &str,
    limits: Limits,
    ready: &Sender<Result<Session, LinkError>>,
    stop: &AtomicBool,
) {
    let handshakes = Counter::new();
    let poll = Duration::from_millis(100);
    // Ordering: Acquire pairs with the Release store in `Acceptor::drop`.
    while !stop.load(Ordering::Acquire) {
        // Hosts past the handshake limit wait in the listen queue.
        let Some(turn) = handshakes.try_take(limits.max_handshakes.max(1)) else {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        let handshake = match next(poll) {
            Ok(Some(h)) => h,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!("{handshake_name}: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let ready = ready.clone();
        let run = move || {
            let _turn = turn;
            if let Some(session) = handshake() {
                // The server may be gone; the session then just closes.
                let _ = ready.send(session);
            }
        };
        if let Err(e) = std::thread::Builder::new()
            .name(handshake_name.into())
            .spawn(run)
        {
            // The connection (and its turn) went with the closure: the host sees it closed.
            tracing::warn!("{handshake_name}: cannot start a handshake thread: {e}");
        }
    }
}

/// The connections of a `shm:` listener. The session slot is taken before the handshake, so
/// that a host past the limit is refused within it.
pub(crate) fn shm_connections(
    l: Arc<offhost_shm::Listener>,
    limits: Limits,
    sessions: Counter,
) -> NextConnection {
    Box::new(move |poll| {
        let Some(pending) = l.accept_pending(Some(poll))? else {
            return Ok(None);
        };
        let slot = sessions.try_take(limits.max_sessions);
        let h: Handshake = Box::new(move || {
            let Some(slot) = slot else {
                pending.refuse(&over_sessions(&limits), limits.handshake_timeout);
                return None;
            };
            match pending.finish(None, limits.handshake_timeout) {
                Ok(ep) => {
                    let (r, w) = crate::shm::halves(ep);
                    let accepted = Accepted {
                        side: Side::Server,
                        limits,
                        write: WriteLimits::from(&limits),
                        slot: Some(slot),
                    };
                    Some(Session::over_limited(
                        Box::new(r),
                        Box::new(w),
                        "shm",
                        accepted,
                    ))
                }
                Err(e) => {
                    tracing::info!("shm handshake: {e}");
                    None
                }
            }
        });
        Ok(Some(h))
    })
}

/// The connections of a `tls:` listener. The session slot is taken after the handshake: a
/// peer without a good certificate holds a handshake turn, never a session.
pub(crate) fn tls_connections(
    l: std::net::TcpListener,
    config: offhost_access::TlsServer,
    limits: Limits,
    sessions: Counter,
) -> NextConnection {
    Box::new(move |poll| {
        let (s, peer) = match wait_accept(&l, poll) {
            Ok(Some(c)) => c,
            Ok(None) => return Ok(None),
            Err(e) => return Err(LinkError::io("accept tls", e)),
        };
        let config = config.clone();
        let sessions = sessions.clone();
        let h: Handshake = Box::new(move || {
            let (r, w, cert) = match crate::tls::accept(s, &config, limits.handshake_timeout) {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!("tls: turned away {peer}: {e}");
                    return None;
                }
            };
            let slot = sessions.try_take(limits.max_sessions);
            let refused = slot.is_none();
            let accepted = match slot {
                Some(slot) => Accepted {
                    side: Side::Server,
                    limits,
                    write: WriteLimits::from(&limits),
                    slot: Some(slot),
                },
                None => Accepted::host(Side::Server),
            };
            let session = Session::over_limited(Box::new(r), Box::new(w), "tls", accepted);
            if let (Ok(s), Some(cert)) = (&session, cert) {
                let _ = s.handle.peer_certificate.set(cert);
            }
            match session {
                Ok(s) if refused => {
                    s.refuse(&over_sessions(&limits));
                    None
                }
                other => Some(other),
            }
        });
        Ok(Some(h))
    })
}

/// Accepts one TCP connection, waiting at most `timeout` for it.
fn wait_accept(
    l: &std::net::TcpListener,
    timeout: Duration,
) -> std::io::Result<Option<(std::net::TcpStream, std::net::SocketAddr)>> {
    let ts = rustix::time::Timespec {
        tv_sec: timeout.as_secs() as i64,
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    let mut fds = [rustix::event::PollFd::new(l, rustix::event::PollFlags::IN)];
    match rustix::event::poll(&mut fds, Some(&ts)) {
        Ok(0) => return Ok(None),
        Ok(_) => {}
        Err(rustix::io::Errno::INTR) => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    match l.accept() {
        Ok((s, peer)) => {
            // The listener is non-blocking; the connection must not be.
            s.set_nonblocking(false)?;
            Ok(Some((s, peer)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}
