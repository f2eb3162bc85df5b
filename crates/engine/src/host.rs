//! Host ports: how the application talks to a running pipeline's `host-in` and `host-out`
//! tasks, in process. (The engine daemon bridges these to network channels.)
//!
//! A [`HostInput`] sends byte messages into a pipeline; the `host-in` task copies them into
//! buffers of its output pool, or, for a message sent in a buffer laid out like the pool's
//! ([`HostInput::front`], [`HostInput::send_quiet_at`]), takes the buffer itself into the pool
//! and gives the pool's storage back as a spare, copying nothing. A [`HostOutput`] receives
//! the buffers that reach a `host-out` task, without copying; holding them holds pool
//! buffers, so a slow host slows the pipeline down instead of growing memory (the closed loop
//! extends into the host).

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, TrySendError};

use crate::backlog::Backlog;
use crate::buffer::Buffer;
pub use crate::host_error::HostError;
use crate::pool::StorageStack;
use crate::queue::Get;
use crate::runq::Waker;
use crate::task::{Context, Status, Task, TaskError};

/// Messages a host may queue for a `host-in` task before `send` waits.
pub const HOST_IN_DEPTH: usize = 64;

/// The least a buffer of `host-in`'s pool counts for in [`HOST_IN_DEPTH`] buffers' worth of
/// bytes, the most a host may queue (see [`HostInput::send`]).
pub const HOST_IN_MIN_BUFFER: usize = 64 << 10;

/// First byte of a message to `host-in whole=true`: more parts of this buffer follow.
pub const MORE: u8 = 1;
/// First byte of a message to `host-in whole=true`: the last (or only) part of a buffer.
pub const LAST: u8 = 0;

/// A message to `host-in`: its buffer, and where in it the message starts.
pub(crate) type Sent = (Vec<u8>, usize);

/// A host-in channel before the host takes it.
pub(crate) struct InPort {
    /// Messages to the task.
    pub(crate) tx: Sender<Sent>,
    /// The task's waker (set at start).
    pub(crate) waker: Arc<OnceLock<Waker>>,
    /// The task's id.
    pub(crate) task: usize,
    /// Where the host leaves the reason its stream broke.
    pub(crate) failure: Failure,
    /// Message buffers the task is done with, for the host to fill again (the one given
    /// back last first, at most [`SPARE_DEPTH`]).
    pub(crate) spare: Arc<StorageStack>,
    /// The task joins the parts of whole buffers (`whole=true`).
    pub(crate) whole: bool,
    /// Where a message goes in its buffer for the task to take the buffer whole (set at
    /// start, from the task's pool; see [`HostInput::front`]).
    pub(crate) front: usize,
    /// Bytes of storage of a buffer of the task's pool (set at start): what a new spare holds.
    pub(crate) storage: usize,
    /// Bytes of data a buffer of the task's pool holds (set at start).
    pub(crate) size: usize,
    /// Bytes queued to the task.
    pub(crate) backlog: Arc<Backlog>,
}

/// Message buffers kept for reuse between a host and its `host-in` task: as many as may be
/// queued, and a few more.
pub(crate) const SPARE_DEPTH: usize = HOST_IN_DEPTH + 4;

/// Why a stream broke, set once by the side that saw it.
pub(crate) type Failure = Arc<OnceLock<String>>;

/// The task to wake when a buffer reaches a `host-out`: a task of the same pipeline that
/// reads it (a call to its own pipeline's service, see `call.rs`); none for a host,
/// which waits on the channel itself.
pub(crate) type OutWaker = Arc<Mutex<Option<Waker>>>;

/// A host-out channel before the host takes it.
pub(crate) struct OutPort {
    /// The task's buffers.
    pub(crate) rx: Receiver<Buffer>,
    /// They cross a link whole (`whole=true`).
    pub(crate) whole: bool,
    /// The task's id.
    pub(crate) task: usize,
    /// Whom the task wakes when it hands over buffers.
    pub(crate) reader: OutWaker,
}

