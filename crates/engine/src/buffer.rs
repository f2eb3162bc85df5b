//! Buffers: views (offset and length) into preallocated storage that returns to its pool
//! when the last reference is dropped.
//!
//! A [`BufMut`] is the single, writable reference a task gets from [`Pool::alloc`]. Freezing it
//! gives a [`Buffer`], the shared, read-only form that travels on queues; cloning a `Buffer`
//! duplicates by reference (the paper's buffer duplication), never by copy. Both keep
//! *headroom* in front of the data and *tailroom* behind it, so a header or trailer can be
//! added by moving the offset or the length, without copying the data.

use std::fmt;
use std::ops::{Deref, Range};
use std::sync::Arc;

/// Where a storage goes back when its last view drops: its pool's free list. A buffer knows
/// its pool only through this, so buffers stand below pools.
pub(crate) trait Home: Send + Sync {
    /// Takes back `bytes`, known to hold what `filled` says.
    fn take_back(self: Arc<Self>, bytes: Vec<u8>, filled: Option<Filled>);
    /// The pool's name.
    fn name(&self) -> &str;
}

/// What went wrong when growing a buffer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BufferError {
    /// There is not enough headroom in front of the data for the bytes to prepend.
    #[error("not enough headroom: need {need} bytes, have {have}")]
    NoHeadroom {
        /// Bytes asked for.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// There is not enough room behind the data for the bytes to append.
    #[error("not enough room: need {need} bytes, have {have}")]
    NoRoom {
        /// Bytes asked for.
        need: usize,
        /// Bytes available.
        have: usize,
    },
}

/// Storage shared by the views of one buffer; goes back to its pool on drop.
pub(crate) struct Storage {
    pub(crate) bytes: Vec<u8>,
    /// End of the ordinary data area (headroom + buffer size); the tailroom lies beyond.
    pub(crate) data_end: usize,
    pub(crate) pool: Option<Arc<dyn Home>>,
    /// What the bytes are known to hold, as `fill` left them; it goes back to the pool
    /// with them, and every write through a [`BufMut`] clears it.
    pub(crate) filled: Option<Filled>,
}

/// Bytes `start..end` of a storage all hold `value`: what `fill` wrote there, and no one has
/// written since. A buffer keeps this through its pool's free list, so that `fill
/// rewrite=false` given the same storage again does not write the same bytes again, as a raw
/// socket's writer sends one buffer again without writing it. `bench engines` compares an
/// engine-to-engine queue with such a writer; writing the bytes took about a twentieth of
/// the CPU that sending 64 KiB buffers over TLS takes there (docs/notes/engines.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Filled {
    /// The byte value.
    pub(crate) value: u8,
    /// Where the bytes holding it start, in the storage.
    pub(crate) start: usize,
    /// Where they end.
    pub(crate) end: usize,
}

impl Drop for Storage {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            pool.take_back(std::mem::take(&mut self.bytes), self.filled);
        }
    }
}

/// A shared, read-only buffer: a view (offset, length) into pooled storage.
///
/// Clone is cheap (a reference count); the storage returns to its pool when the last clone
/// is dropped.
#[derive(Clone)]
pub struct Buffer {
    st: Arc<Storage>,
    off: usize,
    len: usize,
}

impl Buffer {
    /// A buffer that belongs to no pool, holding `data` (for tests and host messages).
    pub fn from_vec(data: Vec<u8>) -> Buffer {
        let len = data.len();
        Buffer {
            st: Arc::new(Storage {
                bytes: data,
                data_end: len,
                pool: None,
                filled: None,
            }),
            off: 0,
            len,
        }
    }

    /// Length of the data in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no data.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Offset of the data within the storage (the headroom in front of it).
    pub fn offset(&self) -> usize {
        self.off
    }

