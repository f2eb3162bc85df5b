//! Single-producer single-consumer rings of variable-length records over shared memory.
//!
//! A record is a 16-byte header (`stamp: u64`, `len: u32`, `kind: u32`) followed by `len`
//! payload bytes, padded to 16 bytes. A record never wraps: when it does not fit before the end
//! of the ring, the producer writes a `PAD` record over the rest and starts again at offset 0.
//!
//! Positions count bytes ever written (`tail`, the producer's) and consumed (`head`, the
//! consumer's). A record is published by its **stamp**: the producer stores `position + 1` into
//! the record's first word (release) after writing the rest, and the consumer polls the stamp at
//! its `head` (acquire). So a waiting consumer touches one cache line, the one the record is
//! in, and a small record costs one cache-line transfer per hop. Stale bytes from earlier laps
//! never carry the current stamp, because positions only grow.
//!
//! Publication is batched: the stamp of the first record of a batch is stored last, at
//! [`Producer::publish`], so the consumer sees the whole batch at once. The producer also stores
//! its `tail` there, for diagnostics only; the consumer never reads it. The consumer publishes
//! `head` on its own cache line when it runs dry or has consumed a quarter of the ring; the
//! producer caches it and rereads it only when the cached value says the ring is full.
//!
//! Nothing read from the ring is trusted: the peer's head must stay within one ring of our tail
//! and never move backwards, and every record header must describe a record that ends inside
//! the ring. Anything else is [`ShmError::CorruptPeer`].
//!
//! The ends reach the ring's words through [`Mem`]: the shared mapping ([`SharedRing`]), or,
//! in the loom models of the stamp protocol (`ring_loom.rs`, `RUSTFLAGS="--cfg loom" cargo
//! test -p offhost-shm --release --lib loom`), words and cells loom tracks.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::ShmError;
use crate::layout::RingCtl;

/// Bytes of a record header.
pub(crate) const HEADER: usize = 16;
/// Record kind: payload bytes follow the header.
pub(crate) const KIND_INLINE: u32 = 1;
/// Record kind: a buffer descriptor follows the header.
pub(crate) const KIND_BUF: u32 = 2;
/// Record kind: skip to the end of the ring.
const KIND_PAD: u32 = 3;

/// Ring bytes taken by a record of `len` payload bytes: records start 16-aligned, so a header
/// always fits before the ring's end.
pub(crate) fn padded(len: usize) -> u64 {
    ((HEADER + len + 15) & !15) as u64
}

fn corrupt(msg: String) -> ShmError {
    ShmError::CorruptPeer(msg)
}

/// An atomic 64-bit word: a stamp, or the head or tail index (std's, or loom's in models).
pub(crate) trait Word64 {
    /// `load`.
    fn get(&self, o: Ordering) -> u64;
    /// `store`.
    fn set(&self, v: u64, o: Ordering);
}

macro_rules! word64 {
    ($t:ty) => {
        impl Word64 for $t {
            fn get(&self, o: Ordering) -> u64 {
                self.load(o)
            }
            fn set(&self, v: u64, o: Ordering) {
                self.store(v, o)
            }
        }
    };
}
word64!(AtomicU64);
#[cfg(loom)]
word64!(loom::sync::atomic::AtomicU64);

/// Where a ring's words and bytes live.
pub(crate) trait Mem {
    /// Its atomic words.
    type Word: Word64;
    /// The stamp word of the record at ring offset `pos`.
    ///
    /// # Safety
    /// `pos` must be 16-aligned and at least 16 bytes before the ring's end.
    unsafe fn stamp(&self, pos: u64) -> &Self::Word;
    /// The consumer's index.
    fn head(&self) -> &Self::Word;
    /// The producer's index (diagnostics only).
    fn tail(&self) -> &Self::Word;
    /// The ring's first byte; headers and payloads are read and written through it.
    fn data(&self) -> *mut u8;
    /// The producer is about to write the header (length and kind) of the record at position
    /// `at` (bytes ever written). A model checks that the consumer does not read what the
    /// producer writes meanwhile; a real ring has nothing to do.
    #[inline(always)]
    fn writing_header(&self, _at: u64) {}
    /// The producer hands out `len` payload bytes at position `at` to be written (as
    /// [`writing_header`](Self::writing_header); a model also puts bytes there that would pass
    /// for the stamp of the next lap, as a payload may).
    #[inline(always)]
    fn writing_payload(&self, _at: u64, _len: u64) {}
    /// The consumer is about to read `len` bytes at position `at` (as
    /// [`writing_header`](Self::writing_header)).
    #[inline(always)]
    fn reading(&self, _at: u64, _len: u64) {}
}

