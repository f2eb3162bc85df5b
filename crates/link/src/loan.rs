//! Zero-copy loans on the `shm` transport: borrow a buffer of the shared pool, fill it, send it
//! by descriptor; the receiver reads it in place and it returns to the pool when dropped.

use crate::wait::Wait;
use std::collections::HashMap;

use offhost_proto::{CallError, Incoming, Landed, SendMode};

use crate::channel::Channel;
use crate::driver::{call_error, Deadline, Driver, Fed, State};
use crate::error::LinkError;

/// A buffer of the shared pool, writable in place; send it with [`Channel::send_loan`].
/// Its length starts as the whole buffer; [`set_len`](Self::set_len) trims it.
#[derive(Debug)]
pub struct Loan {
    buf: offhost_shm::Buf,
}

impl Loan {
    /// Size of the whole buffer.
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Sets the message length (at most the capacity).
    pub fn set_len(&mut self, len: usize) -> Result<(), LinkError> {
        self.buf.set_len(len).map_err(|_| LinkError::TooLarge {
            len,
            max: self.capacity() as u64,
        })
    }
}

impl std::ops::Deref for Loan {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf
    }
}

impl std::ops::DerefMut for Loan {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

/// A received message: bytes copied out of the link, or a loan read in place.
#[derive(Debug)]
pub enum Message {
    /// Bytes reassembled from packets.
    Bytes(Vec<u8>),
    /// A buffer of the shared pool; it returns to the pool when dropped.
    Loan(Loan),
}

impl std::ops::Deref for Message {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Message::Bytes(b) => b,
            Message::Loan(l) => l,
        }
    }
}

impl Message {
    /// The bytes as a vector (copies a loan, which then returns to the pool).
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            Message::Bytes(b) => b,
            Message::Loan(l) => l.to_vec(),
        }
    }
}

/// A message taken from a channel: bytes lent by the connection, or a loan.
pub(crate) enum Taken<'a> {
    /// The message's bytes, valid while the state lock is held and nothing else is received.
    Bytes(&'a [u8]),
    /// A buffer of the shared pool.
    Loan(Loan),
}

/// One step of receiving on channel `id`: a message, end of stream, or `None` to wait.
pub(crate) fn take_ref(st: &mut State, id: u32) -> Option<Result<Option<Taken<'_>>, LinkError>> {
    let waiting = held(st, id);
    // The fields apart: the message's bytes borrow the connection only.
    let State {
        conn,
        held,
        loans,
        dead,
        ..
    } = st;
    let peer_closed = conn.peer_closed();
    let (len, token) = match waiting {
        Some(held) => held,
        None => match conn.recv_ref(id) {
            Ok(Incoming::Message(m)) => return Some(Ok(Some(Taken::Bytes(m)))),
            Ok(Incoming::End) => return Some(Ok(None)),
            Ok(Incoming::Empty) => return None,
            Ok(Incoming::Loan { len, token }) => (len, token),
            Err(e) => return Some(Err(call_error(dead, peer_closed, e))),
        },
    };
    loan_of(held, loans, id, len, token).map(|r| r.map(|l| Some(Taken::Loan(l))))
}

/// The loan message taken from channel `id` whose buffer has not arrived yet, if any.
fn held(st: &State, id: u32) -> Option<(u64, u64)> {
    // (Most sessions never hold a loan: skip the hashing then.)
    match st.held.is_empty() {
        true => None,
        false => st.held.get(&id).copied(),
    }
}

/// The buffer of a loan message (`len` bytes, `token`) taken from channel `id`, or `None` to
/// wait for it (the message is held until then).
fn loan_of(
    held: &mut HashMap<u32, (u64, u64)>,
    loans: &mut HashMap<u32, offhost_shm::Buf>,
    id: u32,
    len: u64,
    token: u64,
) -> Option<Result<Loan, LinkError>> {
    let Some(buf) = u32::try_from(token).ok().and_then(|t| loans.remove(&t)) else {
        held.insert(id, (len, token));
        return None;
    };
    held.remove(&id);
    if buf.len() as u64 != len {
        return Some(Err(LinkError::Protocol(
            offhost_proto::ProtoError::MessageTooLong {
                channel: id,
                max: len,
            },
        )));
    }
    Some(Ok(Loan { buf }))
}

/// One step of receiving on channel `id` as an owned message.
pub(crate) fn take_message(st: &mut State, id: u32) -> Option<Result<Option<Message>, LinkError>> {
    let mut buf = Vec::new();
    take_into(st, id, &mut buf, 0).map(|r| {
        r.map(|m| {
            m.map(|a| match a {
                Arrived::Copied => Message::Bytes(buf),
                Arrived::Loan(l) => Message::Loan(l),
            })
        })
    })
}