/// The host's end of a `host-in` task.
pub struct HostInput {
    tx: Option<Sender<Sent>>,
    waker: Arc<OnceLock<Waker>>,
    failure: Failure,
    spare: Arc<StorageStack>,
    front: usize,
    storage: usize,
    size: usize,
    backlog: Arc<Backlog>,
    /// Bytes of message buffers that may be queued at once (one message always may).
    max_queued: usize,
}

impl HostInput {
    pub(crate) fn new(port: InPort) -> HostInput {
        HostInput {
            tx: Some(port.tx),
            waker: port.waker,
            failure: port.failure,
            spare: port.spare,
            front: port.front,
            storage: port.storage,
            size: port.size,
            backlog: port.backlog,
            max_queued: HOST_IN_DEPTH.saturating_mul(port.storage.max(HOST_IN_MIN_BUFFER)),
        }
    }

    /// Bytes of message buffers (their capacity) that may wait for the task at once: those
    /// of [`HOST_IN_DEPTH`] buffers of its pool, each counted as at least
    /// [`HOST_IN_MIN_BUFFER`]. A message over that still goes when nothing else waits.
    pub fn max_queued(&self) -> usize {
        self.max_queued
    }

    /// Bytes of data a buffer of the task's free list holds: the largest buffer it takes
    /// whole (`whole=true`).
    pub fn buffer_size(&self) -> usize {
        self.size
    }

    /// Where a message starts in its buffer for the task to take that buffer into its pool as
    /// it is, without copying (see [`send_quiet_at`](Self::send_quiet_at)): the pool's
    /// headroom, less the part's flag byte for `whole=true`.
    pub fn front(&self) -> usize {
        self.front
    }

    /// An empty message buffer to fill and [`send`](Self::send): one the task is done with
    /// (so a stream of large messages allocates, and faults in, no new memory), or a new one
    /// with room for a pool buffer's storage (so that a message received into it at
    /// [`front`](Self::front) can enter the pool whole).
    pub fn spare(&self) -> Vec<u8> {
        match self.spare.pop() {
            Some((mut v, _)) => {
                v.clear();
                v
            }
            None => Vec::with_capacity(self.storage),
        }
    }

    /// Ends the stream as broken: the task fails with `reason` (naming what broke) instead of
    /// passing on an end of stream, so that a cut stream never looks complete.
    pub fn fail(&mut self, reason: impl Into<String>) {
        let _ = self.failure.set(reason.into());
        self.close();
    }

    /// Wakes the task to take what was sent with [`send_quiet`](Self::send_quiet).
    pub fn wake(&self) {
        if let Some(w) = self.waker.get() {
            w.wake();
        }
    }

    /// Sends one message; waits while the task has [`HOST_IN_DEPTH`] messages pending, or
    /// while this one's buffer would take the bytes waiting past
    /// [`max_queued`](Self::max_queued).
    pub fn send(&self, data: impl Into<Vec<u8>>) -> Result<(), HostError> {
        self.send_then((data.into(), 0), true, &|| true)
    }

    /// Like [`send`](Self::send), but looks at `live` at least every 50 ms while it waits
    /// for room, and gives up with [`HostError::GaveUp`] once it says false (for a sender
    /// whose own source went away, such as a link that went down).
    pub fn send_while(
        &self,
        data: impl Into<Vec<u8>>,
        live: &dyn Fn() -> bool,
    ) -> Result<(), HostError> {
        self.send_then((data.into(), 0), true, live)
    }

    /// Sends one message without waking the task: for a sender that has more at once and
    /// calls [`wake`](Self::wake) after the last of them (before it waits for anything), so
    /// that the task is woken once for several messages. A full queue still wakes it.
    pub fn send_quiet(&self, data: impl Into<Vec<u8>>) -> Result<(), HostError> {
        self.send_then((data.into(), 0), false, &|| true)
    }

    /// Like [`send_quiet`](Self::send_quiet) for the message `buf[front..]` (the bytes before
    /// it are not sent). With `front` at [`front`](Self::front), a message that fills at least
    /// half a pool buffer, in a buffer with room for the pool's whole storage (as the spares
    /// are), enters the pool without being copied. A `front` past the end of `buf` makes the
    /// task fail with an error saying so.
    pub fn send_quiet_at(&self, buf: Vec<u8>, front: usize) -> Result<(), HostError> {
        self.send_then((buf, front), false, &|| true)
    }

