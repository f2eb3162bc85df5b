//! Drives a [`Connection`] over a transport from the calling threads.
//!
//! There is no I/O thread on the fast path, and one lock per session. A thread that must wait
//! (for a message, for credit, for a rendezvous) first looks at the transport under the lock
//! when that is cheap (shared memory); otherwise it becomes the *reader* if nobody else is: it
//! takes the reading half out of the state, waits for input without the lock, then feeds the
//! input to the connection where it lies (a shared-memory record is parsed in place) under the
//! lock, and wakes the others. Bytes to transmit are written by whichever thread produced them,
//! under the lock and without blocking; only when the transport is full does the background
//! *flusher* thread (`flusher.rs`) take the writing half out and write, blocking, so a thread
//! never blocks in a write while its peer waits for it to read.
//!
//! The common receive on shared memory takes a shorter way (`quick.rs`): its wait is offered
//! the ring record directly, and between two receives the reading half stays parked with the
//! channel instead of going home; every wait here brings a parked half home first.
//!
//! [`Driver`] is one type; its methods are grouped by side, a file each:
//!
//! | file | owns |
//! |---|---|
//! | `mod.rs` | the shared state, the reader role, waits, feeding input |
//! | `quick.rs` | the quick receive on shm and mem, and the parked reading half |
//! | `flusher.rs` | writing: non-blocking writes, the flusher thread, goodbye, loans' writes |
//! | `liveness.rs` | heartbeats and the peer's deadline (the flusher's, at each wake-up) |

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use offhost_proto::{CallError, Connection, Event, ProtoError};
use offhost_shm::Handoff;

mod flusher;
mod liveness;
mod quick;

use crate::error::LinkError;
use crate::wire::{is_idle, Input, WireRead, WireWrite};

/// Longest single sleep: waits recheck peer liveness at least this often.
pub(crate) const TICK: Duration = Duration::from_millis(100);
/// How long a passive waiter lets the transport rest after the last data wait before it reads
/// itself: long enough to leave the gaps between one thread's receives alone, short enough that
/// a thread that turns from receiving to accepting is not kept waiting.
const PASSIVE_GRACE: Duration = Duration::from_millis(2);

/// When a wait gives up.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Deadline {
    /// Do not wait: one look at the transport, then give up.
    Now,
    /// Wait until this instant.
    At(Instant),
    /// Wait for ever (peer liveness still ends the wait).
    Never,
}

impl Deadline {
    pub(crate) fn after(timeout: Option<Duration>) -> Deadline {
        match timeout {
            None => Deadline::Never,
            Some(t) => Instant::now()
                .checked_add(t)
                .map_or(Deadline::Never, Deadline::At),
        }
    }
}

/// A receiver that takes the next message of its channel as it is parsed (see
/// [`Driver::feed_taking`]).
type Taker<'a> = Option<(u32, &'a mut dyn FnMut(&[u8]))>;

/// What [`Driver::feed_taking`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fed {
    /// The receiver took a message as it was parsed.
    Took,
    /// Input was fed (into the stores), none of it taken.
    Input,
    /// No input was ready (or the transport is not one looked at under the lock, or the
    /// reader is out).
    Nothing,
}

/// A transport's reading half, boxed once more so that it passes through a [`Handoff`] slot.
pub(crate) type ReadHalf = Box<Box<dyn WireRead>>;

/// Why the link is no longer usable.
#[derive(Debug, Clone)]
pub(crate) enum Dead {
    PeerGone,
    /// Nothing came for the peer deadline.
    Silent(Duration),
    Protocol(ProtoError),
    Io(String),
}

impl Dead {
    pub(crate) fn error(&self) -> LinkError {
        match self {
            Dead::PeerGone => LinkError::PeerGone,
            Dead::Silent(d) => LinkError::PeerSilent(*d),
            Dead::Protocol(e) => LinkError::Protocol(e.clone()),
            Dead::Io(s) => LinkError::io(s.clone(), std::io::ErrorKind::BrokenPipe.into()),
        }
    }
}

