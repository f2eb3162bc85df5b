//! Accepting off the caller's thread, for transports whose handshake takes round trips
//! (`shm:` and `tls:`): a thread accepts every connection at once and runs its handshake on a
//! thread of its own, within `handshake_timeout`. Until its handshake ends a connection is
//! *unproven*: it holds a place in the server's [`Unproven`] table (at most `max_handshakes`,
//! `max_handshakes_per_source` from one IP address or uid), never a session slot; when the
//! table is full the oldest silent connection is shut down to make way, so that hosts that
//! connect and say nothing (or trickle bytes) never keep a good host out, and never fill the
//! listen queue. Sessions that are ready wait in a channel for `Server::accept`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use offhost_access::{Lobby, Source, Ticket, Unproven};
use offhost_proto::Side;

use crate::error::LinkError;
use crate::limits::{Counter, DriverLimits, Limits};
use crate::server::{over_sessions, Accepted};
use crate::session::Session;

/// A connection whose handshake is still to run: it runs on its own thread and yields the
/// session, or nothing when the host was turned away (which it logs).
pub(crate) type Handshake = Box<dyn FnOnce() -> Option<Result<Session, LinkError>> + Send>;

/// An accepted connection: where it comes from, its socket (a duplicate, for the lobby to
/// watch) and its handshake (which owns the connection).
pub(crate) struct Arrival {
    source: Source,
    socket: std::os::fd::OwnedFd,
    handshake: Handshake,
}

/// Waits up to the given time for the next connection; `Ok(None)` when none came.
pub(crate) type NextConnection =
    Box<dyn FnMut(Duration) -> Result<Option<Arrival>, LinkError> + Send>;

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
        ready_bytes: u64,
        mut next: NextConnection,
    ) -> Result<Acceptor, LinkError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let handshake_name = format!("{name}-handshake");
        let lobby = lobby(name, limits, ready_bytes, tx)?;
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || accept_loop(&mut next, &handshake_name, &lobby, &s))
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
        // Ordering: Release pairs with the Acquire load in `accept_loop` (a flag only).
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The lobby connections wait in until they speak; then each handshake runs on a thread of
/// its own (at most four times `max_handshakes` at once: those of unproven connections, and
/// of evicted ones still ending; past it a newcomer is closed).
fn lobby(
    name: &str,
    limits: Limits,
    ready_bytes: u64,
    ready: Sender<Result<Session, LinkError>>,
) -> Result<Lobby<Handshake>, LinkError> {
    let handshakes = Counter::new();
    let max_threads = limits.max_handshakes.max(1).saturating_mul(4);
    let handshake_name = format!("{name}-handshake");
    let spawn = move |handshake: Handshake| {
        let Some(turn) = handshakes.try_take(max_threads) else {
            // Dropping the handshake closes its connection.
            tracing::info!("{handshake_name}: {max_threads} handshakes running: closed one");
            return;
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
            .name(handshake_name.clone())
            .spawn(run)
        {
            // The connection (and its turn) went with the closure: the host sees it closed.
            tracing::warn!("{handshake_name}: cannot start a handshake thread: {e}");
        }
    };
    Lobby::start(&format!("{name}-lobby"), limits.lobby(ready_bytes), spawn)
        .map_err(|e| LinkError::io(format!("start the {name} lobby"), e))
}

fn accept_loop(next: &mut NextConnection, name: &str, lobby: &Lobby<Handshake>, stop: &AtomicBool) {
    let poll = Duration::from_millis(100);
    // Ordering: Acquire pairs with the Release store in `Acceptor::drop`.
    while !stop.load(Ordering::Acquire) {
        let arrival = match next(poll) {
            Ok(Some(a)) => a,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!("{name}: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if let Err(e) = lobby.admit(arrival.source, &arrival.socket, arrival.handshake) {
            tracing::warn!("{name}: {e}");
        }
    }
}

/// The time a handshake admitted with `ticket` has left.
fn time_left(ticket: &Ticket) -> Duration {
    ticket.deadline().saturating_duration_since(Instant::now())
}

/// A server's session over a proven connection: with a session slot, or refused over the
/// session (its host learns why) when none is left.
fn start_session(
    r: Box<dyn crate::wire::WireRead>,
    w: Box<dyn crate::wire::WireWrite>,
    transport: &'static str,
    limits: Limits,
    sessions: &Counter,
    cert: Option<Vec<u8>>,
) -> Option<Result<Session, LinkError>> {
    let slot = sessions.try_take(limits.max_sessions);
    let refused = slot.is_none();
    let accepted = match slot {
        Some(slot) => Accepted {
            side: Side::Server,
            limits,
            write: DriverLimits::from(&limits),
            slot: Some(slot),
        },
        None => Accepted::host(Side::Server, limits.peer_deadline),
    };
    let session = Session::over_limited(r, w, transport, accepted);
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
}

/// The connections of a `shm:` listener: each admitted among the unproven by its uid, and
/// given a session slot once the host's segment is attached.
pub(crate) fn shm_connections(
    l: Arc<offhost_shm::Listener>,
    limits: Limits,
    sessions: Counter,
    unproven: Unproven,
) -> NextConnection {
    Box::new(move |poll| {
        unproven.expire();
        let Some(pending) = l.accept_pending(Some(poll))? else {
            return Ok(None);
        };
        let source = Source::Uid(offhost_access::peer::peer_uid(&pending)?);
        let socket = std::os::fd::AsFd::as_fd(&pending)
            .try_clone_to_owned()
            .map_err(|e| LinkError::io("admit a shm host", e))?;
        let (sessions, unproven) = (sessions.clone(), unproven.clone());
        let h: Handshake = Box::new(move || {
            let ticket = match unproven.admit(source, &pending) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!("shm: turned away a host: {e}");
                    return None;
                }
            };
            let ep = match pending.finish(None, time_left(&ticket)) {
                Ok(ep) => ep,
                Err(e) => {
                    tracing::info!("shm handshake: {e}");
                    return None;
                }
            };
            if !ticket.proven() {
                return None;
            }
            let mut ep = ep;
            ep.receiver().set_event_limit(limits.event_limit);
            let (r, w) = crate::shm::halves(ep);
            start_session(Box::new(r), Box::new(w), "shm", limits, &sessions, None)
        });
        Ok(Some(Arrival {
            source,
            socket,
            handshake: h,
        }))
    })
}

