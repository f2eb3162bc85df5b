//! Engine-to-engine links: the network side an engine runs on its hosts' behalf.
//!
//! A [`Peers`] holds this engine's links to other engines, by name. Each link to a peer is one
//! [`Session`] per [`Lane`]: a **bulk** lane and an **urgent** lane, so that no byte of an urgent
//! channel ever waits behind a bulk channel's bytes, neither in our queues nor in a socket
//! buffer (TCP has one byte stream; XTP's priorities preempt at packet level, two connections
//! are how we get the same over TCP). Links are made on demand, to an address from the peer
//! table (`recon=tls:10.0.0.2:7460`) or a URL, or accepted from a peer that connected
//! ([`Peers::accept`]); a link a peer made is used to answer it.
//!
//! A sender opens a [`Stream`] to `(peer, channel, lane, rate)` and hands it messages
//! ([`Stream::send`]); every message ends in exactly one call of its [`Notify::done`]:
//!
//! - `Ok(bytes)` once the **remote engine acknowledged** it: the remote engine took it off the
//!   link and handed it to a local host's posted receive, queued it in the channel's mailbox,
//!   or put it into a pipeline's `host-in` (what its [`Deliver`] does). That is the delivery
//!   guarantee: the message is in the remote engine's hands, not necessarily a host's.
//! - `Err` when the link fails before the acknowledgement: at once (within the link timeout
//!   for a silent peer) with no retry policy; with [`PeerConfig::retry_for`] the link is made
//!   again (every 100 ms, by whichever side has the address) and the unacknowledged messages
//!   are sent again in order, and only if that does not succeed within the time do they fail.
//!   A resent message carries its sequence number, and the remote engine drops one it has
//!   already taken, so a retry delivers exactly once while the remote engine lives; if it
//!   restarted, a message it took but had not acknowledged before dying comes again (at least
//!   once).
//!
//! Rate and burst ([`Rate`]) are a token bucket per stream, enforced here, on the sending
//! engine. Within a lane, streams take turns one message at a time; a stream out of tokens or
//! credit waits without holding up the others.
//!
//! Liveness: each side sends a ping on the control channel every 100 ms; a session from which
//! nothing (ping, acknowledgement, data) came for [`PeerConfig::link_timeout`] is closed as
//! failed. A peer that exits or is killed closes its sockets, which is noticed at once.
//!
//! The wire format of the control channel and the data channels' names are in
//! [`offhost_proto::peer`].

mod batch;
mod bucket;
mod lane;
mod runner;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use batch::{SendBatch, CORK_MAX};
pub use bucket::Rate;
pub use offhost_proto::offload::ErrorCode;
pub use offhost_proto::peer::Lane;
use offhost_proto::peer::{valid_peer_name, MAX_DATA_CHANNEL};

use crate::{Channel, LinkOptions, Session};
use lane::PeerLane;

/// Settings of an engine's peer links.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PeerConfig {
    /// This engine's name, sent to the peers it links to (1 to 64 bytes of `A-Za-z0-9._-`).
    pub name: String,
    /// Peer names and where they listen (`tls:HOST:PORT`, or `tcp:HOST:PORT` with
    /// [`LinkOptions::insecure`]).
    pub table: BTreeMap<String, String>,
    /// Certificates for `tls:` links; `insecure` allows `tcp:` peers.
    pub options: LinkOptions,
    /// How long a failed link is retried before its unacknowledged messages fail (zero: no
    /// retry, they fail at once).
    pub retry_for: Duration,
    /// A session from which nothing arrived for this long is closed as failed.
    pub link_timeout: Duration,
    /// Sessions to other engines at most (incoming and outgoing, both lanes).
    pub max_links: usize,
    /// Streams a lane sends at most, and data channels a session accepts at most.
    pub max_streams: usize,
    /// Largest message.
    pub max_message: u32,
    /// Engines that link to us must present a certificate naming the engine their hello
    /// says they are (`offhost certs DIR --engine NAME`); otherwise a hello's name is taken
    /// at its word (with the rule that a session claiming a peer of our table is never sent
    /// that peer's messages).
    pub certified_names: bool,
}

