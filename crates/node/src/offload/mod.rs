//! The engine as protocol processor (`[Off-host]`'s attached processor): it serves the off-host
//! queues of its local hosts and runs the network side for them.
//!
//! A host connects over shared memory (`shm:PATH`, the same address the daemon's link
//! sessions use: the first record tells them apart, an off-host hello carries
//! [`offhost_proto::offload::MAGIC`]). Each host gets a thread that sleeps on its submission
//! ring's doorbell and, when woken, takes every record there is, acts on each, and publishes
//! the completions it made with one store and at most one doorbell. Sends go to the peer links
//! ([`offhost_link::peer`]: one link per remote engine, a bulk and an urgent lane, rate and
//! burst per channel, acknowledgements, retry policy) or to a local mailbox; receives wait in
//! the mailboxes ([`Router`]) for messages from peers or local hosts. Completions made by the
//! links' threads (acknowledgements, arrivals) are written into the host's ring by those
//! threads, in batches, one doorbell per batch.
//!
//! What a peer sends to `in/N/NAME` goes into `host-in name=NAME` of the daemon's pipeline N
//! (an empty message ends that input); any other channel is a mailbox.
//!
//! Budgets: hosts per engine; per host, outstanding submissions, bytes of sends in flight and
//! open channels (over budget: that submission fails with [`ErrorCode::Budget`]); records that
//! do not decode get the host refused (a refusal completion, then its queue is closed) while
//! the others are served. Peer sessions, streams and mailboxes have their own
//! ([`PeerConfig`], [`RouterLimits`]).

mod deliver;
mod host;
mod listen;

pub use listen::ListenError;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use offhost_access::{Lobby, Source, Ticket, Unproven};
use offhost_link::offload::{Router, RouterLimits};
use offhost_link::peer::{PeerConfig, PeerSetupError, Peers};
use offhost_link::{Server, Session, Threads};
use offhost_proto::offload::{
    Completion, ErrorCode, Op, QueueLimits, Status, Submission, HEADER, LIMITS_BODY, MAGIC, VERSION,
};
use offhost_proto::peer::CONTROL_CHANNEL;
use offhost_shm::{Endpoint, Listener, Mode};

use crate::daemon::Daemon;
pub use deliver::{EngineDeliver, InputError};
use host::Refused;

/// What one host may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostLimits {
    /// Submissions not yet completed.
    pub max_outstanding: u32,
    /// Open channel handles.
    pub max_channels: u32,
    /// Bytes of sends not yet completed.
    pub max_bytes: u64,
}

impl Default for HostLimits {
    fn default() -> Self {
        HostLimits {
            max_outstanding: 4096,
            max_channels: 256,
            max_bytes: 64 << 20,
        }
    }
}

/// Settings of the engine's off-host service.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OffloadConfig {
    /// The engine's name, peers, link security, retry policy and link budgets.
    pub peers: PeerConfig,
    /// Per-host budgets.
    pub host: HostLimits,
    /// Hosts served at once.
    pub max_hosts: usize,
    /// Mailbox budgets.
    pub router: RouterLimits,
    /// How the engine's side of a host's segment waits (it spins briefly by default: the
    /// engine's cores are the protocol processor's).
    pub wait: (Mode, Duration),
    /// What link sessions of hosts on shared memory are held to.
    pub link: offhost_link::Limits,
}

impl OffloadConfig {
    /// Defaults for an engine configured by `peers`: 64 hosts, [`HostLimits::default`],
    /// [`RouterLimits::default`], adaptive waits spinning 50 us, default link limits.
    pub fn new(peers: PeerConfig) -> OffloadConfig {
        OffloadConfig {
            peers,
            host: HostLimits::default(),
            max_hosts: 64,
            router: RouterLimits::default(),
            wait: (Mode::Adaptive, Duration::from_micros(50)),
            link: offhost_link::Limits::default(),
        }
    }
}

/// The engine's off-host service: its hosts, its peer links, its mailboxes.
pub struct Offload {
    peers: Peers,
    router: Arc<Router>,
    config: OffloadConfig,
    hosts: AtomicUsize,
    next_host: AtomicU64,
}

