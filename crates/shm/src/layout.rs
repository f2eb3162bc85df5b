//! The segment layout: a `#[repr(C)]` control block (header, ring indices, doorbells), then the
//! two rings' data, the two free rings and the buffer pool. Only offsets live in the segment.

use crossbeam_utils::CachePadded;
use std::mem::size_of;
use std::sync::atomic::{AtomicU32, AtomicU64};

use crate::config::Config;
use crate::endpoint::Side;
use crate::error::{AttachError, ConfigError};

/// Magic number at offset 0 of every offhost segment (`OFFHSHM` and a NUL, little endian).
pub const MAGIC: u64 = u64::from_le_bytes(*b"OFFHSHM\0");
/// Version of the segment layout this build speaks.
pub const VERSION: u32 = 1;

const MIN_RING: u64 = 256;
const MAX_RING: u64 = 1 << 30;
const MAX_BUFFER: u64 = 1 << 30;
const MAX_POOL: u64 = 1 << 20;
const MAX_SEGMENT: u64 = 64 << 30;
const PAGE: u64 = 4096;

/// Fixed header written by the creator before the segment is handed over.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Header {
    pub magic: u64,
    pub version: u32,
    pub control_size: u32,
    pub total_size: u64,
    pub ring_bytes: u64,
    pub pool_buffers: u32,
    pub buffer_size: u32,
    pub free_slots: u32,
    pub mode: u32,
    pub spin_ns: u64,
    pub ring_off: [u64; 2],
    pub free_off: [u64; 2],
    pub pool_off: u64,
}

/// Producer and consumer index of one ring, each on its own cache line.
#[repr(C)]
pub(crate) struct RingCtl {
    /// Bytes (or slots) ever published by the producer. Data-ring consumers never read it
    /// (records carry their own publication stamp); it is kept for diagnostics.
    pub tail: CachePadded<AtomicU64>,
    /// Bytes (or slots) ever consumed by the consumer.
    pub head: CachePadded<AtomicU64>,
}

/// The control block at offset 0 of the segment.
#[repr(C)]
pub(crate) struct Control {
    pub header: CachePadded<Header>,
    /// Data rings: `[host->engine, engine->host]`.
    pub rings: [RingCtl; 2],
    /// Free rings: `free[s]` returns buffers homed at side `s` to it.
    pub free: [RingCtl; 2],
    /// Doorbells, indexed by [`bell_index`].
    pub bells: [CachePadded<AtomicU32>; 4],
}

// The control block is shared between two builds (possibly two different binaries): its
// layout is fixed here at compile time, and `control_size` in the header catches the rest at
// attach.
const _: () = {
    use std::mem::{align_of, offset_of};
    assert!(size_of::<Header>() == 96);
    assert!(offset_of!(Header, magic) == 0);
    assert!(offset_of!(Header, version) == 8);
    assert!(offset_of!(Header, control_size) == 12);
    assert!(offset_of!(Header, total_size) == 16);
    assert!(offset_of!(Header, ring_bytes) == 24);
    assert!(offset_of!(Header, pool_buffers) == 32);
    assert!(offset_of!(Header, buffer_size) == 36);
    assert!(offset_of!(Header, free_slots) == 40);
    assert!(offset_of!(Header, mode) == 44);
    assert!(offset_of!(Header, spin_ns) == 48);
    assert!(offset_of!(Header, ring_off) == 56);
    assert!(offset_of!(Header, free_off) == 72);
    assert!(offset_of!(Header, pool_off) == 88);
    // Every index and doorbell on a cache line of its own, after the header.
    let line = size_of::<CachePadded<AtomicU64>>();
    assert!(line >= 64 && line == size_of::<CachePadded<AtomicU32>>());
    assert!(size_of::<RingCtl>() == 2 * line);
    assert!(offset_of!(RingCtl, tail) == 0);
    assert!(offset_of!(RingCtl, head) == line);
    assert!(offset_of!(Control, header) == 0);
    assert!(size_of::<CachePadded<Header>>().is_multiple_of(line));
    assert!(offset_of!(Control, rings) == size_of::<CachePadded<Header>>());
    assert!(offset_of!(Control, free) == offset_of!(Control, rings) + 2 * size_of::<RingCtl>());
    assert!(offset_of!(Control, bells) == offset_of!(Control, free) + 2 * size_of::<RingCtl>());
    assert!(size_of::<Control>() == offset_of!(Control, bells) + 4 * line);
    assert!(align_of::<Control>() <= PAGE as usize);
    // The control block fits before the first ring (which starts at the next page).
    assert!(size_of::<Control>() <= PAGE as usize);
    // The futex word of a doorbell is the first 4 bytes of its line.
    assert!(size_of::<AtomicU32>() == 4);
};

