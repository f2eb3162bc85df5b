//! The receiving half of an endpoint and the records it hands out.

use std::sync::Arc;
use std::time::Duration;

use crate::bell;
use crate::endpoint::DESC;
use crate::error::ShmError;
use crate::pool::Buf;
use crate::ring;
use crate::ring::{Consumer, RawRecord, KIND_BUF};
use crate::shared::Shared;

/// The next record of `ring` if one is ready (a function of the fields, so that a wait on
/// `shared` can peek at `ring` without cloning the `Arc`).
fn peek_in(shared: &Shared, ring: &mut Consumer) -> Result<Option<RawRecord>, ShmError> {
    shared.check()?;
    match ring.peek() {
        Ok(Some(r)) => Ok(Some(r)),
        Ok(None) => {
            // Running dry: publish what we consumed so the peer sees all the room there is.
            if ring.publish() {
                shared.wake_peer(false);
            }
            Ok(None)
        }
        Err(e) => Err(shared.latch(e)),
    }
}

/// An event limit in doorbell units: the ring bytes that `records` records of at least
/// `min_len` payload bytes take at least (inline or as a buffer descriptor, whichever is
/// smaller), capped at half a ring of `cap` bytes so that it can always be reached.
fn want_units(records: usize, min_len: usize, cap: u64) -> u32 {
    let least = ring::padded(min_len.min(DESC));
    let bytes = (records as u64).saturating_mul(least).min(cap / 2);
    (bytes / bell::WANT_UNIT).min(u64::from(bell::WANT_MAX)) as u32
}

/// Interrupt coalescing for a receiver's waits ([`Receiver::set_event_limit`]): sleep until
/// `records` records of at least `min_len` payload bytes could be ready, or `delay` has
/// passed with at least one there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventLimit {
    /// Records to wait for (at least 1; 1 is a wake-up per publication, as without a limit).
    pub records: usize,
    /// Payload bytes of the smallest record counted (0: any).
    pub min_len: usize,
    /// The longest a record that has arrived waits for the others (above zero).
    pub delay: Duration,
}

impl EventLimit {
    /// The delay when none is written: how long a lone record may wait for others.
    pub const DEFAULT_DELAY: Duration = Duration::from_millis(1);
}

impl std::fmt::Display for EventLimit {
    /// As [`FromStr`](std::str::FromStr) reads it back (the delay in ns, any record length).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},{}ns", self.records, self.delay.as_nanos())
    }
}

impl std::str::FromStr for EventLimit {
    type Err = String;

    /// `RECORDS` or `RECORDS,DELAY` (`8`, `32,200us`; the delay defaults to
    /// [`EventLimit::DEFAULT_DELAY`]); records of any length count.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (n, delay) = match s.split_once(',') {
            Some((n, d)) => {
                let d = offhost_units::parse_duration(d).map_err(|e| format!("{s}: {e}"))?;
                (n, d)
            }
            None => (s, Self::DEFAULT_DELAY),
        };
        let records = n
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&r| r >= 1)
            .ok_or_else(|| {
                format!("{s}: expected RECORDS or RECORDS,DELAY, records a whole number from 1 (8, 32,200us)")
            })?;
        if delay.is_zero() || delay > Duration::from_secs(1) {
            return Err(format!("{s}: the delay must be above zero and at most 1s"));
        }
        Ok(EventLimit {
            records,
            min_len: 0,
            delay,
        })
    }
}

/// The receiving half: reads records from the incoming ring in place.
pub struct Receiver {
    shared: Arc<Shared>,
    ring: Consumer,
    limit: Option<EventLimit>,
}

/// Waits on `shared`'s data doorbell as `Shared::wait` does, under `limit` when set: each
/// sleep asks for the limit's records and lasts at most its delay, after which whatever is
/// ready is taken.
fn wait_in<T>(
    shared: &Shared,
    limit: Option<EventLimit>,
    cap: u64,
    timeout: Option<Duration>,
    mut cond: impl FnMut() -> Result<Option<T>, ShmError>,
) -> Result<T, ShmError> {
    let Some(l) = limit else {
        return shared.wait(true, 0, timeout, cond);
    };
    let want = want_units(l.records, l.min_len, cap);
    let deadline = timeout.map(|t| std::time::Instant::now() + t);
    loop {
        let now = std::time::Instant::now();
        let slice = deadline.map_or(l.delay, |d| d.saturating_duration_since(now).min(l.delay));
        match shared.wait(true, want, Some(slice), &mut cond) {
            Err(ShmError::Timeout) if deadline.is_none_or(|d| std::time::Instant::now() < d) => {}
            r => return r,
        }
    }
}