impl PeerConfig {
    /// Defaults: no peers, no retry, link timeout 750 ms, 64 sessions, 256 streams, messages
    /// up to 1 MiB.
    pub fn new(name: impl Into<String>) -> PeerConfig {
        PeerConfig {
            name: name.into(),
            table: BTreeMap::new(),
            options: LinkOptions::new(),
            retry_for: Duration::ZERO,
            link_timeout: Duration::from_millis(750),
            max_links: 64,
            max_streams: 256,
            max_message: 1 << 20,
            certified_names: false,
        }
    }

    /// Adds a peer `name` listening at `url`.
    pub fn peer(mut self, name: impl Into<String>, url: impl Into<String>) -> PeerConfig {
        self.table.insert(name.into(), url.into());
        self
    }

    /// Uses `options` for links (certificates, `insecure`).
    pub fn options(mut self, options: LinkOptions) -> PeerConfig {
        self.options = options;
        self
    }

    /// Retries a failed link for `d` (see the module doc).
    pub fn retry_for(mut self, d: Duration) -> PeerConfig {
        self.retry_for = d;
        self
    }

    /// Closes a silent session after `d`.
    pub fn link_timeout(mut self, d: Duration) -> PeerConfig {
        self.link_timeout = d;
        self
    }

    /// At most `n` sessions to other engines.
    pub fn max_links(mut self, n: usize) -> PeerConfig {
        self.max_links = n;
        self
    }

    /// At most `n` streams per lane and data channels per session.
    pub fn max_streams(mut self, n: usize) -> PeerConfig {
        self.max_streams = n;
        self
    }

    /// Requires (`true`) that engines linking to us present a certificate that names them.
    pub fn certified_names(mut self, on: bool) -> PeerConfig {
        self.certified_names = on;
        self
    }

    /// Messages of at most `n` bytes.
    pub fn max_message(mut self, n: u32) -> PeerConfig {
        self.max_message = n;
        self
    }
}

/// A peer configuration was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PeerSetupError {
    /// The engine's own name, or a peer's, is not usable.
    #[error("bad engine name {0:?}: use 1 to 64 of A-Z a-z 0-9 . _ -")]
    BadName(String),
    /// A peer's address is not a `tls:` or `tcp:` URL.
    #[error("peer {name}: {why}")]
    BadPeer {
        /// The peer.
        name: String,
        /// What is wrong.
        why: String,
    },
}

/// Why a message or a stream failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The kind of failure.
    pub code: ErrorCode,
    /// What happened, for people.
    pub reason: String,
}

impl Failure {
    pub(crate) fn new(code: ErrorCode, reason: impl Into<String>) -> Failure {
        Failure {
            code,
            reason: reason.into(),
        }
    }

    /// A [`Budget`](ErrorCode::Budget) failure: `what` went `over` a limit. The reason
    /// reaches a host or another engine as text, so it says how the engine raises the limit
    /// ([`OverLimit::for_peer`](offhost_units::OverLimit::for_peer)).
    pub fn over(what: impl std::fmt::Display, over: offhost_units::OverLimit) -> Failure {
        Failure::new(
            ErrorCode::Budget,
            format!("{what}, {over} {}", over.for_peer()),
        )
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.reason)
    }
}

impl std::error::Error for Failure {}

/// A message's bytes: owned, or in a shared-memory pool buffer (an off-host host's loan,
/// sent from where it lies).
#[derive(Debug)]
pub enum Payload {
    /// Bytes of our own.
    Bytes(Vec<u8>),
    /// A pool buffer's data range.
    Shm(offhost_shm::Buf),
}

impl std::ops::Deref for Payload {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Payload::Bytes(b) => b,
            Payload::Shm(b) => b,
        }
    }
}

/// Told how messages ended. Called from the link's threads, in batches: any number of
/// [`done`](Self::done) calls, then one [`flush`](Self::flush), never under a lock of ours.
pub trait Notify: Send + Sync {
    /// Message `token` of `handle`, `len` bytes, ended: delivered (`Ok(bytes)`) or failed.
    fn done(&self, handle: u32, token: u64, len: u64, result: Result<u64, Failure>);
    /// The end of a batch of [`done`](Self::done) calls (publish them).
    fn flush(&self);
}

