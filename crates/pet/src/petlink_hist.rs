//! Histogramming PETLINK words into span-1 or compressed sinograms.

use crate::buckets::{Counts, Strategy, MINUS};
use crate::error::GeometryError;
use crate::geometry::Scanner;
use crate::layout::Layout;
use crate::petlink::PetlinkStats;
use crate::sinogram::{HistStats, Sinogram};

/// Words whose counts are handed to the sinogram at once.
const BLOCK: usize = 1024;

/// Histograms PETLINK 32-bit words (span-1 bin addresses) into a sinogram of any span.
#[derive(Clone, Debug)]
pub struct PetlinkHistogrammer {
    /// span-1 sinogram index -> target sinogram offset in bins.
    map: Vec<u32>,
    plane: u32,
    /// Net counts plus a trash bin.
    counts: Counts,
    sino: Sinogram,
    stats: HistStats,
    words: PetlinkStats,
}

impl PetlinkHistogrammer {
    /// A histogrammer for the PETLINK scanner `scanner` (its span is ignored: PETLINK bin
    /// addresses are span 1) into a sinogram of span `span`.
    pub fn new(scanner: &Scanner, span: u32) -> Result<Self, GeometryError> {
        Self::with_strategy(scanner, span, Strategy::Auto)
    }

    /// As [`PetlinkHistogrammer::new`], choosing how increments reach the counts.
    pub fn with_strategy(
        scanner: &Scanner,
        span: u32,
        strategy: Strategy,
    ) -> Result<Self, GeometryError> {
        let src = Layout::new(&scanner.with_span(1))?;
        let mut sino = Sinogram::new(&scanner.with_span(span))?;
        let plane = scanner.plane_size() as u32;
        let map = (0..src.total_sinograms())
            .map(|i| {
                let (seg, sum) = src.locate(i).expect("index in range");
                let d = seg.min_rd;
                let ra = ((sum as i32 - d) / 2) as u32;
                let rb = ((sum as i32 + d) / 2) as u32;
                let t = sino
                    .layout
                    .sinogram(ra, rb)
                    .expect("kept in span 1 is kept");
                t * plane
            })
            .collect();
        let counts = sino.take_counts(strategy);
        Ok(PetlinkHistogrammer {
            map,
            plane,
            counts,
            sino,
            stats: HistStats::default(),
            words: PetlinkStats::default(),
        })
    }

    /// Adds raw words; events go to the sinogram, tags are counted.
    pub fn add_words(&mut self, words: &[u32]) {
        let blocks = words.chunks(BLOCK).map(|b| b.iter().copied());
        self.add_blocks(blocks, words.len());
    }

    /// Adds raw words as they lie in a file or a message, 4 little-endian bytes each (a
    /// trailing partial word is left out: the caller keeps it for the next bytes).
    pub fn add_le_bytes(&mut self, bytes: &[u8]) {
        let word = |c: &[u8]| u32::from_le_bytes(c.try_into().expect("4 bytes"));
        let whole = &bytes[..bytes.len() / 4 * 4];
        let blocks = whole.chunks(4 * BLOCK).map(|b| b.chunks_exact(4).map(word));
        self.add_blocks(blocks, whole.len() / 4);
    }

    /// Adds `words` words given in blocks of at most [`BLOCK`].
    fn add_blocks<B: Iterator<Item = u32>>(
        &mut self,
        blocks: impl Iterator<Item = B>,
        words: usize,
    ) {
        let trash = self.counts.trash() as usize;
        let (mut events, mut delayeds) = (0u64, 0u64);
        let (mut rej_p, mut rej_d) = (0u64, 0u64);
        let mut entries = [0u32; BLOCK];
        for block in blocks {
            let mut n = 0;
            for w in block {
                if w >> 31 == 0 {
                    let addr = w & 0x3FFF_FFFF;
                    let idx = match self.map.get((addr / self.plane) as usize) {
                        Some(&base) => (base + addr % self.plane) as usize,
                        None => trash,
                    };
                    let delayed = (w >> 30) & 1 == 0;
                    let rejected = idx == trash;
                    events += 1;
                    delayeds += delayed as u64;
                    rej_p += (rejected & !delayed) as u64;
                    rej_d += (rejected & delayed) as u64;
                    entries[n] = idx as u32 | if delayed { MINUS } else { 0 };
                    n += 1;
                } else {
                    self.words.add(crate::petlink::Word::decode(w));
                    self.words.words -= 1;
                }
            }
            self.counts.add(&entries[..n]);
        }
        self.words.words += words as u64;
        self.words.events += events;
        self.words.delayeds += delayeds;
        self.words.prompts += events - delayeds;
        let st = &mut self.stats;
        st.events += events;
        st.delayeds += delayeds;
        st.prompts += events - delayeds;
        st.geometry_rejected += rej_p + rej_d;
        st.accepted_prompts += events - delayeds - rej_p;
        st.accepted_delayeds += delayeds - rej_d;
    }

    /// Applies increments still pending in buckets (see the bucketed counts); snapshots and
    /// [`PetlinkHistogrammer::finish`] include them anyway.
    pub fn flush(&mut self) {
        self.counts.flush();
    }

    /// Histogram statistics so far.
    pub fn stats(&self) -> HistStats {
        self.stats
    }

    /// Word counts so far (events, prompts, delayeds, tags, duration).
    pub fn word_stats(&self) -> &PetlinkStats {
        &self.words
    }

    /// The sinogram so far without a copy: its scanner and its counts, every pending
    /// increment applied (what [`snapshot`](Self::snapshot) copies).
    pub fn counts(&mut self) -> (&Scanner, &[i32]) {
        (&self.sino.scanner, self.counts.flushed())
    }

    /// A copy of the sinogram so far.
    pub fn snapshot(&self) -> Sinogram {
        self.sino.with_counts(&self.counts)
    }

    /// The final sinogram and statistics.
    pub fn finish(mut self) -> (Sinogram, HistStats, PetlinkStats) {
        self.sino.data = self.counts.into_vec();
        (self.sino, self.stats, self.words)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_and_words_histogram_alike() {
        let s = Scanner::mmr();
        // Events over the whole span-1 range and past it (to the trash bin), delayeds,
        // tags, and more than a block.
        let words: Vec<u32> = (0..5000u32)
            .map(|i| match i % 7 {
                0 => 0x8000_0000 | i,
                1 => i.wrapping_mul(2_654_435_761) % 400_000_000,
                _ => 0x4000_0000 | (i.wrapping_mul(40_503) % 354_033_216),
            })
            .collect();
        let bytes: Vec<u8> = words
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .chain([7, 7])
            .collect();
        let mut a = PetlinkHistogrammer::new(&s, 11).unwrap();
        let mut b = PetlinkHistogrammer::new(&s, 11).unwrap();
        a.add_words(&words);
        b.add_le_bytes(&bytes);
        let (sa, ha, wa) = a.finish();
        let (sb, hb, wb) = b.finish();
        assert_eq!(ha, hb);
        assert_eq!(wa, wb);
        assert_eq!(wa.words, 5000);
        assert!(sa.data == sb.data);
        assert!(ha.geometry_rejected > 0 && ha.delayeds > 0 && wa.time_tags > 0);
    }
}