/// One step of receiving on channel `id` into `buf`: bytes land there (replacing its
/// contents, at `buf[front..]`; a message of several packets by exchanging buffers, see
/// `Connection::recv_into_at`), a loan is handed out as it is.
pub(crate) fn take_into(
    st: &mut State,
    id: u32,
    buf: &mut Vec<u8>,
    front: usize,
) -> Option<Result<Option<Arrived>, LinkError>> {
    let (len, token) = match held(st, id) {
        Some(held) => held,
        None => match st.conn.recv_into_at(id, buf, front) {
            Ok(Landed::Message) => return Some(Ok(Some(Arrived::Copied))),
            Ok(Landed::End) => return Some(Ok(None)),
            Ok(Landed::Empty) => return None,
            Ok(Landed::Loan { len, token }) => (len, token),
            Err(e) => return Some(Err(st.call_error(e))),
        },
    };
    loan_of(&mut st.held, &mut st.loans, id, len, token).map(|r| r.map(|l| Some(Arrived::Loan(l))))
}

/// One step of receiving on channel `id` into `buf` for a waiter: a message that is there, or
/// one that is arriving, taken as it is parsed (see [`Driver::feed_taking`]).
pub(crate) fn receive_into(
    d: &Driver,
    st: &mut State,
    id: u32,
    buf: &mut Vec<u8>,
    front: usize,
) -> Option<Result<Option<Arrived>, LinkError>> {
    if let Some(r) = take_into(st, id, buf, front) {
        return Some(r);
    }
    let fed = d.feed_taking(st, id, &mut crate::driver::copy_into(buf, front));
    match fed {
        Fed::Took => Some(Ok(Some(Arrived::Copied))),
        Fed::Input => take_into(st, id, buf, front),
        Fed::Nothing => None,
    }
}

/// Like [`receive_into`] for an owned message.
pub(crate) fn receive_message(
    d: &Driver,
    st: &mut State,
    id: u32,
) -> Option<Result<Option<Message>, LinkError>> {
    if let Some(r) = take_message(st, id) {
        return Some(r);
    }
    let mut got = None;
    match d.feed_taking(st, id, &mut |m: &[u8]| got = Some(m.to_vec())) {
        Fed::Took => got.map(|m| Ok(Some(Message::Bytes(m)))),
        Fed::Input => take_message(st, id),
        Fed::Nothing => None,
    }
}

/// Where [`Channel::recv_message_into`] put a message.
#[derive(Debug)]
pub enum Arrived {
    /// Its bytes are in the caller's buffer.
    Copied,
    /// It is a loan, read in place; it returns to the pool when dropped.
    Loan(Loan),
}

impl Channel {
    /// Borrows a buffer of the shared pool, waiting for one to be free as `wait` says
    /// (`None`: for ever, `Some(d)`: at most `d`, or a [`Wait`]). [`LinkError::NoLoans`] on
    /// transports other than `shm`.
    pub fn loan(&self, wait: impl Into<Wait>) -> Result<Loan, LinkError> {
        let buf = self.handle.driver.alloc_loan(wait.into().deadline())?;
        Ok(Loan { buf })
    }

    /// Sends a loan by descriptor, without copying its bytes; waits for credit like
    /// [`send`](Self::send) (and for the rendezvous on a synchronous channel).
    pub fn send_loan(&self, loan: Loan) -> Result<(), LinkError> {
        let len = loan.len();
        if len as u64 > self.options().max_message {
            return Err(LinkError::TooLarge {
                len,
                max: self.options().max_message,
            });
        }
        let token = u64::from(loan.buf.index());
        let d = &self.handle.driver;
        let seq = d.wait(Deadline::Never, |st| {
            match st.conn.send_loan(self.id, len, token) {
                Ok(seq) => Some(Ok(seq)),
                Err(CallError::Blocked) => None,
                Err(e) => Some(Err(st.call_error(e))),
            }
        })?;
        d.write_loan(loan.buf)?;
        if self.options().send_mode == SendMode::Sync {
            d.wait(Deadline::Never, |st| match st.conn.delivered(self.id) {
                Ok(n) if n >= seq => Some(Ok(())),
                Ok(_) => None,
                Err(e) => Some(Err(st.call_error(e))),
            })?;
        }
        Ok(())
    }

    /// Receives the next message as it arrived, waiting for it as `wait` says: a loan stays
    /// in shared memory (read in place), other messages are bytes. `None` once the peer ended
    /// the stream.
    pub fn recv_message(&self, wait: impl Into<Wait>) -> Result<Option<Message>, LinkError> {
        let d = &self.handle.driver;
        d.wait(wait.into().deadline(), |st| receive_message(d, st, self.id))
    }

    /// Receives the next message without allocating: bytes are copied into `buf` (replacing
    /// its contents), a loan is returned as it is (read in place). `None` once the peer ended
    /// the stream.
    pub fn recv_message_into(&self, buf: &mut Vec<u8>) -> Result<Option<Arrived>, LinkError> {
        let d = &self.handle.driver;
        if d.receive_quick(self.id, buf, 0, Deadline::Never) {
            return Ok(Some(Arrived::Copied));
        }
        d.wait(Deadline::Never, |st| receive_into(d, st, self.id, buf, 0))
    }
}