    /// A view of part of this buffer's data, sharing the storage (no copy).
    ///
    /// # Panics
    /// If `range` is not within `0..self.len()`.
    pub fn slice(&self, range: Range<usize>) -> Buffer {
        assert!(
            range.start <= range.end && range.end <= self.len,
            "slice {range:?} out of 0..{}",
            self.len
        );
        Buffer {
            st: Arc::clone(&self.st),
            off: self.off + range.start,
            len: range.end - range.start,
        }
    }

    /// Drops `n` bytes from the front of this view (clamped to the length).
    pub fn advance(&mut self, n: usize) {
        let n = n.min(self.len);
        self.off += n;
        self.len -= n;
    }

    /// Shortens this view to `len` bytes (no effect if it is already shorter).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// How many views share this buffer's storage.
    pub fn ref_count(&self) -> usize {
        Arc::strong_count(&self.st)
    }

    /// Name of the pool the storage belongs to, if any.
    pub fn pool_name(&self) -> Option<&str> {
        self.st.pool.as_ref().map(|p| p.name())
    }

    /// Turns this view back into a writable buffer if it is the only reference.
    pub fn try_into_mut(self) -> Result<BufMut, Buffer> {
        if Arc::strong_count(&self.st) == 1 && Arc::weak_count(&self.st) == 0 {
            let data_end = self.st.data_end;
            Ok(BufMut {
                st: self.st,
                off: self.off,
                len: self.len,
                data_end,
            })
        } else {
            Err(self)
        }
    }
}

impl Deref for Buffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.st.bytes[self.off..self.off + self.len]
    }
}

impl AsRef<[u8]> for Buffer {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("pool", &self.pool_name())
            .field("offset", &self.off)
            .field("len", &self.len)
            .finish()
    }
}

/// A writable buffer held by one task, obtained from a pool. Freeze it to put it on a queue.
pub struct BufMut {
    st: Arc<Storage>,
    off: usize,
    len: usize,
    /// End of the ordinary data area; beyond it lies the tailroom.
    data_end: usize,
}

impl BufMut {
    pub(crate) fn new(st: Arc<Storage>, headroom: usize) -> BufMut {
        let data_end = st.data_end;
        BufMut {
            st,
            off: headroom,
            len: 0,
            data_end,
        }
    }

    /// The storage, writable.
    fn storage_mut(&mut self) -> &mut Storage {
        // A BufMut is the only reference to its storage by construction (fresh from the pool,
        // or `try_into_mut` checked the counts), so this cannot fail.
        Arc::get_mut(&mut self.st).expect("a BufMut is the only reference to its storage")
    }

    /// The storage's bytes to write: every write goes through here, which forgets what
    /// they were known to hold.
    fn bytes_mut(&mut self) -> &mut Vec<u8> {
        let st = self.storage_mut();
        st.filled = None;
        &mut st.bytes
    }

    /// Fills the next `n` bytes behind the data with `value` and commits them; unless
    /// `rewrite`, not where the storage is known to hold `value` already (it holds what
    /// `fill` wrote, and no one has written since). `n` is clamped to the data area.
    pub(crate) fn fill_with(&mut self, value: u8, n: usize, rewrite: bool) {
        let start = self.off + self.len;
        let n = n.min(self.remaining());
        let end = start + n;
        let st = self.storage_mut();
        let known = !rewrite
            && st
                .filled
                .is_some_and(|f| f.value == value && f.start <= start && end <= f.end);
        if !known {
            st.bytes[start..end].fill(value);
            st.filled = Some(Filled { value, start, end });
        }
        self.len += n;
    }

    /// Length of the data in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no data.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes free in front of the data.
    pub fn headroom(&self) -> usize {
        self.off
    }

    /// Bytes free behind the data in the ordinary data area (the pool's buffer size).
    pub fn remaining(&self) -> usize {
        self.data_end.saturating_sub(self.off + self.len)
    }

    /// Bytes free behind the data including the tailroom.
    pub fn tailroom(&self) -> usize {
        self.st.bytes.len() - (self.off + self.len)
    }