/// A ring in the shared mapping: its indices in the control block, its bytes in the segment.
pub(crate) struct SharedRing {
    ctl: *const RingCtl,
    data: *mut u8,
}

// SAFETY: the pointers refer to a mapping kept alive by the `Arc<Shared>` that every owner of a
// ring end also holds; each end is used by one thread at a time (`&mut self`), and the words
// it shares with the peer are atomics.
unsafe impl Send for SharedRing {}

impl Mem for SharedRing {
    type Word = AtomicU64;

    unsafe fn stamp(&self, pos: u64) -> &AtomicU64 {
        // SAFETY: in bounds and aligned (caller); the mapping outlives `self` (see `new`).
        unsafe { stamp(self.data, pos) }
    }

    fn head(&self) -> &AtomicU64 {
        // SAFETY: valid for the ring end's life (see `Producer::new`).
        unsafe { &(*self.ctl).head }
    }

    fn tail(&self) -> &AtomicU64 {
        // SAFETY: as in `head`.
        unsafe { &(*self.ctl).tail }
    }

    fn data(&self) -> *mut u8 {
        self.data
    }
}

/// The producer end of a ring.
pub(crate) struct Producer<M: Mem = SharedRing> {
    mem: M,
    cap: u64,
    tail: u64,
    cached_head: u64,
    published: u64,
    /// Position of the first record staged since the last publication (its stamp waits).
    first_staged: Option<u64>,
}

/// The stamp word of the record at ring offset `pos` (8-aligned, inside the ring).
///
/// # Safety
/// `data + pos .. data + pos + 8` must lie in a live shared mapping and be 8-aligned.
unsafe fn stamp<'a>(data: *const u8, pos: u64) -> &'a AtomicU64 {
    debug_assert!(pos.is_multiple_of(16));
    // SAFETY: in bounds and aligned (caller); shared memory is only accessed atomically here.
    unsafe { &*data.add(pos as usize).cast::<AtomicU64>() }
}

impl Producer {
    /// # Safety
    /// `ctl` and `data..data+cap` must point into a live shared mapping that outlives the
    /// producer, `cap` must be a power of two, and no other producer may exist for this ring.
    pub(crate) unsafe fn new(ctl: *const RingCtl, data: *mut u8, cap: u64) -> Producer {
        // SAFETY: as the caller promises.
        unsafe { Producer::with_mem(SharedRing { ctl, data }, cap) }
    }
}

impl<M: Mem> Producer<M> {
    /// # Safety
    /// `mem.data() .. + cap` and its words must stay valid for the producer's life, `cap` must
    /// be a power of two (at least 16), and no other producer may exist for this ring.
    pub(crate) unsafe fn with_mem(mem: M, cap: u64) -> Producer<M> {
        // A new segment's positions are 0, and only this side ever stores this ring's tail:
        // start from 0 rather than from what the segment says, which a hostile peer could
        // have set to anything (unaligned, or about to overflow).
        let tail = 0;
        Producer {
            mem,
            cap,
            tail,
            cached_head: tail,
            published: tail,
            first_staged: None,
        }
    }

    /// Largest payload a record can have: half the ring, less a header. A larger one could
    /// find no room even in an empty ring once the tail is past the point where it would fit
    /// before the ring's end (the pad to the end and the record must be free at once); half
    /// the ring always fits then.
    pub(crate) fn max_record(&self) -> usize {
        (self.cap / 2) as usize - HEADER
    }

    /// Rereads the consumer's index, checking it is plausible.
    fn refresh_head(&mut self) -> Result<(), ShmError> {
        // Ordering: Acquire: pairs with the consumer's Release store in `Consumer::publish`, so the
        // bytes it consumed are no longer read when we overwrite them.
        let head = self.mem.head().get(Ordering::Acquire);
        if head.wrapping_sub(self.cached_head) > self.cap || self.tail.wrapping_sub(head) > self.cap
        {
            return Err(corrupt(format!(
                "ring head {head} is outside [{}, {}]",
                self.cached_head, self.tail
            )));
        }
        self.cached_head = head;
        Ok(())
    }

