//! Off-host transport for hosts: submission and completion queues (`[Off-host]`'s TN and FN
//! queues), in the spirit of io_uring.
//!
//! A host **pushes** submissions (open a channel to an address, send a message or a loan,
//! post a receive, close), **submits** them, and later **reaps** their completions
//! ([`HostQueue::wait`], [`HostQueue::pop`]): one per submission, with the submission's tag,
//! its outcome and, for a receive, the message. The same API has two implementations:
//!
//! - **off-host** ([`HostQueue::connect`]): the host talks only to its local engine, over a
//!   shared-memory segment (`shm:PATH`). Submissions are records in the host -> engine ring,
//!   completions records in the engine -> host ring ([`offhost_proto::offload`]); large
//!   messages travel in pool buffers. No system call per message while the engine is awake:
//!   [`submit`](HostQueue::submit) publishes every pushed record with one store and rings the
//!   engine's doorbell only if it sleeps; the engine writes completions in batches with one
//!   doorbell per batch, and [`wait`](HostQueue::wait) sleeps only when nothing is ready.
//!   The engine runs the network side ([`crate::peer`]): links, rate and burst, priority,
//!   acknowledgements, failure.
//! - **in-host** ([`HostQueue::in_host`]): the host process runs the same peer links itself,
//!   on its own threads; for comparing the two on the same work.
//!
//! Addresses are `[PEER/]CHANNEL` ([`Address`]). A send completes `Ok(bytes)` once the engine
//! that owns the destination channel has the message (the remote engine acknowledged it, or
//! for a local channel it is in the mailbox); it fails with the reason otherwise (see
//! [`crate::peer`] for what happens when a link fails). A receive completes with the next
//! message of its channel, in the order the channel's mailbox got them.
//!
//! ```no_run
//! # fn main() -> Result<(), offhost_link::offload::QueueError> {
//! use offhost_link::offload::{HostQueue, OpenOptions, RecvSize};
//! let mut q = HostQueue::connect("shm:/run/offhost/engine.sock")?;
//! let ch = q.open("recon/pet", OpenOptions::bulk())?;          // blocking helper
//! for (i, block) in [b"one".as_slice(), b"two"].iter().enumerate() {
//!     q.push_send(ch, block, i as u64)?;                          // no system call
//! }
//! q.push_recv(ch, RecvSize::Any, 99)?;
//! q.submit()?;                                                    // one doorbell at most
//! q.wait(3, None)?;
//! while let Some(c) = q.pop() {
//!     println!("tag {} {:?} {} bytes", c.tag, c.outcome, c.data.len());
//! }
//! # Ok(()) }
//! ```

mod address;
mod book;
mod inhost;
mod offhost;
mod pipe;
mod router;
mod spares;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

pub use address::{Address, AddressError};
pub use offhost_proto::offload::{ErrorCode, Op, QueueLimits};
pub use pipe::{recv_all, send_all};
pub use router::{HostSink, Posted, Router, RouterLimits};

use crate::peer::{Failure, PeerConfig, PeerSetupError, Rate};
use book::{Book, Entry};

/// How a channel is opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Urgent channels never queue behind bulk ones (they ride the urgent lane).
    pub urgent: bool,
    /// Rate and burst the engine holds the channel's sends to.
    pub rate: Option<Rate>,
}

impl OpenOptions {
    /// A bulk channel without a rate limit.
    pub fn bulk() -> OpenOptions {
        OpenOptions::default()
    }

    /// An urgent channel without a rate limit.
    pub fn urgent() -> OpenOptions {
        OpenOptions {
            urgent: true,
            rate: None,
        }
    }

    /// Limits the channel to `bytes_per_sec` with bursts of `burst` bytes.
    pub fn rate(mut self, bytes_per_sec: u64, burst: u64) -> OpenOptions {
        self.rate = Some(Rate {
            bytes_per_sec,
            burst,
        });
        self
    }
}

