//! Mailboxes: where messages for a node's channels wait for its hosts' posted receives.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::spares::Spares;
use crate::peer::{Deliver, DeliverError, ErrorCode, Failure, Notify};

/// Where a host's receives and sends end: the engine writes completion records into the host's
/// ring, an in-host queue keeps them in memory. Called outside the router's lock; any number
/// of calls, then [`Notify::flush`].
pub trait HostSink: Notify {
    /// Receive `id` on `handle` ended: with a message, at the end of its channel (`Ok(None)`),
    /// or failed. False when the host is gone and the message was not taken (the router then
    /// gives it to the next receive).
    fn received(&self, handle: u32, id: u64, result: Result<Option<&[u8]>, Failure>) -> bool;
}

/// A receive a host posted, waiting for a message.
pub struct Posted {
    /// Where its completion goes.
    pub sink: Arc<dyn HostSink>,
    /// Which host posted it (to cancel a host's receives).
    pub owner: u64,
    /// The host's handle.
    pub handle: u32,
    /// The submission id.
    pub id: u64,
    /// The largest message it takes (0: any).
    pub max: u32,
}

/// A local send waiting for room in a full mailbox.
struct Waiting {
    /// Which host sent it (its sends go when it does).
    owner: u64,
    msg: Vec<u8>,
    notify: Arc<dyn Notify>,
    handle: u32,
    token: u64,
}

#[derive(Default)]
struct Mailbox {
    queued: VecDeque<Vec<u8>>,
    bytes: usize,
    posted: VecDeque<Posted>,
    waiting: VecDeque<Waiting>,
}

/// Bounds of a router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouterLimits {
    /// Channels (mailboxes) at most.
    pub mailboxes: usize,
    /// Bytes a mailbox queues before senders wait (one message is always taken, if the
    /// router's total allows it).
    pub mailbox_bytes: usize,
    /// Bytes all mailboxes together queue before senders wait (one message is always taken
    /// when they are all empty).
    pub total_bytes: usize,
}

impl Default for RouterLimits {
    fn default() -> Self {
        RouterLimits {
            mailboxes: 1024,
            mailbox_bytes: 8 << 20,
            total_bytes: 256 << 20,
        }
    }
}

/// A node's mailboxes, one per channel name: messages from peers and local hosts meet the
/// receives hosts post. A message goes to the oldest posted receive of its channel, or waits
/// in the mailbox (bounded: a peer's sender then waits, which stops the link's credit for
/// that stream; a local sender's completion waits).
pub struct Router {
    st: Mutex<HashMap<String, Mailbox>>,
    room: Condvar,
    limits: RouterLimits,
    /// Bytes queued in all mailboxes (changed only under `st`'s lock, with the mailboxes').
    total: AtomicUsize,
    /// A local send waits for room in the total, not in its own mailbox: a receive from any
    /// mailbox may let it in (changed under `st`'s lock).
    waiting_on_total: AtomicBool,
    /// Buffers of messages that waited in a mailbox, for the next ones that wait.
    spares: Spares,
}

/// Spare message buffers a router keeps: as many as a stream of messages in flight needs.
const SPARE_COUNT: usize = 64;

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// A receive that ended: with a message, at the end of its channel (`None`), or failed.
type Got = (Posted, Result<Option<Vec<u8>>, Failure>);
/// A local send that ended: notifier, handle, token, length, result.
type Sent = (Arc<dyn Notify>, u32, u64, u64, Result<u64, Failure>);

/// Completions to make once the lock is released.
#[derive(Default)]
struct After {
    got: Vec<Got>,
    sent: Vec<Sent>,
}

impl After {
    /// Makes the completions; true unless the delivered message's host was gone.
    fn run(self, delivered: Option<(Posted, &[u8])>) -> bool {
        let mut sinks: Vec<Arc<dyn Notify>> = Vec::new();
        let mut note = |n: Arc<dyn Notify>| {
            if !sinks.iter().any(|s| Arc::ptr_eq(s, &n)) {
                sinks.push(n);
            }
        };
        for (p, r) in self.got {
            p.sink.received(
                p.handle,
                p.id,
                r.as_ref().map(|m| m.as_deref()).map_err(Clone::clone),
            );
            note(p.sink.clone());
        }
        let mut taken = true;
        if let Some((p, msg)) = delivered {
            taken = p.sink.received(p.handle, p.id, Ok(Some(msg)));
            if taken {
                note(p.sink.clone());
            }
        }
        for (n, h, t, len, r) in self.sent {
            n.done(h, t, len, r);
            note(n);
        }
        for s in sinks {
            s.flush();
        }
        taken
    }
}

fn too_large(len: usize, max: u32) -> Failure {
    Failure::new(
        ErrorCode::TooLarge,
        format!("message of {len} bytes, the receive takes {max}"),
    )
}