    /// Reserves a record of `len` payload bytes of `kind`, or `None` when the ring is full.
    /// The record becomes visible at the next [`Producer::publish`].
    pub(crate) fn reserve(&mut self, len: usize, kind: u32) -> Result<Option<&mut [u8]>, ShmError> {
        if len > self.max_record() {
            return Err(ShmError::RecordTooLarge {
                len,
                max: self.max_record(),
            });
        }
        let need = padded(len);
        let pos = self.tail & (self.cap - 1);
        let contiguous = self.cap - pos;
        let total = if need > contiguous {
            contiguous + need
        } else {
            need
        };
        if self.cap - (self.tail - self.cached_head) < total {
            self.refresh_head()?;
            if self.cap - (self.tail - self.cached_head) < total {
                return Ok(None);
            }
        }
        if need > contiguous {
            self.write_header(contiguous as u32 - HEADER as u32, KIND_PAD);
            self.tail += contiguous;
            self.clear_next();
        }
        let pos = self.tail & (self.cap - 1);
        self.write_header(len as u32, kind);
        let payload_at = self.tail + HEADER as u64;
        self.tail += need;
        self.clear_next();
        self.mem.writing_payload(payload_at, len as u64);
        // SAFETY: `pos + need <= cap` (a record never wraps), and the bytes between the
        // consumer's head and our tail + need are ours until we publish them.
        Ok(Some(unsafe {
            std::slice::from_raw_parts_mut(self.mem.data().add(pos as usize + HEADER), len)
        }))
    }

    /// Zeroes the stamp word at `tail` when that slot is free, so that stale payload bytes of
    /// an earlier lap can never look like the stamp of the next record. (When the slot is not
    /// free it holds the header of the unconsumed record at the consumer's head, whose stamp is
    /// from the previous lap.) Ordered before the batch's publishing stamp (release).
    fn clear_next(&mut self) {
        if self.tail - self.cached_head < self.cap {
            // SAFETY: the slot is 16-aligned in the ring and free, so only we access it.
            unsafe { self.mem.stamp(self.tail & (self.cap - 1)) }.set(0, Ordering::Relaxed);
        }
    }

    /// Writes the header of the record at `tail`; stamps it unless it opens a batch.
    fn write_header(&mut self, len: u32, kind: u32) {
        let pos = self.tail & (self.cap - 1);
        debug_assert!(pos + HEADER as u64 <= self.cap && pos.is_multiple_of(8));
        self.mem.writing_header(self.tail);
        // SAFETY: `pos` is 16-aligned and `pos + 16 <= cap` (records are 16-aligned and the ring
        // a multiple of 16); the bytes lie between the consumer's head and our tail + need, so
        // the consumer does not read them until they are stamped.
        unsafe {
            let p = self.mem.data().add(pos as usize + 8).cast::<u32>();
            p.write_volatile(len);
            p.add(1).write_volatile(kind);
        }
        if self.first_staged.is_none() {
            self.first_staged = Some(self.tail);
        } else {
            // Ordering: Release, though only the header is written before this stamp (the caller
            // fills the payload after `reserve` returns): a later record of a batch is read only
            // after the consumer acquires the batch's first stamp, stored Release in `publish`
            // after every payload, so this Release is stronger than needed; the consumer cannot
            // reach this position before then.
            // SAFETY: as above.
            unsafe { self.mem.stamp(pos) }.set(self.tail + 1, Ordering::Release);
        }
    }

    /// True when a record of `len` payload bytes would fit now (rereads the head if needed).
    pub(crate) fn has_room(&mut self, len: usize) -> Result<bool, ShmError> {
        let need = padded(len);
        let pos = self.tail & (self.cap - 1);
        let contiguous = self.cap - pos;
        let total = if need > contiguous {
            contiguous + need
        } else {
            need
        };
        if self.cap - (self.tail - self.cached_head) < total {
            self.refresh_head()?;
        }
        Ok(self.cap - (self.tail - self.cached_head) >= total)
    }

    /// Makes every reserved record visible; returns false when there was nothing new.
    pub(crate) fn publish(&mut self) -> bool {
        let Some(first) = self.first_staged.take() else {
            return false;
        };
        // Ordering: Release: pairs with the consumer's Acquire load of the stamp in
        // `Consumer::peek`, making every record of the batch (written before this store) visible at
        // once.
        // SAFETY: `first` is the position of a staged record, so its offset is in the ring.
        unsafe { self.mem.stamp(first & (self.cap - 1)) }.set(first + 1, Ordering::Release);
        // Diagnostics only: the consumer never reads the tail.
        self.mem.tail().set(self.tail, Ordering::Relaxed);
        self.published = self.tail;
        true
    }

