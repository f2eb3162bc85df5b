//! Net counts of a sinogram and the two ways of adding increments to them.
//!
//! Histogramming adds `+1` (prompt) or `-1` (delayed) at a random bin. When the sinogram is
//! larger than the caches (the demo's span-1 stack is 16 MiB, the mMR's hundreds), nearly
//! every increment is a cache miss. [`Counts`] then works in two passes: increments are first
//! scattered into one bucket per *region* of the sinogram (256 KiB of bins), a sequential
//! write; a full bucket (64 Ki increments) is flushed into its region, whose lines are by then
//! in cache and each take many increments. Small sinograms keep the direct path.
//!
//! Increments travel as `u32` entries: the bin index in bits 0-30 and the sign in bit 31
//! (set for `-1`). Integer addition commutes, so both paths give bit-identical counts.

/// Bit 31 of an entry: the increment is `-1`.
pub const MINUS: u32 = 1 << 31;
/// Bits 0-30 of an entry: the bin index.
pub const INDEX: u32 = MINUS - 1;

/// Sinograms at most this large (in bytes) are histogrammed directly.
pub const DIRECT_MAX_BYTES: usize = 2 << 20;
/// Bins per region: 64 Ki bins = 256 KiB.
const REGION_BITS: u32 = 16;
/// Increments a bucket holds before it is flushed.
const BUCKET_CAP: usize = 1 << 16;
/// Bucket storage of all regions together, in entries (at most 64 MiB); huge sinograms get
/// smaller buckets.
const BUCKETS_MAX_ENTRIES: usize = 1 << 24;

/// How increments reach the counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Strategy {
    /// Bucketed above `DIRECT_MAX_BYTES` (2 MiB), direct below.
    #[default]
    Auto,
    /// Every increment goes straight to its bin.
    Direct,
    /// Increments go through per-region buckets.
    Bucketed,
}

/// Per-region buckets of pending increments.
#[derive(Clone, Debug)]
struct Buckets {
    /// Entries per bucket before a flush.
    cap: usize,
    /// `regions * cap` entries, bucket `r` at `r * cap`.
    store: Vec<u32>,
    /// Entries pending per region.
    fill: Vec<u32>,
}

impl Buckets {
    fn new(bins: usize, cap: Option<usize>) -> Self {
        let regions = bins.div_ceil(1 << REGION_BITS);
        let cap = cap
            .unwrap_or_else(|| (BUCKETS_MAX_ENTRIES / regions).clamp(1024, BUCKET_CAP))
            .max(1);
        Buckets {
            cap,
            store: vec![0; regions * cap],
            fill: vec![0; regions],
        }
    }

    /// The pending entries of region `r`.
    fn pending(&self, r: usize) -> &[u32] {
        let at = r * self.cap;
        &self.store[at..at + self.fill[r] as usize]
    }
}

/// Adds entries to bins directly.
#[inline]
fn apply(bins: &mut [i32], entries: &[u32]) {
    for &e in entries {
        let minus = (e >> 31) as i32;
        if let Some(b) = bins.get_mut((e & INDEX) as usize) {
            *b += 1 - 2 * minus;
        }
    }
}

/// Net counts with a trash bin at the end, fed with entries (see the module docs).
#[derive(Clone, Debug)]
pub struct Counts {
    /// The counts, then the trash bin.
    bins: Vec<i32>,
    buckets: Option<Buckets>,
}

impl Counts {
    /// `len` zero counts plus a trash bin at index `len`, with the given strategy.
    ///
    /// # Panics
    /// When `len` does not fit in 31 bits.
    pub fn new(len: usize, strategy: Strategy) -> Self {
        Self::with_bucket_cap(len, strategy, None)
    }

    /// As [`Counts::new`], with `cap` increments per bucket (tests use small ones to flush
    /// often).
    pub(crate) fn with_bucket_cap(len: usize, strategy: Strategy, cap: Option<usize>) -> Self {
        assert!(len < INDEX as usize, "sinogram of {len} bins is too large");
        let bucketed = match strategy {
            Strategy::Auto => len * 4 > DIRECT_MAX_BYTES,
            Strategy::Direct => false,
            Strategy::Bucketed => true,
        };
        let mut bins = vec![0; len + 1];
        bins.shrink_to_fit();
        Counts {
            buckets: bucketed.then(|| Buckets::new(len + 1, cap)),
            bins,
        }
    }

