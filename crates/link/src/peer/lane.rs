//! One lane of the link to one peer: its streams (queues, rate buckets, messages in flight),
//! the session it sends on, the sender thread, and what a failed session does to the messages.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use offhost_proto::peer::{DataName, Lane};

use super::bucket::{Bucket, Rate};
use super::runner::{self, Runner};
use super::{finish, ErrorCode, Failure, Inner, Msg, Outgoing};
use crate::wait::Wait;
use crate::{Channel, Cork, LinkError};

/// Messages up to this size are sent by the caller's thread when nothing is ahead of them
/// (the lane unlocked while the bytes go out); larger ones, and any that must wait, go through
/// the sender thread.
const FAST_MAX: usize = 64 << 10;
/// How long a stream that found no credit waits before it is tried again while others go on.
const STALL: Duration = Duration::from_millis(1);
/// How long the sender blocks for credit when only one stream has work.
const CREDIT_WAIT: Duration = Duration::from_millis(20);
/// Between two attempts to make a failed link again.
const RECONNECT_EVERY: Duration = Duration::from_millis(100);

type Done = Vec<(Msg, Result<u64, Failure>)>;

/// Who writes a stream's next message, which says what a write that found no credit does.
#[derive(Clone, Copy)]
enum Writer {
    /// The caller of `send`, on the fast path: it never blocks; the message goes back to the
    /// queue and the sender thread takes it at once.
    Caller,
    /// The sender thread: it blocks up to `credit_wait` for credit, and a stream that still
    /// found none rests for a moment ([`STALL`]) so that others go first.
    Sender { credit_wait: Option<Duration> },
}

/// The data channel a stream sends on in one session.
struct Link {
    ch: Arc<Channel>,
    runner: Weak<Runner>,
    runner_id: u64,
}

impl Drop for Link {
    fn drop(&mut self) {
        if let Some(r) = self.runner.upgrade() {
            r.unregister(self.ch.id);
        }
    }
}

struct StreamState {
    channel: String,
    bucket: Option<Bucket>,
    /// Not yet written to a session.
    queue: VecDeque<Msg>,
    /// Written, not yet acknowledged, in sequence order.
    inflight: VecDeque<Msg>,
    /// Changes whenever `inflight` is emptied behind the sender thread's back (failure,
    /// requeue), so a write that ends after that knows its message was dealt with.
    generation: u64,
    /// Messages acknowledged (the sequence number of the first in `inflight`).
    acked: u64,
    /// The sequence number the next message written gets.
    next_seq: u64,
    /// The highest acknowledgement heard (may run ahead of `inflight` for a moment).
    taken: u64,
    link: Option<Link>,
    /// The sender thread is writing this stream's head message.
    sending: bool,
    stall_until: Option<Instant>,
    closing: bool,
    in_ready: bool,
}

impl StreamState {
    fn pop_acked(&mut self, done: &mut Done) {
        while self.acked < self.taken {
            match self.inflight.pop_front() {
                Some(o) => {
                    self.acked += 1;
                    let n = o.len as u64;
                    done.push((o, Ok(n)));
                }
                None => break,
            }
        }
    }

    fn fail(&mut self, f: &Failure, done: &mut Done) {
        for o in self.inflight.drain(..).chain(self.queue.drain(..)) {
            done.push((o, Err(f.clone())));
        }
        // Those sequence numbers are spent: the next session starts after them, so a peer
        // that took some of them does not mistake new messages for copies.
        self.acked = self.next_seq;
        self.taken = self.taken.max(self.next_seq);
        self.link = None;
        self.generation += 1;
    }

    fn idle(&self) -> bool {
        self.queue.is_empty() && self.inflight.is_empty() && !self.sending
    }
}

struct LaneState {
    runner: Option<Arc<Runner>>,
    streams: BTreeMap<u64, StreamState>,
    ready: VecDeque<u64>,
    /// Retrying since then.
    down_since: Option<Instant>,
    connect_after: Option<Instant>,
    thread: bool,
    /// The sender thread waits on the condition variable (a notify is a system call, made
    /// only then).
    sleeping: bool,
    closed: bool,
}

