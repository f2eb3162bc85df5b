//! The two halves of an endpoint: a [`Sender`] that produces into this side's outgoing ring and
//! allocates from this side's pool, and a [`Receiver`] that consumes the incoming ring.

use rustix::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::Duration;

use crate::config::Mode;
use crate::error::ShmError;
use crate::layout::Layout;
use crate::pool::Buf;
use crate::ring::{Consumer, Producer, RawRecord, KIND_BUF, KIND_INLINE};
use crate::shared::Shared;

/// Bytes of a buffer descriptor record: index, offset, length, reserved (`u32` each, LE).
const DESC: usize = 16;

/// Which end of a segment an endpoint is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The creator of the segment (the connecting side).
    Host,
    /// The side that attached to it (the accepting side).
    Engine,
}

/// A connected end of a shared-memory link: a sender half and a receiver half.
pub struct Endpoint {
    sender: Sender,
    receiver: Receiver,
}

impl Endpoint {
    pub(crate) fn new(shared: Shared) -> Endpoint {
        let shared = Arc::new(shared);
        let side = shared.side;
        let map = &shared.seg.map;
        let l = &shared.seg.layout;
        let ctl = map.control();
        let (tx, rx) = (side, 1 - side);
        // SAFETY: the ring pointers lie in the mapping (the layout was validated against its
        // size), which the `Arc<Shared>` held by each half keeps alive; this side is the only
        // producer of ring `tx` and the only consumer of ring `rx`.
        let (producer, consumer) = unsafe {
            (
                Producer::new(
                    &ctl.rings[tx],
                    map.range(l.ring_off[tx], l.ring_bytes),
                    l.ring_bytes,
                ),
                Consumer::new(
                    &ctl.rings[rx],
                    map.range(l.ring_off[rx], l.ring_bytes),
                    l.ring_bytes,
                ),
            )
        };
        Endpoint {
            sender: Sender {
                shared: shared.clone(),
                ring: producer,
            },
            receiver: Receiver {
                shared,
                ring: consumer,
            },
        }
    }

    /// Splits the endpoint into halves that can live on different threads.
    pub fn split(self) -> (Sender, Receiver) {
        (self.sender, self.receiver)
    }

    /// The sender half.
    pub fn sender(&mut self) -> &mut Sender {
        &mut self.sender
    }

    /// The receiver half.
    pub fn receiver(&mut self) -> &mut Receiver {
        &mut self.receiver
    }

    /// Which end this is.
    pub fn side(&self) -> Side {
        self.sender.side()
    }

    /// The segment's layout (offsets of rings, indices and pool).
    pub fn layout(&self) -> &Layout {
        &self.sender.shared.seg.layout
    }

    /// The memfd behind the segment, for diagnostics and fault-injection tests.
    pub fn segment_fd(&self) -> BorrowedFd<'_> {
        self.sender.shared.seg.fd.as_fd()
    }

    /// Changes how this side waits (both halves).
    pub fn set_mode(&self, mode: Mode, spin: Duration) {
        self.sender.shared.set_mode(mode, spin);
    }

    /// How this side waits: mode and adaptive spin budget.
    pub fn mode(&self) -> (Mode, Duration) {
        self.sender.shared.mode()
    }
}

/// The sending half: writes records into the outgoing ring and allocates pool buffers.
///
/// `write*` stage records without making them visible; [`Sender::flush`] publishes every staged
/// record at once and rings the peer's doorbell once. `try_send`/`send`/`send_batch`/`send_buf`
/// stage and flush.
pub struct Sender {
    shared: Arc<Shared>,
    ring: Producer,
}

impl Sender {
    /// Which end this is.
    pub fn side(&self) -> Side {
        if self.shared.side == 0 {
            Side::Host
        } else {
            Side::Engine
        }
    }

    /// Largest payload of an inline record.
    pub fn max_record(&self) -> usize {
        self.ring.max_record()
    }

    /// Size of each pool buffer.
    pub fn buffer_size(&self) -> usize {
        self.shared.seg.layout.buffer_size as usize
    }

