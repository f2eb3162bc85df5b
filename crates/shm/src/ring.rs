//! Single-producer single-consumer rings of variable-length records over shared memory.
//!
//! A record is an 8-byte header (`len: u32`, `kind: u32`) followed by `len` payload bytes,
//! padded to 8 bytes. A record never wraps: when it does not fit before the end of the ring,
//! the producer writes a `PAD` record over the rest and starts again at offset 0.
//!
//! The indices `tail` (producer) and `head` (consumer) count bytes ever written and consumed;
//! each sits on its own cache line. Each side keeps a private copy of its own index and a cached
//! copy of the other's, and rereads the other's only when the cached one says "full" or
//! "empty". The producer publishes `tail` once per batch; the consumer publishes `head` when it
//! runs dry or has consumed a quarter of the ring.
//!
//! Nothing read from the ring is trusted: the peer's index must stay within one ring of ours
//! and never move backwards, and every record header must describe a record that lies inside
//! the published bytes and inside the ring. Anything else is [`ShmError::CorruptPeer`].

use std::sync::atomic::Ordering;

use crate::error::ShmError;
use crate::layout::RingCtl;

/// Bytes of a record header.
pub(crate) const HEADER: usize = 8;
/// Record kind: payload bytes follow the header.
pub(crate) const KIND_INLINE: u32 = 1;
/// Record kind: a buffer descriptor follows the header.
pub(crate) const KIND_BUF: u32 = 2;
/// Record kind: skip to the end of the ring.
const KIND_PAD: u32 = 3;

fn padded(len: usize) -> u64 {
    ((HEADER + len + 7) & !7) as u64
}

fn corrupt(msg: String) -> ShmError {
    ShmError::CorruptPeer(msg)
}

/// The producer end of a ring.
pub(crate) struct Producer {
    ctl: *const RingCtl,
    data: *mut u8,
    cap: u64,
    tail: u64,
    cached_head: u64,
    published: u64,
}

// SAFETY: the pointers refer to a mapping kept alive by the `Arc<Shared>` that every owner of a
// `Producer` also holds; the producer end itself is used by one thread at a time (`&mut self`).
unsafe impl Send for Producer {}

impl Producer {
    /// # Safety
    /// `ctl` and `data..data+cap` must point into a live shared mapping that outlives the
    /// producer, `cap` must be a power of two, and no other producer may exist for this ring.
    pub(crate) unsafe fn new(ctl: *const RingCtl, data: *mut u8, cap: u64) -> Producer {
        // SAFETY: the caller guarantees `ctl` is valid.
        let tail = unsafe { &*ctl }.tail.load(Ordering::Relaxed);
        Producer {
            ctl,
            data,
            cap,
            tail,
            cached_head: tail,
            published: tail,
        }
    }

    fn ctl(&self) -> &RingCtl {
        // SAFETY: valid for the producer's life (see `new`).
        unsafe { &*self.ctl }
    }

    /// Largest payload a record can have.
    pub(crate) fn max_record(&self) -> usize {
        self.cap as usize - HEADER
    }