    /// Bins without the trash bin.
    pub fn len(&self) -> usize {
        self.bins.len() - 1
    }

    /// Index of the trash bin (where rejected events go).
    pub fn trash(&self) -> u32 {
        self.len() as u32
    }

    /// Whether increments go through buckets.
    pub fn is_bucketed(&self) -> bool {
        self.buckets.is_some()
    }

    /// Adds entries (index in bits 0-30, bit 31 for `-1`); indices past the trash bin are
    /// ignored.
    pub fn add(&mut self, entries: &[u32]) {
        let Some(bk) = &mut self.buckets else {
            apply(&mut self.bins, entries);
            return;
        };
        let cap = bk.cap;
        for &e in entries {
            let r = ((e & INDEX) >> REGION_BITS) as usize;
            let Some(f) = bk.fill.get_mut(r) else {
                continue;
            };
            let at = r * cap + *f as usize;
            bk.store[at] = e;
            *f += 1;
            if *f as usize == cap {
                *f = 0;
                apply(&mut self.bins, &bk.store[r * cap..(r + 1) * cap]);
            }
        }
    }

    /// Applies every pending increment (the counts then hold everything added so far).
    pub fn flush(&mut self) {
        if let Some(bk) = &mut self.buckets {
            for r in 0..bk.fill.len() {
                apply(&mut self.bins, bk.pending(r));
                bk.fill[r] = 0;
            }
        }
    }

    /// Copies the counts, pending increments included, into `out` (`len()` values).
    pub fn copy_to(&self, out: &mut [i32]) {
        let n = self.len();
        out.copy_from_slice(&self.bins[..n]);
        if let Some(bk) = &self.buckets {
            for r in 0..bk.fill.len() {
                apply(out, bk.pending(r));
            }
        }
    }

    /// The counts with every pending increment applied, without the trash bin, in place.
    pub fn flushed(&mut self) -> &[i32] {
        self.flush();
        let n = self.len();
        &self.bins[..n]
    }

    /// The counts, pending increments included, without the trash bin.
    pub fn into_vec(mut self) -> Vec<i32> {
        self.flush();
        self.bins.pop();
        self.bins
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn random_entries(n: usize, len: usize, seed: u64) -> Vec<u32> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                // Mostly in range, some to the trash bin, a few past it (ignored).
                let idx = match rng.gen_range(0..100) {
                    0..=89 => rng.gen_range(0..len as u32),
                    90..=97 => len as u32,
                    _ => rng.gen_range(len as u32 + 1..INDEX),
                };
                idx | if rng.gen_bool(0.2) { MINUS } else { 0 }
            })
            .collect()
    }

    #[test]
    fn bucketed_counts_equal_direct_counts() {
        let len = (1 << 20) + 12_345;
        let entries = random_entries(3_000_000, len, 5);
        for cap in [None, Some(1), Some(7), Some(1000)] {
            let mut direct = Counts::new(len, Strategy::Direct);
            let mut bucketed = Counts::with_bucket_cap(len, Strategy::Bucketed, cap);
            assert!(bucketed.is_bucketed() && !direct.is_bucketed());
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(6);
            let mut rest = &entries[..];
            while !rest.is_empty() {
                let n = rng.gen_range(0..5000).min(rest.len());
                direct.add(&rest[..n]);
                bucketed.add(&rest[..n]);
                rest = &rest[n..];
                if rng.gen_bool(0.01) {
                    bucketed.flush();
                }
                if rng.gen_bool(0.01) {
                    // Snapshots include pending increments.
                    let (mut a, mut b) = (vec![0; len], vec![0; len]);
                    direct.copy_to(&mut a);
                    bucketed.copy_to(&mut b);
                    assert!(a == b, "snapshot differs (cap {cap:?})");
                }
            }
            assert!(direct.into_vec() == bucketed.into_vec(), "cap {cap:?}");
        }
    }

    #[test]
    fn auto_buckets_only_large_sinograms() {
        assert!(!Counts::new(DIRECT_MAX_BYTES / 4, Strategy::Auto).is_bucketed());
        assert!(Counts::new(DIRECT_MAX_BYTES / 4 + 1, Strategy::Auto).is_bucketed());
        let c = Counts::new(10, Strategy::Bucketed);
        assert_eq!((c.len(), c.trash()), (10, 10));
    }
}
