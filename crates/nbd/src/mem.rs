//! A sparse memory pseudo-disk: a two-level page map of lazily allocated 64 KiB chunks.
//!
//! Nothing is allocated until written, so `mem:1T` costs a small directory (one pointer per
//! 256 MiB). Each chunk has its own lock, so requests on different chunks run in parallel.
//! A trimmed or zeroed whole chunk is freed again.
//!
//! Chunks are [`PageBuf`]s: page-aligned, from the system allocator (glibc's `malloc`), not
//! from the process's global one (mimalloc in the `offhost` binary), which backs them with
//! transparent huge pages: the first writes to a fresh export then fault in 2 MiB at a time,
//! and where the kernel's zeroing of such pages is slow (a VM whose host backs guest memory
//! on first touch) it dominates the server's time. A new chunk's pages are faulted in by one
//! system call rather than one fault per page (`docs/notes/nbd.md`, "Where the server's time
//! goes").

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{OnceLock, RwLock};

use offhost_shm::PageBuf;

use crate::backend::Backend;
use crate::proto::Errno;

/// log2 of the chunk size.
const CHUNK_SHIFT: u32 = 16;
/// Bytes per chunk.
pub const CHUNK: u64 = 1 << CHUNK_SHIFT;
/// log2 of the chunks per second-level table.
const L2_SHIFT: u32 = 12;
const L2_LEN: usize = 1 << L2_SHIFT;
/// Largest supported size: 64 TiB (a 2 MiB directory).
pub const MAX_SIZE: u64 = 1 << 46;

/// A chunk: absent until written, then zeroes with its pages already faulted in.
type Chunk = RwLock<Option<PageBuf>>;

/// The sparse memory disk.
pub struct MemDisk {
    size: u64,
    dir: Vec<OnceLock<Box<[Chunk]>>>,
    allocated: AtomicU64,
}

impl std::fmt::Debug for MemDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemDisk")
            .field("size", &self.size)
            .field("allocated", &self.allocated_bytes())
            .finish()
    }
}

impl MemDisk {
    /// Creates a disk of `size` bytes (at most [`MAX_SIZE`]); callers check the bound.
    pub fn new(size: u64) -> Self {
        let size = size.min(MAX_SIZE);
        let chunks = size.div_ceil(CHUNK);
        let tables = chunks.div_ceil(L2_LEN as u64) as usize;
        let mut dir = Vec::with_capacity(tables);
        dir.resize_with(tables, OnceLock::new);
        Self {
            size,
            dir,
            allocated: AtomicU64::new(0),
        }
    }

    /// Bytes of chunk memory currently allocated.
    pub fn allocated_bytes(&self) -> u64 {
        // Relaxed: a statistic, not used to order other memory operations.
        self.allocated.load(Ordering::Relaxed)
    }

    fn chunk(&self, idx: u64) -> Option<&Chunk> {
        let t = (idx >> L2_SHIFT) as usize;
        self.dir
            .get(t)?
            .get()
            .map(|tab| &tab[(idx as usize) & (L2_LEN - 1)])
    }

    fn chunk_or_create(&self, idx: u64) -> &Chunk {
        let t = (idx >> L2_SHIFT) as usize;
        let tab = self.dir[t].get_or_init(|| {
            let mut v = Vec::with_capacity(L2_LEN);
            v.resize_with(L2_LEN, || RwLock::new(None));
            v.into_boxed_slice()
        });
        &tab[(idx as usize) & (L2_LEN - 1)]
    }

    /// Visits the chunk pieces of `[off, off+len)`: (chunk index, offset in chunk, position in
    /// the request, length).
    fn pieces(off: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize, usize)> {
        let mut pos = 0usize;
        std::iter::from_fn(move || {
            if pos >= len {
                return None;
            }
            let abs = off + pos as u64;
            let idx = abs >> CHUNK_SHIFT;
            let inner = (abs & (CHUNK - 1)) as usize;
            let n = (CHUNK as usize - inner).min(len - pos);
            let item = (idx, inner, pos, n);
            pos += n;
            Some(item)
        })
    }