impl std::fmt::Debug for Offload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Offload")
            .field("name", &self.peers.name())
            .field("hosts", &self.hosts.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// How long a new shm connection has to send its first record (at most: its unproven
/// deadline, `handshake_timeout`, comes first).
const FIRST_RECORD: Duration = Duration::from_secs(10);

/// What looks at one connection: its handshake and first record, on a thread of its own.
type Look = Box<dyn FnOnce() + Send>;

impl Offload {
    /// The service for `config`; what peers send to `in/N/NAME` goes to `daemon`'s pipelines.
    pub fn new(
        config: OffloadConfig,
        daemon: Option<Arc<Daemon>>,
    ) -> Result<Arc<Offload>, PeerSetupError> {
        let router = Arc::new(Router::new(config.router));
        let deliver = Arc::new(EngineDeliver::new(router.clone(), daemon));
        let peers = Peers::new(config.peers.clone(), deliver)?;
        Ok(Arc::new(Offload {
            peers,
            router,
            config,
            hosts: AtomicUsize::new(0),
            next_host: AtomicU64::new(1),
        }))
    }

    /// The engine's mailboxes (for status and tests).
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// The engine's peer links (hand sessions that open the peer control channel to
    /// [`Peers::accept`]).
    pub fn peers(&self) -> &Peers {
        &self.peers
    }

    /// Hosts served now.
    pub fn hosts(&self) -> usize {
        // Ordering: Acquire load of a count kept with AcqRel RMWs; stronger than needed.
        self.hosts.load(Ordering::Acquire)
    }

    fn limits(&self) -> QueueLimits {
        let max_message = self.config.peers.max_message;
        QueueLimits {
            max_outstanding: self.config.host.max_outstanding.max(1),
            max_channels: self.config.host.max_channels.max(1),
            max_bytes: self.config.host.max_bytes.max(1),
            max_message,
            inline_max: max_message.min(64 << 10),
        }
    }

    /// Accepts sessions on `server` for ever: one whose first channel is the peer control
    /// channel is a peer engine's link ([`Peers::accept`]); any other is a host of `daemon`
    /// (closed if there is none). The first channel is awaited on a thread per session, and
    /// the daemon's channels run on threads, all under the server's thread budget
    /// ([`Server::threads`]); a session that finds no thread is refused.
    pub fn serve_links(self: &Arc<Self>, server: &Server, daemon: Option<Arc<Daemon>>) {
        let me = self.clone();
        server.serve_each("offhost-first-channel", move |s, t| {
            me.dispatch(s, daemon.clone(), t)
        })
    }

    /// Hands a session to the peer links or the daemon, by its first channel.
    /// The daemon serves its channels on threads of `threads`.
    pub fn dispatch(&self, session: Session, daemon: Option<Arc<Daemon>>, threads: &Threads) {
        let first = match session.accept_timeout(Some(FIRST_RECORD)) {
            Ok(ch) => ch,
            Err(_) => return session.close(),
        };
        if first.name() == CONTROL_CHANNEL {
            self.peers.accept(session, first);
        } else if let Some(d) = daemon {
            d.serve_session(session, Some(first), threads);
        } else {
            session.close();
        }
    }

    /// Accepts hosts on `listener` for ever: off-host queues are served here, anything else
    /// (a link session's first frame) is handed to `sessions`. Until its first record is
    /// known a connection is unproven, as on the link's own `shm:` listeners
    /// (`offhost_access`): it waits in a lobby with no thread of its own until its peer
    /// speaks, then holds a place among the link limits' `max_handshakes`
    /// (`max_handshakes_per_source` per uid) within `handshake_timeout` while its handshake
    /// and first record are looked at on a thread of its own; when that budget is full the
    /// oldest silent one makes way. Idle connections of one uid keep nobody out.
    pub fn serve_shm(
        self: &Arc<Self>,
        listener: Listener,
        sessions: Arc<dyn Fn(Session) + Send + Sync>,
    ) {
        let link = self.config.link;
        let unproven = Unproven::new(link.unproven());
        let threads = Arc::new(AtomicUsize::new(0));
        let max_threads = link.max_handshakes.max(1).saturating_mul(4);
        let spawn = move |look: Look| {
            // Ordering: AcqRel on the count of looking threads: only the RMW's atomicity
            // bounds it, stronger than needed.
            if threads.fetch_add(1, Ordering::AcqRel) >= max_threads {
                // Ordering: as above.
                threads.fetch_sub(1, Ordering::AcqRel);
                tracing::info!("shm: {max_threads} handshakes running: closed one");
                return; // dropping it closes the connection
            }
            let counted = Arc::clone(&threads);
            let run = move || {
                look();
                // Ordering: as above.
                counted.fetch_sub(1, Ordering::AcqRel);
            };
            if let Err(e) = std::thread::Builder::new()
                .name("shm-first".into())
                .spawn(run)
            {
                tracing::warn!("shm: cannot start a thread: {e}");
            }
        };
        let lobby = match Lobby::start("shm-lobby", link.lobby(1), spawn) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("shm: cannot start the lobby: {e}");
                return;
            }
        };
        loop {
            unproven.expire();
            let pending = match listener.accept_pending(Some(Duration::from_millis(100))) {
                Ok(Some(p)) => p,
                Ok(None) | Err(offhost_shm::ShmError::PeerUid { .. }) => continue,
                Err(e) => {
                    tracing::warn!("shm accept: {e}");
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            let source = match offhost_access::peer::peer_uid(&pending) {
                Ok(uid) => Source::Uid(uid),
                Err(e) => {
                    tracing::warn!("shm: turned away a host: {e}");
                    continue;
                }
            };
            let socket = match std::os::fd::AsFd::as_fd(&pending).try_clone_to_owned() {
                Ok(fd) => fd,
                Err(e) => {
                    tracing::warn!("shm: turned away a host: {e}");
                    continue;
                }
            };
            let (me, sessions, unproven) = (self.clone(), sessions.clone(), unproven.clone());
            let look: Look = Box::new(move || {
                let ticket = match unproven.admit(source, &pending) {
                    Ok(t) => t,
                    Err(e) => return tracing::warn!("shm: turned away a host: {e}"),
                };
                let left = ticket.deadline().saturating_duration_since(Instant::now());
                match pending.finish(Some(me.config.wait), left) {
                    Ok(ep) => me.first_record(ep, &*sessions, ticket),
                    Err(e) => tracing::info!("shm handshake: {e}"),
                }
            });
            if let Err(e) = lobby.admit(source, &socket, look) {
                tracing::warn!("shm: {e}");
            }
        }
    }

    /// Looks at a connection's first record: an off-host hello, or a link session. The
    /// connection is unproven (`ticket`) until its first record is known, within the
    /// ticket's deadline.
    fn first_record(self: Arc<Self>, mut ep: Endpoint, sessions: &dyn Fn(Session), ticket: Ticket) {
        let rx = ep.receiver();
        let left = ticket.deadline().saturating_duration_since(Instant::now());
        if rx.wait_ready(Some(left.min(FIRST_RECORD))).is_err() {
            return;
        }
        let mut hello: Option<Result<u32, Refused>> = None;
        let taken = rx.try_take_inline(|b| {
            if b.len() < HEADER + 8 || b[HEADER..HEADER + 8] != MAGIC {
                return false;
            }
            hello = Some(match Submission::decode(b) {
                Ok(Submission::Hello { version }) => Ok(version),
                Ok(_) => Err(Refused::NoHello),
                Err(e) => Err(e.into()),
            });
            true
        });
        if !ticket.proven() {
            return;
        }
        match (taken, hello) {
            (Ok(Some(true)), Some(h)) => self.start_host(ep, h),
            (Ok(Some(false)), _) => match Session::serve_shm(ep, &self.config.link) {
                Ok(s) => sessions(s),
                Err(e) => tracing::info!("shm session: {e}"),
            },
            _ => {}
        }
    }

    /// Answers a host's hello (limits, or a refusal) and serves it on a thread of its own.
    fn start_host(self: Arc<Self>, ep: Endpoint, hello: Result<u32, Refused>) {
        let (tx, rx) = ep.split();
        let refusal = match hello {
            Err(why) => Some(why),
            Ok(v) if v != VERSION => Some(Refused::Version(v)),
            Ok(_) => {
                let max = self.config.max_hosts;
                self.hosts
                    // Ordering: AcqRel/Acquire on the host count: only the RMW's atomicity bounds
                    // it at `max_hosts`, stronger than needed; likewise the decrements below.
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                        (n < max).then_some(n + 1)
                    })
                    .err()
                    .map(|_| Refused::OverHosts {
                        max,
                        over: offhost_units::OverLimit::new(offhost_units::Limit::MaxHosts, max),
                    })
            }
        };
        let mut tx = tx;
        if let Some(why) = refusal {
            tracing::info!("offload host refused: {why}");
            let why = why.for_host();
            let c = Completion::error(Op::Refused, ErrorCode::Budget, 0, 0, &why);
            let mut rec = vec![0u8; c.encoded_len()];
            c.encode(&mut rec);
            let _ = tx.send(&rec, Some(Duration::from_secs(1)));
            return;
        }
        let limits = self.limits();
        let body = limits.encode();
        let c = Completion {
            op: Op::Hello,
            status: Status::Ok,
            handle: 0,
            id: 0,
            value: 0,
            body: &body,
        };
        let mut rec = [0u8; HEADER + LIMITS_BODY];
        c.encode(&mut rec);
        if tx.send(&rec, Some(Duration::from_secs(1))).is_err() {
            // Ordering: AcqRel: gives back the host counted above; stronger than needed.
            self.hosts.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        let id = self.next_host.fetch_add(1, Ordering::Relaxed);
        let conn = host::HostConn::new(id, tx, limits);
        let me = self.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("host-{id}"))
            .spawn(move || {
                conn.run(rx, &me);
                // Ordering: AcqRel: the host's thread ends and gives back its count; stronger than
                // needed.
                me.hosts.fetch_sub(1, Ordering::AcqRel);
            });
        if let Err(e) = spawned {
            tracing::warn!("offload: cannot start a host thread: {e}");
            // Ordering: AcqRel: no thread started, give back the count; stronger than needed.
            self.hosts.fetch_sub(1, Ordering::AcqRel);
        }
    }
}
