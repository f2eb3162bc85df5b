//! Channels: the CSP API (blocking and non-blocking, synchronous and asynchronous, select).

use std::sync::Arc;

use offhost_proto::{BatchEnd, CallError, ChannelOptions, SendMode};

use crate::driver::Deadline;
use crate::error::LinkError;
use crate::loan::{Arrived, Taken};
use crate::session::Handle;
use crate::wait::Wait;

/// One virtual link of a session, carrying messages both ways (the paper's WriteLink/ReadLink).
///
/// A channel may be used from several threads at once (`&self` methods). Dropping it ends its
/// sending direction, like [`close`](Self::close).
pub struct Channel {
    pub(crate) handle: Arc<Handle>,
    pub(crate) id: u32,
    name: String,
    options: ChannelOptions,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("id", &self.id)
            .field("name", &self.name)
            .finish()
    }
}

impl Channel {
    pub(crate) fn new(
        handle: Arc<Handle>,
        id: u32,
        name: String,
        options: ChannelOptions,
    ) -> Channel {
        Channel {
            handle,
            id,
            name,
            options,
        }
    }

    /// The channel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The channel's options (for an accepted channel, those the peer chose).
    pub fn options(&self) -> ChannelOptions {
        self.options
    }

    /// Sends a message, waiting for credit (and, on a [`SendMode::Sync`] channel, until the
    /// receiving application has taken it): [`send_wait`](Self::send_wait) with
    /// [`Wait::Forever`].
    pub fn send(&self, msg: &[u8]) -> Result<(), LinkError> {
        self.send_wait(msg, Wait::Forever)
    }

    /// Sends a message, waiting for credit (and on a synchronous channel for the rendezvous)
    /// as `wait` says. With [`Wait::Never`] it goes only if it fits the credit now, and does
    /// not wait for the rendezvous either. On a synchronous channel a timeout after the
    /// message left means it may still be delivered.
    pub fn send_wait(&self, msg: &[u8], wait: impl Into<Wait>) -> Result<(), LinkError> {
        let wait = wait.into();
        self.check_size(msg.len())?;
        let deadline = wait.deadline();
        // Straight from `msg` into the transport when nothing waits ahead of it and the
        // credit allows (no copy into the connection's output first).
        let seq = match self.handle.driver.send_in_place(self.id, msg) {
            Some(r) => r?,
            None => self.queue(deadline, &[msg])?,
        };
        self.rendezvous(seq, wait)
    }

    /// Sends one message made of `parts` joined (a header and a body, say), without joining
    /// them first, waiting as `wait` says (as [`send_wait`](Self::send_wait)). A sender that
    /// must not wait, such as a task, passes [`Wait::Never`].
    pub fn send_parts(&self, parts: &[&[u8]], wait: impl Into<Wait>) -> Result<(), LinkError> {
        let wait = wait.into();
        self.check_size(parts.iter().map(|p| p.len()).sum())?;
        let seq = match self.handle.driver.send_direct(self.id, &[], parts) {
            Some(r) => r?,
            None => self.queue(wait.deadline(), parts)?,
        };
        self.rendezvous(seq, wait)
    }

    fn check_size(&self, len: usize) -> Result<(), LinkError> {
        if len as u64 > self.options.max_message {
            return Err(LinkError::TooLarge {
                len,
                max: self.options.max_message,
            });
        }
        Ok(())
    }

    /// Queues one message made of `parts` joined once credit allows, waiting until
    /// `deadline`; returns its sequence number.
    fn queue(&self, deadline: Deadline, parts: &[&[u8]]) -> Result<u64, LinkError> {
        self.handle
            .driver
            .wait(deadline, |st| match st.conn.send_parts(self.id, parts) {
                Ok(seq) => Some(Ok(seq)),
                Err(CallError::Blocked) => None,
                Err(e) => Some(Err(st.call_error(e))),
            })
    }

    /// On a synchronous channel, waits until the receiving application has taken message
    /// `seq` (not at all under [`Wait::Never`]).
    fn rendezvous(&self, seq: u64, wait: Wait) -> Result<(), LinkError> {
        let d = &self.handle.driver;
        if self.options.send_mode == SendMode::Sync && wait != Wait::Never {
            d.wait(wait.deadline(), |st| match st.conn.delivered(self.id) {
                Ok(n) if n >= seq => Some(Ok(())),
                Ok(_) => None,
                Err(e) => Some(Err(st.call_error(e))),
            })?;
        }
        Ok(())
    }

