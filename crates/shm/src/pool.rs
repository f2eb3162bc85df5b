//! The buffer pool: `2 * pool_buffers` fixed-size buffers in the segment, referred to by index.
//!
//! Buffers `[0, n)` are homed at the host, `[n, 2n)` at the engine. Only a buffer's home side
//! allocates it. Either side may release a buffer it holds: a buffer homed here goes straight
//! back to the local free list; a buffer homed at the peer goes back through the peer's free
//! ring, a small SPSC ring of `u32` indices whose only producer is this side. So a buffer may be
//! allocated by one process, sent by descriptor, forwarded back, and released by either.
//!
//! Each side tracks every buffer's state (free here, held here, or with the peer) and checks
//! every index the peer hands it against that state: a buffer received twice, or returned while
//! it was never given away, is [`ShmError::CorruptPeer`]. So no buffer is ever held twice in one
//! process.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::endpoint::Side;
use crate::error::ShmError;
use crate::layout::RingCtl;
use crate::segment::Segment;
use crate::shared::Shared;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    /// In this side's free list (only for buffers homed here).
    Free,
    /// Held by a `Buf` in this process.
    Held,
    /// With the peer (sent, or homed there and not received).
    Away,
}

/// One direction of a free ring: `u32` slots with a tail and a head on their own lines.
struct Slots {
    ctl: *const RingCtl,
    slots: *mut u32,
    cap: u64,
}

impl Slots {
    fn ctl(&self) -> &RingCtl {
        // SAFETY: points into the mapping, which the owning `Shared` keeps alive.
        unsafe { &*self.ctl }
    }
}

/// Pool bookkeeping of one side (kept under a mutex in [`Shared`]).
pub(crate) struct Pool {
    n: u32,
    side: Side,
    state: Vec<State>,
    free: Vec<u32>,
    /// Free ring homed here: the peer produces, we consume.
    inbox: Slots,
    /// Free ring homed at the peer: we produce.
    outbox: Slots,
}

// SAFETY: the raw pointers refer to the mapping owned by the same `Shared` as the pool; all
// access happens under the `Shared::pool` mutex.
unsafe impl Send for Pool {}

impl Pool {
    pub(crate) fn new(seg: &Segment, side: Side) -> Pool {
        let l = &seg.layout;
        let n = l.pool_buffers;
        let ctl = seg.map.control();
        let slots = |s: Side| Slots {
            ctl: &ctl.free[s.index()],
            slots: seg
                .map
                .range(l.free_off[s.index()], 4 * u64::from(l.free_slots))
                .cast::<u32>(),
            cap: l.free_slots.into(),
        };
        let first = side.index() as u32 * n;
        let mine = first..first + n;
        let state = (0..2 * n)
            .map(|i| {
                if mine.contains(&i) {
                    State::Free
                } else {
                    State::Away
                }
            })
            .collect();
        Pool {
            n,
            side,
            state,
            free: mine.rev().collect(),
            inbox: slots(side),
            outbox: slots(side.peer()),
        }
    }

    fn home(&self, index: u32) -> Side {
        if index < self.n {
            Side::Host
        } else {
            Side::Engine
        }
    }

    /// Takes a free buffer homed here, after collecting those the peer returned.
    pub(crate) fn alloc(&mut self) -> Result<Option<u32>, ShmError> {
        if self.n == 0 {
            return Err(ShmError::NoPool);
        }
        if self.free.is_empty() {
            self.collect()?;
        }
        Ok(self
            .free
            .pop()
            .inspect(|&i| self.state[i as usize] = State::Held))
    }

    /// Moves the indices the peer returned through our inbox to the free list.
    fn collect(&mut self) -> Result<(), ShmError> {
        let ctl = self.inbox.ctl();
        let head = ctl.head.load(Ordering::Relaxed);
        // Acquire: pairs with the Release store of the tail in `release` on the peer, which
        // follows its last access to the buffers it returns.
        let tail = ctl.tail.load(Ordering::Acquire);
        if tail.wrapping_sub(head) > self.inbox.cap {
            return Err(ShmError::CorruptPeer(format!(
                "free ring tail {tail} is outside [{head}, {}]",
                head.wrapping_add(self.inbox.cap)
            )));
        }
        let mut h = head;
        while h != tail {
            // SAFETY: the slot index is masked into the ring; the slot is published and ours to
            // read until we move the head past it.
            let index = unsafe {
                self.inbox
                    .slots
                    .add((h & (self.inbox.cap - 1)) as usize)
                    .read_volatile()
            };
            if index >= 2 * self.n || self.home(index) != self.side {
                return Err(ShmError::CorruptPeer(format!(
                    "peer returned buffer {index}, which is not homed here"
                )));
            }
            if self.state[index as usize] != State::Away {
                return Err(ShmError::CorruptPeer(format!(
                    "peer returned buffer {index}, which it did not hold"
                )));
            }
            self.state[index as usize] = State::Free;
            self.free.push(index);
            h += 1;
        }
        // Release: pairs with the peer's Acquire load of our head before it reuses the slots.
        ctl.head.store(tail, Ordering::Release);
        Ok(())
    }

    /// Records that a held buffer was sent to the peer.
    pub(crate) fn sent(&mut self, index: u32) {
        debug_assert_eq!(self.state[index as usize], State::Held);
        self.state[index as usize] = State::Away;
    }