/// One message to send and whom to tell when it ends.
pub struct Outgoing {
    /// The message.
    pub data: Payload,
    /// Told when it ends.
    pub notify: Arc<dyn Notify>,
    /// Passed to [`Notify::done`].
    pub handle: u32,
    /// Passed to [`Notify::done`].
    pub token: u64,
}

impl std::fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outgoing")
            .field("len", &self.data.len())
            .field("token", &self.token)
            .finish()
    }
}

/// A message as the lanes keep it: its bytes shared, so the sender thread can write them
/// while the message already sits, numbered, among those in flight.
pub(crate) struct Msg {
    /// The bytes; once written and without a retry policy, an empty payload for owned bytes
    /// (see [`Msg::written`]).
    pub(crate) data: Arc<Payload>,
    /// The message's length.
    pub(crate) len: usize,
    pub(crate) notify: Arc<dyn Notify>,
    pub(crate) handle: u32,
    pub(crate) token: u64,
}

impl Msg {
    /// Lets go of the bytes once written when no retry policy will send them again. A
    /// shared-memory buffer is kept until the acknowledgement all the same: buffers then go
    /// home in batches (one acknowledgement covers several), which wakes a host waiting for
    /// one once per batch instead of once per message.
    pub(crate) fn written(&mut self, keep: bool) {
        if !keep && matches!(*self.data, Payload::Bytes(_)) {
            self.data = Arc::new(Payload::Bytes(Vec::new()));
        }
    }
}

impl From<Outgoing> for Msg {
    fn from(o: Outgoing) -> Msg {
        Msg {
            len: o.data.len(),
            data: Arc::new(o.data),
            notify: o.notify,
            handle: o.handle,
            token: o.token,
        }
    }
}

/// Ends a batch of finished messages: tells each its result, then flushes every distinct
/// notifier once.
pub(crate) fn finish(done: Vec<(Msg, Result<u64, Failure>)>) {
    if done.is_empty() {
        return;
    }
    let mut flushed: Vec<Arc<dyn Notify>> = Vec::new();
    for (out, r) in done {
        out.notify.done(out.handle, out.token, out.len as u64, r);
        if !flushed.iter().any(|n| Arc::ptr_eq(n, &out.notify)) {
            flushed.push(out.notify.clone());
        }
    }
    for n in flushed {
        n.flush();
    }
}

/// Where messages from peers go: the engine's mailboxes and pipelines.
pub trait Deliver: Send + Sync {
    /// A message for `channel` from peer `from`. May wait while the destination is full (the
    /// link then stops granting credit to that stream), but looks at `live` at least every
    /// 100 ms while it waits and gives up with an error once it says false (the link that
    /// brought the message went down: its reader must not wait for ever). An `Err` refuses
    /// the stream: the sender's unacknowledged messages on it fail with
    /// [`ErrorCode::Refused`], their reason the error's [`for_peer`](DeliverError::for_peer)
    /// text.
    fn deliver(
        &self,
        from: &str,
        channel: &str,
        msg: &[u8],
        live: &dyn Fn() -> bool,
    ) -> Result<(), DeliverError>;
}

/// Why a [`Deliver`] refused a peer's stream.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeliverError {
    /// The link that brought the message went down while the message waited for room at
    /// `channel` (or for another stream's delivery there).
    #[error("the link went down while {channel:?} had no room")]
    LinkDown {
        /// The channel the message was for.
        channel: String,
    },
    /// Taking the message would go over a limit of this engine: `what` says what is held.
    #[error("{what}, {over}")]
    OverLimit {
        /// What is held already ("64 channels have mailboxes").
        what: String,
        /// The limit gone over and its value.
        #[source]
        over: offhost_units::OverLimit,
    },
    /// The destination of `channel` refused the message, for a reason of its own.
    #[error("{channel}: {source}")]
    Destination {
        /// The channel the message was for.
        channel: String,
        /// The destination's reason.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl DeliverError {
    /// The reason the peer is sent: it cannot match the error by type, so past a limit it
    /// also says how this engine raises it ([`OverLimit::for_peer`](offhost_units::OverLimit::for_peer)).
    pub fn for_peer(&self) -> String {
        match self {
            DeliverError::OverLimit { over, .. } => format!("{self} {}", over.for_peer()),
            _ => self.to_string(),
        }
    }

    /// The same refusal for a local send or receive: [`ErrorCode::Budget`] past a limit,
    /// else [`ErrorCode::Refused`].
    pub(crate) fn failure(&self) -> Failure {
        let code = match self {
            DeliverError::OverLimit { .. } => ErrorCode::Budget,
            _ => ErrorCode::Refused,
        };
        Failure::new(code, self.for_peer())
    }
}

