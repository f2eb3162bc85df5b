//! One session to a peer engine: the hello exchange, the control channel (acknowledgements,
//! refusals, pings, the liveness watch), and the data channels the peer opens to us.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use offhost_proto::peer::{DataName, Lane, PeerMessage, CONTROL_CHANNEL, PEER_VERSION};

use super::lane::PeerLane;
use super::{ErrorCode, Failure, Inner};
use crate::wait::Wait;
use crate::{Channel, ChannelOptions, LinkError, SendMode, Session};

/// How long each side waits for the other's hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// Pings go out this often.
const PING_EVERY: Duration = Duration::from_millis(100);
/// Messages a data channel's reader takes before it acknowledges them (fewer when no more
/// are ready).
const ACK_BATCH: usize = 64;

fn control_options() -> ChannelOptions {
    ChannelOptions {
        packet_size: 4096,
        recv_buffer: 1 << 20,
        max_message: 128 << 10,
        send_mode: SendMode::Async,
    }
}

/// A live session to a peer engine, sending (attached to a lane) or only receiving.
pub(crate) struct Runner {
    pub(crate) id: u64,
    /// The peer's name as it said in its hello.
    peer: String,
    lane: Lane,
    remote_instance: u64,
    pub(crate) session: Session,
    control: Channel,
    max_message: u32,
    timeout: Duration,
    started: Instant,
    /// Milliseconds after `started` when the peer was last heard.
    heard_ms: AtomicU64,
    dead: AtomicBool,
    sending: Mutex<Option<Weak<PeerLane>>>,
    /// Data channels we opened on this session: id -> (stream, first sequence number).
    opened: Mutex<HashMap<u32, (u64, u64)>>,
    incoming: AtomicUsize,
    inner: Weak<Inner>,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("id", &self.id)
            .field("peer", &self.peer)
            .field("lane", &self.lane)
            .finish()
    }
}

fn hello(inner: &Inner, lane: Lane) -> Vec<u8> {
    let mut b = Vec::new();
    PeerMessage::Hello {
        lane,
        version: PEER_VERSION,
        instance: inner.instance,
        name: &inner.config.name,
    }
    .encode(&mut b);
    b
}

/// Waits for the peer's hello on `control`: its lane, instance and name.
fn their_hello(control: &Channel, what: &str) -> Result<(Lane, u64, String), Failure> {
    let refused = |why: String| Failure::new(ErrorCode::Refused, format!("{what}: {why}"));
    let msg = match control.recv_wait(HELLO_TIMEOUT) {
        Ok(Some(m)) => m,
        Ok(None) => return Err(refused("the peer closed before its hello".into())),
        Err(LinkError::Timeout) => return Err(refused("no hello within 5 s".into())),
        Err(e) => return Err(Failure::new(ErrorCode::Unreachable, format!("{what}: {e}"))),
    };
    match PeerMessage::decode(&msg) {
        Ok(PeerMessage::Hello {
            lane,
            version,
            instance,
            name,
        }) => {
            if version != PEER_VERSION {
                return Err(refused(format!(
                    "peer protocol version {version}, we speak {PEER_VERSION}"
                )));
            }
            Ok((lane, instance, name.to_owned()))
        }
        Ok(_) => Err(refused("the first control message is not a hello".into())),
        Err(e) => Err(refused(e.to_string())),
    }
}

/// Whether the certificate the other side of `session` presented (`which`, for the
/// message) names engine `name`; refused (and the other side told why) if not.
fn certified(session: &Session, name: &str, which: &str) -> Result<(), Failure> {
    let why = match session.peer_certificate() {
        Some(c) if offhost_access::identity::names_engine(c, name) => return Ok(()),
        Some(_) => format!("the engine says it is {name:?}, and {which} does not name that engine"),
        None => format!(
            "the engine says it is {name:?} over a link without certificates ({})",
            session.transport()
        ),
    };
    let why = format!(
        "{why}: this engine takes only names a certificate proves (`offhost certs DIR --engine NAME` makes them)"
    );
    session.refuse(&why);
    Err(Failure::new(ErrorCode::Refused, why))
}