/// Index of a doorbell: side `side` (0 host, 1 engine), waiting to receive (`rx`) or to send.
pub(crate) fn bell_index(side: Side, rx: bool) -> usize {
    side.index() * 2 + usize::from(!rx)
}

/// Where everything lives in a segment, computed from the sizes in a [`Config`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub(crate) ring_bytes: u64,
    pub(crate) pool_buffers: u32,
    pub(crate) buffer_size: u32,
    pub(crate) free_slots: u32,
    pub(crate) ring_off: [u64; 2],
    pub(crate) free_off: [u64; 2],
    pub(crate) pool_off: u64,
    pub(crate) total: u64,
}

fn align(v: u64, a: u64) -> u64 {
    v.div_ceil(a) * a
}

impl Layout {
    /// Lays out a segment for `config`, or says which size is unsupported.
    pub fn new(config: &Config) -> Result<Layout, ConfigError> {
        Self::from_sizes(config.ring_bytes, config.pool_buffers, config.buffer_size)
    }

    fn from_sizes(ring_bytes: u64, pool: u32, buffer: u32) -> Result<Layout, ConfigError> {
        if !ring_bytes.is_power_of_two() || !(MIN_RING..=MAX_RING).contains(&ring_bytes) {
            return Err(ConfigError::RingBytes {
                found: ring_bytes,
                min: MIN_RING,
                max: MAX_RING,
            });
        }
        let buffer64 = u64::from(buffer);
        if buffer64 % 64 != 0 || buffer64 == 0 || buffer64 > MAX_BUFFER {
            return Err(ConfigError::BufferSize {
                found: buffer64,
                max: MAX_BUFFER,
            });
        }
        if u64::from(pool) > MAX_POOL {
            return Err(ConfigError::PoolBuffers {
                found: pool.into(),
                max: MAX_POOL,
            });
        }
        let free_slots = pool.max(1).next_power_of_two();
        let mut at = align(size_of::<Control>() as u64, PAGE);
        let mut ring_off = [0; 2];
        for off in &mut ring_off {
            *off = at;
            at += ring_bytes;
        }
        let mut free_off = [0; 2];
        for off in &mut free_off {
            *off = at;
            at = align(at + 4 * u64::from(free_slots), 128);
        }
        let pool_off = align(at, PAGE);
        // At most 2^21 buffers of at most 2^30 bytes: no overflow in u64.
        let total = align(pool_off + 2 * u64::from(pool) * buffer64, PAGE);
        if total > MAX_SEGMENT {
            return Err(ConfigError::TooLarge {
                found: total,
                max: MAX_SEGMENT,
            });
        }
        Ok(Layout {
            ring_bytes,
            pool_buffers: pool,
            buffer_size: buffer,
            free_slots,
            ring_off,
            free_off,
            pool_off,
            total,
        })
    }

    /// Total size of the segment in bytes.
    pub fn total_size(&self) -> u64 {
        self.total
    }

    /// Bytes of each data ring.
    pub fn ring_bytes(&self) -> u64 {
        self.ring_bytes
    }

    /// Offset of the data of ring `dir` (0 host->engine, 1 engine->host).
    pub fn ring_data_offset(&self, dir: usize) -> u64 {
        self.ring_off[dir]
    }