impl LaneState {
    fn live_runner(&self) -> Option<Arc<Runner>> {
        self.runner.clone().filter(|r| !r.is_dead())
    }

    fn has_work(&self) -> bool {
        self.streams
            .values()
            .any(|s| !s.queue.is_empty() || !s.inflight.is_empty())
    }

    fn fail_all(&mut self, f: &Failure) -> Done {
        let mut done = Vec::new();
        for s in self.streams.values_mut() {
            s.fail(f, &mut done);
        }
        self.streams.retain(|_, s| !(s.closing && s.idle()));
        done
    }

    fn remove_if_done(&mut self, id: u64) {
        if self.streams.get(&id).is_some_and(|s| s.closing && s.idle()) {
            self.streams.remove(&id);
        }
    }
}

/// One lane (bulk or urgent) of the link to one peer.
pub(crate) struct PeerLane {
    inner: Weak<Inner>,
    pub(crate) key: String,
    lane: Lane,
    url: Option<String>,
    st: Mutex<LaneState>,
    cv: Condvar,
}

fn ensure_link(
    s: &mut StreamState,
    id: u64,
    runner: &Arc<Runner>,
) -> Result<Arc<Channel>, LinkError> {
    if let Some(l) = &s.link {
        if l.runner_id == runner.id {
            return Ok(l.ch.clone());
        }
    }
    let base = s.next_seq;
    let name = DataName {
        stream: id,
        first: base,
        channel: &s.channel,
    }
    .to_name();
    let ch = Arc::new(runner.session.open(&name, runner.data_options())?);
    runner.register(ch.id, id, base);
    s.link = Some(Link {
        ch: ch.clone(),
        runner: Arc::downgrade(runner),
        runner_id: runner.id,
    });
    Ok(ch)
}