    fn stage(
        &mut self,
        len: usize,
        kind: u32,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<bool, ShmError> {
        self.shared.check()?;
        match self.ring.reserve(len, kind) {
            Ok(Some(slot)) => {
                fill(slot);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(self.shared.latch(e)),
        }
    }

    /// Stages a record filled in place by `fill` (given exactly `len` bytes); false when the ring
    /// has no room now. Errors with [`ShmError::RecordTooLarge`] if it never can.
    pub fn write_with(
        &mut self,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<bool, ShmError> {
        self.stage(len, KIND_INLINE, fill)
    }

    /// Stages a copy of `data`; false when the ring has no room now.
    pub fn write(&mut self, data: &[u8]) -> Result<bool, ShmError> {
        self.stage(data.len(), KIND_INLINE, |slot| slot.copy_from_slice(data))
    }

    /// Stages a descriptor of `buf`; hands the buffer back when the ring has no room now.
    pub fn write_buf(&mut self, buf: Buf) -> Result<Result<(), Buf>, ShmError> {
        if !Arc::ptr_eq(&buf.shared, &self.shared) {
            return Err(ShmError::Handshake(
                "buffer belongs to another segment".into(),
            ));
        }
        let mut desc = [0u8; DESC];
        desc[0..4].copy_from_slice(&buf.index.to_le_bytes());
        desc[4..8].copy_from_slice(&buf.offset.to_le_bytes());
        desc[8..12].copy_from_slice(&buf.len.to_le_bytes());
        if !self.stage(DESC, KIND_BUF, |slot| slot.copy_from_slice(&desc))? {
            return Ok(Err(buf));
        }
        let mut buf = buf;
        self.shared
            .pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .sent(buf.index);
        buf.live = false;
        Ok(Ok(()))
    }

    /// True when staged records wait for [`Sender::flush`].
    pub fn has_staged(&self) -> bool {
        self.ring.pending()
    }

    /// Publishes every staged record and wakes the peer if it sleeps.
    pub fn flush(&mut self) -> Result<(), ShmError> {
        if self.ring.publish() {
            self.shared.wake_peer(true);
        }
        self.shared.check()
    }

    /// Sends `data` now if the ring has room; false otherwise.
    pub fn try_send(&mut self, data: &[u8]) -> Result<bool, ShmError> {
        let ok = self.write(data)?;
        self.flush()?;
        Ok(ok)
    }

    /// Waits for room on this side's send doorbell until `stage` succeeds.
    fn wait_room(
        &mut self,
        timeout: Option<Duration>,
        mut stage: impl FnMut(&mut Producer) -> Result<bool, ShmError>,
    ) -> Result<(), ShmError> {
        self.flush()?;
        let shared = self.shared.clone();
        let ring = &mut self.ring;
        shared.wait(false, timeout, || Ok(stage(ring)?.then_some(())))
    }

    /// Sends a copy of `data`, waiting up to `timeout` (`None`: for ever) for room.
    pub fn send(&mut self, data: &[u8], timeout: Option<Duration>) -> Result<(), ShmError> {
        if !self.write(data)? {
            self.wait_room(timeout, |ring| {
                Ok(ring
                    .reserve(data.len(), KIND_INLINE)?
                    .map(|s| s.copy_from_slice(data))
                    .is_some())
            })?;
        }
        self.flush()
    }

    /// Sends every record of `records` with as few publications as the ring allows (one when
    /// they all fit), waiting up to `timeout` for room each time the ring fills. A record that
    /// can never fit fails the whole call before anything is staged.
    pub fn send_batch(
        &mut self,
        records: &[&[u8]],
        timeout: Option<Duration>,
    ) -> Result<(), ShmError> {
        let max = self.max_record();
        if let Some(r) = records.iter().find(|r| r.len() > max) {
            return Err(ShmError::RecordTooLarge { len: r.len(), max });
        }
        for data in records {
            if !self.write(data)? {
                self.wait_room(timeout, |ring| {
                    Ok(ring
                        .reserve(data.len(), KIND_INLINE)?
                        .map(|s| s.copy_from_slice(data))
                        .is_some())
                })?;
            }
        }
        self.flush()
    }

    /// Sends `buf` by descriptor (no copy), waiting up to `timeout` for room. On error the
    /// buffer returns to its pool.
    pub fn send_buf(&mut self, buf: Buf, timeout: Option<Duration>) -> Result<(), ShmError> {
        let mut pending = Some(buf);
        loop {
            let buf = pending.take().expect("buffer present");
            match self.write_buf(buf)? {
                Ok(()) => return self.flush(),
                Err(buf) => {
                    pending = Some(buf);
                    // Room for a descriptor is enough; `write_buf` stages it next.
                    self.wait_room(timeout, |ring| ring.has_room(DESC))?;
                }
            }
        }
    }

    /// Allocates a buffer homed at this side, if one is free.
    pub fn try_alloc(&mut self) -> Result<Option<Buf>, ShmError> {
        self.shared.check()?;
        let index = {
            let mut pool = self.shared.pool.lock().unwrap_or_else(|p| p.into_inner());
            pool.alloc().map_err(|e| self.shared.latch(e))?
        };
        let size = self.buffer_size() as u32;
        Ok(index.map(|i| Buf::new(self.shared.clone(), i, 0, size)))
    }

    /// Allocates a buffer, waiting up to `timeout` for the peer to return one. Its data range
    /// starts as the whole buffer.
    pub fn alloc(&mut self, timeout: Option<Duration>) -> Result<Buf, ShmError> {
        if let Some(b) = self.try_alloc()? {
            return Ok(b);
        }
        self.flush()?;
        let shared = self.shared.clone();
        let index = shared.wait(false, timeout, || {
            shared
                .pool
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .alloc()
        })?;
        let size = self.buffer_size() as u32;
        Ok(Buf::new(self.shared.clone(), index, 0, size))
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        // Staged records are published rather than lost.
        let _ = self.flush();
        self.shared.half_dropped();
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

/// The receiving half: reads records from the incoming ring in place.
pub struct Receiver {
    shared: Arc<Shared>,
    ring: Consumer,
}

impl Receiver {
    fn peek(&mut self) -> Result<Option<RawRecord>, ShmError> {
        self.shared.check()?;
        match self.ring.peek() {
            Ok(Some(r)) => Ok(Some(r)),
            Ok(None) => {
                // Running dry: publish what we consumed so the peer sees all the room there is.
                if self.ring.publish() {
                    self.shared.wake_peer(false);
                }
                Ok(None)
            }
            Err(e) => Err(self.shared.latch(e)),
        }
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
        // SAFETY: the record is unconsumed; we copy the descriptor out at once.
        let d = unsafe { raw.payload() };
        if d.len() != DESC {
            return Err(ShmError::CorruptPeer(format!(
                "buffer descriptor of {} bytes, expected {DESC}",
                d.len()
            )));
        }
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

    /// The next record, waiting up to `timeout` (`None`: for ever). Records the peer published
    /// before it closed are still delivered; after them, [`ShmError::PeerGone`].
    pub fn recv(&mut self, timeout: Option<Duration>) -> Result<Record<'_>, ShmError> {
        let shared = self.shared.clone();
        let raw = shared.wait(true, timeout, || self.peek())?;
        self.record(raw)
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
        if self.rx.ring.consume(&self.raw) {
            self.rx.shared.wake_peer(false);
        }
    }
}