    /// Checks and records a buffer the peer sent us; returns `Ok(())` if we may hold it now.
    pub(crate) fn received(&mut self, index: u32) -> Result<(), ShmError> {
        if index >= 2 * self.n {
            return Err(ShmError::CorruptPeer(format!(
                "descriptor names buffer {index}, the pool has {}",
                2 * self.n
            )));
        }
        if self.state[index as usize] != State::Away {
            return Err(ShmError::CorruptPeer(format!(
                "descriptor names buffer {index}, which the peer does not hold"
            )));
        }
        self.state[index as usize] = State::Held;
        Ok(())
    }

    /// Releases a held buffer; returns true when the peer should be woken (buffers returned).
    pub(crate) fn release(&mut self, index: u32) -> Result<bool, ShmError> {
        debug_assert_eq!(self.state[index as usize], State::Held);
        if self.home(index) == self.side {
            self.state[index as usize] = State::Free;
            self.free.push(index);
            return Ok(false);
        }
        self.state[index as usize] = State::Away;
        let ctl = self.outbox.ctl();
        let tail = ctl.tail.load(Ordering::Relaxed);
        // Acquire: pairs with the Release store of the head in the peer's `collect`.
        let head = ctl.head.load(Ordering::Acquire);
        let used = tail.wrapping_sub(head);
        if used > self.outbox.cap {
            return Err(ShmError::CorruptPeer(format!(
                "free ring head {head} is outside [{}, {tail}]",
                tail.wrapping_sub(self.outbox.cap)
            )));
        }
        if used == self.outbox.cap {
            // We hold at most n of its buffers and the ring has >= n slots: cannot be full.
            return Err(ShmError::CorruptPeer(
                "peer's free ring is full although we hold its buffers".into(),
            ));
        }
        // SAFETY: the slot index is masked into the ring, and slots between head and tail+1
        // are ours to write until we publish the new tail.
        unsafe {
            self.outbox
                .slots
                .add((tail & (self.outbox.cap - 1)) as usize)
                .write_volatile(index);
        }
        // Release: pairs with the Acquire load of the tail in the peer's `collect`; our use of
        // the buffer happens before the peer reuses it.
        ctl.tail.store(tail + 1, Ordering::Release);
        Ok(true)
    }
}

/// A pool buffer held by this process, readable and writable in place.
///
/// It holds a data range `[offset, offset + len)` inside its fixed-size buffer, so headers can
/// be added in front without copying. Send it with [`Sender::send_buf`](crate::Sender::send_buf)
/// (by descriptor; no copy); dropping it returns it to its home pool, whichever side that is.
pub struct Buf {
    pub(crate) shared: Arc<Shared>,
    pub(crate) index: u32,
    pub(crate) offset: u32,
    pub(crate) len: u32,
    ptr: *mut u8,
    /// False once the buffer was handed to the peer: then dropping it releases nothing.
    pub(crate) live: bool,
}

// SAFETY: a `Buf` is the only handle to its buffer in this process (pool state `Held`), and the
// mapping outlives it through the `Arc<Shared>`.
unsafe impl Send for Buf {}
// SAFETY: shared references only give out `&[u8]`.
unsafe impl Sync for Buf {}

impl Buf {
    pub(crate) fn new(shared: Arc<Shared>, index: u32, offset: u32, len: u32) -> Buf {
        let l = &shared.seg.layout;
        let size = u64::from(l.buffer_size);
        let ptr = shared
            .seg
            .map
            .range(l.pool_off + u64::from(index) * size, size);
        Buf {
            shared,
            index,
            offset,
            len,
            ptr,
            live: true,
        }
    }

    /// Index of the buffer in the segment's pool (what travels in a descriptor).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Size of the whole buffer.
    pub fn capacity(&self) -> usize {
        self.shared.seg.layout.buffer_size as usize
    }

    /// Start of the data range.
    pub fn offset(&self) -> usize {
        self.offset as usize
    }

    /// Sets the data range to `[offset, offset + len)`.
    pub fn set_range(&mut self, offset: usize, len: usize) -> Result<(), ShmError> {
        if offset
            .checked_add(len)
            .is_none_or(|end| end > self.capacity())
        {
            return Err(ShmError::BufferRange {
                offset,
                len,
                size: self.capacity(),
            });
        }
        self.offset = offset as u32;
        self.len = len as u32;
        Ok(())
    }

    /// Sets the data range to `[0, len)`.
    pub fn set_len(&mut self, len: usize) -> Result<(), ShmError> {
        self.set_range(0, len)
    }

    /// The whole buffer, whatever the data range.
    pub fn whole_mut(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` covers `capacity()` bytes of the mapping, and this `Buf` is the only
        // handle to them in this process.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.capacity()) }
    }
}

impl std::ops::Deref for Buf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `offset + len <= capacity` is kept by `set_range` and checked on receipt.
        unsafe { std::slice::from_raw_parts(self.ptr.add(self.offset as usize), self.len as usize) }
    }
}

impl std::ops::DerefMut for Buf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive in this process.
        unsafe {
            std::slice::from_raw_parts_mut(self.ptr.add(self.offset as usize), self.len as usize)
        }
    }
}

impl std::fmt::Debug for Buf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buf")
            .field("index", &self.index)
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        if !self.live {
            return;
        }
        let r = {
            let mut pool = self.shared.pool.lock().unwrap_or_else(|p| p.into_inner());
            pool.release(self.index)
        };
        match r {
            Ok(true) => self.shared.wake_peer(false),
            Ok(false) => {}
            Err(e) => {
                self.shared.latch(e);
            }
        }
    }
}