impl Router {
    /// An empty router.
    pub fn new(limits: RouterLimits) -> Router {
        Router {
            st: Mutex::new(HashMap::new()),
            room: Condvar::new(),
            // At most a quarter of one mailbox's bytes sits idle in spares.
            spares: Spares::new(SPARE_COUNT, limits.mailbox_bytes / 4),
            limits,
            total: AtomicUsize::new(0),
            waiting_on_total: AtomicBool::new(false),
        }
    }

    /// Whether `len` more bytes fit the router's total: they do when nothing is queued.
    fn fits_total(&self, len: usize) -> bool {
        let total = self.total.load(Relaxed);
        total == 0 || total + len <= self.limits.total_bytes
    }

    /// Whether a message of `len` bytes may join `mb` now.
    fn room_for(&self, mb: &Mailbox, len: usize) -> bool {
        (mb.queued.is_empty() || mb.bytes + len <= self.limits.mailbox_bytes)
            && self.fits_total(len)
    }

    /// Counts `len` bytes into (`add`) or out of `mb` and the total.
    fn count(&self, mb: &mut Mailbox, len: usize, add: bool) {
        if add {
            mb.bytes += len;
            self.total.fetch_add(len, Relaxed);
        } else {
            mb.bytes -= len;
            self.total.fetch_sub(len, Relaxed);
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Mailbox>> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn mailbox<'a>(
        &self,
        boxes: &'a mut HashMap<String, Mailbox>,
        channel: &str,
    ) -> Result<&'a mut Mailbox, DeliverError> {
        if !boxes.contains_key(channel) {
            if boxes.len() >= self.limits.mailboxes {
                return Err(DeliverError::OverLimit {
                    what: format!("{} channels have mailboxes", boxes.len()),
                    over: offhost_units::OverLimit::new(
                        offhost_units::Limit::MaxMailboxes,
                        self.limits.mailboxes,
                    ),
                });
            }
            boxes.insert(channel.to_owned(), Mailbox::default());
        }
        Ok(boxes.get_mut(channel).expect("inserted above"))
    }

    /// The first posted receive that takes `len` bytes; those that cannot take it fail.
    fn take_posted(mb: &mut Mailbox, len: usize, after: &mut After) -> Option<Posted> {
        while let Some(p) = mb.posted.pop_front() {
            if p.max != 0 && len > p.max as usize {
                let f = too_large(len, p.max);
                after.got.push((p, Err(f)));
                continue;
            }
            return Some(p);
        }
        None
    }

    /// Moves waiting local sends into the mailbox while there is room.
    fn admit_waiting(&self, mb: &mut Mailbox, after: &mut After) {
        while let Some(w) = mb.waiting.front() {
            if !self.room_for(mb, w.msg.len()) {
                if !self.fits_total(w.msg.len()) {
                    self.waiting_on_total.store(true, Relaxed);
                }
                break;
            }
            let w = mb.waiting.pop_front().expect("front exists");
            let n = w.msg.len();
            self.count(mb, n, true);
            mb.queued.push_back(w.msg);
            after
                .sent
                .push((w.notify, w.handle, w.token, n as u64, Ok(n as u64)));
        }
    }

    /// Posts a receive on `channel`: completed at once if a message waits, else when one comes.
    pub fn post(&self, channel: &str, p: Posted) {
        let mut after = After::default();
        let mut immediate = None;
        {
            let mut boxes = self.lock();
            match self.mailbox(&mut boxes, channel) {
                Err(e) => after.got.push((p, Err(e.failure()))),
                Ok(mb) => match mb.queued.front() {
                    Some(m) if p.max != 0 && m.len() > p.max as usize => {
                        let f = too_large(m.len(), p.max);
                        after.got.push((p, Err(f)));
                    }
                    Some(_) => {
                        let m = mb.queued.pop_front().expect("front exists");
                        self.count(mb, m.len(), false);
                        self.admit_waiting(mb, &mut after);
                        immediate = Some((p, m));
                        self.room.notify_all();
                    }
                    // Nothing queued, but a local send waits for room in the total (mailboxes
                    // nobody reads may hold all of it): it goes to this receive directly, as
                    // it would have had the receive come first.
                    None => match mb.waiting.front() {
                        Some(w) if p.max != 0 && w.msg.len() > p.max as usize => {
                            let f = too_large(w.msg.len(), p.max);
                            after.got.push((p, Err(f)));
                        }
                        Some(_) => {
                            let w = mb.waiting.pop_front().expect("front exists");
                            let n = w.msg.len() as u64;
                            after.sent.push((w.notify, w.handle, w.token, n, Ok(n)));
                            self.admit_waiting(mb, &mut after);
                            immediate = Some((p, w.msg));
                        }
                        None => {
                            mb.posted.push_back(p);
                            // A peer's message waiting for room in the total goes to this
                            // receive directly, now rather than at its next look.
                            self.room.notify_all();
                        }
                    },
                },
            }
            // Room in the total: local sends waiting for it in other mailboxes may go in.
            if immediate.is_some() && self.waiting_on_total.swap(false, Relaxed) {
                for mb in boxes.values_mut() {
                    self.admit_waiting(mb, &mut after);
                }
            }
        }
        match immediate {
            Some((p, m)) => {
                if after.run(Some((p, &m))) {
                    self.spares.give(m);
                } else {
                    // The posting host is gone already: the message waits for the next one.
                    let mut boxes = self.lock();
                    if let Ok(mb) = self.mailbox(&mut boxes, channel) {
                        self.count(mb, m.len(), true);
                        mb.queued.push_front(m);
                    }
                }
            }
            None => {
                after.run(None);
            }
        }
    }