fn take_session_slot(inner: &Inner) -> Result<(), Failure> {
    let max = inner.config.max_links;
    inner
        .sessions
        // Ordering: AcqRel/Acquire on the session count: only the RMW's atomicity matters (at most
        // `max_links`), stronger than needed; the decrements below are the same.
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max).then_some(n + 1)
        })
        .map(drop)
        .map_err(|_| {
            Failure::over(
                format!("{max} sessions to other engines"),
                offhost_units::OverLimit::new(offhost_units::Limit::MaxLinks, max),
            )
        })
}

/// Makes a session to the peer known as `key` at `url`, in `lane`.
pub(crate) fn connect(
    inner: &Arc<Inner>,
    key: &str,
    url: &str,
    lane: Lane,
) -> Result<Arc<Runner>, Failure> {
    take_session_slot(inner)?;
    let r = (|| {
        let session = Session::connect_with(url, &inner.config.options)
            .map_err(|e| Failure::new(ErrorCode::Unreachable, format!("{key} at {url}: {e}")))?;
        let control = session
            .open(CONTROL_CHANNEL, control_options())
            .map_err(|e| Failure::new(ErrorCode::Unreachable, format!("{key}: {e}")))?;
        control
            .send(&hello(inner, lane))
            .map_err(|e| Failure::new(ErrorCode::Unreachable, format!("{key}: {e}")))?;
        let (their_lane, instance, name) = their_hello(&control, key)?;
        if their_lane != lane {
            return Err(Failure::new(
                ErrorCode::Refused,
                format!("{key} answered on the {} lane", their_lane.name()),
            ));
        }
        let by_url = key.starts_with("tls:") || key.starts_with("tcp:");
        if !by_url && name != key {
            return Err(Failure::new(
                ErrorCode::Refused,
                format!("the engine at {url} says it is {name:?}, not {key:?}"),
            ));
        }
        if inner.config.certified_names && !by_url {
            certified(&session, &name, "its server certificate")?;
        }
        let runner = Runner::new(inner, name, lane, instance, session, control);
        runner.run();
        Ok(runner)
    })();
    if r.is_err() {
        // Ordering: AcqRel: gives back the session counted above; a count, stronger than needed.
        inner.sessions.fetch_sub(1, Ordering::AcqRel);
    }
    r
}

/// Serves a session a peer opened: hello both ways, then the runner, attached to the lane of
/// the peer's name if that lane has no session to send on.
pub(crate) fn accept(
    inner: &Arc<Inner>,
    session: Session,
    control: Channel,
) -> Result<(), Failure> {
    take_session_slot(inner).inspect_err(|_| session.close())?;
    let r = (|| {
        let (lane, instance, name) = their_hello(&control, "incoming peer link")?;
        if inner.config.certified_names {
            certified(&session, &name, "its certificate")?;
        }
        control
            .send(&hello(inner, lane))
            .map_err(|e| Failure::new(ErrorCode::Unreachable, format!("{name}: {e}")))?;
        Ok((lane, instance, name))
    })();
    let (lane, instance, name) = match r {
        Ok(v) => v,
        Err(e) => {
            // Ordering: AcqRel: gives back the session counted above; a count, stronger than
            // needed.
            inner.sessions.fetch_sub(1, Ordering::AcqRel);
            session.close();
            return Err(e);
        }
    };
    // Served only once it is the lane's: a host that hears from this peer may answer it at
    // once, by its name (before, a message could reach a host while the lane was not there
    // yet, and the host's answer failed "no peer named ...").
    let runner = Runner::new(inner, name.clone(), lane, instance, session, control);
    let lane_obj = {
        let mut lanes = inner.lanes.lock().unwrap_or_else(|e| e.into_inner());
        let key = (name.clone(), lane);
        // Ordering: Acquire pairs with the Release store in `Peer::close`; read under the lanes
        // lock, which `close` also takes, so stronger than needed.
        if inner.closed.load(Ordering::Acquire) {
            Err(())
        } else if inner.config.table.contains_key(&name) {
            // A peer of our table we reach at its URL ourselves: the name in a hello is only
            // what the other side says (any engine with a certificate of the CA could say
            // it), so messages for that peer never go back on a session it opened.
            Ok(None)
        } else if !lanes.contains_key(&key)
            && lanes.len() >= inner.config.max_links.saturating_mul(2)
        {
            // As many lanes as links may have (each a sending thread): this peer is served
            // what it sends, but nothing goes back to it on this session.
            Ok(None)
        } else {
            Ok(Some(
                lanes
                    .entry(key)
                    .or_insert_with(|| {
                        PeerLane::new(
                            Arc::downgrade(inner),
                            name.clone(),
                            lane,
                            inner.config.table.get(&name).cloned(),
                        )
                    })
                    .clone(),
            ))
        }
    };
    match lane_obj {
        Ok(Some(l)) => {
            l.attach(&runner);
            runner.run();
        }
        Ok(None) => {
            tracing::debug!("peer {name}: its session only brings messages here");
            runner.run();
        }
        Err(()) => runner.kill("closing"),
    }
    tracing::info!("peer {name} linked to us ({} lane)", lane.name());
    Ok(())
}