    fn zero_range(&self, off: u64, len: u64) {
        let mut pos = 0u64;
        while pos < len {
            let abs = off + pos;
            let idx = abs >> CHUNK_SHIFT;
            let inner = (abs & (CHUNK - 1)) as usize;
            let n = (CHUNK - inner as u64).min(len - pos) as usize;
            if let Some(c) = self.chunk(idx) {
                let mut g = c.write().unwrap_or_else(|e| e.into_inner());
                if n as u64 == CHUNK {
                    if g.take().is_some() {
                        // Relaxed: statistic only.
                        self.allocated.fetch_sub(CHUNK, Ordering::Relaxed);
                    }
                } else if let Some(buf) = g.as_mut() {
                    buf[inner..inner + n].fill(0);
                }
            }
            pos += n as u64;
        }
    }
}

impl Backend for MemDisk {
    fn size(&self) -> u64 {
        self.size
    }

    fn read(&self, off: u64, buf: &mut [u8]) -> Result<(), Errno> {
        for (idx, inner, pos, n) in Self::pieces(off, buf.len()) {
            let dst = &mut buf[pos..pos + n];
            match self.chunk(idx) {
                Some(c) => {
                    let g = c.read().unwrap_or_else(|e| e.into_inner());
                    match g.as_ref() {
                        Some(src) => dst.copy_from_slice(&src[inner..inner + n]),
                        None => dst.fill(0),
                    }
                }
                None => dst.fill(0),
            }
        }
        Ok(())
    }

    fn write(&self, off: u64, data: &[u8], _fua: bool) -> Result<(), Errno> {
        for (idx, inner, pos, n) in Self::pieces(off, data.len()) {
            let c = self.chunk_or_create(idx);
            let mut g = c.write().unwrap_or_else(|e| e.into_inner());
            let buf = g.get_or_insert_with(|| {
                // Relaxed: statistic only.
                self.allocated.fetch_add(CHUNK, Ordering::Relaxed);
                PageBuf::zeroed(CHUNK as usize)
            });
            buf[inner..inner + n].copy_from_slice(&data[pos..pos + n]);
        }
        Ok(())
    }

    fn trim(&self, off: u64, len: u64, _fua: bool) -> Result<(), Errno> {
        self.zero_range(off, len);
        Ok(())
    }

    fn write_zeroes(&self, off: u64, len: u64, _fua: bool) -> Result<(), Errno> {
        // A freed chunk reads as zeroes, so punching the hole is a valid way to write zeroes.
        self.zero_range(off, len);
        Ok(())
    }

    fn flush(&self) -> Result<(), Errno> {
        Ok(())
    }
    fn kind(&self) -> &'static str {
        "memory"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terabyte_disk_costs_nothing_until_written() {
        let d = MemDisk::new(1 << 40);
        assert_eq!(d.allocated_bytes(), 0);
        let mut b = vec![1u8; 4096];
        d.read((1 << 40) - 4096, &mut b).unwrap();
        assert!(b.iter().all(|&x| x == 0));
        d.write(123_456_789, b"hello", false).unwrap();
        assert_eq!(d.allocated_bytes(), CHUNK);
    }

    #[test]
    fn writes_across_chunks_read_back() {
        let d = MemDisk::new(1 << 20);
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + 3) as u8).collect();
        d.write(CHUNK - 17, &data, false).unwrap();
        let mut back = vec![0u8; data.len()];
        d.read(CHUNK - 17, &mut back).unwrap();
        assert_eq!(back, data);
        assert_eq!(d.allocated_bytes(), 5 * CHUNK);
    }

    #[test]
    fn trim_frees_whole_chunks_and_zeroes_partial_ones() {
        let d = MemDisk::new(1 << 20);
        d.write(0, &vec![9u8; 3 * CHUNK as usize], false).unwrap();
        d.trim(100, 2 * CHUNK, false).unwrap();
        // Chunk 1 is wholly inside the range and is freed; chunks 0 and 2 stay.
        assert_eq!(d.allocated_bytes(), 2 * CHUNK);
        let mut b = vec![0u8; 3 * CHUNK as usize];
        d.read(0, &mut b).unwrap();
        assert!(b[..100].iter().all(|&x| x == 9));
        assert!(b[100..100 + 2 * CHUNK as usize].iter().all(|&x| x == 0));
        assert!(b[100 + 2 * CHUNK as usize..].iter().all(|&x| x == 9));
    }
}