/// Maps a connection call error to the session's view of it, given why the link died (if it
/// did) and whether the peer said goodbye.
pub(crate) fn call_error(dead: &Option<Dead>, peer_closed: bool, e: CallError) -> LinkError {
    match e {
        CallError::LinkClosed | CallError::NoChannel(_) => {
            if let Some(d) = dead {
                d.error()
            } else if peer_closed {
                LinkError::PeerGone
            } else {
                LinkError::SessionClosed
            }
        }
        other => other.into(),
    }
}

pub(crate) struct State {
    pub(crate) conn: Connection,
    /// Bytes the connection produced that are not written yet.
    pub(crate) pending: Vec<u8>,
    /// Bytes at the front of `pending` already written (a non-blocking write took part of
    /// it; the flusher writes the rest): skipped instead of moved out, since `pending` can
    /// hold megabytes.
    pub(crate) written: usize,
    /// The transport's writing half; out while the flusher or a loan call uses it.
    pub(crate) writer: Option<Box<dyn WireWrite>>,
    /// The flusher shut the writing half down for good.
    pub(crate) writer_closed: bool,
    /// The transport's reading half; out while a waiter reads, or parked in
    /// [`Driver::parked`] between two quick receives (see `quick.rs`).
    pub(crate) reader: Option<ReadHalf>,
    /// The reading half is parked: in its slot, or out with the quick receiver that took it
    /// from there (which brings it home when others wait for it).
    pub(crate) parked: bool,
    /// Whether looking at the reading half is cheap enough to do under the lock.
    pub(crate) cheap_poll: bool,
    /// `pending` waits for the flusher (the transport was full or the writer was out).
    pub(crate) stuck: bool,
    /// Corks held ([`crate::Cork`]): while any is, new frames stay in the connection; each
    /// release writes what waits.
    pub(crate) corked: u32,
    pub(crate) shutdown: bool,
    pub(crate) dead: Option<Dead>,
    pub(crate) incoming: VecDeque<u32>,
    /// Threads waiting in `wait` for channel data (not passive).
    active: usize,
    /// Data waits finished so far (a passive waiter reads only after a tick without any).
    pub(crate) active_gen: u64,
    /// Threads asleep on `cond` (data waiters) and on `accept_cond` (passive waiters).
    pub(crate) sleepers: usize,
    pub(crate) passive_sleepers: usize,
    /// Threads asleep on `writer_cond`, waiting for the writing half.
    pub(crate) writer_waiters: usize,
    /// Zero-copy buffers that arrived, by pool index, waiting for their `loan` frame's reader.
    pub(crate) loans: HashMap<u32, offhost_shm::Buf>,
    /// Loan messages taken from a channel whose buffer has not arrived yet: (len, token).
    pub(crate) held: HashMap<u32, (u64, u64)>,
    /// Feeds that brought input, so far (the heartbeat watches it move, see `liveness.rs`).
    pub(crate) fed: u64,
}

impl State {
    /// Bytes held for the peer and not written yet (queued here or still in the connection).
    pub(crate) fn unsent(&self) -> u64 {
        (self.pending.len() - self.written + self.conn.transmit_len()) as u64
    }

    /// Maps a connection call error to the session's view of it.
    pub(crate) fn call_error(&self, e: CallError) -> LinkError {
        call_error(&self.dead, self.conn.peer_closed(), e)
    }

    fn take_events(&mut self) {
        while let Some(ev) = self.conn.poll_event() {
            if let Event::Opened { channel, .. } = ev {
                self.incoming.push_back(channel);
            }
        }
    }

    /// Feeds what the reading half has ready to the connection (and collects loans); also
    /// says whether anything was there. With a `taker`, the next message of its channel goes
    /// to its callback as it is parsed when it can (see `Connection::handle_input_taking`).
    fn feed(
        &mut self,
        wire: &mut dyn WireRead,
        mut taker: Taker<'_>,
    ) -> (Option<ProtoError>, std::io::Result<bool>, bool) {
        let mut failed = None;
        let mut fed = false;
        let State { conn, loans, .. } = self;
        let more = wire.feed(&mut |input| {
            fed = true;
            match input {
                Input::Bytes(b) => {
                    // Once the taker has its message, feeding stops: the receiver goes on at
                    // once, and the next record's slot, which the peer writes next, is left
                    // alone.
                    let r = match &mut taker {
                        Some((id, take)) => conn.handle_input_taking(b, *id, *take),
                        None => conn.handle_input(b).map(|()| false),
                    };
                    match r {
                        Ok(took) => !took,
                        Err(e) => {
                            failed = Some(e);
                            false
                        }
                    }
                }
                Input::Loan(b) => {
                    loans.insert(b.index(), b);
                    true
                }
            }
        });
        (failed, more, fed)
    }
}

