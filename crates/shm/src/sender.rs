//! The sending half of an endpoint.

use std::sync::Arc;
use std::time::Duration;

use crate::endpoint::{Side, DESC};
use crate::error::ShmError;
use crate::pool::Buf;
use crate::ring::{Producer, KIND_BUF, KIND_INLINE};
use crate::shared::Shared;

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
    pub(crate) fn new(shared: Arc<Shared>, ring: Producer) -> Sender {
        Sender { shared, ring }
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    /// Which end this is.
    pub fn side(&self) -> Side {
        self.shared.side
    }

    /// What this side's waits for room or buffers did with their spins
    /// ([`Mode::Adaptive`](crate::Mode::Adaptive)).
    pub fn spin_stats(&self) -> crate::SpinStats {
        self.shared.spin_stats(false)
    }

    /// `Err(PeerGone)` once the peer has closed the link or died (non-blocking probe).
    pub fn check_peer(&self) -> Result<(), ShmError> {
        self.shared.check()?;
        self.shared.check_alive()
    }

    /// Largest payload of an inline record.
    pub fn max_record(&self) -> usize {
        self.ring.max_record()
    }

    /// Size of each pool buffer.
    pub fn buffer_size(&self) -> usize {
        self.shared.seg.layout.buffer_size as usize
    }

    /// Pool buffers homed at this side.
    pub fn pool_buffers(&self) -> usize {
        self.shared.seg.layout.pool_buffers as usize
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
            let ring = &self.ring;
            self.shared.wake_peer_when(|| ring.unconsumed());
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
        shared.wait(false, 0, timeout, || Ok(stage(ring)?.then_some(())))
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
        try_alloc(&self.shared)
    }

    /// A handle that allocates buffers homed at this side without waiting, from any thread
    /// (waiting for a free buffer stays with [`Sender::alloc`], which owns this side's
    /// doorbell).
    pub fn allocator(&self) -> Allocator {
        Allocator {
            shared: self.shared.clone(),
        }
    }

    /// Allocates a buffer, waiting up to `timeout` for the peer to return one. Its data range
    /// starts as the whole buffer.
    pub fn alloc(&mut self, timeout: Option<Duration>) -> Result<Buf, ShmError> {
        if let Some(b) = self.try_alloc()? {
            return Ok(b);
        }
        self.flush()?;
        let shared = self.shared.clone();
        let index = shared.wait(false, 0, timeout, || {
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
        // Staged records are published rather than lost, and a peer waiting for more than
        // will now come is woken to find the end.
        let _ = self.flush();
        self.shared.wake_peer(true);
        self.shared.half_dropped();
    }
}

fn try_alloc(shared: &Arc<Shared>) -> Result<Option<Buf>, ShmError> {
    shared.check()?;
    let index = {
        let mut pool = shared.pool.lock().unwrap_or_else(|p| p.into_inner());
        pool.alloc().map_err(|e| shared.latch(e))?
    };
    let size = shared.seg.layout.buffer_size;
    Ok(index.map(|i| Buf::new(shared.clone(), i, 0, size)))
}

/// Allocates pool buffers homed at one side, without waiting, from any thread (see
/// [`Sender::allocator`]).
#[derive(Clone)]
pub struct Allocator {
    shared: Arc<Shared>,
}

impl Allocator {
    /// A free buffer homed at this side, if there is one; its data range is the whole buffer.
    pub fn try_alloc(&self) -> Result<Option<Buf>, ShmError> {
        try_alloc(&self.shared)
    }
}

impl std::fmt::Debug for Allocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Allocator").finish_non_exhaustive()
    }
}