/// The connections of a `tls:` listener: each admitted among the unproven by its IP address,
/// and given a session slot once its certificate was checked.
pub(crate) fn tls_connections(
    l: std::net::TcpListener,
    config: offhost_access::TlsServer,
    limits: Limits,
    sessions: Counter,
    unproven: Unproven,
) -> NextConnection {
    Box::new(move |poll| {
        unproven.expire();
        let (s, peer) = match wait_accept(&l, poll) {
            Ok(Some(c)) => c,
            Ok(None) => return Ok(None),
            Err(e) => return Err(LinkError::io("accept tls", e)),
        };
        let source = Source::ip(peer.ip());
        let socket = match std::os::fd::AsFd::as_fd(&s).try_clone_to_owned() {
            Ok(fd) => fd,
            Err(e) => {
                tracing::warn!("tls: turned away {peer}: {e}");
                return Ok(None);
            }
        };
        let config = config.clone();
        let (sessions, unproven) = (sessions.clone(), unproven.clone());
        let h: Handshake = Box::new(move || {
            let ticket = match unproven.admit(source, &s) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!("tls: turned away {peer}: {e}");
                    return None;
                }
            };
            let progressed = &mut || ticket.progressed();
            let (r, w, cert) = match crate::tls::accept(s, &config, time_left(&ticket), progressed)
            {
                Ok(accepted) => accepted,
                Err(e) => {
                    let why = if ticket.evicted() {
                        "made way for newer connections".to_string()
                    } else {
                        e.to_string()
                    };
                    tracing::info!("tls: turned away {peer}: {why}");
                    return None;
                }
            };
            if !ticket.proven() {
                return None;
            }
            start_session(Box::new(r), Box::new(w), "tls", limits, &sessions, cert)
        });
        Ok(Some(Arrival {
            source,
            socket,
            handshake: h,
        }))
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