/// One session's connection, transport and waiters.
pub(crate) struct Driver {
    state: Mutex<State>,
    pub(crate) cond: Condvar,
    pub(crate) accept_cond: Condvar,
    /// The flusher sleeps here until there is something to write (or to shut down).
    pub(crate) flush_cond: Condvar,
    /// Loan calls wait here for the writing half to come home.
    pub(crate) writer_cond: Condvar,
    /// Loans: allocation from the shared pool, apart from the writer (shared memory only).
    pub(crate) alloc: Option<Box<dyn crate::wire::LoanAlloc>>,
    /// The writing half can take frames written in place (shared memory).
    pub(crate) writes_in_place: bool,
    /// The writing half can write frames from several slices at once (TLS, sockets).
    pub(crate) writes_vectored: bool,
    /// Where a quick receiver parks the reading half between two receives (see `quick.rs`).
    pub(crate) parked: Handoff<Box<dyn WireRead>>,
    /// Bytes held for the peer and write progress: past them the session ends.
    pub(crate) limits: crate::limits::DriverLimits,
    /// The channel whose quick receive parked it (written before the slot's release store).
    pub(crate) parked_for: AtomicU32,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Driver {
    /// Starts driving `conn` over the two halves; spawns the flusher thread (a failure to
    /// start it is the error).
    pub(crate) fn start(
        conn: Connection,
        read: Box<dyn WireRead>,
        mut write: Box<dyn WireWrite>,
        limits: crate::limits::DriverLimits,
    ) -> Result<Arc<Driver>, LinkError> {
        let alloc = write.allocator();
        let writes_in_place = write.shm_sender().is_some();
        let writes_vectored = write.writes_vectored();
        let d = Arc::new(Driver {
            state: Mutex::new(State {
                conn,
                pending: Vec::new(),
                written: 0,
                writer: Some(write),
                writer_closed: false,
                cheap_poll: read.cheap_poll(),
                reader: Some(Box::new(read)),
                parked: false,
                stuck: false,
                corked: 0,
                shutdown: false,
                dead: None,
                incoming: VecDeque::new(),
                active: 0,
                active_gen: 0,
                sleepers: 0,
                passive_sleepers: 0,
                writer_waiters: 0,
                loans: HashMap::new(),
                held: HashMap::new(),
                fed: 0,
            }),
            cond: Condvar::new(),
            accept_cond: Condvar::new(),
            flush_cond: Condvar::new(),
            writer_cond: Condvar::new(),
            alloc,
            writes_in_place,
            writes_vectored,
            parked: Handoff::new(),
            parked_for: AtomicU32::new(0),
            limits,
        });
        let f = d.clone();
        std::thread::Builder::new()
            .name("offhost-flush".into())
            .spawn(move || f.flusher())
            .map_err(|e| LinkError::io("start the session's flusher thread", e))?;
        let st = d.lock();
        drop(d.flush(st));
        Ok(d)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    pub(crate) fn kill(&self, st: &mut State, e: &std::io::Error) {
        self.unpark(st);
        if st.dead.is_none() {
            st.dead = Some(match e.kind() {
                std::io::ErrorKind::BrokenPipe
                | std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::NotConnected => Dead::PeerGone,
                _ => Dead::Io(e.to_string()),
            });
        }
        self.cond.notify_all();
        self.accept_cond.notify_all();
        self.writer_cond.notify_all();
    }

    /// Runs `f` until it returns `Some`, reading the transport in between, until `deadline`.
    pub(crate) fn wait<T>(
        &self,
        deadline: Deadline,
        f: impl FnMut(&mut State) -> Option<Result<T, LinkError>>,
    ) -> Result<T, LinkError> {
        self.wait_as(deadline, false, f)
    }

    /// Like [`wait`](Self::wait) for a waiter that needs no channel data (accepting channels):
    /// it reads the transport only while no other thread waits for data, and otherwise sleeps
    /// until a channel opens, so it never takes a data waiter's turn (or its CPU) to read.
    pub(crate) fn wait_passive<T>(
        &self,
        deadline: Deadline,
        f: impl FnMut(&mut State) -> Option<Result<T, LinkError>>,
    ) -> Result<T, LinkError> {
        self.wait_as(deadline, true, f)
    }

    fn wait_as<T>(
        &self,
        deadline: Deadline,
        passive: bool,
        mut f: impl FnMut(&mut State) -> Option<Result<T, LinkError>>,
    ) -> Result<T, LinkError> {
        let mut st = self.lock();
        // Grants the last wait held back (see `flush_taken`) wait no longer than this call:
        // a receiver that takes one message after another without sending sends them now.
        if !passive {
            st = self.flush(st);
            st.active += 1;
        }
        let mut looked = false;
        let mut polled = false;
        let mut seen_gen = None;
        let r = loop {
            if let Some(r) = f(&mut st) {
                st = self.flush_taken(st);
                break r;
            }
            st = self.flush(st);
            if let Some(d) = &st.dead {
                break Err(d.error());
            }
            if st.shutdown {
                break Err(LinkError::SessionClosed);
            }
            // A reading half parked by a quick receiver comes home for this wait.
            self.unpark(&mut st);
            // Input that is already there is fed without letting go of the lock.
            if !passive && !polled && st.cheap_poll && st.reader.is_some() {
                polled = true;
                if self.poll_in_place(&mut st) {
                    continue;
                }
            }
            polled = false;
            let slice = match deadline {
                Deadline::Now if looked => break Err(LinkError::WouldBlock),
                Deadline::Now => None,
                Deadline::Never => Some(TICK),
                Deadline::At(t) => {
                    let now = Instant::now();
                    if now >= t {
                        break Err(LinkError::Timeout);
                    }
                    Some((t - now).min(TICK))
                }
            };
            looked = true;
            // A passive waiter leaves the transport to data waiters while there are any, and
            // for a grace period after the last one left (it reads only after sleeping a whole
            // grace period in which no data wait ended): between two messages there is no data
            // waiter for a moment, and a passive reader spinning then would take the CPU of the
            // data waiter it has to wake.
            let recent = passive && seen_gen.map_or(st.active_gen != 0, |g| g != st.active_gen);
            seen_gen = Some(st.active_gen);
            let defer = st.reader.is_none() || (passive && (st.active > 0 || recent));
            match (defer, slice) {
                (true, None) => break Err(LinkError::WouldBlock),
                (true, Some(s)) => {
                    if passive {
                        // While data waiters read, they feed the channel openings too and wake
                        // this one; once they are gone, it looks again after the grace period.
                        let s = if st.active == 0 && st.reader.is_some() {
                            s.min(PASSIVE_GRACE)
                        } else {
                            s
                        };
                        st.passive_sleepers += 1;
                        st = self
                            .accept_cond
                            .wait_timeout(st, s)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                        st.passive_sleepers -= 1;
                    } else {
                        st.sleepers += 1;
                        st = self
                            .cond
                            .wait_timeout(st, s)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                        st.sleepers -= 1;
                    }
                }
                // On shared memory a data waiter feeds the input itself, at the top of the loop
                // (where a receiver takes its message as it is parsed).
                (false, _) => {
                    let feed = passive || !st.cheap_poll;
                    st = self.read_once(st, slice, feed)
                }
            }
        };
        if !passive {
            // A passive waiter notices the end of the active ones at its next tick; waking it
            // now would make it race the data waiters for the transport between messages.
            st.active -= 1;
            st.active_gen += 1;
        }
        r
    }

    /// Wakes the sleeping waiters, if any (a notification without sleepers still costs a
    /// system call).
    pub(crate) fn wake(&self, st: &State) {
        if st.sleepers > 0 {
            self.cond.notify_all();
        }
        if st.passive_sleepers > 0 && (!st.incoming.is_empty() || st.dead.is_some() || st.shutdown)
        {
            self.accept_cond.notify_all();
        }
    }

    /// Feeds the input that is ready, under the lock, if any; true if some was (or the input
    /// ended, or the transport failed). `feed` itself finds out, without a separate look.
    fn poll_in_place(&self, st: &mut State) -> bool {
        let Some(mut wire) = st.reader.take() else {
            return false;
        };
        let ready = self.take_input(st, &mut **wire, None);
        st.reader = Some(wire);
        if ready {
            self.wake(st);
        }
        ready
    }

    /// Like [`poll_in_place`](Self::poll_in_place) for a receiver on channel `id` (on the
    /// transports whose input is looked at under the lock: shm and mem): the next message of
    /// the channel goes to `take` as it is parsed, when nothing of the channel waits before
    /// it, instead of into the channel's store. Says whether `take` got one, and whether any
    /// input was fed.
    pub(crate) fn feed_taking(&self, st: &mut State, id: u32, take: &mut dyn FnMut(&[u8])) -> Fed {
        // A loan taken from the channel waits for its buffer: what comes after it waits too.
        if !st.cheap_poll || (!st.held.is_empty() && st.held.contains_key(&id)) {
            return Fed::Nothing;
        }
        self.unpark(st);
        let Some(mut wire) = st.reader.take() else {
            return Fed::Nothing;
        };
        let mut took = false;
        let ready = self.take_input(
            st,
            &mut **wire,
            Some((id, &mut |m: &[u8]| {
                took = true;
                take(m)
            })),
        );
        st.reader = Some(wire);
        if ready {
            self.wake(st);
        }
        match (took, ready) {
            (true, _) => Fed::Took,
            (false, true) => Fed::Input,
            (false, false) => Fed::Nothing,
        }
    }

    /// Takes the reading half out, waits for input (at most `slice`, or not at all) without the
    /// state lock, then (if `feed`) feeds what arrived to the connection under it.
    fn read_once<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        slice: Option<Duration>,
        feed: bool,
    ) -> MutexGuard<'a, State> {
        let mut wire = st.reader.take().expect("the reader is home");
        drop(st);
        let r = wire.wait(slice);
        let mut st = self.lock();
        match r {
            Ok(()) if feed => {
                self.take_input(&mut st, &mut **wire, None);
            }
            Ok(()) => {}
            Err(e) if is_idle(&e) => {}
            Err(e) => self.kill(&mut st, &e),
        }
        st.reader = Some(wire);
        self.wake(&st);
        st
    }