impl Receiver {
    pub(crate) fn new(shared: Arc<Shared>, ring: Consumer) -> Receiver {
        Receiver {
            shared,
            ring,
            limit: None,
        }
    }

    /// Sets the event limit of this receiver's waits ([`recv`](Self::recv),
    /// [`wait_ready`](Self::wait_ready), [`wait_take_inline`](Self::wait_take_inline)); `None`
    /// wakes at each publication. A wait still returns at once when a record is there as it
    /// begins; only its sleeps are coalesced, so a stream costs about one wake-up per
    /// `records` records and a lone record waits up to `delay`. The record count is capped at
    /// half the ring; a zero count or delay is taken as none.
    pub fn set_event_limit(&mut self, limit: Option<EventLimit>) {
        self.limit = limit.filter(|l| l.records > 1 && !l.delay.is_zero());
    }

    /// The event limit set, if any.
    pub fn event_limit(&self) -> Option<EventLimit> {
        self.limit
    }

    /// What this side's waits for records did with their spins
    /// ([`Mode::Adaptive`](crate::Mode::Adaptive)).
    pub fn spin_stats(&self) -> crate::SpinStats {
        self.shared.spin_stats(true)
    }

    fn peek(&mut self) -> Result<Option<RawRecord>, ShmError> {
        peek_in(&self.shared, &mut self.ring)
    }

