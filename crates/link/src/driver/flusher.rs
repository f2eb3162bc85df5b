//! The writing side of a [`Driver`]: non-blocking writes under the lock, the flusher thread
//! that takes over when the transport is full, goodbye, and zero-copy loans.
//!
//! The writing half lives in the driver's state. A caller writes through it without blocking;
//! a thread that must block on it (the flusher, a loan call waiting for a free buffer or for
//! room) takes it out of the state, so the lock is never held across a blocking call, and
//! brings it back (`writer_cond` tells those waiting for it, `flush_cond` the flusher). While
//! it is out, new bytes queue in `pending` and the flusher writes them once it is home.

use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use crate::driver::liveness::Beat;
use crate::driver::{Dead, Deadline, Driver, State, TICK};
use crate::error::LinkError;
use crate::wire::{is_idle, WireWrite};

impl Driver {
    /// Writes what the connection has to transmit, without blocking and without letting go of
    /// the lock (a non-blocking write is a copy into a ring or a socket buffer). What does not
    /// fit, or cannot be written because the writer is out, goes to the flusher thread.
    #[inline]
    pub(crate) fn flush<'a>(&'a self, st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        // Corked: the bytes wait for the cork's release, which writes them together.
        if st.corked > 0 {
            return st;
        }
        self.flush_uncorked(st)
    }

    /// [`flush`](Self::flush) after a wait was answered (a message taken, say): on a byte
    /// stream, credit grants that may wait stay back (see
    /// `offhost_proto::Connection::has_urgent_transmit`) for the caller's next send, which
    /// writes them in front of its frames (`send_direct`), its next receive or other wait
    /// (`wait_as` flushes first), or the flusher's next tick (its heartbeat's look ends in a
    /// flush), whichever comes first. In a request and its answer, the request's grant then
    /// goes with the answer, in one write and one wake-up of the peer; a stream's receiver
    /// sends it when it comes for the next message.
    #[inline]
    pub(crate) fn flush_taken<'a>(&'a self, st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        if self.writes_vectored && !st.conn.has_urgent_transmit() && st.pending.is_empty() {
            return st;
        }
        self.flush(st)
    }

    /// [`flush`](Self::flush) whether or not a cork is held.
    #[inline]
    fn flush_uncorked<'a>(&'a self, st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        // The common case on a receive: nothing new to transmit, nothing of ours to write.
        if !st.conn.has_transmit() && (st.pending.is_empty() || st.stuck || st.dead.is_some()) {
            return st;
        }
        self.flush_out(st)
    }

    fn flush_out<'a>(&'a self, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        // While the flusher owns the bytes (stuck), it takes the connection's new bytes itself
        // when it comes back for more (an exchange of buffers), instead of their being
        // appended here (a copy).
        if !st.stuck {
            let State { conn, pending, .. } = &mut *st;
            conn.poll_transmit(pending);
        }
        if st.unsent() > self.limits.max_unsent {
            self.too_much_unsent(&mut st);
            return st;
        }
        if st.pending.is_empty() || st.stuck || st.dead.is_some() {
            return st;
        }
        if st.writer_closed {
            st.pending.clear();
            st.written = 0;
            return st;
        }
        let State {
            writer,
            pending,
            written,
            ..
        } = &mut *st;
        let Some(w) = writer.as_mut() else {
            self.hand_over(&mut st);
            return st;
        };
        debug_assert_eq!(*written, 0, "written bytes are the flusher's");
        match w.write_nb(pending) {
            Ok(n) if n == pending.len() => pending.clear(),
            Ok(n) => {
                *written = n;
                self.hand_over(&mut st);
            }
            Err(e) if is_idle(&e) => self.hand_over(&mut st),
            Err(e) => self.kill(&mut st, &e),
        }
        st
    }

    /// Sends a message on channel `id` with its frames written straight into the transport
    /// (a shared-memory record; on a byte stream, see [`Driver::send_direct`]), when nothing
    /// else waits to be written and there is room and credit now; `None` when the message was
    /// not sent (send it the usual way). Returns its sequence number.
    pub(crate) fn send_in_place(&self, id: u32, msg: &[u8]) -> Option<Result<u64, LinkError>> {
        if !self.writes_in_place {
            return self.send_direct(id, msg, &[]);
        }
        let mut st = self.lock();
        if !st.pending.is_empty()
            || st.stuck
            || st.dead.is_some()
            || st.conn.has_transmit()
            || st.corked > 0
        {
            return None;
        }
        let State { conn, writer, .. } = &mut *st;
        let tx = writer.as_mut()?.shm_sender()?;
        // Otherwise, when it cannot go now (credit short, or anything unusual), or the ring has
        // no room, the usual path sends it, waits, or says why it cannot.
        let permit = conn.send_in_place(id, msg)?;
        let frames = permit.frames();
        let len = frames.len();
        if len > crate::shm::record_limit(tx) {
            return None;
        }
        let placed = tx
            .write_with(len, |slot| frames.write_to(slot))
            .and_then(|placed| tx.flush().map(|()| placed));
        match placed {
            Ok(true) => Some(Ok(permit.commit())),
            Ok(false) => None,
            Err(e) => Some(Err(self.ring_failed(&mut st, e))),
        }
    }

    /// Sends a message on channel `id` (`msg`, or `parts` joined) with its frames written
    /// straight to a byte-stream transport from the message's own slices (rustls encrypts
    /// from them; a socket takes them by `sendmsg`), when nothing else waits to be written
    /// and the credit allows it now; `None` when it was not sent (send it the usual way).
    /// What the transport does not take at once is copied to `pending` for the flusher, so
    /// the connection's bytes stay in order. Returns the message's sequence number.
    pub(crate) fn send_direct(
        &self,
        id: u32,
        msg: &[u8],
        parts: &[&[u8]],
    ) -> Option<Result<u64, LinkError>> {
        // Other transports (in memory, shared memory for parts) go the usual way, before any
        // lock or permit is taken for nothing.
        if !self.writes_vectored {
            return None;
        }
        let mut st = self.lock();
        if !st.pending.is_empty()
            || st.stuck
            || st.dead.is_some()
            || st.writer_closed
            || st.conn.has_urgent_transmit()
            || st.corked > 0
            || st.writer.is_none()
        {
            return None;
        }
        let State {
            conn,
            writer,
            pending,
            ..
        } = &mut *st;
        // Grants held back for this send (see `flush_taken`) go first, in the same write.
        let mut held = Vec::new();
        conn.poll_transmit(&mut held);
        let sent = if parts.is_empty() {
            conn.send_in_place(id, msg)
        } else {
            conn.send_parts_in_place(id, parts)
        };
        let Some(permit) = sent else {
            // Sent the usual way, after the grants (`pending` was empty).
            *pending = held;
            return None;
        };
        let w = writer.as_mut().expect("the writer is home");
        let total = held.len() + permit.frames().len();
        let mut headers = Vec::new();
        let mut pieces = Vec::with_capacity(8);
        if !held.is_empty() {
            pieces.push(&held[..]);
        }
        permit.frames().pieces(&mut headers, &mut pieces);
        let wrote = match w.write_vectored_nb(&pieces) {
            Ok(n) => n,
            // Nothing left now: all of it waits for the flusher (a TLS write that said so
            // may hold the first records, which the flusher's first write then finishes).
            Err(e) if is_idle(&e) => 0,
            Err(e) => {
                drop(pieces);
                drop(permit);
                self.kill(&mut st, &e);
                return Some(Err(st
                    .dead
                    .as_ref()
                    .map_or(LinkError::PeerGone, Dead::error)));
            }
        };
        if wrote < total {
            // The rest, in order, for the flusher.
            let mut skip = wrote;
            for p in &pieces {
                if skip >= p.len() {
                    skip -= p.len();
                    continue;
                }
                pending.extend_from_slice(&p[skip..]);
                skip = 0;
            }
        }
        drop(pieces);
        let seq = permit.commit();
        if wrote < total {
            if st.unsent() > self.limits.max_unsent {
                self.too_much_unsent(&mut st);
            } else {
                self.hand_over(&mut st);
            }
        }
        Some(Ok(seq))
    }

    /// Holds new frames back (see [`crate::Cork`]).
    pub(crate) fn cork(&self) {
        self.lock().corked += 1;
    }

    /// Releases a cork and writes what waits, whether or not others are still held: threads
    /// that take turns holding corks on one session (an engine's threads serving several
    /// hosts) must never keep it from writing.
    pub(crate) fn uncork(&self) {
        let mut st = self.lock();
        st.corked = st.corked.saturating_sub(1);
        drop(self.flush_uncorked(st));
    }

    /// The ring failed under a send in place: the link is dead; what the caller is told.
    #[cold]
    fn ring_failed(&self, st: &mut State, e: offhost_shm::ShmError) -> LinkError {
        self.kill(st, &crate::shm::to_io(e));
        st.dead.as_ref().map_or(LinkError::PeerGone, Dead::error)
    }

    /// The peer reads nothing while the session holds more than it may for it: the session
    /// ends, and what was held is dropped.
    #[cold]
    fn too_much_unsent(&self, st: &mut State) {
        let e = std::io::Error::other(format!(
            "the peer reads nothing: {} bytes wait to be written, {}",
            st.unsent(),
            offhost_units::OverLimit::new(offhost_units::Limit::MaxUnsent, self.limits.max_unsent)
        ));
        st.pending = Vec::new();
        st.written = 0;
        self.kill(st, &e);
    }

    /// Hands the pending bytes to the flusher thread.
    pub(crate) fn hand_over(&self, st: &mut State) {
        st.stuck = true;
        self.flush_cond.notify_all();
    }

    /// Brings the writing half home and tells whoever waits for it (a notification costs a
    /// system call, so only those that wait are told).
    fn bring_back(&self, st: &mut State, w: Box<dyn WireWrite>) {
        st.writer = Some(w);
        if st.writer_waiters > 0 {
            self.writer_cond.notify_all();
        }
        if st.stuck || st.shutdown {
            self.flush_cond.notify_all();
        }
    }

    /// The flusher thread: writes, blocking, whatever the callers could not write at once.
    pub(crate) fn flusher(&self) {
        let mut beat = Beat::new(self.limits.peer_deadline);
        let mut st = self.lock();
        loop {
            // Sleep while the writer is out, or while there is nothing to do; look at the
            // peer's liveness at every wake-up.
            while st.writer.is_none() || !(st.stuck || st.shutdown) {
                st = self
                    .flush_cond
                    .wait_timeout(st, TICK)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                st = self.beat(st, &mut beat);
            }
            let mut w = st.writer.take().expect("the writer is home");
            if !st.stuck {
                // Shut down and nothing left to write.
                st.writer_closed = true;
                drop(st);
                w.shutdown();
                self.writer_cond.notify_all();
                return;
            }
            let mut buf = std::mem::take(&mut st.pending);
            let from = std::mem::take(&mut st.written);
            drop(st);
            let failed = self.write_all(&mut *w, &buf[from..], &mut beat);
            st = self.lock();
            self.bring_back(&mut st, w);
            if let Some(e) = failed {
                st.stuck = false;
                st.pending.clear();
                self.kill(&mut st, &e);
                continue;
            }
            // The written buffer goes back to be filled again: into `pending` unless something
            // was queued there meanwhile, and from there it is exchanged for the bytes the
            // connection queued meanwhile (so both buffers keep their capacity, and nothing is
            // copied).
            buf.clear();
            if st.pending.is_empty() {
                st.pending = buf;
            }
            let State { conn, pending, .. } = &mut *st;
            conn.poll_transmit(pending);
            if st.unsent() > self.limits.max_unsent {
                self.too_much_unsent(&mut st);
            }
            if st.pending.is_empty() {
                st.stuck = false;
            }
            self.cond.notify_all();
        }
    }

    /// Writes all of `buf`, blocking; gives up a second after shutdown on a peer that reads
    /// nothing, when no byte could be written for the session's write-stall limit, and when
    /// the peer is silent past its deadline (`beat`, looked at while the write waits).
    fn write_all(
        &self,
        w: &mut dyn WireWrite,
        buf: &[u8],
        beat: &mut Beat,
    ) -> Option<std::io::Error> {
        let mut at = 0;
        let give_up = Instant::now() + Duration::from_secs(1);
        let mut progress = Instant::now();
        while at < buf.len() {
            match w.write_wait(&buf[at..], TICK) {
                Ok(n) => {
                    at += n;
                    progress = Instant::now();
                }
                Err(e) if is_idle(&e) => {
                    let st = self.beat(self.lock(), beat);
                    if let Some(Dead::Silent(d)) = &st.dead {
                        return Some(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            LinkError::PeerSilent(*d),
                        ));
                    }
                    if st.shutdown && Instant::now() > give_up {
                        return Some(std::io::ErrorKind::TimedOut.into());
                    }
                    drop(st);
                    if let Some(stall) = self.limits.write_stall {
                        if progress.elapsed() > stall {
                            return Some(std::io::Error::new(
                                std::io::ErrorKind::TimedOut,
                                format!(
                                    "the peer read nothing for {} s, {}",
                                    stall.as_secs_f64(),
                                    offhost_units::OverLimit::time(
                                        offhost_units::Limit::WriteStall,
                                        stall
                                    )
                                ),
                            ));
                        }
                    }
                }
                Err(e) => return Some(e),
            }
        }
        None
    }

    /// Refuses the link: an error frame with `reason` for the peer, then [`Driver::close`].
    pub(crate) fn refuse(&self, reason: &str) {
        let mut st = self.lock();
        st.conn.refuse_link(reason);
        drop(self.flush(st));
        self.close();
    }

    /// Says goodbye to the peer, waits (boundedly) until everything is written, and stops the
    /// flusher.
    pub(crate) fn close(&self) {
        let mut st = self.lock();
        if st.shutdown {
            return;
        }
        st.conn.close_link();
        st = self.flush(st);
        st.shutdown = true;
        self.unpark(&mut st);
        if !st.pending.is_empty() {
            st.stuck = true;
        }
        self.flush_cond.notify_all();
        self.writer_cond.notify_all();
        self.cond.notify_all();
        self.accept_cond.notify_all();
        // Let the goodbye and everything before it reach the transport, so a process may exit
        // right after closing; a dead or stuck peer bounds the wait.
        let give_up = Instant::now() + Duration::from_secs(10);
        while st.stuck && st.dead.is_none() && Instant::now() < give_up {
            st = self
                .cond
                .wait_timeout(st, TICK)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Waits until the writing half is home and takes it out; `None` with the error to
    /// report when the session ends first or `deadline` passes.
    fn take_writer<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        deadline: Deadline,
    ) -> (MutexGuard<'a, State>, Result<Box<dyn WireWrite>, LinkError>) {
        loop {
            if let Some(d) = &st.dead {
                let e = d.error();
                return (st, Err(e));
            }
            if st.shutdown || st.writer_closed {
                return (st, Err(LinkError::SessionClosed));
            }
            if let Some(w) = st.writer.take() {
                return (st, Ok(w));
            }
            let slice = match deadline {
                Deadline::Now => return (st, Err(LinkError::WouldBlock)),
                Deadline::Never => TICK,
                Deadline::At(t) => match t.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left.min(TICK),
                    _ => return (st, Err(LinkError::Timeout)),
                },
            };
            st.writer_waiters += 1;
            st = self
                .writer_cond
                .wait_timeout(st, slice)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            st.writer_waiters -= 1;
        }
    }

    /// Takes a buffer from the shared pool for a zero-copy message.
    pub(crate) fn alloc_loan(&self, deadline: Deadline) -> Result<offhost_shm::Buf, LinkError> {
        let alloc = self.alloc.as_ref().ok_or(LinkError::NoLoans)?;
        loop {
            match alloc.try_alloc() {
                Ok(Some(b)) => return Ok(b),
                Ok(None) => {}
                Err(e) => return Err(self.fail_io(&e)),
            }
            // None free: wait on the writer's doorbell, which rings when the peer returns one.
            let (st, w) = self.take_writer(self.lock(), deadline);
            let mut w = w?;
            drop(st);
            let slice = match deadline {
                Deadline::Now => Duration::ZERO,
                Deadline::Never => TICK,
                Deadline::At(t) => t.saturating_duration_since(Instant::now()).min(TICK),
            };
            let r = w.alloc_loan(slice);
            let mut st = self.lock();
            self.bring_back(&mut st, w);
            drop(self.flush(st));
            match r {
                Ok(Some(b)) => return Ok(b),
                Ok(None) => {}
                Err(e) => return Err(self.fail_io(&e)),
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
        let (st, w) = self.take_writer(self.lock(), Deadline::Never);
        let mut w = w?;
        let r = match w.send_loan_nb(buf) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(buf)) => {
                // No room in the ring now: wait for it without the lock.
                drop(st);
                let r = w.send_loan(buf, Duration::from_secs(3600));
                let mut st = self.lock();
                self.bring_back(&mut st, w);
                return self.loan_written(st, r);
            }
            Err(e) => Err(e),
        };
        let mut st = st;
        self.bring_back(&mut st, w);
        self.loan_written(st, r)
    }

    fn loan_written(
        &self,
        mut st: MutexGuard<'_, State>,
        r: std::io::Result<()>,
    ) -> Result<(), LinkError> {
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

    /// A transport failure seen by a loan call: the link is dead; the error to report.
    fn fail_io(&self, e: &std::io::Error) -> LinkError {
        let mut st = self.lock();
        self.kill(&mut st, e);
        st.dead.as_ref().map_or(LinkError::PeerGone, Dead::error)
    }
}