    /// Sends one message if there is room for it now, and wakes the task; [`HostError::GaveUp`]
    /// (the message not sent) if there is not. For a sender that must not wait: a task.
    pub(crate) fn try_send(&self, data: Vec<u8>) -> Result<(), HostError> {
        self.try_send_back(data).map_err(|(e, _)| e)
    }

    /// Like `try_send` (for a task), giving the message back with the error.
    pub fn try_send_back(&self, data: Vec<u8>) -> Result<(), (HostError, Vec<u8>)> {
        let Some(tx) = self.tx.as_ref() else {
            return Err((HostError::Closed, data));
        };
        let n = data.capacity();
        if let Err(e) = self.backlog.reserve(n, self.max_queued, || {}, &|| false) {
            return Err((e, data));
        }
        match tx.try_send((data, 0)) {
            Ok(()) => {
                self.wake();
                Ok(())
            }
            Err(e) => {
                self.backlog.release(n);
                Err(match e {
                    TrySendError::Full((d, _)) => (HostError::GaveUp, d),
                    TrySendError::Disconnected((d, _)) => (HostError::Closed, d),
                })
            }
        }
    }

    /// A [`Helper`](crate::runq::Helper) of the task's pipeline, to run its tasks on this
    /// thread while it waits for what they put out; `None` before the pipeline starts or
    /// after it ended.
    pub fn helper(&self) -> Option<crate::runq::Helper> {
        self.waker.get().and_then(|w| w.helper())
    }

    fn send_then(&self, data: Sent, wake: bool, live: &dyn Fn() -> bool) -> Result<(), HostError> {
        let tx = self.tx.as_ref().ok_or(HostError::Closed)?;
        // Counted by the memory it holds: the task releases the same count when it takes it.
        let n = data.0.capacity();
        self.backlog
            .reserve(n, self.max_queued, || self.wake(), live)?;
        let mut msg = data;
        loop {
            match tx.send_timeout(msg, Duration::from_millis(50)) {
                Ok(()) => {
                    if wake {
                        self.wake();
                    }
                    return Ok(());
                }
                Err(crossbeam_channel::SendTimeoutError::Timeout(m)) => {
                    if !live() {
                        self.backlog.release(n);
                        return Err(HostError::GaveUp);
                    }
                    // Make sure the task is not asleep on a stale notion of an empty channel.
                    self.wake();
                    msg = m;
                }
                Err(crossbeam_channel::SendTimeoutError::Disconnected(_)) => {
                    return Err(HostError::Closed)
                }
            }
        }
    }

    /// Ends the stream: the task finishes once it has passed on what was sent.
    pub fn close(&mut self) {
        self.tx = None;
        self.wake();
    }
}

impl Drop for HostInput {
    fn drop(&mut self) {
        self.close();
    }
}

/// The host's end of a `host-out` task.
pub struct HostOutput {
    rx: Receiver<Buffer>,
    whole: bool,
    reader: OutWaker,
}

impl HostOutput {
    /// Whether the task said its buffers cross a link whole (`host-out whole=true`): a
    /// daemon then sends each buffer as messages that start with [`MORE`] or [`LAST`], as
    /// `engine-out` does, so that the reader (a `call` task) can join them again. A host
    /// reading in its own process gets whole buffers either way.
    pub fn whole(&self) -> bool {
        self.whole
    }

