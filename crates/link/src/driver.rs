//! Drives a [`Connection`] over a transport from the calling threads.
//!
//! There is no I/O thread on the fast path. A thread that must wait (for a message, for credit,
//! for a rendezvous) becomes the *reader* if nobody else is: it reads the transport itself and
//! feeds the connection, then wakes the others. Bytes to transmit are written by whichever
//! thread produced them, without blocking; only when the transport is full does a background
//! *flusher* thread take over the writing, so a thread never blocks in a write while its peer
//! waits for it to read.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use offhost_proto::{CallError, Connection, Event, ProtoError};

use crate::error::LinkError;
use crate::wire::{is_idle, WireRead, WireWrite};

/// Longest single sleep: waits recheck peer liveness at least this often.
pub(crate) const TICK: Duration = Duration::from_millis(100);
const READ_BUF: usize = 256 * 1024;

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

/// Why the link is no longer usable.
#[derive(Debug, Clone)]
pub(crate) enum Dead {
    PeerGone,
    Protocol(ProtoError),
    Io(String),
}

impl Dead {
    fn error(&self) -> LinkError {
        match self {
            Dead::PeerGone => LinkError::PeerGone,
            Dead::Protocol(e) => LinkError::Protocol(e.clone()),
            Dead::Io(s) => LinkError::io(s.clone(), std::io::ErrorKind::BrokenPipe.into()),
        }
    }
}

pub(crate) struct State {
    pub(crate) conn: Connection,
    pending: Vec<u8>,
    writing: bool,
    stuck: bool,
    reading: bool,
    shutdown: bool,
    dead: Option<Dead>,
    pub(crate) incoming: VecDeque<u32>,
    /// Zero-copy buffers that arrived, by pool index, waiting for their `loan` frame's reader.
    pub(crate) loans: HashMap<u32, offhost_shm::Buf>,
    /// Loan messages taken from a channel whose buffer has not arrived yet: (len, token).
    pub(crate) held: HashMap<u32, (u64, u64)>,
}

impl State {
    /// Maps a connection call error to the session's view of it.
    pub(crate) fn call_error(&self, e: CallError) -> LinkError {
        match e {
            CallError::LinkClosed | CallError::NoChannel(_) => {
                if let Some(d) = &self.dead {
                    d.error()
                } else if self.conn.peer_closed() {
                    LinkError::PeerGone
                } else {
                    LinkError::SessionClosed
                }
            }
            other => other.into(),
        }
    }

    fn take_events(&mut self) {
        while let Some(ev) = self.conn.poll_event() {
            if let Event::Opened { channel, .. } = ev {
                self.incoming.push_back(channel);
            }
        }
    }
}

struct ReadSide {
    wire: Box<dyn WireRead>,
    buf: Vec<u8>,
}