    /// Sends several messages with one lock and one transport write per credit window
    /// (buffered publication); waits for credit as [`send`](Self::send) does, and on a
    /// synchronous channel for the last message's rendezvous.
    pub fn send_batch(&self, msgs: &[&[u8]]) -> Result<(), LinkError> {
        if let Some(m) = msgs
            .iter()
            .find(|m| m.len() as u64 > self.options.max_message)
        {
            return Err(LinkError::TooLarge {
                len: m.len(),
                max: self.options.max_message,
            });
        }
        let d = &self.handle.driver;
        let mut next = 0;
        let mut seq = 0;
        while next < msgs.len() {
            seq = d.wait(Deadline::Never, |st| {
                let mut last = None;
                while next < msgs.len() {
                    match st.conn.send(self.id, msgs[next]) {
                        Ok(s) => {
                            last = Some(s);
                            next += 1;
                        }
                        Err(CallError::Blocked) => break,
                        Err(e) => return Some(Err(st.call_error(e))),
                    }
                }
                last.map(Ok)
            })?;
        }
        if self.options.send_mode == SendMode::Sync && !msgs.is_empty() {
            d.wait(Deadline::Never, |st| match st.conn.delivered(self.id) {
                Ok(n) if n >= seq => Some(Ok(())),
                Ok(_) => None,
                Err(e) => Some(Err(st.call_error(e))),
            })?;
        }
        Ok(())
    }

    /// Waits for at least one message and appends up to `max` that are ready to `out` under
    /// one lock; returns how many (0 once the peer ended the stream and all were taken).
    /// Loans are copied out (use [`recv_message`](Self::recv_message) to read them in place).
    pub fn recv_batch(&self, max: usize, out: &mut Vec<Vec<u8>>) -> Result<usize, LinkError> {
        self.recv_each(max, |m| out.push(m.to_vec()))
    }

    /// Waits for at least one message, then shows up to `max` that are ready to `f` in place,
    /// in order, under one lock and without copying or allocating; returns how many (0 once
    /// the peer ended the stream and all were taken). Loans are shown in place too and go back
    /// to the pool after `f` returns.
    pub fn recv_each(&self, max: usize, mut f: impl FnMut(&[u8])) -> Result<usize, LinkError> {
        let max = max.max(1);
        self.handle.driver.wait(Deadline::Never, |st| {
            let mut n = 0;
            while n < max {
                // Byte messages in one sweep of the connection; a loan (or one whose buffer is
                // still on its way) one at a time.
                if st.held.is_empty() || !st.held.contains_key(&self.id) {
                    match st.conn.recv_each(self.id, max - n, &mut f) {
                        Ok((k, BatchEnd::Loan)) => n += k,
                        Ok((k, BatchEnd::Full | BatchEnd::Empty)) => {
                            n += k;
                            break;
                        }
                        Ok((k, BatchEnd::End)) => {
                            n += k;
                            if n == 0 {
                                return Some(Ok(0));
                            }
                            break;
                        }
                        Err(e) if n == 0 => return Some(Err(st.call_error(e))),
                        Err(_) => break,
                    }
                    if n == max {
                        break;
                    }
                }
                match crate::loan::take_ref(st, self.id) {
                    Some(Ok(Some(Taken::Bytes(m)))) => f(m),
                    Some(Ok(Some(Taken::Loan(l)))) => f(&l),
                    Some(Ok(None)) if n == 0 => return Some(Ok(0)),
                    Some(Err(e)) if n == 0 => return Some(Err(e)),
                    Some(_) | None => break,
                }
                n += 1;
            }
            (n > 0).then_some(Ok(n))
        })
    }

    /// Receives the next message into `buf` (replacing its contents), waiting for it as
    /// `wait` says; false once the peer ended the stream. Allocates nothing once `buf` is
    /// large enough (a loan is copied into `buf` and goes back to the pool).
    pub fn recv_into(&self, buf: &mut Vec<u8>, wait: impl Into<Wait>) -> Result<bool, LinkError> {
        self.recv_into_until(buf, 0, wait.into().deadline())
    }

