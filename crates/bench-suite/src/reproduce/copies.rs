//! `[SUN-T]`'s copies into shared memory (Tables 4 and 5): 32-bit words one at a time in four
//! code styles, against block copies (`bcopy`, here `copy_from_slice`, i.e. memcpy) of
//! 4 B to 256 KiB. The caller hands in the shared region (a buffer of an `offhost-shm`
//! segment) and a private one of the same length.

use std::hint::black_box;
use std::time::{Duration, Instant};

use super::verdict::Measured;
use offhost_bench::stats::Summary;

/// A word-by-word code style of `[SUN-T]`'s Figure 17.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// `*dst_shared++ = constant`: writes only.
    WriteConst,
    /// `*dst_local = *src_shared++`: reads only.
    ReadShared,
    /// `*dst_shared++ = *src_local++`: private to shared.
    CopyToShared,
    /// `*dst_local++ = *src_shared++`: shared to private.
    CopyFromShared,
}

impl Style {
    /// Every style, in the paper's row order.
    pub const ALL: [Style; 4] = [
        Style::WriteConst,
        Style::ReadShared,
        Style::CopyToShared,
        Style::CopyFromShared,
    ];

    /// The seed's C expression for this style.
    pub fn code(self) -> &'static str {
        match self {
            Style::WriteConst => "*dst_shm++ = const",
            Style::ReadShared => "*dst_local = *src_shm++",
            Style::CopyToShared => "*dst_shm++ = *src_local++",
            Style::CopyFromShared => "*dst_local++ = *src_shm++",
        }
    }
}

/// Direction of a block copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Private memory to the shared region.
    ToShared,
    /// The shared region to private memory.
    FromShared,
}

fn word(b: &[u8]) -> u32 {
    u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
}

/// Moves `len` bytes (a multiple of 4) word by word in `style`. After each word the
/// destination goes through `black_box` (a compiler barrier, no instruction), so every store
/// happens in its own iteration and the loop cannot be turned into a block copy.
fn words(style: Style, shared: &mut [u8], local: &mut [u8], len: usize) {
    let n = len / 4;
    match style {
        Style::WriteConst => {
            let c = black_box(0x5a5a_5a5au32).to_ne_bytes();
            for w in shared[..n * 4].chunks_exact_mut(4) {
                w.copy_from_slice(&c);
                black_box(&mut *w);
            }
        }
        Style::ReadShared => {
            for w in shared[..n * 4].chunks_exact(4) {
                black_box(word(w));
            }
        }
        Style::CopyToShared => {
            for (d, s) in shared[..n * 4]
                .chunks_exact_mut(4)
                .zip(local[..n * 4].chunks_exact(4))
            {
                d.copy_from_slice(s);
                black_box(&mut *d);
            }
        }
        Style::CopyFromShared => {
            for (d, s) in local[..n * 4]
                .chunks_exact_mut(4)
                .zip(shared[..n * 4].chunks_exact(4))
            {
                d.copy_from_slice(s);
                black_box(&mut *d);
            }
        }
    }
}

/// Runs `op` (which moves `bytes`) repeatedly for `reps` repetitions of about `rep_time`
/// each, after one warm-up repetition; returns the median rate in bytes per second.
fn rate(bytes: usize, reps: usize, rep_time: Duration, mut op: impl FnMut()) -> Measured {
    let t = Instant::now();
    let mut calls = 0usize;
    while calls < 1 || t.elapsed() < rep_time {
        op();
        calls += 1;
    }
    let per_rep = calls.max(1);
    let samples: Vec<f64> = (0..reps.max(1))
        .map(|_| {
            let t = Instant::now();
            for _ in 0..per_rep {
                op();
            }
            (bytes * per_rep) as f64 / t.elapsed().as_secs_f64().max(1e-12)
        })
        .collect();
    Summary::of(&samples).map_or(Measured::point(0.0), |s| Measured {
        mid: s.median,
        lo: s.min,
        hi: s.max,
    })
}

/// Word-by-word rate (bytes/s) of `style` over transfers of `size` bytes (at least 4).
pub fn word_rate(
    style: Style,
    shared: &mut [u8],
    local: &mut [u8],
    size: usize,
    reps: usize,
    rep_time: Duration,
) -> Measured {
    let size = size.clamp(4, shared.len().min(local.len()));
    rate(size, reps, rep_time, || words(style, shared, local, size))
}

/// Block-copy rate (bytes/s) of single copies of `block` bytes, walking through the regions
/// block after block.
pub fn block_rate(
    dir: Direction,
    shared: &mut [u8],
    local: &mut [u8],
    block: usize,
    reps: usize,
    rep_time: Duration,
) -> Measured {
    let len = shared.len().min(local.len());
    let block = block.clamp(1, len);
    let mut at = 0;
    rate(block, reps, rep_time, || {
        if at + block > len {
            at = 0;
        }
        let n = black_box(block);
        match dir {
            Direction::ToShared => shared[at..at + n].copy_from_slice(&local[at..at + n]),
            Direction::FromShared => local[at..at + n].copy_from_slice(&shared[at..at + n]),
        }
        at += block;
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_styles_move_the_data() {
        let mut shared = vec![0u8; 1024];
        let mut local: Vec<u8> = (0..1024).map(|i| i as u8).collect();
        words(Style::CopyToShared, &mut shared, &mut local, 1024);
        assert_eq!(shared, local);
        let mut back = vec![0u8; 1024];
        words(Style::CopyFromShared, &mut shared, &mut back, 1024);
        assert_eq!(back, local);
        words(Style::WriteConst, &mut shared, &mut back, 8);
        assert_eq!(&shared[..4], &0x5a5a_5a5au32.to_ne_bytes());
    }

    #[test]
    fn rates_are_positive() {
        let mut shared = vec![0u8; 4096];
        let mut local = vec![1u8; 4096];
        let t = Duration::from_micros(200);
        for s in Style::ALL {
            let r = word_rate(s, &mut shared, &mut local, 64, 3, t);
            assert!(r.lo > 0.0 && r.lo <= r.mid && r.mid <= r.hi, "{r:?}");
        }
        for d in [Direction::ToShared, Direction::FromShared] {
            assert!(block_rate(d, &mut shared, &mut local, 4, 3, t).lo > 0.0);
            assert!(block_rate(d, &mut shared, &mut local, 4096, 3, t).lo > 0.0);
        }
        assert_eq!(shared, local);
    }
}