    fn record(&mut self, raw: RawRecord) -> Result<Record<'_>, ShmError> {
        let buf = if raw.kind == KIND_BUF {
            Some(self.take_buf(&raw).map_err(|e| self.shared.latch(e))?)
        } else {
            None
        };
        Ok(Record { rx: self, raw, buf })
    }

    fn take_buf(&mut self, raw: &RawRecord) -> Result<Buf, ShmError> {
        if raw.len != DESC {
            return Err(ShmError::CorruptPeer(format!(
                "buffer descriptor of {} bytes, expected {DESC}",
                raw.len
            )));
        }
        // SAFETY: the record is unconsumed and its `DESC` payload bytes lie in the ring (checked
        // when it was peeked); one volatile read copies the descriptor out, so the peer changing
        // it afterwards cannot change what we check and use.
        let d: [u8; DESC] = unsafe { raw.read_payload::<DESC>() };
        let word = |i: usize| u32::from_le_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]]);
        let (index, offset, len) = (word(0), word(4), word(8));
        let size = self.shared.seg.layout.buffer_size;
        if u64::from(offset) + u64::from(len) > u64::from(size) {
            return Err(ShmError::CorruptPeer(format!(
                "descriptor range {offset}+{len} of buffer {index} exceeds the buffer size {size}"
            )));
        }
        self.shared
            .pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .received(index)?;
        Ok(Buf::new(self.shared.clone(), index, offset, len))
    }

    /// The next record if one is ready.
    pub fn try_recv(&mut self) -> Result<Option<Record<'_>>, ShmError> {
        match self.peek()? {
            Some(raw) => self.record(raw).map(Some),
            None => Ok(None),
        }
    }

    /// Offers the next record, if it is ready and inline, to `take`, which reads its bytes in
    /// place and says whether it took them: the record is consumed only then, and otherwise
    /// stays the next one to receive. `Some(false)` also when the next record carries a pool
    /// buffer (it is not offered); `None` when no record is ready.
    pub fn try_take_inline(
        &mut self,
        take: impl FnOnce(&[u8]) -> bool,
    ) -> Result<Option<bool>, ShmError> {
        let Some(raw) = self.peek()? else {
            return Ok(None);
        };
        Ok(Some(self.offer(raw, take)))
    }

    /// Like [`try_take_inline`](Self::try_take_inline), waiting up to `timeout` (`None`: for
    /// ever) for the next record first: a receiver that must wait anyway is offered the record
    /// the moment the wait sees it, without a second look at the ring. False when the record
    /// carries a pool buffer or `take` did not take it (it stays the next one to receive);
    /// [`ShmError::Timeout`] when none came, [`ShmError::PeerGone`] as [`recv`](Self::recv).
    pub fn wait_take_inline(
        &mut self,
        timeout: Option<Duration>,
        take: impl FnOnce(&[u8]) -> bool,
    ) -> Result<bool, ShmError> {
        let raw = self.wait_next(timeout)?;
        Ok(self.offer(raw, take))
    }

    /// Waits up to `timeout` for the next record (under the event limit, if set) and returns
    /// it unconsumed.
    fn wait_next(&mut self, timeout: Option<Duration>) -> Result<RawRecord, ShmError> {
        let Receiver {
            shared,
            ring,
            limit,
        } = self;
        let cap = ring.capacity();
        wait_in(shared, *limit, cap, timeout, || peek_in(shared, ring))
    }

    /// Offers `raw`, the next record, to `take` if it is inline, and consumes it if `take`
    /// took it.
    fn offer(&mut self, raw: RawRecord, take: impl FnOnce(&[u8]) -> bool) -> bool {
        if raw.kind == KIND_BUF {
            return false;
        }
        // SAFETY: the record is unconsumed until the `consume` below, after `take` returned,
        // and `take` cannot keep the slice (it is only borrowed for the call).
        if !take(unsafe { raw.payload() }) {
            return false;
        }
        self.consume(&raw);
        true
    }

    /// Consumes `raw`, the next record, waking the peer when that published room it may wait
    /// for.
    fn consume(&mut self, raw: &RawRecord) {
        if self.ring.consume(raw) {
            self.shared.wake_peer(false);
        }
    }

    /// The next record, waiting up to `timeout` (`None`: for ever). Records the peer published
    /// before it closed are still delivered; after them, [`ShmError::PeerGone`].
    pub fn recv(&mut self, timeout: Option<Duration>) -> Result<Record<'_>, ShmError> {
        let raw = self.wait_next(timeout)?;
        self.record(raw)
    }

    /// Waits up to `timeout` (`None`: for ever) until a record is ready, without taking it.
    /// Records the peer published before it closed are ready as usual; after them,
    /// [`ShmError::PeerGone`].
    pub fn wait_ready(&mut self, timeout: Option<Duration>) -> Result<(), ShmError> {
        self.wait_next(timeout).map(|_| ())
    }

    /// As [`Receiver::wait_ready`], with an event limit: when it must sleep, it asks the peer
    /// to wake it only once at least `records` records of at least `min_len` payload bytes each
    /// could be ready (io_uring's `min_complete`), so that a stream costs one wake-up per batch
    /// rather than one per publication. It still returns as soon as it finds any record ready
    /// when it looks; the limit is capped at half the ring. Ask only for records that will
    /// come: otherwise it sleeps until `timeout` or its next liveness check.
    pub fn wait_ready_for(
        &mut self,
        records: usize,
        min_len: usize,
        timeout: Option<Duration>,
    ) -> Result<(), ShmError> {
        let Receiver { shared, ring, .. } = self;
        let want = want_units(records, min_len, ring.capacity());
        shared.wait(true, want, timeout, || {
            Ok(peek_in(shared, ring)?.map(|_| ()))
        })
    }

    /// True when a record is ready (non-blocking).
    pub fn is_ready(&mut self) -> Result<bool, ShmError> {
        Ok(self.peek()?.is_some())
    }

    /// `Err(PeerGone)` once the peer has closed the link or died (non-blocking probe).
    pub fn check_peer(&self) -> Result<(), ShmError> {
        self.shared.check()?;
        self.shared.check_alive()
    }

    /// True when every published record has been received.
    pub fn is_empty(&mut self) -> Result<bool, ShmError> {
        self.ring.is_empty().map_err(|e| self.shared.latch(e))
    }
}

/// A received record, borrowed from the ring (inline) or holding a pool buffer (descriptor).
/// Dropping it consumes it.
pub struct Record<'a> {
    rx: &'a mut Receiver,
    raw: RawRecord,
    buf: Option<Buf>,
}

impl Record<'_> {
    /// The record's bytes: the inline payload, or the data range of the buffer.
    pub fn bytes(&self) -> &[u8] {
        match &self.buf {
            Some(b) => b,
            // SAFETY: the record stays unconsumed while `self` lives (it borrows the receiver).
            None => unsafe { self.raw.payload() },
        }
    }

    /// Length of [`Record::bytes`].
    pub fn len(&self) -> usize {
        self.bytes().len()
    }

    /// True when the record has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when the record carries a pool buffer.
    pub fn is_buf(&self) -> bool {
        self.buf.is_some()
    }

    /// Takes the pool buffer out of a descriptor record (to keep, modify or forward it).
    pub fn take_buf(mut self) -> Option<Buf> {
        self.buf.take()
    }
}

impl Drop for Record<'_> {
    fn drop(&mut self) {
        self.rx.consume(&self.raw);
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if self.ring.publish() {
            self.shared.wake_peer(false);
        }
        self.shared.half_dropped();
    }
}