    /// True when unpublished records are pending.
    pub(crate) fn pending(&self) -> bool {
        self.published != self.tail
    }

    /// Bytes published and not yet consumed, from a fresh look at the consumer's head (for a
    /// doorbell's event limit). A head the consumer has not published yet makes this larger
    /// than it is, never smaller; a head out of range (a corrupt peer) counts as nothing
    /// consumed at all.
    pub(crate) fn unconsumed(&self) -> u64 {
        // Ordering: Acquire: pairs with the consumer's Release store of its head.
        let head = self.mem.head().get(Ordering::Acquire);
        match self.published.checked_sub(head) {
            Some(n) if n <= self.cap => n,
            _ => self.cap,
        }
    }
}

/// A record as seen by the consumer: validated kind, payload position and length.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawRecord {
    pub kind: u32,
    pub len: usize,
    payload: *const u8,
    size: u64,
}

impl RawRecord {
    /// # Safety
    /// The record must still be unconsumed in a live ring (the returned slice aliases shared
    /// memory that only a misbehaving peer would write concurrently).
    pub(crate) unsafe fn payload<'a>(&self) -> &'a [u8] {
        // SAFETY: bounds were checked when the record was read; liveness by the caller.
        unsafe { std::slice::from_raw_parts(self.payload, self.len) }
    }

    /// Copies the first `N` payload bytes out with one volatile read.
    ///
    /// # Safety
    /// As [`payload`](Self::payload), and the record must be at least `N` bytes long.
    pub(crate) unsafe fn read_payload<const N: usize>(&self) -> [u8; N] {
        debug_assert!(self.len >= N);
        // SAFETY: `payload .. payload + len` lies in the ring (checked at peek) and `N <= len`
        // (caller); `[u8; N]` has alignment 1.
        unsafe { std::ptr::read_volatile(self.payload.cast::<[u8; N]>()) }
    }
}

/// The consumer end of a ring.
pub(crate) struct Consumer<M: Mem = SharedRing> {
    mem: M,
    cap: u64,
    head: u64,
    published: u64,
}

impl Consumer {
    /// # Safety
    /// As [`Producer::new`], for the single consumer of the ring.
    pub(crate) unsafe fn new(ctl: *const RingCtl, data: *const u8, cap: u64) -> Consumer {
        let data = data.cast_mut();
        // SAFETY: as the caller promises; the consumer never writes through `data`.
        unsafe { Consumer::with_mem(SharedRing { ctl, data }, cap) }
    }
}

impl<M: Mem> Consumer<M> {
    /// # Safety
    /// As [`Producer::with_mem`], for the single consumer of the ring.
    pub(crate) unsafe fn with_mem(mem: M, cap: u64) -> Consumer<M> {
        // As in `Producer::with_mem`: only this side stores the head; a new segment starts at 0.
        let head = 0;
        Consumer {
            mem,
            cap,
            head,
            published: head,
        }
    }

    /// The ring's size in bytes.
    pub(crate) fn capacity(&self) -> u64 {
        self.cap
    }

    /// True when the record at `head` is published (its stamp is `head + 1`).
    fn ready(&self) -> bool {
        // Ordering: Acquire: pairs with the producer's Release store of the stamp in `publish` (or
        // in `write_header` for later records of a batch): the header and payload are visible.
        // SAFETY: `head & (cap - 1)` is 16-aligned and at least 16 bytes before the ring's end.
        unsafe { self.mem.stamp(self.head & (self.cap - 1)) }.get(Ordering::Acquire)
            == self.head.wrapping_add(1)
    }

    /// True when no published record is waiting.
    pub(crate) fn is_empty(&mut self) -> Result<bool, ShmError> {
        Ok(!self.ready())
    }