/// What a receive takes: a message of any size, or at most this many bytes (the buffer it
/// offers; a larger message fails that receive with [`ErrorCode::TooLarge`] and stays for
/// the next one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvSize {
    /// Any message up to the engine's maximum.
    Any,
    /// At most this many bytes.
    Max(u32),
}

/// A channel handle of a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChannelId(pub u32);

/// How a submission ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Done: a send's bytes delivered, a receive's message length, 0 for open and close.
    Ok(u64),
    /// A receive found its channel closed by this host.
    End,
    /// Failed.
    Failed(Failure),
}

/// A received message: copied out of the ring, or a pool buffer lent in place (returned to
/// the engine when dropped).
#[derive(Debug, Default)]
pub enum Data {
    /// No data (every completion but a receive's).
    #[default]
    None,
    /// Bytes of our own.
    Bytes(Vec<u8>),
    /// A shared-memory pool buffer.
    Loan(offhost_shm::Buf),
}

impl std::ops::Deref for Data {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Data::None => &[],
            Data::Bytes(b) => b,
            Data::Loan(b) => b,
        }
    }
}

impl Data {
    /// The bytes as a vector (a loan is copied and returns to the pool).
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            Data::None => Vec::new(),
            Data::Bytes(b) => b,
            Data::Loan(b) => b.to_vec(),
        }
    }
}

/// One completion.
#[derive(Debug)]
pub struct Completion {
    /// The op of the submission.
    pub op: Op,
    /// The submission's tag.
    pub tag: u64,
    /// The submission's channel.
    pub channel: ChannelId,
    /// How it ended.
    pub outcome: Outcome,
    /// A receive's message.
    pub data: Data,
    id: u64,
}

/// A queue call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// The shared-memory link to the engine failed.
    #[error("shared memory: {0}")]
    Shm(#[from] offhost_shm::ShmError),
    /// The engine refused this host (the reason it gave).
    #[error("the engine refused this host: {0}")]
    Refused(String),
    /// The local engine went away; every outstanding submission completed with
    /// [`ErrorCode::EngineGone`].
    #[error("the local engine went away")]
    EngineGone,
    /// The engine wrote a record that does not decode; the queue is closed.
    #[error("bad completion from the engine: {0}")]
    Corrupt(String),
    /// A budget is spent: reap completions first.
    #[error("queue full: {0} at the limit")]
    Full(&'static str),
    /// The handle is not open, or a close was submitted for it.
    #[error("channel handle {0} is not open")]
    BadChannel(u32),
    /// The message is larger than the engine takes.
    #[error("message of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A blocking helper's submission did not complete in time.
    #[error("timed out")]
    Timeout,
    /// A blocking helper's submission failed.
    #[error("{0}")]
    Failed(Failure),
    /// The address does not parse.
    #[error("bad address: {0}")]
    BadAddress(String),
    /// The in-host node's configuration was refused.
    #[error("{0}")]
    Setup(#[from] PeerSetupError),
}

/// A loan for a send: a buffer the message is written into in place (a pool buffer off-host,
/// so the engine sends it from where it lies).
#[derive(Debug)]
pub struct SendLoan {
    kind: LoanKind,
}

#[derive(Debug)]
enum LoanKind {
    Shm(offhost_shm::Buf),
    Heap(Vec<u8>),
}

impl SendLoan {
    /// Sets the message length (at most the capacity).
    pub fn set_len(&mut self, len: usize) -> Result<(), QueueError> {
        let cap = self.capacity();
        if len > cap {
            return Err(QueueError::TooLarge { len, max: cap });
        }
        match &mut self.kind {
            LoanKind::Shm(b) => b
                .set_range(offhost_proto::offload::HEADER, len)
                .map_err(QueueError::Shm),
            LoanKind::Heap(v) => {
                v.resize(len, 0);
                Ok(())
            }
        }
    }

    /// The largest message it holds.
    pub fn capacity(&self) -> usize {
        match &self.kind {
            LoanKind::Shm(b) => b.capacity() - offhost_proto::offload::HEADER,
            LoanKind::Heap(v) => v.capacity(),
        }
    }
}

impl std::ops::Deref for SendLoan {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.kind {
            LoanKind::Shm(b) => b,
            LoanKind::Heap(v) => v,
        }
    }
}

impl std::ops::DerefMut for SendLoan {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.kind {
            LoanKind::Shm(b) => b,
            LoanKind::Heap(v) => v,
        }
    }
}