/// Counts of what the links hold, for status and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeerStats {
    /// Live sessions.
    pub sessions: usize,
    /// Messages waiting to be sent.
    pub queued: usize,
    /// Messages sent, not yet acknowledged.
    pub in_flight: usize,
    /// Threads reading data channels peers opened (each ends with its link, even while its
    /// delivery waits for room).
    pub readers: usize,
    /// Lanes to peers (a sending thread each; at most twice `max_links`).
    pub lanes: usize,
}

/// The next sequence number to take, per (peer, sender instance, lane, stream): a message
/// sent again after a reconnect is recognised and dropped. Each entry has its own lock, held
/// while a message of that stream is delivered, so the readers of an old and a new session of
/// the same stream take turns.
///
/// Keyed by the peer's name as well as the instance it announces: the instance is the peer's
/// own word, so without the name one peer could announce another's instance and move that
/// peer's streams on, making their messages sent again look like duplicates (under
/// `--certified-peers` the name is the one its certificate carries).
///
/// Bounded: past [`SEEN_MAX`] entries in all, the peer holding the most loses its oldest
/// entry that no reader holds. A peer that opens stream after stream evicts its own ended
/// streams, never another peer's while it holds more than that peer, and never a live one's.
#[derive(Default)]
pub(crate) struct Seen {
    /// Each peer's streams.
    peers: HashMap<String, PeerSeen>,
    /// (entries, peer) for each peer: which holds the most, in O(log peers).
    by_count: std::collections::BTreeSet<(usize, String)>,
    /// Entries in all.
    len: usize,
}

/// One peer's entries in [`Seen`].
#[derive(Default)]
struct PeerSeen {
    next: HashMap<SeenKey, Arc<Mutex<u64>>>,
    /// Oldest first.
    order: VecDeque<SeenKey>,
}

/// A stream as its sender names it: (sender instance, lane, stream).
pub(crate) type SeenKey = (u64, Lane, u64);

const SEEN_MAX: usize = 1 << 16;

impl Seen {
    /// The entry of `peer`'s stream `key`, made (at `first`) if there is none.
    pub(crate) fn entry(&mut self, peer: &str, key: SeenKey, first: u64) -> Arc<Mutex<u64>> {
        if let Some(e) = self.peers.get(peer).and_then(|p| p.next.get(&key)) {
            return e.clone();
        }
        let e = Arc::new(Mutex::new(first));
        let p = self.peers.entry(peer.to_owned()).or_default();
        p.next.insert(key, e.clone());
        p.order.push_back(key);
        let mut count = (p.order.len() - 1, peer.to_owned());
        self.by_count.remove(&count);
        count.0 += 1;
        self.by_count.insert(count);
        self.len += 1;
        while self.len > SEEN_MAX && self.evict_one() {}
        e
    }

    /// Evicts the oldest entry no reader holds of the peer with the most entries (of the
    /// next peer, if a reader holds each of that one's); false if every entry is held (the
    /// table then grows until a reader ends: readers are far fewer than the bound).
    fn evict_one(&mut self) -> bool {
        // Peers in order of entries held, most first; a peer whose entries readers hold all
        // (a few, as readers are few) is passed over.
        for skip in 0.. {
            let Some(mut count) = self.by_count.iter().rev().nth(skip).cloned() else {
                break;
            };
            let Some(p) = self.peers.get_mut(&count.1) else {
                continue;
            };
            // Held entries move to the back; each is looked at once.
            for _ in 0..p.order.len() {
                let Some(old) = p.order.pop_front() else {
                    break;
                };
                if p.next.get(&old).is_some_and(|e| Arc::strong_count(e) > 1) {
                    p.order.push_back(old);
                    continue;
                }
                p.next.remove(&old);
                self.len -= 1;
                let left = p.order.len();
                self.by_count.remove(&count);
                if left == 0 {
                    self.peers.remove(&count.1);
                } else {
                    count.0 = left;
                    self.by_count.insert(count);
                }
                return true;
            }
        }
        false
    }