    /// The data.
    pub fn as_slice(&self) -> &[u8] {
        &self.st.bytes[self.off..self.off + self.len]
    }

    /// The data, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let (o, l) = (self.off, self.len);
        &mut self.bytes_mut()[o..o + l]
    }

    /// The free part of the data area behind the data; fill it, then call [`BufMut::commit`].
    pub fn unfilled(&mut self) -> &mut [u8] {
        let (start, end) = (self.off + self.len, self.data_end.max(self.off + self.len));
        &mut self.bytes_mut()[start..end]
    }

    /// Marks `n` more bytes behind the data as written (after filling [`BufMut::unfilled`]).
    ///
    /// # Panics
    /// If `n` exceeds [`BufMut::tailroom`].
    pub fn commit(&mut self, n: usize) {
        assert!(n <= self.tailroom(), "commit {n} beyond the buffer");
        self.len += n;
    }

    /// Appends bytes behind the data (may use the tailroom).
    pub fn extend_from_slice(&mut self, data: &[u8]) -> Result<(), BufferError> {
        let have = self.tailroom();
        if data.len() > have {
            return Err(BufferError::NoRoom {
                need: data.len(),
                have,
            });
        }
        let start = self.off + self.len;
        self.bytes_mut()[start..start + data.len()].copy_from_slice(data);
        self.len += data.len();
        Ok(())
    }

    /// Prepends bytes in front of the data using the headroom, without moving the data.
    pub fn prepend(&mut self, header: &[u8]) -> Result<(), BufferError> {
        if header.len() > self.off {
            return Err(BufferError::NoHeadroom {
                need: header.len(),
                have: self.off,
            });
        }
        let start = self.off - header.len();
        self.bytes_mut()[start..start + header.len()].copy_from_slice(header);
        self.off = start;
        self.len += header.len();
        Ok(())
    }

    /// Drops `n` bytes from the front of the data (clamped), growing the headroom.
    pub fn advance(&mut self, n: usize) {
        let n = n.min(self.len);
        self.off += n;
        self.len -= n;
    }

    /// Shortens the data to `len` bytes (no effect if it is already shorter).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Takes `bytes` as this buffer's storage, holding `len` bytes of data at this buffer's
    /// offset, and gives back the storage it had, without copying: how a message received in
    /// a buffer laid out like the pool's (see `offhost_link::Channel::recv_into_at`) enters
    /// the pool. The pool keeps as many buffers as before, the storage it gets back later
    /// is `bytes`. Only for an empty buffer and `bytes` as long as its storage, with `len`
    /// within its data area; `Err(bytes)` otherwise.
    pub(crate) fn exchange_storage(
        &mut self,
        bytes: Vec<u8>,
        len: usize,
    ) -> Result<Vec<u8>, Vec<u8>> {
        let fits = self.len == 0
            && bytes.len() == self.st.bytes.len()
            && self
                .off
                .checked_add(len)
                .is_some_and(|end| end <= self.data_end);
        if !fits {
            return Err(bytes);
        }
        self.len = len;
        Ok(std::mem::replace(self.bytes_mut(), bytes))
    }

    /// Makes the buffer shareable and read-only, ready to be put on a queue.
    pub fn freeze(self) -> Buffer {
        Buffer {
            st: self.st,
            off: self.off,
            len: self.len,
        }
    }
}