enum Backend {
    OffHost(offhost::OffHost),
    InHost(inhost::InHost),
}

/// A host's submission and completion queues (see the module doc).
pub struct HostQueue {
    book: Book,
    ready: VecDeque<Completion>,
    backend: Backend,
}

impl std::fmt::Debug for HostQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostQueue")
            .field("mode", &self.mode())
            .field("outstanding", &self.book.outstanding())
            .finish()
    }
}

/// The shared-memory segment an off-host queue makes: 1 MiB rings, 16 pool buffers per side
/// of 1 MiB and a header (so a 1 MiB message fits one), the host sleeping on its doorbell
/// (no spinning: the host's CPU is what off-host saves).
pub fn default_segment() -> offhost_shm::Config {
    offhost_shm::Config {
        ring_bytes: 1 << 20,
        pool_buffers: 16,
        buffer_size: (1 << 20) + 64,
        mode: offhost_shm::Mode::Block,
        spin: Duration::ZERO,
        event_limit: None,
    }
}

impl HostQueue {
    /// Connects to the local engine at `engine` (`shm:PATH` or `shm:@name`) with
    /// [`default_segment`].
    pub fn connect(engine: &str) -> Result<HostQueue, QueueError> {
        Self::connect_with(engine, &default_segment())
    }

    /// Connects to the local engine at `engine` with a segment of `config`.
    pub fn connect_with(
        engine: &str,
        config: &offhost_shm::Config,
    ) -> Result<HostQueue, QueueError> {
        let addr = engine.strip_prefix("shm:").ok_or_else(|| {
            QueueError::BadAddress(format!(
                "{engine:?}: the local engine is reached at shm:PATH"
            ))
        })?;
        let (backend, limits) = offhost::OffHost::connect(addr, config)?;
        Ok(HostQueue {
            book: Book::new(limits),
            ready: VecDeque::new(),
            backend: Backend::OffHost(backend),
        })
    }

    /// A queue whose host runs the peer links itself (the in-host mode), named and configured
    /// by `config`.
    pub fn in_host(config: PeerConfig) -> Result<HostQueue, QueueError> {
        let (backend, limits) = inhost::InHost::new(config)?;
        Ok(HostQueue {
            book: Book::new(limits),
            ready: VecDeque::new(),
            backend: Backend::InHost(backend),
        })
    }