    /// The next buffer; `Ok(None)` at end of stream; [`HostError::Timeout`] if nothing came.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Option<Buffer>, HostError> {
        match self.rx.recv_timeout(timeout) {
            Ok(b) => Ok(Some(b)),
            Err(RecvTimeoutError::Disconnected) => Ok(None),
            Err(RecvTimeoutError::Timeout) => Err(HostError::Timeout),
        }
    }

    /// The next buffer, waiting as long as it takes; `None` at end of stream.
    pub fn recv(&self) -> Option<Buffer> {
        self.rx.recv().ok()
    }

    /// The next buffer if one is there now: `Some(Some(b))`, `Some(None)` at end of stream,
    /// `None` if nothing is there yet.
    pub fn try_recv(&self) -> Option<Option<Buffer>> {
        match self.rx.try_recv() {
            Ok(b) => Some(Some(b)),
            Err(TryRecvError::Disconnected) => Some(None),
            Err(TryRecvError::Empty) => None,
        }
    }

    /// How many buffers the task has handed over that [`recv`](Self::recv) has not taken
    /// yet (a service's daemon looks here for answers nobody asked for).
    pub fn waiting(&self) -> usize {
        self.rx.len()
    }

    /// Has the task wake `reader` (a task of the same pipeline) whenever it hands over
    /// buffers, or nobody.
    pub(crate) fn wake_on_buffers(&self, reader: Option<Waker>) {
        *self.reader.lock().unwrap_or_else(|e| e.into_inner()) = reader;
    }
}

/// A `host-in` task for channel `name` of task `task`, and the port the host takes.
pub(crate) fn host_in(name: String, task: usize, whole: bool) -> (HostIn, InPort) {
    let (tx, rx) = crossbeam_channel::bounded(HOST_IN_DEPTH);
    let spare = Arc::new(StorageStack::new(SPARE_DEPTH));
    let failure = Failure::default();
    let backlog = Arc::new(Backlog::default());
    let port = InPort {
        tx,
        waker: Arc::new(OnceLock::new()),
        task,
        failure: failure.clone(),
        spare: spare.clone(),
        whole,
        front: 0,
        storage: 0,
        size: 0,
        backlog: backlog.clone(),
    };
    let task = HostIn {
        rx,
        backlog,
        spare,
        pending: None,
        failure,
        whole,
        joining: None,
        name,
    };
    (task, port)
}

/// A `host-out` task of task id `task`, and the port the host takes.
pub(crate) fn host_out(task: usize, whole: bool) -> (HostOut, OutPort) {
    let (tx, rx) = crossbeam_channel::unbounded();
    let reader = OutWaker::default();
    let port = OutPort {
        rx,
        whole,
        task,
        reader: Arc::clone(&reader),
    };
    (HostOut { tx, reader }, port)
}

impl HostOutput {
    /// The host's end of a `host-out` channel taken from the pipeline's ports.
    pub(crate) fn from_port(p: OutPort) -> HostOutput {
        HostOutput {
            rx: p.rx,
            whole: p.whole,
            reader: p.reader,
        }
    }
}

pub(crate) struct HostIn {
    rx: Receiver<Sent>,
    /// Bytes queued by the host: released as messages are taken, closed when the task ends.
    backlog: Arc<Backlog>,
    /// Where a message's buffer goes once copied out (dropped when the host keeps enough).
    spare: Arc<StorageStack>,
    /// The message being put out, and the offset of what is left of it.
    pending: Option<Sent>,
    failure: Failure,
    /// Buffers cross whole (`whole=true`): each message starts with [`MORE`] or [`LAST`],
    /// and the parts of one buffer are joined into one; a buffer larger than the free list's
    /// is an error.
    whole: bool,
    /// The buffer being joined (`whole=true`).
    joining: Option<crate::buffer::BufMut>,
    name: String,
}

impl HostIn {
    /// `whole=true`: adds one message to the buffer being joined, and puts the buffer out
    /// after its last part.
    fn join(&mut self, cx: &mut Context<'_>, msg: &[u8]) -> Result<Status, TaskError> {
        let Some((&flag, data)) = msg.split_first() else {
            return Err(self.bad("an empty message (every part starts with a MORE or LAST byte)"));
        };
        if flag != MORE && flag != LAST {
            return Err(self.bad(&format!(
                "a part starts with {flag}, not MORE (1) or LAST (0)"
            )));
        }
        if self.joining.is_none() {
            match cx.alloc(0) {
                Some(b) => self.joining = Some(b),
                None => return Ok(Status::Blocked),
            }
        }
        let b = self.joining.as_mut().expect("set above");
        if data.len() > b.remaining() {
            let (have, room) = (b.len(), b.len() + b.remaining());
            return Err(TaskError::Failed(format!(
                "host-in channel '{}': a buffer of more than {} bytes does not fit a buffer of its free list ({room} bytes); give the queue a free list of larger buffers",
                self.name,
                have + data.len()
            )));
        }
        b.unfilled()[..data.len()].copy_from_slice(data);
        b.commit(data.len());
        if flag == LAST {
            let b = self.joining.take().expect("set above");
            cx.put(0, b.freeze());
        }
        self.pending = None;
        Ok(Status::Progress)
    }