    /// Entries of every peer, counted one by one.
    #[cfg(test)]
    fn entries(&self) -> usize {
        self.peers.values().map(|p| p.next.len()).sum()
    }

    /// Whether `peer`'s stream `key` has an entry.
    #[cfg(test)]
    fn contains(&self, peer: &str, key: SeenKey) -> bool {
        self.peers
            .get(peer)
            .is_some_and(|p| p.next.contains_key(&key))
    }
}

pub(crate) struct Inner {
    config: PeerConfig,
    instance: u64,
    deliver: Arc<dyn Deliver>,
    lanes: Mutex<HashMap<(String, Lane), Arc<PeerLane>>>,
    sessions: AtomicUsize,
    /// Threads reading the data channels peers opened, over all sessions.
    pub(crate) readers: Arc<AtomicUsize>,
    pub(crate) seen: Mutex<Seen>,
    next_stream: AtomicU64,
    next_runner: AtomicU64,
    closed: AtomicBool,
}

/// This engine's links to other engines (see the module doc).
#[derive(Clone)]
pub struct Peers {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Peers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peers")
            .field("name", &self.inner.config.name)
            .finish_non_exhaustive()
    }
}

fn check_url(name: &str, url: &str, options: &LinkOptions) -> Result<(), PeerSetupError> {
    let bad = |why: String| PeerSetupError::BadPeer {
        name: name.to_owned(),
        why,
    };
    match crate::Url::parse(url).map_err(|e| bad(e.to_string()))? {
        crate::Url::Tls(_) => Ok(()),
        crate::Url::Tcp(_) if options.insecure => Ok(()),
        crate::Url::Tcp(_) => Err(bad(format!(
            "{url} is plain tcp (no authentication, no encryption): use tls:HOST:PORT, or allow tcp (the setting insecure)"
        ))),
        _ => Err(bad(format!("{url}: a peer is reached at tls:HOST:PORT or tcp:HOST:PORT"))),
    }
}

impl Peers {
    /// Links for an engine configured by `config`, delivering what peers send to `deliver`.
    pub fn new(config: PeerConfig, deliver: Arc<dyn Deliver>) -> Result<Peers, PeerSetupError> {
        if !valid_peer_name(&config.name) {
            return Err(PeerSetupError::BadName(config.name));
        }
        for (name, url) in &config.table {
            if !valid_peer_name(name) {
                return Err(PeerSetupError::BadName(name.clone()));
            }
            check_url(name, url, &config.options)?;
        }
        let instance = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ (u64::from(std::process::id()) << 32)
            ^ rand_word();
        Ok(Peers {
            inner: Arc::new(Inner {
                config,
                instance,
                deliver,
                lanes: Mutex::new(HashMap::new()),
                sessions: AtomicUsize::new(0),
                readers: Arc::new(AtomicUsize::new(0)),
                seen: Mutex::new(Seen::default()),
                next_stream: AtomicU64::new(1),
                next_runner: AtomicU64::new(1),
                closed: AtomicBool::new(false),
            }),
        })
    }

    /// This engine's name.
    pub fn name(&self) -> &str {
        &self.inner.config.name
    }

    /// The configuration.
    pub fn config(&self) -> &PeerConfig {
        &self.inner.config
    }