impl fmt::Debug for BufMut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufMut")
            .field("offset", &self.off)
            .field("len", &self.len)
            .field("remaining", &self.remaining())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Pool, PoolConfig};

    fn one_buffer_pool() -> Pool {
        Pool::new(PoolConfig::new("p", 1, 64))
    }

    /// Fills the pool's buffer with `value` the way `fill` does and gives it back.
    fn fill(pool: &Pool, value: u8, n: usize) -> Vec<u8> {
        let mut b = pool.alloc().expect("the pool's one buffer is free");
        b.fill_with(value, n, false);
        let b = b.freeze();
        b.to_vec()
    }

    #[test]
    fn a_filled_storage_keeps_what_it_holds_through_the_pool() {
        let pool = one_buffer_pool();
        assert_eq!(fill(&pool, 7, 64), vec![7; 64]);
        let b = pool.alloc().unwrap();
        let start = pool.config().headroom;
        assert_eq!(
            b.st.filled,
            Some(Filled {
                value: 7,
                start,
                end: start + 64
            }),
            "the storage comes back known to hold what fill wrote"
        );
        drop(b);
        assert_eq!(fill(&pool, 7, 64), vec![7; 64]);
        // A shorter fill is covered; a fill of another value is not.
        assert_eq!(fill(&pool, 7, 10), vec![7; 10]);
        assert_eq!(fill(&pool, 8, 64), vec![8; 64]);
    }

    #[test]
    fn any_other_write_makes_fill_write_again() {
        let pool = one_buffer_pool();
        // Each way of writing a pooled buffer, after which fill must not trust the storage.
        type Write = fn(&mut BufMut);
        let writes: Vec<(&str, Write)> = vec![
            ("unfilled", |b| {
                b.unfilled()[..64].fill(9);
                b.commit(64);
            }),
            ("extend_from_slice", |b| {
                b.extend_from_slice(&[9; 64]).unwrap()
            }),
            ("as_mut_slice", |b| {
                b.commit(64);
                b.as_mut_slice().fill(9);
            }),
            ("exchange_storage", |b| {
                let len = b.st.bytes.len();
                let old = b.exchange_storage(vec![9; len], 64).unwrap();
                assert_eq!(old.len(), len);
            }),
        ];
        for (how, write) in writes {
            assert_eq!(fill(&pool, 7, 64), vec![7; 64]);
            let mut b = pool.alloc().unwrap();
            write(&mut b);
            assert_eq!(b.as_slice(), &[9; 64][..], "{how} wrote");
            drop(b);
            assert_eq!(fill(&pool, 7, 64), vec![7; 64], "fill after {how}");
        }
    }

    #[test]
    fn a_buffer_written_again_after_try_into_mut_is_filled_again() {
        let pool = one_buffer_pool();
        assert_eq!(fill(&pool, 7, 64), vec![7; 64]);
        let mut b = pool.alloc().unwrap();
        b.fill_with(7, 64, false);
        let mut again = b.freeze().try_into_mut().expect("the only reference");
        again.as_mut_slice()[3] = 1;
        drop(again);
        assert_eq!(fill(&pool, 7, 64), vec![7; 64]);
    }

    #[test]
    fn a_longer_fill_writes_the_bytes_beyond_the_known_ones() {
        let pool = one_buffer_pool();
        let mut b = pool.alloc().unwrap();
        b.unfilled().fill(9);
        drop(b);
        assert_eq!(fill(&pool, 7, 16), vec![7; 16]);
        assert_eq!(fill(&pool, 7, 64), vec![7; 64]);
    }

    #[test]
    fn rewrite_writes_even_what_the_storage_is_said_to_hold() {
        let pool = one_buffer_pool();
        let start = pool.config().headroom;
        // A storage said to hold 7s that holds 9s: only rewrite puts 7s there.
        let say_sevens = |b: &mut BufMut| {
            b.unfilled()[..64].fill(9);
            Arc::get_mut(&mut b.st).unwrap().filled = Some(Filled {
                value: 7,
                start,
                end: start + 64,
            });
        };
        let mut b = pool.alloc().unwrap();
        say_sevens(&mut b);
        b.fill_with(7, 64, true);
        assert_eq!(b.as_slice(), &[7; 64][..]);
        drop(b);
        let mut b = pool.alloc().unwrap();
        say_sevens(&mut b);
        b.fill_with(7, 64, false);
        assert_eq!(
            b.as_slice(),
            &[9; 64][..],
            "without rewrite the mark is trusted"
        );
    }
}