    /// Feeds the ready input and handles what it brought: a broken protocol, the end of the
    /// input, a failed transport, channels the peer opened. True if anything happened.
    fn take_input(&self, st: &mut State, wire: &mut dyn WireRead, taker: Taker<'_>) -> bool {
        let (failed, more, fed) = st.feed(wire, taker);
        st.fed = st.fed.wrapping_add(u64::from(fed));
        let mut happened = fed;
        if let Some(e) = failed {
            self.fail(st, e);
            happened = true;
        }
        match more {
            Ok(true) => {}
            Ok(false) => {
                if st.dead.is_none() {
                    st.dead = Some(Dead::PeerGone);
                }
                happened = true;
            }
            Err(e) if is_idle(&e) => {}
            Err(e) => {
                self.kill(st, &e);
                happened = true;
            }
        }
        st.take_events();
        happened
    }

    /// The peer broke the protocol: tell it why, then end the link.
    fn fail(&self, st: &mut State, e: ProtoError) {
        self.unpark(st);
        if st.dead.is_none() && !matches!(e, ProtoError::LinkClosed) {
            tracing::warn!("closing link: {e}");
            st.dead = Some(Dead::Protocol(e));
        }
        st.shutdown = true;
        let State { conn, pending, .. } = st;
        conn.poll_transmit(pending);
        self.hand_over(st);
    }
}

/// A receiver's copy of a message into `buf` (replacing what it held), at `buf[front..]`
/// after `front` zero bytes.
pub(crate) fn copy_into(buf: &mut Vec<u8>, front: usize) -> impl FnMut(&[u8]) + '_ {
    move |m| offhost_proto::put_at(buf, front, m)
}