    fn bad(&self, what: &str) -> TaskError {
        TaskError::BadInput(format!("host-in channel '{}': {what}", self.name))
    }

    /// Puts out the pending message by taking its buffer into the pool, when it lies there as
    /// a pool buffer's data would (see [`HostInput::send_quiet_at`]); `None` when it does not
    /// (the caller copies it). The pool buffer allocated for it gives its storage to the
    /// spares, so the pool keeps its count of buffers. Taken only when the message fills at
    /// least half the buffer (the rest of the buffer is zeroed, which for a short message
    /// would cost more than the copy), and when its buffer holds at most a quarter more than
    /// a pool buffer's storage (one that once held a larger message would swell the pool
    /// past the memory its budget counted).
    fn adopt(&mut self, cx: &mut Context<'_>) -> Option<Result<Status, TaskError>> {
        let (msg, off) = self.pending.as_ref()?;
        let cfg = cx.pool(0)?.config();
        let start = off + usize::from(self.whole);
        let n = msg.len().checked_sub(start)?;
        let total = cfg.headroom + cfg.size + cfg.tailroom;
        let whole_buffer = !self.whole || (self.joining.is_none() && msg[*off] == LAST);
        if start != cfg.headroom
            || n > cfg.size
            || 2 * n < cfg.size
            || msg.capacity() < total
            || msg.capacity() > total + total / 4
            || !whole_buffer
        {
            return None;
        }
        let Some(mut b) = cx.alloc(0) else {
            return Some(Ok(Status::Blocked));
        };
        let (mut msg, off) = self.pending.take().expect("looked at above");
        msg.resize(total, 0);
        match b.exchange_storage(msg, n) {
            Ok(old) => {
                self.give_cold_spare(cx, old);
                cx.put(0, b.freeze());
                Some(Ok(Status::Progress))
            }
            Err(mut msg) => {
                // Not the pool's layout after all: copied instead.
                msg.truncate(start + n);
                self.pending = Some((msg, off));
                None
            }
        }
    }
}

impl Task for HostIn {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        let r = self.step(cx);
        if !matches!(r, Ok(Status::Blocked | Status::Progress)) {
            // Ended: a host waiting for room would wait for ever.
            self.backlog.close();
        }
        r
    }
}

impl Drop for HostIn {
    fn drop(&mut self) {
        self.backlog.close();
    }
}

impl HostIn {
    /// Keeps a message buffer for the host to fill again, unless it holds more than a
    /// quarter over a pool buffer's storage (one that once held a large message would keep
    /// that memory for as long as it circulates), has less room than that storage (a
    /// message received into it could never enter the pool without a copy, and it would
    /// circulate as long), or enough are kept.
    fn give_spare(&self, cx: &mut Context<'_>, m: Vec<u8>) {
        if self.keeps(cx, &m) {
            self.spare.push(m);
        }
    }

    /// Like [`give_spare`](Self::give_spare) for storage a pool buffer gave up in exchange
    /// for a message's, which has waited in the pool a while: it goes to the bottom, and
    /// the pool takes it back in exchange for the next storage that comes back to it (see
    /// `Pool::trade_with`), so that the host fills the storage freed last.
    fn give_cold_spare(&self, cx: &mut Context<'_>, m: Vec<u8>) {
        if let Some(pool) = cx.pool(0) {
            pool.trade_with(&self.spare);
        }
        if self.keeps(cx, &m) {
            self.spare.push_bottom(m);
        }
    }

    /// Whether a message buffer is worth keeping as a spare (see
    /// [`give_spare`](Self::give_spare)).
    fn keeps(&self, cx: &mut Context<'_>, m: &Vec<u8>) -> bool {
        let Some(cfg) = cx.pool(0).map(|p| p.config()) else {
            return false;
        };
        let total = cfg.headroom + cfg.size + cfg.tailroom;
        (total..=total + total / 4).contains(&m.capacity())
    }