    /// Like [`recv_into`](Self::recv_into), with the message at `buf[front..]` after `front`
    /// zero bytes: room for a header of the receiver's own in front of it. The channel then
    /// reassembles its next messages at that offset too, so that a message of several packets
    /// still comes by exchanging buffers, not by copying (an engine's `host-in` takes such
    /// buffers into its pool whole; see `offhost_proto::Connection::recv_into_at`). The
    /// `front` bytes are part of every such buffer: keep it to a header's size.
    pub fn recv_into_at(
        &self,
        buf: &mut Vec<u8>,
        front: usize,
        wait: impl Into<Wait>,
    ) -> Result<bool, LinkError> {
        self.recv_into_until(buf, front, wait.into().deadline())
    }

    fn recv_into_until(
        &self,
        buf: &mut Vec<u8>,
        front: usize,
        deadline: Deadline,
    ) -> Result<bool, LinkError> {
        let d = &self.handle.driver;
        if d.receive_quick(self.id, buf, front, deadline) {
            return Ok(true);
        }
        let arrived = d.wait(deadline, |st| {
            crate::loan::receive_into(d, st, self.id, buf, front)
        })?;
        Ok(match arrived {
            None => false,
            Some(Arrived::Copied) => true,
            Some(Arrived::Loan(l)) => {
                offhost_proto::put_at(buf, front, &l);
                true
            }
        })
    }

    /// Receives the next message, waiting for it; `None` once the peer ended the stream:
    /// [`recv_wait`](Self::recv_wait) with [`Wait::Forever`].
    pub fn recv(&self) -> Result<Option<Vec<u8>>, LinkError> {
        self.recv_until(Deadline::Never)
    }

    /// Receives the next message, waiting for it as `wait` says; `None` once the peer ended
    /// the stream.
    pub fn recv_wait(&self, wait: impl Into<Wait>) -> Result<Option<Vec<u8>>, LinkError> {
        self.recv_until(wait.into().deadline())
    }

    fn recv_until(&self, deadline: Deadline) -> Result<Option<Vec<u8>>, LinkError> {
        let d = &self.handle.driver;
        let mut quick = Vec::new();
        if d.receive_quick(self.id, &mut quick, 0, deadline) {
            return Ok(Some(quick));
        }
        let m = d.wait(deadline, |st| crate::loan::receive_message(d, st, self.id))?;
        Ok(m.map(crate::loan::Message::into_vec))
    }

    /// Ends this side's sending direction: the peer receives end of stream after the messages
    /// already sent. Receiving goes on. Closing twice is harmless.
    pub fn close(&self) -> Result<(), LinkError> {
        let d = &self.handle.driver;
        let mut st = d.lock();
        let r = st.conn.close(self.id).map_err(|e| st.call_error(e));
        drop(d.flush(st));
        r
    }

    /// Refuses or resets this channel (one the peer opened, say, that this side has no
    /// budget to serve): the peer's calls on it fail with `reason` (name the limit and the flag
    /// that raises it); the session and its other channels go on.
    pub fn refuse(&self, reason: &str) -> Result<(), LinkError> {
        let d = &self.handle.driver;
        let mut st = d.lock();
        let r = st
            .conn
            .reset(self.id, offhost_proto::CODE_REFUSED, reason)
            .map_err(|e| st.call_error(e));
        drop(d.flush(st));
        r
    }

    /// Whether nobody can receive on this channel's other side any more: its session ended
    /// (the peer said goodbye, its connection closed or failed, or this side closed the
    /// session), as far as this side's readers have seen. A peer that only ended its
    /// sending direction ([`close`](Self::close)) is not gone: it may still be waiting for
    /// an answer. Takes the session's lock; reads nothing itself.
    pub fn peer_is_gone(&self) -> bool {
        let st = self.handle.driver.lock();
        st.dead.is_some() || st.shutdown || st.conn.peer_closed()
    }

    /// A [`std::io::Read`] over the messages of this channel.
    pub fn reader(&self) -> crate::io::ChannelReader<'_> {
        crate::io::ChannelReader::new(self)
    }

    /// A [`std::io::Write`] that sends the bytes written as messages of at most the channel's
    /// maximum message size (and at most 1 MiB).
    pub fn writer(&self) -> crate::io::ChannelWriter<'_> {
        crate::io::ChannelWriter::new(self)
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        // The session may be gone already; a drop has no one to report to.
        let _ = self.close();
    }
}