    /// Rereads the consumer's index, checking it is plausible.
    fn refresh_head(&mut self) -> Result<(), ShmError> {
        // Acquire: pairs with the consumer's Release store in `Consumer::publish`, so the bytes
        // it consumed are no longer read when we overwrite them.
        let head = self.ctl().head.load(Ordering::Acquire);
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
            self.write_header(pos, contiguous as u32 - HEADER as u32, KIND_PAD);
            self.tail += contiguous;
        }
        let pos = self.tail & (self.cap - 1);
        self.write_header(pos, len as u32, kind);
        self.tail += need;
        // SAFETY: `pos + need <= cap` (a record never wraps), and the bytes between the
        // consumer's head and our tail + need are ours until we publish them.
        Ok(Some(unsafe {
            std::slice::from_raw_parts_mut(self.data.add(pos as usize + HEADER), len)
        }))
    }

    fn write_header(&mut self, pos: u64, len: u32, kind: u32) {
        debug_assert!(pos + HEADER as u64 <= self.cap && pos % 8 == 0);
        // SAFETY: `pos` is 8-aligned and `pos + 8 <= cap`; the bytes are unpublished, so the
        // consumer does not read them.
        unsafe {
            let p = self.data.add(pos as usize).cast::<u32>();
            p.write_volatile(len);
            p.add(1).write_volatile(kind);
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
        if self.published == self.tail {
            return false;
        }
        // Release: pairs with the consumer's Acquire load in `Consumer::refresh_tail`, making
        // the record bytes written before it visible.
        self.ctl().tail.store(self.tail, Ordering::Release);
        self.published = self.tail;
        true
    }

    /// True when unpublished records are pending.
    pub(crate) fn pending(&self) -> bool {
        self.published != self.tail
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
}

/// The consumer end of a ring.
pub(crate) struct Consumer {
    ctl: *const RingCtl,
    data: *const u8,
    cap: u64,
    head: u64,
    cached_tail: u64,
    published: u64,
}

// SAFETY: see `Producer`.
unsafe impl Send for Consumer {}

impl Consumer {
    /// # Safety
    /// As [`Producer::new`], for the single consumer of the ring.
    pub(crate) unsafe fn new(ctl: *const RingCtl, data: *const u8, cap: u64) -> Consumer {
        // SAFETY: the caller guarantees `ctl` is valid.
        let head = unsafe { &*ctl }.head.load(Ordering::Relaxed);
        Consumer {
            ctl,
            data,
            cap,
            head,
            cached_tail: head,
            published: head,
        }
    }

    fn ctl(&self) -> &RingCtl {
        // SAFETY: valid for the consumer's life (see `new`).
        unsafe { &*self.ctl }
    }

    fn refresh_tail(&mut self) -> Result<(), ShmError> {
        // Acquire: pairs with the producer's Release store in `Producer::publish`.
        let tail = self.ctl().tail.load(Ordering::Acquire);
        if tail.wrapping_sub(self.cached_tail) > self.cap || tail.wrapping_sub(self.head) > self.cap
        {
            return Err(corrupt(format!(
                "ring tail {tail} is outside [{}, {}]",
                self.cached_tail,
                self.head.wrapping_add(self.cap)
            )));
        }
        self.cached_tail = tail;
        Ok(())
    }

    /// True when the consumer has seen every published record (rereads the tail).
    pub(crate) fn is_empty(&mut self) -> Result<bool, ShmError> {
        if self.head != self.cached_tail {
            return Ok(false);
        }
        self.refresh_tail()?;
        Ok(self.head == self.cached_tail)
    }

    /// The next record, validated, or `None` when the ring is empty.
    pub(crate) fn peek(&mut self) -> Result<Option<RawRecord>, ShmError> {
        loop {
            if self.head == self.cached_tail {
                self.refresh_tail()?;
                if self.head == self.cached_tail {
                    return Ok(None);
                }
            }
            let pos = self.head & (self.cap - 1);
            let avail = self.cached_tail - self.head;
            let contiguous = self.cap - pos;
            if avail < HEADER as u64 {
                return Err(corrupt(format!(
                    "ring holds {avail} bytes at offset {pos}, less than a record header"
                )));
            }
            // SAFETY: `pos` is 8-aligned (all records are) and `pos + 8 <= cap`; the bytes are
            // published and not yet consumed, so the producer does not write them.
            let (len, kind) = unsafe {
                let p = self.data.add(pos as usize).cast::<u32>();
                (p.read_volatile(), p.add(1).read_volatile())
            };
            let size = padded(len as usize);
            match kind {
                KIND_PAD => {
                    if u64::from(len) + HEADER as u64 != contiguous || contiguous > avail {
                        return Err(corrupt(format!(
                            "pad record of {len} bytes at ring offset {pos} does not end the ring"
                        )));
                    }
                    self.head += contiguous;
                }
                KIND_INLINE | KIND_BUF => {
                    if size > contiguous || size > avail {
                        return Err(corrupt(format!(
                            "record of {len} bytes at ring offset {pos} overruns the {} published \
                             bytes or the ring end",
                            avail.min(contiguous)
                        )));
                    }
                    return Ok(Some(RawRecord {
                        kind,
                        len: len as usize,
                        // SAFETY: `pos + size <= cap`, checked just above.
                        payload: unsafe { self.data.add(pos as usize + HEADER) },
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
        // Release: pairs with the producer's Acquire load in `Producer::refresh_head`; our reads
        // of the consumed bytes happen before the producer may overwrite them.
        self.ctl().head.store(self.head, Ordering::Release);
        self.published = self.head;
        true
    }
}