    /// Ends the posted receives of `owner` (on `handle`, or all of them): with end of channel
    /// when `end`, silently otherwise (the host is gone). When the host is gone (`handle`
    /// `None`), its sends still waiting for room in a full mailbox go too: nobody is left to
    /// be told of them, and they must not hold its memory.
    pub fn cancel(&self, owner: u64, handle: Option<u32>, end: bool) {
        let mut after = After::default();
        {
            let mut boxes = self.lock();
            for mb in boxes.values_mut() {
                if handle.is_none() {
                    mb.waiting.retain(|w| w.owner != owner);
                }
                let (gone, keep): (Vec<Posted>, Vec<Posted>) = mb
                    .posted
                    .drain(..)
                    .partition(|p| p.owner == owner && handle.is_none_or(|h| p.handle == h));
                mb.posted = keep.into();
                if end {
                    after.got.extend(gone.into_iter().map(|p| (p, Ok(None))));
                }
            }
            boxes.retain(|_, mb| {
                !mb.queued.is_empty() || !mb.posted.is_empty() || !mb.waiting.is_empty()
            });
        }
        after.run(None);
    }

    /// A message from this node for `channel`: to a posted receive, into the mailbox, or
    /// waiting for room; `notify` is told when it is in (never waits). `owner` is the sending
    /// host: its sends still waiting go when it does ([`cancel`](Self::cancel)).
    pub fn deliver_local(
        &self,
        channel: &str,
        msg: Vec<u8>,
        owner: u64,
        notify: Arc<dyn Notify>,
        handle: u32,
        token: u64,
    ) {
        let n = msg.len() as u64;
        loop {
            let mut after = After::default();
            let direct = {
                let mut boxes = self.lock();
                let mb = match self.mailbox(&mut boxes, channel) {
                    Ok(mb) => mb,
                    Err(e) => {
                        drop(boxes);
                        after
                            .sent
                            .push((notify, handle, token, n, Err(e.failure())));
                        after.run(None);
                        return;
                    }
                };
                let direct = if mb.waiting.is_empty() && mb.queued.is_empty() {
                    Self::take_posted(mb, msg.len(), &mut after)
                } else {
                    None
                };
                if direct.is_none() {
                    mb.waiting.push_back(Waiting {
                        owner,
                        msg,
                        notify,
                        handle,
                        token,
                    });
                    self.admit_waiting(mb, &mut after);
                    drop(boxes);
                    after.run(None);
                    return;
                }
                direct
            };
            if after.run(direct.map(|p| (p, msg.as_slice()))) {
                let mut sent = After::default();
                sent.sent.push((notify, handle, token, n, Ok(n)));
                sent.run(None);
                return;
            }
            // That receive's host is gone: the next one, or the mailbox.
        }
    }

    /// Messages waiting in `channel`'s mailbox.
    pub fn queued(&self, channel: &str) -> usize {
        self.lock().get(channel).map_or(0, |mb| mb.queued.len())
    }

    /// Local sends waiting for room in `channel`'s mailbox.
    pub fn waiting(&self, channel: &str) -> usize {
        self.lock().get(channel).map_or(0, |mb| mb.waiting.len())
    }
}

impl Deliver for Router {
    /// A message from a peer: to a posted receive or into the mailbox, waiting while the
    /// mailbox is full and the link that brought it is `live`.
    fn deliver(
        &self,
        _from: &str,
        channel: &str,
        msg: &[u8],
        live: &dyn Fn() -> bool,
    ) -> Result<(), DeliverError> {
        let mut boxes = self.lock();
        loop {
            let mut after = After::default();
            let mb = self.mailbox(&mut boxes, channel)?;
            if mb.queued.is_empty() && mb.waiting.is_empty() {
                if let Some(p) = Self::take_posted(mb, msg.len(), &mut after) {
                    drop(boxes);
                    if after.run(Some((p, msg))) {
                        return Ok(());
                    }
                    // That receive's host is gone: the next one, or the mailbox.
                    boxes = self.lock();
                    continue;
                }
            }
            if self.room_for(mb, msg.len()) {
                self.count(mb, msg.len(), true);
                mb.queued.push_back(self.spares.copy_of(msg));
                drop(boxes);
                after.run(None);
                return Ok(());
            }
            drop(boxes);
            after.run(None);
            if !live() {
                return Err(DeliverError::LinkDown {
                    channel: channel.to_owned(),
                });
            }
            boxes = self.lock();
            boxes = self
                .room
                .wait_timeout(boxes, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}