    /// Opens a stream of messages to `channel` at `peer` (a name of the peer table, the name
    /// of an engine that linked to us, or a `tls:`/`tcp:` URL), in `lane`, limited to `rate`.
    /// The link is made when the first message is sent.
    pub fn stream(
        &self,
        peer: &str,
        channel: &str,
        lane: Lane,
        rate: Option<Rate>,
    ) -> Result<Stream, Failure> {
        let inner = &self.inner;
        // Ordering: Acquire pairs with the Release store in `close`; the flag publishes nothing
        // else, so stronger than needed.
        if inner.closed.load(Ordering::Acquire) {
            return Err(Failure::new(
                ErrorCode::Shutdown,
                "the peer links are closed",
            ));
        }
        if channel.is_empty() || channel.len() > MAX_DATA_CHANNEL {
            return Err(Failure::new(
                ErrorCode::BadAddress,
                format!("channel names have 1 to {MAX_DATA_CHANNEL} bytes"),
            ));
        }
        if let Some(r) = rate {
            if r.bytes_per_sec == 0 || r.burst == 0 {
                return Err(Failure::new(
                    ErrorCode::BadAddress,
                    "a rate needs bytes per second and a burst of at least 1",
                ));
            }
        }
        let url = if peer.starts_with("tls:") || peer.starts_with("tcp:") {
            check_url(peer, peer, &inner.config.options)
                .map_err(|e| Failure::new(ErrorCode::BadAddress, e.to_string()))?;
            Some(peer.to_owned())
        } else {
            inner.config.table.get(peer).cloned()
        };
        let lane_obj = {
            let mut lanes = inner.lanes.lock().unwrap_or_else(|e| e.into_inner());
            let key = (peer.to_owned(), lane);
            let other = (
                peer.to_owned(),
                match lane {
                    Lane::Bulk => Lane::Urgent,
                    Lane::Urgent => Lane::Bulk,
                },
            );
            match lanes.get(&key) {
                Some(l) => l.clone(),
                // A peer we cannot reach ourselves is answered on the lane it made.
                None if url.is_none() && lanes.contains_key(&other) => lanes[&other].clone(),
                None => {
                    if url.is_none() {
                        return Err(Failure::new(
                            ErrorCode::UnknownPeer,
                            format!("no peer named {peer:?} (not in the peer table, and no engine of that name linked to us)"),
                        ));
                    }
                    if lanes.len() >= inner.config.max_links.saturating_mul(2) {
                        return Err(Failure::over(
                            format!("{} lanes to other engines (two per link)", lanes.len()),
                            offhost_units::OverLimit::new(
                                offhost_units::Limit::MaxLinks,
                                inner.config.max_links,
                            ),
                        ));
                    }
                    let l = PeerLane::new(Arc::downgrade(inner), peer.to_owned(), lane, url);
                    lanes.insert(key, l.clone());
                    l
                }
            }
        };
        let id = inner.next_stream.fetch_add(1, Ordering::Relaxed);
        lane_obj.add_stream(id, channel, rate)?;
        Ok(Stream { lane: lane_obj, id })
    }

    /// Serves a session a peer opened to us, whose first channel, `control`, is the peer
    /// control channel ([`offhost_proto::peer::CONTROL_CHANNEL`]): the hello exchange runs on
    /// a thread of its own (never on the caller's accept loop), then the session's channels
    /// are served until it ends.
    pub fn accept(&self, session: Session, control: Channel) {
        let inner = self.inner.clone();
        std::thread::Builder::new()
            .name("peer-accept".into())
            .spawn(move || {
                if let Err(e) = runner::accept(&inner, session, control) {
                    tracing::warn!("peer link refused: {e}");
                }
            })
            .map(drop)
            .unwrap_or_else(|e| tracing::warn!("peer link: cannot start a thread: {e}"));
    }

    /// What the links hold now.
    pub fn stats(&self) -> PeerStats {
        let lanes: Vec<Arc<PeerLane>> = self
            .inner
            .lanes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        let mut s = PeerStats {
            // Ordering: Acquire loads of counts kept with AcqRel RMWs in runner.rs; for statistics,
            // stronger than needed.
            sessions: self.inner.sessions.load(Ordering::Acquire),
            readers: self.inner.readers.load(Ordering::Acquire),
            lanes: lanes.len(),
            ..PeerStats::default()
        };
        for l in lanes {
            let (q, f) = l.counts();
            s.queued += q;
            s.in_flight += f;
        }
        s
    }