    /// The next record, validated, or `None` when the ring is empty.
    pub(crate) fn peek(&mut self) -> Result<Option<RawRecord>, ShmError> {
        loop {
            if !self.ready() {
                return Ok(None);
            }
            let pos = self.head & (self.cap - 1);
            let contiguous = self.cap - pos;
            self.mem.reading(self.head, HEADER as u64);
            // SAFETY: `pos + 16 <= cap`; the record is stamped and not yet consumed, so the
            // producer does not write it (a misbehaving one could: we copy the header once).
            let (len, kind) = unsafe {
                let p = self.mem.data().add(pos as usize + 8).cast::<u32>();
                (p.read_volatile(), p.add(1).read_volatile())
            };
            let size = padded(len as usize);
            match kind {
                KIND_PAD => {
                    if u64::from(len) + HEADER as u64 != contiguous {
                        return Err(corrupt(format!(
                            "pad record of {len} bytes at ring offset {pos} does not end the ring"
                        )));
                    }
                    self.head += contiguous;
                }
                KIND_INLINE | KIND_BUF => {
                    if size > contiguous {
                        return Err(corrupt(format!(
                            "record of {len} bytes at ring offset {pos} overruns the ring end \
                             ({contiguous} bytes left)"
                        )));
                    }
                    self.mem.reading(self.head + HEADER as u64, u64::from(len));
                    return Ok(Some(RawRecord {
                        kind,
                        len: len as usize,
                        // SAFETY: `pos + size <= cap`, checked just above.
                        payload: unsafe { self.mem.data().add(pos as usize + HEADER) },
                        size,
                    }));
                }
                other => {
                    return Err(corrupt(format!(
                        "unknown record kind {other} at ring offset {pos}"
                    )))
                }
            }
        }
    }

    /// Consumes the record last returned by [`Consumer::peek`].
    pub(crate) fn consume(&mut self, rec: &RawRecord) -> bool {
        self.head += rec.size;
        self.head - self.published >= self.cap / 4 && self.publish()
    }

    /// Publishes the consumed position; returns false when it had not moved.
    pub(crate) fn publish(&mut self) -> bool {
        if self.published == self.head {
            return false;
        }
        // Ordering: Release: pairs with the producer's Acquire load in `Producer::refresh_head`;
        // our reads of the consumed bytes happen before the producer may overwrite them.
        self.mem.head().set(self.head, Ordering::Release);
        self.published = self.head;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_utils::CachePadded;

    /// Indices a hostile peer left in the control block before we attached (unaligned, about to
    /// overflow) are not where our positions start: records still land inside the ring.
    #[test]
    fn the_largest_record_finds_room_in_an_empty_ring_wherever_its_tail_is() {
        let ctl = RingCtl {
            tail: CachePadded::new(AtomicU64::new(0)),
            head: CachePadded::new(AtomicU64::new(0)),
        };
        let mut ring = vec![0u128; 256 / 16];
        let data = ring.as_mut_ptr().cast::<u8>();
        // SAFETY: `ctl` and `ring` outlive both ends, one producer and one consumer.
        let (mut p, mut c) = unsafe {
            (
                Producer::new(&ctl, data, 256),
                Consumer::new(&ctl, data, 256),
            )
        };
        let max = p.max_record();
        assert_eq!(max, 112);
        // Every tail offset: a small record moves it by 16 or 32 bytes, then the largest
        // must fit the empty ring (it found no room at some offsets when the largest was
        // the whole ring less a header).
        for small in [0usize, 1, 16, 17, 40, 100] {
            for len in [small, max] {
                p.reserve(len, KIND_INLINE)
                    .unwrap()
                    .expect("room in an empty ring");
                p.publish();
                let rec = c.peek().unwrap().expect("a record");
                assert_eq!(rec.len, len);
                c.consume(&rec);
                c.publish();
            }
        }
        assert!(matches!(
            p.reserve(max + 1, KIND_INLINE),
            Err(ShmError::RecordTooLarge { .. })
        ));
    }

    #[test]
    fn new_ends_ignore_the_indices_found_in_the_segment() {
        let ctl = RingCtl {
            tail: CachePadded::new(AtomicU64::new(3)),
            head: CachePadded::new(AtomicU64::new(u64::MAX - 5)),
        };
        let mut ring = vec![0u128; 256 / 16]; // 256 bytes, 16-aligned
        let data = ring.as_mut_ptr().cast::<u8>();
        // SAFETY: `ctl` and `ring` outlive both ends, one producer and one consumer.
        let (mut p, mut c) = unsafe {
            (
                Producer::new(&ctl, data, 256),
                Consumer::new(&ctl, data, 256),
            )
        };
        for round in 0..40u8 {
            let slot = p.reserve(20, KIND_INLINE).unwrap().expect("room");
            slot.fill(round);
            p.publish();
            let rec = c.peek().unwrap().expect("a record");
            assert_eq!(rec.len, 20);
            // SAFETY: unconsumed, in the live ring.
            assert!(unsafe { rec.payload() }.iter().all(|&b| b == round));
            c.consume(&rec);
            c.publish();
        }
    }
}