/// One session's connection, transport and waiters.
pub(crate) struct Driver {
    state: Mutex<State>,
    cond: Condvar,
    flush_cond: Condvar,
    reader: Mutex<ReadSide>,
    writer: Mutex<Box<dyn WireWrite>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Driver {
    /// Starts driving `conn` over the two halves; spawns the flusher thread.
    pub(crate) fn start(
        conn: Connection,
        read: Box<dyn WireRead>,
        write: Box<dyn WireWrite>,
    ) -> Arc<Driver> {
        let d = Arc::new(Driver {
            state: Mutex::new(State {
                conn,
                pending: Vec::new(),
                writing: false,
                stuck: false,
                reading: false,
                shutdown: false,
                dead: None,
                incoming: VecDeque::new(),
                loans: HashMap::new(),
                held: HashMap::new(),
            }),
            cond: Condvar::new(),
            flush_cond: Condvar::new(),
            reader: Mutex::new(ReadSide {
                wire: read,
                buf: vec![0; READ_BUF],
            }),
            writer: Mutex::new(write),
        });
        let f = d.clone();
        std::thread::Builder::new()
            .name("offhost-flush".into())
            .spawn(move || f.flusher())
            .expect("spawn the session flusher thread");
        let st = d.lock();
        drop(d.flush(st));
        d
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Writes what the connection has to transmit, without blocking.
    pub(crate) fn flush<'a>(&'a self, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        loop {
            let State { conn, pending, .. } = &mut *st;
            conn.poll_transmit(pending);
            if st.pending.is_empty() || st.writing || st.stuck || st.dead.is_some() {
                return st;
            }
            st.writing = true;
            let mut buf = std::mem::take(&mut st.pending);
            drop(st);
            let r = lock(&self.writer).write_nb(&buf);
            st = self.lock();
            st.writing = false;
            if st.shutdown {
                self.flush_cond.notify_one();
            }
            match r {
                Ok(n) if n == buf.len() => {
                    if st.pending.is_empty() {
                        buf.clear();
                        st.pending = buf; // keep the capacity
                    }
                }
                Ok(n) => self.park(&mut st, buf, n),
                Err(e) if is_idle(&e) => self.park(&mut st, buf, 0),
                Err(e) => self.kill(&mut st, &e),
            }
        }
    }

    /// Hands the unwritten rest of `buf` to the flusher thread.
    fn park(&self, st: &mut State, mut buf: Vec<u8>, written: usize) {
        buf.drain(..written);
        buf.append(&mut st.pending);
        st.pending = buf;
        st.stuck = true;
        self.flush_cond.notify_one();
    }

    fn kill(&self, st: &mut State, e: &std::io::Error) {
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
    }

    /// The flusher thread: writes, blocking, whatever the callers could not write at once.
    fn flusher(&self) {
        let mut st = self.lock();
        loop {
            // Sleep while someone else writes, or while there is nothing to do.
            while st.writing || !(st.stuck || st.shutdown) {
                st = self.flush_cond.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            if !st.stuck {
                // Shut down and nothing left to write.
                drop(st);
                lock(&self.writer).shutdown();
                return;
            }
            st.writing = true;
            let mut buf = std::mem::take(&mut st.pending);
            drop(st);
            let mut at = 0;
            let mut failed = None;
            let give_up = Instant::now() + Duration::from_secs(1);
            {
                let mut w = lock(&self.writer);
                while at < buf.len() {
                    match w.write_wait(&buf[at..], TICK) {
                        Ok(n) => at += n,
                        Err(e) if is_idle(&e) => {
                            if self.lock().shutdown && Instant::now() > give_up {
                                failed = Some(std::io::Error::from(std::io::ErrorKind::TimedOut));
                                break;
                            }
                        }
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
            }
            st = self.lock();
            st.writing = false;
            if let Some(e) = failed {
                st.stuck = false;
                st.pending.clear();
                self.kill(&mut st, &e);
                continue;
            }
            let State { conn, pending, .. } = &mut *st;
            conn.poll_transmit(pending);
            if st.pending.is_empty() {
                buf.clear();
                st.pending = buf;
                st.stuck = false;
            }
            self.cond.notify_all();
        }
    }

    /// Runs `f` until it returns `Some`, reading the transport in between, until `deadline`.
    pub(crate) fn wait<T>(
        &self,
        deadline: Deadline,
        mut f: impl FnMut(&mut State) -> Option<Result<T, LinkError>>,
    ) -> Result<T, LinkError> {
        let mut st = self.lock();
        let mut looked = false;
        loop {
            if let Some(r) = f(&mut st) {
                drop(self.flush(st));
                return r;
            }
            st = self.flush(st);
            if let Some(d) = &st.dead {
                return Err(d.error());
            }
            if st.shutdown {
                return Err(LinkError::SessionClosed);
            }
            let slice = match deadline {
                Deadline::Now if looked => return Err(LinkError::WouldBlock),
                Deadline::Now => None,
                Deadline::Never => Some(TICK),
                Deadline::At(t) => {
                    let now = Instant::now();
                    if now >= t {
                        return Err(LinkError::Timeout);
                    }
                    Some((t - now).min(TICK))
                }
            };
            looked = true;
            if st.reading {
                match slice {
                    Some(s) => {
                        st = self
                            .cond
                            .wait_timeout(st, s)
                            .unwrap_or_else(|e| e.into_inner())
                            .0
                    }
                    None => return Err(LinkError::WouldBlock),
                }
            } else {
                st = self.read_once(st, slice);
            }
        }
    }

    /// Reads the transport once (waiting at most `slice`, or not at all) and feeds the bytes in.
    fn read_once<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        slice: Option<Duration>,
    ) -> MutexGuard<'a, State> {
        st.reading = true;
        drop(st);
        let mut rs = lock(&self.reader);
        let ReadSide { wire, buf } = &mut *rs;
        let r = wire.read(buf, slice);
        let mut arrived = Vec::new();
        wire.take_loans(&mut arrived);
        let mut st = self.lock();
        for b in arrived {
            st.loans.insert(b.index(), b);
        }
        st.reading = false;
        match r {
            Ok(0) => {
                if st.dead.is_none() {
                    st.dead = Some(Dead::PeerGone);
                }
            }
            Ok(n) => {
                if let Err(e) = st.conn.handle_input(&buf[..n]) {
                    if st.dead.is_none() && !matches!(e, ProtoError::LinkClosed) {
                        tracing::warn!("closing link: {e}");
                        st.dead = Some(Dead::Protocol(e));
                    }
                    // Tell the peer why, then end the link.
                    st.shutdown = true;
                    let State { conn, pending, .. } = &mut *st;
                    conn.poll_transmit(pending);
                    st.stuck = true;
                    self.flush_cond.notify_one();
                }
                st.take_events();
            }
            Err(e) if is_idle(&e) => {}
            Err(e) => self.kill(&mut st, &e),
        }
        drop(rs);
        self.cond.notify_all();
        st
    }

    /// Says goodbye to the peer and stops the flusher once everything is written.
    pub(crate) fn close(&self) {
        let mut st = self.lock();
        if st.shutdown {
            return;
        }
        st.conn.close_link();
        st = self.flush(st);
        st.shutdown = true;
        if !st.pending.is_empty() {
            st.stuck = true;
        }
        self.flush_cond.notify_one();
        self.cond.notify_all();
    }

    /// Takes a buffer from the shared pool for a zero-copy message.
    pub(crate) fn alloc_loan(&self, deadline: Deadline) -> Result<offhost_shm::Buf, LinkError> {
        loop {
            let slice = match deadline {
                Deadline::Now => Duration::ZERO,
                Deadline::Never => TICK,
                Deadline::At(t) => t.saturating_duration_since(Instant::now()).min(TICK),
            };
            let r = lock(&self.writer).alloc_loan(slice);
            match r {
                Ok(Some(b)) => return Ok(b),
                Ok(None) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
                    return Err(LinkError::NoLoans)
                }
                Err(e) => {
                    let mut st = self.lock();
                    self.kill(&mut st, &e);
                    return Err(st.dead.as_ref().map_or(LinkError::PeerGone, Dead::error));
                }
            }
            {
                let st = self.lock();
                if let Some(d) = &st.dead {
                    return Err(d.error());
                }
                if st.shutdown {
                    return Err(LinkError::SessionClosed);
                }
            }
            match deadline {
                Deadline::Now => return Err(LinkError::WouldBlock),
                Deadline::At(t) if Instant::now() >= t => return Err(LinkError::Timeout),
                _ => {}
            }
        }
    }

    /// Writes a loaned buffer to the transport (its `loan` frame is already queued).
    pub(crate) fn write_loan(&self, buf: offhost_shm::Buf) -> Result<(), LinkError> {
        let r = lock(&self.writer).send_loan(buf, Duration::from_secs(3600));
        let mut st = self.lock();
        match r {
            Ok(()) => {
                drop(self.flush(st));
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => Err(LinkError::NoLoans),
            Err(e) => {
                self.kill(&mut st, &e);
                Err(st.dead.as_ref().map_or(LinkError::PeerGone, Dead::error))
            }
        }
    }
}