    fn step(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        loop {
            if self.pending.is_none() {
                let got = self.rx.try_recv();
                if let Ok((m, _)) = &got {
                    self.backlog.release(m.capacity());
                }
                match got {
                    Ok((m, front)) if front > m.len() => {
                        return Err(self.bad(&format!(
                            "a message said to start at byte {front} of a buffer of {}",
                            m.len()
                        )))
                    }
                    Ok(m) => self.pending = Some(m),
                    Err(TryRecvError::Empty) => return Ok(Status::Blocked),
                    Err(TryRecvError::Disconnected) => {
                        return match self.failure.get() {
                            Some(why) => Err(TaskError::Failed(format!(
                                "host-in channel '{}': {why}",
                                self.name
                            ))),
                            None => Ok(Status::Done),
                        }
                    }
                }
            }
            match self.adopt(cx) {
                Some(Ok(Status::Progress)) => continue,
                Some(r) => return r,
                None => {}
            }
            if self.whole {
                let (msg, off) = self.pending.take().expect("set above");
                let r = self.join(cx, &msg[off..]);
                if matches!(r, Ok(Status::Blocked)) {
                    self.pending = Some((msg, off));
                } else {
                    self.give_spare(cx, msg);
                }
                match r {
                    Ok(Status::Progress) => continue,
                    other => return other,
                }
            }
            let (msg, off) = self.pending.as_mut().expect("set above");
            if *off == msg.len() {
                if let Some((m, _)) = self.pending.take() {
                    self.give_spare(cx, m);
                }
                continue;
            }
            let Some(mut b) = cx.alloc(0) else {
                return Ok(Status::Blocked);
            };
            let n = (msg.len() - *off).min(b.remaining());
            b.unfilled()[..n].copy_from_slice(&msg[*off..*off + n]);
            b.commit(n);
            *off += n;
            if *off == msg.len() {
                if let Some((m, _)) = self.pending.take() {
                    self.give_spare(cx, m);
                }
            }
            cx.put(0, b.freeze());
        }
    }
}

pub(crate) struct HostOut {
    tx: Sender<Buffer>,
    reader: OutWaker,
}

impl HostOut {
    /// Wakes the task that reads this channel, if one does.
    fn wake_reader(&self) {
        if let Some(w) = &*self.reader.lock().unwrap_or_else(|e| e.into_inner()) {
            w.wake();
        }
    }
}

impl Task for HostOut {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        let mut handed = false;
        let status = loop {
            match cx.get(0) {
                Get::Buf(b) => match self.tx.try_send(b) {
                    Ok(()) => handed = true,
                    // The host went away: stop reading, which ends the branch feeding us.
                    Err(TrySendError::Disconnected(_)) => break Status::Done,
                    Err(TrySendError::Full(_)) => unreachable!("the channel is unbounded"),
                },
                Get::Empty => break Status::Blocked,
                Get::Closed => break Status::Done,
            }
        };
        if handed || status == Status::Done {
            self.wake_reader();
        }
        Ok(status)
    }

    fn finish(&mut self) -> Result<(), TaskError> {
        // The channel ends with the task (its sender goes with it): a reader must look.
        let (tx, _) = crossbeam_channel::bounded(0);
        drop(std::mem::replace(&mut self.tx, tx));
        self.wake_reader();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spares_come_back_last_given_first_and_are_kept_to_their_depth() {
        let spares = StorageStack::new(SPARE_DEPTH);
        let (a, b) = (Vec::<u8>::with_capacity(10), Vec::<u8>::with_capacity(20));
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        spares.push(a);
        spares.push(b);
        assert_eq!(
            spares.pop().map(|(v, _)| v.as_ptr()),
            Some(pb),
            "the one given last"
        );
        assert_eq!(spares.pop().map(|(v, _)| v.as_ptr()), Some(pa));
        assert!(spares.pop().is_none());
        for _ in 0..SPARE_DEPTH + 3 {
            spares.push(Vec::with_capacity(1));
        }
        assert_eq!(spares.len(), SPARE_DEPTH);
    }
}