impl Runner {
    /// A runner for `session` that does not serve it yet: nothing it brings reaches a host
    /// before [`Runner::run`].
    fn new(
        inner: &Arc<Inner>,
        peer: String,
        lane: Lane,
        remote_instance: u64,
        session: Session,
        control: Channel,
    ) -> Arc<Runner> {
        Arc::new(Runner {
            id: inner.next_runner.fetch_add(1, Ordering::Relaxed),
            peer,
            lane,
            remote_instance,
            session,
            control,
            max_message: inner.config.max_message,
            timeout: inner.config.link_timeout,
            started: Instant::now(),
            heard_ms: AtomicU64::new(0),
            dead: AtomicBool::new(false),
            sending: Mutex::new(None),
            opened: Mutex::new(HashMap::new()),
            incoming: AtomicUsize::new(0),
            inner: Arc::downgrade(inner),
        })
    }

    /// Starts serving the session: its control channel and the channels the peer opens.
    fn run(self: &Arc<Self>) {
        let r = self;
        for (what, f) in [
            ("control", Runner::control_loop as fn(Arc<Runner>)),
            ("accept", Runner::accept_loop),
        ] {
            let me = r.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("peer-{}-{what}", r.peer))
                .spawn(move || f(me));
            if let Err(e) = spawned {
                r.kill(&format!("cannot start a thread: {e}"));
            }
        }
    }

    pub(crate) fn is_dead(&self) -> bool {
        // Ordering: Acquire pairs with the AcqRel swap in `kill`.
        self.dead.load(Ordering::Acquire)
    }

    /// Closes the session (once) and tells the lane it was sending for.
    pub(crate) fn kill(&self, reason: &str) {
        // Ordering: AcqRel swap: exactly one caller goes on to close (atomicity); the Release half
        // pairs with `is_dead`'s Acquire.
        if self.dead.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::info!(
            "session to {} ({} lane) ends: {reason}",
            self.peer,
            self.lane.name()
        );
        self.session.close();
        if let Some(inner) = self.inner.upgrade() {
            // Ordering: AcqRel: gives back the session counted in `connect`; a count, stronger than
            // needed.
            inner.sessions.fetch_sub(1, Ordering::AcqRel);
        }
        let lane = self
            .sending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .and_then(|w| w.upgrade());
        if let Some(l) = lane {
            l.runner_died(self.id, reason);
        }
    }

    /// Makes `lane` the one this session sends for (told when the session dies). True when
    /// the session died already: its `kill` found no lane to tell, so the caller, once it
    /// has made this the lane's runner and let go of the lane's lock, calls
    /// [`PeerLane::runner_died`] itself (calling it here, under that lock, deadlocked).
    #[must_use]
    pub(crate) fn set_sending(&self, lane: &Arc<PeerLane>) -> bool {
        *self.sending.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::downgrade(lane));
        self.is_dead()
    }

    pub(crate) fn data_options(&self) -> ChannelOptions {
        let max = u64::from(self.max_message.max(1));
        ChannelOptions {
            packet_size: 64 << 10,
            recv_buffer: u32::try_from((2 * max).max(2 << 20)).unwrap_or(u32::MAX),
            max_message: max,
            send_mode: SendMode::Async,
        }
    }

    pub(crate) fn register(&self, ch: u32, stream: u64, first: u64) {
        self.opened
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(ch, (stream, first));
    }

    pub(crate) fn unregister(&self, ch: u32) {
        self.opened
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&ch);
    }

    fn heard(&self) {
        let ms = self.started.elapsed().as_millis() as u64;
        self.heard_ms.fetch_max(ms, Ordering::Relaxed);
    }

    fn silent_for(&self) -> Duration {
        let now = self.started.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.heard_ms.load(Ordering::Relaxed)))
    }

    fn lane(&self) -> Option<Arc<PeerLane>> {
        self.sending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(Weak::upgrade)
    }

    fn send_control(&self, m: &PeerMessage<'_>) -> Result<(), LinkError> {
        let mut b = Vec::with_capacity(32);
        m.encode(&mut b);
        self.control.send(&b)
    }

    /// Reads acknowledgements, refusals and pings; pings the peer; closes the session when the
    /// peer has been silent too long.
    fn control_loop(self: Arc<Self>) {
        self.heard();
        let mut buf = Vec::new();
        let mut last_ping = Instant::now() - PING_EVERY;
        let mut ping = Vec::new();
        PeerMessage::Ping.encode(&mut ping);
        let reason = loop {
            if self.is_dead() {
                return;
            }
            if last_ping.elapsed() >= PING_EVERY {
                last_ping = Instant::now();
                match self.control.send_wait(&ping, Wait::Never) {
                    Ok(()) | Err(LinkError::WouldBlock) => {}
                    Err(e) => break format!("ping: {e}"),
                }
            }
            if self.silent_for() > self.timeout {
                break format!("nothing heard for {:?}", self.timeout);
            }
            match self.control.recv_into(&mut buf, PING_EVERY) {
                Ok(true) => {}
                Ok(false) => break "the peer closed the link".into(),
                Err(LinkError::Timeout) => continue,
                Err(e) => break e.to_string(),
            }
            self.heard();
            match PeerMessage::decode(&buf) {
                Ok(PeerMessage::Ping) => {}
                Ok(PeerMessage::Acks(acks)) => self.acks(&acks),
                Ok(PeerMessage::Refused { channel, reason }) => {
                    let s = self
                        .opened
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get(&channel)
                        .copied();
                    if let (Some((stream, _)), Some(l)) = (s, self.lane()) {
                        l.refused(stream, reason);
                    }
                }
                Ok(PeerMessage::Hello { .. }) => break "a second hello".into(),
                Err(e) => break format!("bad control message: {e}"),
            }
        };
        self.kill(&reason);
    }

    fn acks(&self, acks: &[(u32, u64)]) {
        let Some(lane) = self.lane() else {
            return;
        };
        let found: Vec<(u64, u64)> = {
            let opened = self.opened.lock().unwrap_or_else(|e| e.into_inner());
            acks.iter()
                .filter_map(|(ch, taken)| {
                    opened
                        .get(ch)
                        .map(|(stream, first)| (*stream, first.saturating_add(*taken)))
                })
                .collect()
        };
        for (stream, upto) in found {
            lane.ack(stream, upto);
        }
    }

    /// Accepts the data channels the peer opens, a reader thread each, within the budget.
    fn accept_loop(self: Arc<Self>) {
        let max = self.inner.upgrade().map_or(0, |i| i.config.max_streams);
        loop {
            let ch = match self.session.accept() {
                Ok(ch) => ch,
                Err(e) => {
                    self.kill(&format!("accept: {e}"));
                    return;
                }
            };
            let Some(name) = DataName::parse(ch.name()) else {
                let _ = self.refuse(ch.id, "not a data channel name (d/STREAM/FIRST/CHANNEL)");
                continue;
            };
            let (stream, first, channel) = (name.stream, name.first, name.channel.to_owned());
            // Ordering: AcqRel on the count of incoming reader threads (and `readers`, and their
            // decrements below): only atomicity bounds them, the orderings are stronger than
            // needed.
            if self.incoming.fetch_add(1, Ordering::AcqRel) >= max {
                self.incoming.fetch_sub(1, Ordering::AcqRel);
                let _ = self.refuse(ch.id, &format!("{max} channels per session at most"));
                continue;
            }
            // The count, not the whole node: a reader must not keep the node alive.
            let Some(readers) = self.inner.upgrade().map(|i| i.readers.clone()) else {
                return;
            };
            // Ordering: AcqRel: counts the reader thread; stronger than needed.
            readers.fetch_add(1, Ordering::AcqRel);
            let me = self.clone();
            let counted = readers.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("peer-{}-data", self.peer))
                .spawn(move || {
                    me.read_data(&ch, stream, first, &channel);
                    // Ordering: AcqRel: the reader thread ends and gives back its counts; stronger
                    // than needed.
                    me.incoming.fetch_sub(1, Ordering::AcqRel);
                    counted.fetch_sub(1, Ordering::AcqRel);
                });
            if let Err(e) = spawned {
                // Ordering: AcqRel: no thread started, give back the counts; stronger than needed.
                readers.fetch_sub(1, Ordering::AcqRel);
                self.incoming.fetch_sub(1, Ordering::AcqRel);
                tracing::warn!("peer {}: cannot start a reader: {e}", self.peer);
            }
        }
    }

    /// Ends reading data channel `ch`: acknowledges the `taken` messages delivered so far and
    /// refuses the rest, saying `why`.
    fn give_up(&self, ch: u32, taken: u64, why: &str) {
        if taken > 0 {
            let _ = self.send_control(&PeerMessage::Acks(vec![(ch, taken)]));
        }
        let _ = self.refuse(ch, why);
    }

    fn refuse(&self, ch: u32, reason: &str) -> Result<(), LinkError> {
        self.send_control(&PeerMessage::Refused {
            channel: ch,
            reason,
        })
    }

    /// Reads one data channel: drops messages already taken before a reconnect, delivers the
    /// others, acknowledges each batch.
    fn read_data(&self, ch: &Channel, stream: u64, first: u64, channel: &str) {
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        let key = (self.remote_instance, self.lane, stream);
        let next = inner
            .seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(&self.peer, key, first);
        let deliver = inner.deliver.clone();
        let max_message = inner.config.max_message as usize;
        drop(inner);
        let mut seq = first;
        let mut taken = 0u64;
        let mut buf = Vec::new();
        loop {
            match ch.recv_into(&mut buf, Wait::Forever) {
                Ok(true) => {}
                Ok(false) | Err(_) => return,
            }
            let mut n = 0;
            loop {
                self.heard();
                // The peer chose `first`: a sequence number past the last is refused, not
                // wrapped. A message over this engine's largest (the peer's may be larger) is
                // refused too: hosts' receives and mailboxes are sized by ours.
                let bad = if buf.len() > max_message {
                    Some(format!(
                        "a message of {} bytes, this engine takes {max_message} at most",
                        buf.len()
                    ))
                } else if seq == u64::MAX {
                    Some(
                        "sequence number past 2^64 - 1 (FIRST of d/STREAM/FIRST/CHANNEL too large)"
                            .to_owned(),
                    )
                } else {
                    None
                };
                if let Some(why) = bad {
                    return self.give_up(ch.id, taken, &why);
                }
                let after = seq + 1;
                {
                    let mut expected = next.lock().unwrap_or_else(|e| e.into_inner());
                    if seq >= *expected {
                        let live = || !self.is_dead();
                        if let Err(why) = deliver.deliver(&self.peer, channel, &buf, &live) {
                            drop(expected);
                            return self.give_up(ch.id, taken, &why.for_peer());
                        }
                        *expected = after;
                    }
                }
                seq = after;
                taken += 1;
                n += 1;
                if n >= ACK_BATCH {
                    break;
                }
                match ch.recv_into(&mut buf, Wait::Never) {
                    Ok(true) => {}
                    _ => break,
                }
            }
            if self
                .send_control(&PeerMessage::Acks(vec![(ch.id, taken)]))
                .is_err()
            {
                return;
            }
        }
    }
}