    /// `off-host` or `in-host`.
    pub fn mode(&self) -> &'static str {
        match self.backend {
            Backend::OffHost(_) => "off-host",
            Backend::InHost(_) => "in-host",
        }
    }

    /// The budgets this queue works within.
    pub fn limits(&self) -> QueueLimits {
        self.book.limits
    }

    /// Submissions pushed and not yet reaped.
    pub fn outstanding(&self) -> usize {
        self.book.outstanding()
    }

    /// Bytes of sends pushed and not yet completed.
    pub fn bytes_in_flight(&self) -> u64 {
        self.book.bytes()
    }

    /// Pushes an open of `address` (`[PEER/]CHANNEL`); the handle may be used at once (its
    /// submissions fail if the open does).
    pub fn push_open(
        &mut self,
        address: &str,
        opts: OpenOptions,
        tag: u64,
    ) -> Result<ChannelId, QueueError> {
        self.open_id(address, opts, tag).map(|(ch, _)| ch)
    }

    fn open_id(
        &mut self,
        address: &str,
        opts: OpenOptions,
        tag: u64,
    ) -> Result<(ChannelId, u64), QueueError> {
        Address::parse(address).map_err(|e| QueueError::BadAddress(e.to_string()))?;
        if let Some(r) = opts.rate {
            if r.bytes_per_sec == 0 || r.burst == 0 {
                return Err(QueueError::BadAddress(
                    "a rate needs bytes per second and a burst of at least 1".into(),
                ));
            }
        }
        let handle = self.book.new_handle()?;
        let id = match self.book.insert(Entry {
            tag,
            op: Op::Open,
            handle,
            bytes: 0,
        }) {
            Ok(id) => id,
            Err(e) => {
                self.book.forget(handle);
                return Err(e);
            }
        };
        let r = match &mut self.backend {
            Backend::OffHost(b) => b.open(id, handle, address, opts),
            Backend::InHost(b) => b.open(id, handle, address, opts),
        };
        self.undo_on_error(id, Op::Open, r)
            .map(|()| (ChannelId(handle), id))
    }

    fn undo_on_error(
        &mut self,
        id: u64,
        op: Op,
        r: Result<(), QueueError>,
    ) -> Result<(), QueueError> {
        if r.is_err() {
            if let Some(e) = self.book.take(id, op) {
                if op == Op::Open {
                    self.book.forget(e.handle);
                }
            }
        }
        r
    }

    /// Pushes a send of a copy of `data` on `ch`. Off-host, a message too large for a ring
    /// record is copied into a pool buffer; when none is free this is
    /// [`QueueError::Full`]`("pool buffers")`: reap completions (which bring buffers home)
    /// and push again.
    pub fn push_send(&mut self, ch: ChannelId, data: &[u8], tag: u64) -> Result<(), QueueError> {
        self.send_id(ch, data, tag).map(drop)
    }

    fn send_id(&mut self, ch: ChannelId, data: &[u8], tag: u64) -> Result<u64, QueueError> {
        self.book.check_send(ch.0, data.len())?;
        let id = self.book.insert(Entry {
            tag,
            op: Op::Send,
            handle: ch.0,
            bytes: data.len() as u64,
        })?;
        let r = match &mut self.backend {
            Backend::OffHost(b) => b.send(id, ch.0, data),
            Backend::InHost(b) => b.send(id, ch.0, data.to_vec()),
        };
        self.undo_on_error(id, Op::Send, r).map(|()| id)
    }

    /// A loan of `len` bytes to write a message into (waits for a free pool buffer
    /// off-host).
    pub fn loan(&mut self, len: usize) -> Result<SendLoan, QueueError> {
        self.loan_within(len, None)
    }

    /// Like [`loan`](Self::loan), waiting at most `timeout` for a free pool buffer
    /// ([`QueueError::Timeout`] then).
    pub fn loan_within(
        &mut self,
        len: usize,
        timeout: Option<Duration>,
    ) -> Result<SendLoan, QueueError> {
        let max = self.book.limits.max_message as usize;
        if len > max {
            return Err(QueueError::TooLarge { len, max });
        }
        let mut l = match &mut self.backend {
            Backend::OffHost(b) => SendLoan {
                kind: LoanKind::Shm(b.alloc(timeout)?),
            },
            Backend::InHost(_) => SendLoan {
                kind: LoanKind::Heap(Vec::with_capacity(len)),
            },
        };
        l.set_len(len)?;
        Ok(l)
    }

    /// Pushes a send of a loan's message, without copying it (off-host).
    pub fn push_send_loan(
        &mut self,
        ch: ChannelId,
        loan: SendLoan,
        tag: u64,
    ) -> Result<(), QueueError> {
        self.book.check_send(ch.0, loan.len())?;
        let id = self.book.insert(Entry {
            tag,
            op: Op::Send,
            handle: ch.0,
            bytes: loan.len() as u64,
        })?;
        let r = match (&mut self.backend, loan.kind) {
            (Backend::OffHost(b), LoanKind::Shm(buf)) => b.send_buf(id, ch.0, buf),
            (Backend::OffHost(b), LoanKind::Heap(v)) => b.send(id, ch.0, &v),
            (Backend::InHost(b), LoanKind::Heap(v)) => b.send(id, ch.0, v),
            (Backend::InHost(b), LoanKind::Shm(buf)) => b.send(id, ch.0, buf.to_vec()),
        };
        self.undo_on_error(id, Op::Send, r)
    }

    /// Pushes a receive on `ch`.
    pub fn push_recv(&mut self, ch: ChannelId, size: RecvSize, tag: u64) -> Result<(), QueueError> {
        self.recv_id(ch, size, tag).map(drop)
    }

    fn recv_id(&mut self, ch: ChannelId, size: RecvSize, tag: u64) -> Result<u64, QueueError> {
        self.book.usable(ch.0)?;
        let max = match size {
            RecvSize::Any => 0,
            RecvSize::Max(n) => n.max(1),
        };
        let id = self.book.insert(Entry {
            tag,
            op: Op::Recv,
            handle: ch.0,
            bytes: 0,
        })?;
        let r = match &mut self.backend {
            Backend::OffHost(b) => b.recv(id, ch.0, max),
            Backend::InHost(b) => b.recv(id, ch.0, max),
        };
        self.undo_on_error(id, Op::Recv, r).map(|()| id)
    }

    /// Pushes a close of `ch`: its posted receives end, later pushes on it fail.
    pub fn push_close(&mut self, ch: ChannelId, tag: u64) -> Result<(), QueueError> {
        self.close_id(ch, tag).map(drop)
    }

    fn close_id(&mut self, ch: ChannelId, tag: u64) -> Result<u64, QueueError> {
        self.book.usable(ch.0)?;
        let id = self.book.insert(Entry {
            tag,
            op: Op::Close,
            handle: ch.0,
            bytes: 0,
        })?;
        let r = match &mut self.backend {
            Backend::OffHost(b) => b.close(id, ch.0),
            Backend::InHost(b) => b.close(id, ch.0),
        };
        let r = self.undo_on_error(id, Op::Close, r);
        if r.is_ok() {
            self.book.closing(ch.0);
        }
        r.map(|()| id)
    }

    /// Submits every pushed submission at once (off-host: one publication, a doorbell only
    /// if the engine sleeps). Either way the sends taken together go out together: the first
    /// at once, the small ones after it (up to [`crate::peer::CORK_MAX`]) in one write per
    /// link session ([`crate::peer::SendBatch`]).
    pub fn submit(&mut self) -> Result<(), QueueError> {
        match &mut self.backend {
            Backend::OffHost(b) => b.submit(),
            Backend::InHost(b) => {
                b.submit();
                Ok(())
            }
        }
    }

    /// Waits until at least `min` completions are ready or `timeout` passes (`None`: no
    /// limit), taking every completion that arrived; returns how many are ready. Sleeps only
    /// when none is there. Off-host that sleep is on the completion ring's doorbell with an
    /// event limit: the engine rings it once the completions still wanted (at most the
    /// outstanding submissions) could all be there, so a host that waits for a batch under a
    /// stream wakes once per batch, not once per completion.
    pub fn wait(&mut self, min: usize, timeout: Option<Duration>) -> Result<usize, QueueError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        match &mut self.backend {
            Backend::OffHost(b) => b.reap(&mut self.book, &mut self.ready, min, deadline)?,
            Backend::InHost(b) => b.reap(&mut self.book, &mut self.ready, min, deadline),
        }
        Ok(self.ready.len())
    }

    /// Waits, as [`HostQueue::wait`], the way a host that streams and has run out of room
    /// (window, budget or buffers) should, and returns how many completions are ready.
    /// - Off-host: for a batch, a quarter of the outstanding submissions (at least one). Those
    ///   still in flight keep the link busy while the host sleeps, and under a stream it wakes
    ///   once per batch (the event limit), not once per acknowledgement.
    /// - In-host: for the next completion. The host's own threads run the link and take every
    ///   acknowledgement anyway, so a batch saves no wake-up; and as the host's thread writes
    ///   its sends itself, refilling in bursts only leaves the socket idle between them (about
    ///   5% less throughput at 64 KiB, measured alternating the two in one build).
    pub fn wait_batch(&mut self, timeout: Option<Duration>) -> Result<usize, QueueError> {
        let batch = match self.backend {
            Backend::OffHost(_) => (self.book.outstanding() / 4).max(1),
            Backend::InHost(_) => 1,
        };
        self.wait(self.ready.len() + batch, timeout)
    }

    /// The next ready completion.
    pub fn pop(&mut self) -> Option<Completion> {
        self.ready.pop_front()
    }

    fn wait_for(&mut self, id: u64, timeout: Option<Duration>) -> Result<Completion, QueueError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if let Some(i) = self.ready.iter().position(|c| c.id == id) {
                return Ok(self.ready.remove(i).expect("position found"));
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left.is_some_and(|l| l.is_zero()) {
                return Err(QueueError::Timeout);
            }
            let n = self.ready.len();
            self.wait(n + 1, left)?;
            if self.book.outstanding() == 0 && !self.ready.iter().any(|c| c.id == id) {
                return Err(self.closed_error());
            }
        }
    }

    fn closed_error(&self) -> QueueError {
        match &self.backend {
            Backend::OffHost(b) => b.error(),
            Backend::InHost(_) => QueueError::Timeout,
        }
    }

    /// Opens `address` and waits for the engine's answer.
    pub fn open(&mut self, address: &str, opts: OpenOptions) -> Result<ChannelId, QueueError> {
        let (ch, id) = self.open_id(address, opts, 0)?;
        self.submit()?;
        match self.wait_for(id, Some(Duration::from_secs(30)))?.outcome {
            Outcome::Ok(_) => Ok(ch),
            Outcome::Failed(f) => Err(QueueError::Failed(f)),
            Outcome::End => Err(QueueError::BadChannel(ch.0)),
        }
    }

    /// Sends a copy of `data` and waits until it is delivered (see the module doc); the
    /// bytes delivered.
    pub fn send(&mut self, ch: ChannelId, data: &[u8]) -> Result<u64, QueueError> {
        let id = loop {
            match self.send_id(ch, data, 0) {
                // Wait for earlier submissions to complete (they bring pool buffers home).
                Err(QueueError::Full(what)) => {
                    if self.book.outstanding() == 0 {
                        return Err(QueueError::Full(what));
                    }
                    self.submit()?;
                    let n = self.ready.len();
                    self.wait(n + 1, None)?;
                }
                r => break r?,
            }
        };
        self.submit()?;
        match self.wait_for(id, None)?.outcome {
            Outcome::Ok(n) => Ok(n),
            Outcome::Failed(f) => Err(QueueError::Failed(f)),
            Outcome::End => Err(QueueError::BadChannel(ch.0)),
        }
    }

    /// Receives the next message of `ch`, waiting up to `timeout`; `None` once the channel
    /// was closed.
    pub fn recv(
        &mut self,
        ch: ChannelId,
        timeout: Option<Duration>,
    ) -> Result<Option<Data>, QueueError> {
        let id = self.recv_id(ch, RecvSize::Any, 0)?;
        self.submit()?;
        let c = self.wait_for(id, timeout)?;
        match c.outcome {
            Outcome::Ok(_) => Ok(Some(c.data)),
            Outcome::End => Ok(None),
            Outcome::Failed(f) => Err(QueueError::Failed(f)),
        }
    }

    /// Closes `ch` and waits for it.
    pub fn close(&mut self, ch: ChannelId) -> Result<(), QueueError> {
        let id = self.close_id(ch, 0)?;
        self.submit()?;
        match self.wait_for(id, Some(Duration::from_secs(30)))?.outcome {
            Outcome::Failed(f) => Err(QueueError::Failed(f)),
            _ => Ok(()),
        }
    }
}

/// Turns a finished entry into a completion, keeping the book right (a failed open forgets
/// its handle).
pub(crate) fn complete(
    book: &mut Book,
    e: Entry,
    id: u64,
    outcome: Outcome,
    data: Data,
) -> Completion {
    if e.op == Op::Open && !matches!(outcome, Outcome::Ok(_)) {
        book.forget(e.handle);
    }
    Completion {
        op: e.op,
        tag: e.tag,
        channel: ChannelId(e.handle),
        outcome,
        data,
        id,
    }
}