impl PeerLane {
    pub(crate) fn new(
        inner: Weak<Inner>,
        key: String,
        lane: Lane,
        url: Option<String>,
    ) -> Arc<PeerLane> {
        Arc::new(PeerLane {
            inner,
            key,
            lane,
            url,
            st: Mutex::new(LaneState {
                runner: None,
                streams: BTreeMap::new(),
                ready: VecDeque::new(),
                down_since: None,
                connect_after: None,
                thread: false,
                sleeping: false,
                closed: false,
            }),
            cv: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, LaneState> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn max_message(&self) -> usize {
        self.inner
            .upgrade()
            .map_or(0, |i| i.config.max_message as usize)
    }

    /// Whether written messages keep their bytes until acknowledged (for a resend).
    fn keeps_bytes(&self) -> bool {
        self.inner
            .upgrade()
            .is_some_and(|i| !i.config.retry_for.is_zero())
    }

    pub(crate) fn add_stream(
        self: &Arc<Self>,
        id: u64,
        channel: &str,
        rate: Option<Rate>,
    ) -> Result<(), Failure> {
        let inner = self
            .inner
            .upgrade()
            .ok_or_else(|| Failure::new(ErrorCode::Shutdown, "the peer links are closed"))?;
        let mut st = self.lock();
        if st.closed {
            return Err(Failure::new(
                ErrorCode::Shutdown,
                "the peer links are closed",
            ));
        }
        if st.streams.len() >= inner.config.max_streams {
            return Err(Failure::new(
                ErrorCode::Budget,
                format!(
                    "{} streams at most on the {} lane to {}",
                    inner.config.max_streams,
                    self.lane.name(),
                    self.key
                ),
            ));
        }
        let now = Instant::now();
        st.streams.insert(
            id,
            StreamState {
                channel: channel.to_owned(),
                bucket: rate.map(|r| Bucket::new(r, now)),
                queue: VecDeque::new(),
                inflight: VecDeque::new(),
                acked: 0,
                next_seq: 0,
                taken: 0,
                generation: 0,
                link: None,
                sending: false,
                stall_until: None,
                closing: false,
                in_ready: false,
            },
        );
        if !st.thread {
            st.thread = true;
            let me = self.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("peer-{}-{}", self.key, self.lane.name()))
                .spawn(move || me.run());
            if let Err(e) = spawned {
                st.thread = false;
                st.streams.remove(&id);
                return Err(Failure::new(
                    ErrorCode::Budget,
                    format!("cannot start a sender thread: {e}"),
                ));
            }
        }
        Ok(())
    }

    /// Takes a session to send on, unless a live one is there already (then `runner` only
    /// receives). True when attached.
    pub(crate) fn attach(self: &Arc<Self>, runner: &Arc<Runner>) -> bool {
        let mut st = self.lock();
        if st.closed || st.live_runner().is_some() {
            return false;
        }
        let dead = runner.set_sending(self);
        st.runner = Some(runner.clone());
        st.down_since = None;
        st.connect_after = None;
        self.cv.notify_one();
        drop(st);
        if dead {
            self.runner_died(runner.id, "the session ended");
        }
        true
    }

    /// The session `runner_id` failed: the messages in flight on it are sent again later
    /// (retry policy) or fail now.
    pub(crate) fn runner_died(&self, runner_id: u64, reason: &str) {
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        let mut st = self.lock();
        if st.runner.as_ref().map(|r| r.id) != Some(runner_id) {
            return;
        }
        st.runner = None;
        let done = if inner.config.retry_for.is_zero() {
            st.fail_all(&Failure::new(
                ErrorCode::LinkFailed,
                format!("link to {} failed: {reason}", self.key),
            ))
        } else {
            for s in st.streams.values_mut() {
                // Back in order, ahead of what was queued; sent again on the next session.
                while let Some(o) = s.inflight.pop_back() {
                    s.queue.push_front(o);
                }
                s.next_seq = s.acked;
                s.link = None;
                s.generation += 1;
            }
            let ids: Vec<u64> = st
                .streams
                .iter_mut()
                .filter(|(_, s)| !s.queue.is_empty() && !s.in_ready)
                .map(|(id, s)| {
                    s.in_ready = true;
                    *id
                })
                .collect();
            st.ready.extend(ids);
            st.down_since.get_or_insert_with(Instant::now);
            tracing::info!(
                "link to {} ({} lane) failed: {reason}; retrying for {:?}",
                self.key,
                self.lane.name(),
                inner.config.retry_for
            );
            Vec::new()
        };
        self.cv.notify_one();
        drop(st);
        finish(done);
    }

    /// The peer has taken messages of `stream` up to sequence number `upto` (exclusive).
    pub(crate) fn ack(&self, stream: u64, upto: u64) {
        let mut done = Vec::new();
        {
            let mut st = self.lock();
            if let Some(s) = st.streams.get_mut(&stream) {
                s.taken = s.taken.max(upto);
                s.pop_acked(&mut done);
            }
            st.remove_if_done(stream);
        }
        finish(done);
    }

    /// The peer refused `stream`'s data channel: its unacknowledged messages fail.
    pub(crate) fn refused(&self, stream: u64, reason: &str) {
        let mut done = Vec::new();
        {
            let mut st = self.lock();
            if let Some(s) = st.streams.get_mut(&stream) {
                let f = Failure::new(
                    ErrorCode::Refused,
                    format!("{} refused channel {:?}: {reason}", self.key, s.channel),
                );
                s.fail(&f, &mut done);
            }
            st.remove_if_done(stream);
        }
        finish(done);
    }

    pub(crate) fn counts(&self) -> (usize, usize) {
        let st = self.lock();
        st.streams.values().fold((0, 0), |(q, f), s| {
            (q + s.queue.len(), f + s.inflight.len())
        })
    }

    pub(crate) fn close_stream(&self, id: u64) {
        let mut st = self.lock();
        if let Some(s) = st.streams.get_mut(&id) {
            s.closing = true;
        }
        st.remove_if_done(id);
    }

    pub(crate) fn close(&self) {
        let (done, runner) = {
            let mut st = self.lock();
            st.closed = true;
            let done = st.fail_all(&Failure::new(
                ErrorCode::Shutdown,
                "the peer links are closing",
            ));
            st.streams.clear();
            self.cv.notify_one();
            (done, st.runner.take())
        };
        if let Some(r) = runner {
            r.kill("closing");
        }
        finish(done);
    }

    /// Corks the session stream `id` writes to (see [`Cork`]) and adds the cork to `held`,
    /// unless one there holds that session already, the lane is urgent (its messages never
    /// wait for others'), or the stream has no session yet.
    pub(crate) fn cork(&self, id: u64, held: &mut Vec<Cork>) {
        if matches!(self.lane, Lane::Urgent) {
            return;
        }
        let ch = {
            let st = self.lock();
            st.streams
                .get(&id)
                .and_then(|s| s.link.as_ref())
                .map(|l| l.ch.clone())
        };
        if let Some(ch) = ch {
            if !held.iter().any(|c| c.holds(&ch)) {
                held.push(ch.cork());
            }
        }
    }

    /// Sends `out` on stream `id` now if nothing is ahead of it, else queues it.
    pub(crate) fn send(&self, id: u64, out: Outgoing) {
        let out = Msg::from(out);
        let max = self.max_message();
        if out.data.len() > max {
            let f = Failure::new(
                ErrorCode::TooLarge,
                format!("message of {} bytes, {max} at most", out.data.len()),
            );
            finish(vec![(out, Err(f))]);
            return;
        }
        let mut st = self.lock();
        if st.closed {
            drop(st);
            let f = Failure::new(ErrorCode::Shutdown, "the peer links are closed");
            finish(vec![(out, Err(f))]);
            return;
        }
        let runner = st.live_runner();
        let Some(s) = st.streams.get_mut(&id) else {
            drop(st);
            finish(vec![(
                out,
                Err(Failure::new(ErrorCode::Closed, "stream closed")),
            )]);
            return;
        };
        let now = Instant::now();
        let mut broken = None;
        let mut done = Vec::new();
        if let Some(r) = runner.filter(|_| {
            s.queue.is_empty()
                && !s.sending
                && out.data.len() <= FAST_MAX
                && s.stall_until.is_none_or(|t| t <= now)
        }) {
            let tokens = s.bucket.as_mut().is_none_or(|b| b.wait(now).is_zero());
            if tokens {
                match ensure_link(s, id, &r) {
                    Ok(ch) => {
                        let (back, finished, e) =
                            self.write_next(st, id, ch, out, now, Writer::Caller);
                        (st, done) = (back, finished);
                        broken = e.map(|e| (r, e));
                    }
                    Err(e) => {
                        s.queue.push_back(out);
                        broken = Some((r, e));
                    }
                }
            } else {
                s.queue.push_back(out);
            }
        } else {
            s.queue.push_back(out);
        }
        // What waits (this message, or those queued behind it while it was written) is the
        // sender thread's.
        if let Some(s) = st.streams.get_mut(&id).filter(|s| !s.queue.is_empty()) {
            if !s.in_ready {
                s.in_ready = true;
                st.ready.push_back(id);
            }
            if st.sleeping {
                self.cv.notify_one();
            }
        }
        drop(st);
        finish(done);
        if let Some((r, e)) = broken {
            r.kill(&format!("send: {e}"));
        }
    }

    /// The next stream whose head message may go now (round robin), or the earliest time one
    /// may.
    fn pick(st: &mut LaneState, now: Instant) -> Result<u64, Option<Instant>> {
        let mut earliest: Option<Instant> = None;
        let mut soon = |t: Instant| earliest = Some(earliest.map_or(t, |e: Instant| e.min(t)));
        for _ in 0..st.ready.len() {
            let Some(id) = st.ready.pop_front() else {
                break;
            };
            let Some(s) = st.streams.get_mut(&id) else {
                continue;
            };
            if s.queue.is_empty() {
                s.in_ready = false;
                continue;
            }
            st.ready.push_back(id);
            if s.sending {
                continue;
            }
            if let Some(t) = s.stall_until {
                if t > now {
                    soon(t);
                    continue;
                }
                s.stall_until = None;
            }
            if let Some(b) = &mut s.bucket {
                let w = b.wait(now);
                if !w.is_zero() {
                    soon(now + w);
                    continue;
                }
            }
            return Ok(id);
        }
        Err(earliest)
    }

    fn wait<'a>(
        &self,
        mut st: MutexGuard<'a, LaneState>,
        d: Duration,
    ) -> MutexGuard<'a, LaneState> {
        st.sleeping = true;
        let mut st = self
            .cv
            .wait_timeout(st, d)
            .unwrap_or_else(|e| e.into_inner())
            .0;
        st.sleeping = false;
        st
    }

