//! The off-host queue for C (`offhost_queue_*`): a host's submission and completion queues at
//! its local engine, as calls on Rust types (the exported functions are in `ffi/queue.rs`).
#![forbid(unsafe_code)]
#![allow(non_camel_case_types)]

use std::sync::Mutex;

use offhost_bindings::{code_kind, Error};
use offhost_link::offload::{
    ChannelId, Completion, HostQueue, Op, OpenOptions, Outcome, RecvSize, SendLoan,
};

use crate::api::timeout;
use crate::status::{invalid, offhost_status, set_message};

/// `offhost_completion.op` of an open.
pub const OFFHOST_OP_OPEN: u32 = 1;
/// `offhost_completion.op` of a send.
pub const OFFHOST_OP_SEND: u32 = 2;
/// `offhost_completion.op` of a receive.
pub const OFFHOST_OP_RECV: u32 = 3;
/// `offhost_completion.op` of a close.
pub const OFFHOST_OP_CLOSE: u32 = 4;

/// A host's queues at its local engine (opaque).
pub struct offhost_queue {
    inner: Mutex<State>,
}

struct State {
    q: HostQueue,
    /// A completion `offhost_queue_pop` could not hand out (its message did not fit the
    /// buffer): the next pop's.
    first: Option<Completion>,
}

/// A message being written in place for `offhost_queue_push_send_loan` (opaque): off-host a
/// buffer of the shared pool, which the engine sends from where it lies.
pub struct offhost_send_loan {
    pub(crate) inner: SendLoan,
}

impl offhost_send_loan {
    /// Its bytes, writable.
    pub fn data(&mut self) -> *mut u8 {
        self.inner.as_mut_ptr()
    }

    /// Its length.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }
}

/// How a submission ended (`offhost_queue_pop`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct offhost_completion {
    /// The tag given with the submission.
    pub tag: u64,
    /// A send's bytes delivered, a receive's message length, 0 otherwise.
    pub value: u64,
    /// `OFFHOST_OP_OPEN`, `_SEND`, `_RECV` or `_CLOSE`.
    pub op: u32,
    /// The channel handle.
    pub channel: u32,
    /// `OK`; `END` for a receive whose channel this host closed; else the failure's code,
    /// whose reason `offhost_last_error()` gives right after the pop.
    pub status: offhost_status,
}

/// What a pop found.
pub enum Popped {
    /// No completion is ready.
    Empty,
    /// One, and the length of a receive's message (copied to the buffer).
    Got(offhost_completion, usize),
    /// A receive's message of this many bytes does not fit the buffer; it stays first.
    TooSmall(usize),
}

fn op_code(op: Op) -> u32 {
    match op {
        Op::Open => OFFHOST_OP_OPEN,
        Op::Send => OFFHOST_OP_SEND,
        Op::Recv => OFFHOST_OP_RECV,
        _ => OFFHOST_OP_CLOSE,
    }
}

impl offhost_queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Connects to the local engine at `engine` (`shm:PATH` or `shm:@name`).
    pub fn connect(engine: &str) -> Result<offhost_queue, Error> {
        Ok(offhost_queue {
            inner: Mutex::new(State {
                q: HostQueue::connect(engine)?,
                first: None,
            }),
        })
    }

    /// Opens `address` (`PEER/CHANNEL` or `CHANNEL`) and waits for the engine's answer; a
    /// `rate` above 0 holds the channel to that many bytes a second, bursts of `burst`.
    pub fn open(&self, address: &str, urgent: bool, rate: u64, burst: u64) -> Result<u32, Error> {
        let mut o = if urgent {
            OpenOptions::urgent()
        } else {
            OpenOptions::bulk()
        };
        if rate > 0 {
            o = o.rate(rate, burst.max(1));
        } else if burst > 0 {
            return Err(invalid("burst needs a rate"));
        }
        Ok(self.lock().q.open(address, o)?.0)
    }

    /// Stages a send of a copy of `data`.
    pub fn push_send(&self, ch: u32, data: &[u8], tag: u64) -> Result<(), Error> {
        Ok(self.lock().q.push_send(ChannelId(ch), data, tag)?)
    }

    /// A loan of `len` bytes, waiting at most `timeout_ms` (negative: for ever) for a free
    /// pool buffer.
    pub fn loan(&self, len: usize, timeout_ms: i64) -> Result<offhost_send_loan, Error> {
        let inner = self.lock().q.loan_within(len, timeout(timeout_ms))?;
        Ok(offhost_send_loan { inner })
    }

    /// Stages a send of `loan`'s message, without copying it.
    pub fn push_send_loan(&self, ch: u32, loan: offhost_send_loan, tag: u64) -> Result<(), Error> {
        Ok(self
            .lock()
            .q
            .push_send_loan(ChannelId(ch), loan.inner, tag)?)
    }

    /// Stages a receive of at most `max` bytes (0: any).
    pub fn push_recv(&self, ch: u32, max: u32, tag: u64) -> Result<(), Error> {
        let size = if max == 0 {
            RecvSize::Any
        } else {
            RecvSize::Max(max)
        };
        Ok(self.lock().q.push_recv(ChannelId(ch), size, tag)?)
    }

    /// Stages closing a channel.
    pub fn push_close(&self, ch: u32, tag: u64) -> Result<(), Error> {
        Ok(self.lock().q.push_close(ChannelId(ch), tag)?)
    }

    /// Publishes what was staged.
    pub fn submit(&self) -> Result<(), Error> {
        Ok(self.lock().q.submit()?)
    }

    /// Waits until `min` completions are ready or `timeout_ms` passes (negative: no limit);
    /// how many are ready.
    pub fn wait(&self, min: usize, timeout_ms: i64) -> Result<usize, Error> {
        let mut st = self.lock();
        let held = usize::from(st.first.is_some());
        Ok(st.q.wait(min.saturating_sub(held), timeout(timeout_ms))? + held)
    }

    /// The next ready completion, a receive's message copied into `buf`.
    pub fn pop(&self, buf: &mut [u8]) -> Popped {
        let mut st = self.lock();
        let Some(c) = st.first.take().or_else(|| st.q.pop()) else {
            return Popped::Empty;
        };
        let len = c.data.len();
        if len > buf.len() {
            st.first = Some(c);
            return Popped::TooSmall(len);
        }
        buf[..len].copy_from_slice(&c.data);
        let (status, value) = match &c.outcome {
            Outcome::Ok(n) => (offhost_status::Ok, *n),
            Outcome::End => (offhost_status::End, 0),
            Outcome::Failed(f) => {
                set_message(&f.reason);
                (offhost_status::of(code_kind(f.code)), 0)
            }
        };
        let out = offhost_completion {
            tag: c.tag,
            value,
            op: op_code(c.op),
            channel: c.channel.0,
            status,
        };
        Popped::Got(out, len)
    }
}