    /// Offsets of the producer index (tail) and consumer index (head) of ring `dir`.
    pub fn ring_index_offsets(&self, dir: usize) -> (u64, u64) {
        let base = std::mem::offset_of!(Control, rings) + dir * size_of::<RingCtl>();
        let tail = base + std::mem::offset_of!(RingCtl, tail);
        let head = base + std::mem::offset_of!(RingCtl, head);
        (tail as u64, head as u64)
    }

    /// Offsets of the producer and consumer index of free ring `side` (buffers homed at `side`).
    pub fn free_index_offsets(&self, side: Side) -> (u64, u64) {
        let base = std::mem::offset_of!(Control, free) + side.index() * size_of::<RingCtl>();
        let tail = base + std::mem::offset_of!(RingCtl, tail);
        let head = base + std::mem::offset_of!(RingCtl, head);
        (tail as u64, head as u64)
    }

    /// Offset of the slots of free ring `side`.
    pub fn free_data_offset(&self, side: Side) -> u64 {
        self.free_off[side.index()]
    }

    /// Offset of the first pool buffer.
    pub fn pool_offset(&self) -> u64 {
        self.pool_off
    }

    pub(crate) fn header(&self, config: &Config) -> Header {
        Header {
            magic: MAGIC,
            version: VERSION,
            control_size: size_of::<Control>() as u32,
            total_size: self.total,
            ring_bytes: self.ring_bytes,
            pool_buffers: self.pool_buffers,
            buffer_size: self.buffer_size,
            free_slots: self.free_slots,
            mode: config.mode.to_wire(),
            spin_ns: config.spin.as_nanos().min(u64::MAX as u128) as u64,
            ring_off: self.ring_off,
            free_off: self.free_off,
            pool_off: self.pool_off,
        }
    }

    /// Validates a header read from a segment of `file_size` bytes and returns its layout.
    pub(crate) fn validate(h: &Header, file_size: u64) -> Result<Layout, AttachError> {
        if h.magic != MAGIC {
            return Err(AttachError::Magic {
                expected: MAGIC,
                found: h.magic,
            });
        }
        if h.version != VERSION {
            return Err(AttachError::Version {
                expected: VERSION,
                found: h.version,
            });
        }
        let mismatch = |field, expected: u64, found: u64| {
            if expected == found {
                Ok(())
            } else {
                Err(AttachError::Layout {
                    field,
                    expected,
                    found,
                })
            }
        };
        mismatch(
            "control_size",
            size_of::<Control>() as u64,
            h.control_size.into(),
        )?;
        let l = Layout::from_sizes(h.ring_bytes, h.pool_buffers, h.buffer_size)?;
        mismatch("free_slots", l.free_slots.into(), h.free_slots.into())?;
        for i in 0..2 {
            mismatch("ring_off", l.ring_off[i], h.ring_off[i])?;
            mismatch("free_off", l.free_off[i], h.free_off[i])?;
        }
        mismatch("pool_off", l.pool_off, h.pool_off)?;
        mismatch("total_size", l.total, h.total_size)?;
        mismatch("file size", l.total, file_size)?;
        Ok(l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_ordered_and_aligned() {
        let l = Layout::new(&Config::default()).unwrap();
        assert!(l.ring_off[0] >= size_of::<Control>() as u64);
        assert_eq!(l.ring_off[1], l.ring_off[0] + l.ring_bytes);
        assert!(l.free_off[0] >= l.ring_off[1] + l.ring_bytes);
        assert_eq!(l.pool_off % PAGE, 0);
        assert!(l.total >= l.pool_off + 2 * 32 * (64 << 10));
        let (t, h) = l.ring_index_offsets(0);
        assert!(h - t >= 64, "indices share a cache line");
    }

    #[test]
    fn bad_sizes_are_named() {
        let c = Config {
            ring_bytes: 1000,
            ..Config::default()
        };
        let e = Layout::new(&c).unwrap_err();
        assert!(e.to_string().contains("ring_bytes 1000"), "{e}");
        let c = Config {
            buffer_size: 100,
            ..Config::default()
        };
        assert!(Layout::new(&c)
            .unwrap_err()
            .to_string()
            .contains("buffer_size 100"));
    }
}