    /// Writes `out` as stream `id`'s next message on `ch`, with the lane unlocked while its
    /// bytes go out, so that acknowledgements and other streams are not held up by the
    /// encryption and the socket write. Before that it is numbered and among those in flight,
    /// so an acknowledgement that comes at once finds it and a failure meanwhile requeues it
    /// with the others; `sending` keeps the stream's later messages behind it. Not written, it
    /// goes back to the head of the queue (see [`Writer`] for what happens then). Returns the
    /// lock, the messages finished meanwhile, and the error that breaks the session, if any.
    fn write_next<'a>(
        &'a self,
        mut st: MutexGuard<'a, LaneState>,
        id: u64,
        ch: Arc<Channel>,
        out: Msg,
        now: Instant,
        writer: Writer,
    ) -> (MutexGuard<'a, LaneState>, Done, Option<LinkError>) {
        let keep = self.keeps_bytes();
        let s = st.streams.get_mut(&id).expect("the stream written exists");
        let data = out.data.clone();
        let len = out.len;
        if let Some(b) = &mut s.bucket {
            b.take(len, now);
        }
        s.sending = true;
        s.next_seq += 1;
        s.inflight.push_back(out);
        let generation = s.generation;
        drop(st);
        let mut r = ch.send_wait(&data, Wait::Never);
        if let (
            Writer::Sender {
                credit_wait: Some(w),
            },
            Err(LinkError::WouldBlock),
        ) = (writer, &r)
        {
            r = ch.send_wait(&data, w);
        }
        drop(data);
        let mut st = self.lock();
        let mut done = Vec::new();
        let Some(s) = st.streams.get_mut(&id) else {
            return (st, done, None);
        };
        s.sending = false;
        let mut broken = None;
        match r {
            Ok(()) => {
                if s.generation == generation && !keep {
                    if let Some(m) = s.inflight.back_mut() {
                        m.written(false);
                    }
                }
                s.pop_acked(&mut done);
            }
            Err(e) => {
                if s.generation == generation {
                    // Not written: back to the head of the queue.
                    if let Some(m) = s.inflight.pop_back() {
                        s.queue.push_front(m);
                        s.next_seq -= 1;
                    }
                }
                if let Some(b) = &mut s.bucket {
                    b.take_back(len);
                }
                if !matches!(e, LinkError::WouldBlock | LinkError::Timeout) {
                    broken = Some(e);
                } else if matches!(writer, Writer::Sender { .. }) {
                    s.stall_until = Some(Instant::now() + STALL);
                }
            }
        }
        st.remove_if_done(id);
        (st, done, broken)
    }

    /// The sender thread: makes the link when there is work, writes queued messages in turn,
    /// and applies the retry policy.
    fn run(self: Arc<Self>) {
        let mut st = self.lock();
        loop {
            if st.closed {
                return;
            }
            let Some(inner) = self.inner.upgrade() else {
                return;
            };
            let now = Instant::now();
            let Some(runner) = st.live_runner() else {
                st = self.no_session(st, &inner, now);
                continue;
            };
            let id = match Self::pick(&mut st, now) {
                Ok(id) => id,
                Err(earliest) => {
                    let d = earliest
                        .map_or(Duration::from_secs(1), |t| t.saturating_duration_since(now));
                    st = self.wait(st, d.min(Duration::from_secs(1)));
                    continue;
                }
            };
            let alone = st.ready.len() <= 1;
            let s = st.streams.get_mut(&id).expect("picked stream exists");
            let ch = match ensure_link(s, id, &runner) {
                Ok(ch) => ch,
                Err(e) => {
                    drop(st);
                    runner.kill(&format!("open a data channel: {e}"));
                    st = self.lock();
                    continue;
                }
            };
            let out = s.queue.pop_front().expect("picked stream has a message");
            let writer = Writer::Sender {
                credit_wait: alone.then_some(CREDIT_WAIT),
            };
            let (back, done, broken) = self.write_next(st, id, ch, out, now, writer);
            st = back;
            if !done.is_empty() || broken.is_some() {
                drop(st);
                finish(done);
                if let Some(e) = broken {
                    runner.kill(&format!("send: {e}"));
                }
                st = self.lock();
            }
        }
    }

    /// The sender's turn without a session: make one, wait for the peer to, or fail.
    fn no_session<'a>(
        self: &'a Arc<Self>,
        mut st: MutexGuard<'a, LaneState>,
        inner: &Arc<Inner>,
        now: Instant,
    ) -> MutexGuard<'a, LaneState> {
        if !st.has_work() {
            st.down_since = None;
            return self.wait(st, Duration::from_secs(1));
        }
        let retry = inner.config.retry_for;
        if let Some(since) = st.down_since {
            if now >= since + retry {
                let done = st.fail_all(&Failure::new(
                    ErrorCode::LinkFailed,
                    format!(
                        "link to {} failed and was not made again within {retry:?}",
                        self.key
                    ),
                ));
                st.down_since = None;
                drop(st);
                finish(done);
                return self.lock();
            }
        }
        let Some(url) = &self.url else {
            if retry.is_zero() {
                let done = st.fail_all(&Failure::new(
                    ErrorCode::Unreachable,
                    format!("no link from {} and no address to reach it", self.key),
                ));
                drop(st);
                finish(done);
                return self.lock();
            }
            st.down_since.get_or_insert(now);
            return self.wait(st, RECONNECT_EVERY);
        };
        if let Some(t) = st.connect_after.filter(|t| *t > now) {
            return self.wait(st, t - now);
        }
        drop(st);
        let made = runner::connect(inner, &self.key, url, self.lane);
        let mut st = self.lock();
        match made {
            Ok(r) => {
                if st.closed || st.live_runner().is_some() {
                    // Closed meanwhile, or the peer linked to us first and that session sends.
                    drop(st);
                    r.kill("not needed");
                    return self.lock();
                }
                let dead = r.set_sending(self);
                let id = r.id;
                st.runner = Some(r);
                st.down_since = None;
                st.connect_after = None;
                if dead {
                    // It died before it knew its lane: it is this lane's runner now, and its
                    // messages go back to the queue (or fail) as for any session that dies.
                    drop(st);
                    self.runner_died(id, "the session ended");
                    return self.lock();
                }
                st
            }
            Err(f) => {
                if retry.is_zero() {
                    let done = st.fail_all(&f);
                    drop(st);
                    finish(done);
                    self.lock()
                } else {
                    tracing::info!("link to {}: {f}; trying again", self.key);
                    st.down_since.get_or_insert(now);
                    st.connect_after = Some(Instant::now() + RECONNECT_EVERY);
                    st
                }
            }
        }
    }
}