    /// Closes every link: messages not acknowledged fail with [`ErrorCode::Shutdown`].
    pub fn close(&self) {
        // Ordering: Release pairs with the Acquire loads of `closed` in `open_stream` and
        // runner.rs.
        self.inner.closed.store(true, Ordering::Release);
        let lanes: Vec<Arc<PeerLane>> = self
            .inner
            .lanes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(_, l)| l)
            .collect();
        for l in lanes {
            l.close();
        }
    }
}

/// 64 random bits (std's hash seeds come from the kernel), so two engines started in the same
/// nanosecond still draw different instances.
fn rand_word() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// A sender's stream of messages to one channel of one peer (see [`Peers::stream`]). Dropping
/// it closes it once its messages have ended.
pub struct Stream {
    lane: Arc<PeerLane>,
    id: u64,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream").field("id", &self.id).finish()
    }
}

impl Stream {
    /// Queues a message (or sends it at once when nothing is ahead of it and the link, the
    /// rate and the credit allow). Its [`Notify`] is told how it ends; a message over the
    /// maximum size fails at once.
    pub fn send(&self, out: Outgoing) {
        self.lane.send(self.id, out);
    }

    /// Corks the session this stream writes to, for a batch of small messages sent at once
    /// ([`SendBatch`]): they go in one write when the cork is dropped (see [`crate::Cork`]).
    /// The cork is added to `held` unless one there holds that session already; an urgent
    /// stream is never corked.
    pub(crate) fn cork(&self, held: &mut Vec<crate::Cork>) {
        self.lane.cork(self.id, held);
    }

    /// The stream's number (unique in this engine).
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.lane.close_stream(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seen_table_evicts_ended_streams_first_never_one_a_reader_holds() {
        let mut seen = Seen::default();
        // A reader of the honest peer's stream holds its entry, the oldest of all.
        let live = seen.entry("a", (1, Lane::Bulk, 0), 5);
        *live.lock().unwrap() = 42;
        // A peer churning streams fills the table past its bound.
        for s in 0..(SEEN_MAX as u64 + 100) {
            drop(seen.entry("b", (2, Lane::Bulk, s), 0));
        }
        assert_eq!(seen.len, SEEN_MAX);
        assert_eq!(seen.entries(), SEEN_MAX);
        let again = seen.entry("a", (1, Lane::Bulk, 0), 5);
        assert!(Arc::ptr_eq(&again, &live), "the live entry was evicted");
        assert_eq!(*again.lock().unwrap(), 42);
        // The churning peer's oldest entries went.
        assert!(!seen.contains("b", (2, Lane::Bulk, 0)));
        assert!(seen.contains("b", (2, Lane::Bulk, SEEN_MAX as u64 + 99)));
    }

    #[test]
    fn a_churning_peer_evicts_its_own_entries_before_another_peers_ended_ones() {
        let mut seen = Seen::default();
        // Peer a's streams ended (no reader holds them), but a reconnect may still send their
        // last messages again: their entries must outlive b's churn.
        for s in 0..100 {
            *seen.entry("a", (1, Lane::Bulk, s), 0).lock().unwrap() = s + 7;
        }
        for s in 0..(2 * SEEN_MAX as u64) {
            drop(seen.entry("b", (2, Lane::Bulk, s), 0));
        }
        assert_eq!(seen.len, SEEN_MAX);
        for s in 0..100 {
            let e = seen.entry("a", (1, Lane::Bulk, s), 0);
            assert_eq!(*e.lock().unwrap(), s + 7, "a's stream {s} was evicted");
        }
        assert_eq!(seen.peers["b"].order.len(), SEEN_MAX - 100);
    }

    #[test]
    fn a_peer_announcing_another_peers_instance_gets_entries_of_its_own() {
        let mut seen = Seen::default();
        let honest = seen.entry("a", (1, Lane::Bulk, 3), 0);
        *honest.lock().unwrap() = 10;
        // b claims a's instance and stream, and moves what it gets far on.
        let claimed = seen.entry("b", (1, Lane::Bulk, 3), 0);
        assert!(!Arc::ptr_eq(&honest, &claimed));
        *claimed.lock().unwrap() = 1_000_000;
        assert_eq!(*seen.entry("a", (1, Lane::Bulk, 3), 0).lock().unwrap(), 10);
    }
}
