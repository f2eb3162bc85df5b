//! The index pass of histogramming: events -> count entries (see [`crate::buckets`]).
//!
//! The transaxial table (`det_a * n + det_b` -> in-plane offset and orientation) is read for
//! every event and is the largest table touched; it is kept as `u16` when the plane is small
//! enough (the demo scanner's 256 x 256 pairs then take 128 KiB instead of 256 KiB).

use crate::buckets::MINUS;
use crate::listmode::{Event, RECORD_LEN};
use crate::lor::{OUTSIDE, SWAP};
use crate::sinogram::EnergyWindow;

/// An entry of the transaxial table: an in-plane offset, an orientation bit, or outside.
pub(crate) trait LorEntry: Copy + PartialEq {
    /// The value marking a pair outside the field of view.
    const OUT: Self;
    /// In-plane offset (meaningless for [`LorEntry::OUT`]).
    fn offset(self) -> usize;
    /// 1 when the second detector is first in the line's orientation, else 0.
    fn swapped(self) -> usize;
}

impl LorEntry for u32 {
    const OUT: Self = OUTSIDE;
    #[inline(always)]
    fn offset(self) -> usize {
        (self & !SWAP) as usize
    }
    #[inline(always)]
    fn swapped(self) -> usize {
        (self >> 31) as usize
    }
}

impl LorEntry for u16 {
    const OUT: Self = u16::MAX;
    #[inline(always)]
    fn offset(self) -> usize {
        (self & 0x7FFF) as usize
    }
    #[inline(always)]
    fn swapped(self) -> usize {
        (self >> 15) as usize
    }
}

/// The transaxial table, narrow when it can be.
#[derive(Clone, Debug)]
pub(crate) enum LorTable {
    /// Offsets below `0x7FFF`: `u16` with the orientation in bit 15, `u16::MAX` outside.
    Narrow(Vec<u16>),
    /// The table of [`crate::lor::build_table`].
    Wide(Vec<u32>),
}

impl LorTable {
    /// The narrowest form of a [`crate::lor::build_table`] table.
    pub(crate) fn new(wide: Vec<u32>) -> Self {
        let fits = wide.iter().all(|&l| l == OUTSIDE || l & !SWAP < 0x7FFF);
        if !fits {
            return LorTable::Wide(wide);
        }
        LorTable::Narrow(
            wide.iter()
                .map(|&l| match l {
                    OUTSIDE => u16::MAX,
                    l => (l & !SWAP) as u16 | if l & SWAP != 0 { 0x8000 } else { 0 },
                })
                .collect(),
        )
    }
}

impl LorTable {
    /// In-plane offset and orientation ([`LorEntry::swapped`]) of pair `i`, or `None` when
    /// the pair is outside the field of view or the table.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<(usize, usize)> {
        fn one<T: LorEntry>(t: &[T], i: usize) -> Option<(usize, usize)> {
            let l = t.get(i).copied().filter(|&l| l != T::OUT)?;
            Some((l.offset(), l.swapped()))
        }
        match self {
            LorTable::Narrow(t) => one(t, i),
            LorTable::Wide(t) => one(t, i),
        }
    }
}

/// What the index pass reads of an event: a decoded [`Event`], or a list-mode record as it
/// lies in memory (then decoded field by field as the pass needs it, with no copy between).
pub(crate) trait Fields {
    /// Detectors of photons A and B within their rings.
    fn detectors(&self) -> (usize, usize);
    /// Rings of photons A and B.
    fn rings(&self) -> (usize, usize);
    /// Energies of photons A and B, 0.1 keV.
    fn energies(&self) -> (u16, u16);
    /// Whether the event is a delayed coincidence.
    fn delayed(&self) -> bool;
}

impl Fields for Event {
    #[inline(always)]
    fn detectors(&self) -> (usize, usize) {
        (self.det_a as usize, self.det_b as usize)
    }
    #[inline(always)]
    fn rings(&self) -> (usize, usize) {
        (self.ring_a as usize, self.ring_b as usize)
    }
    #[inline(always)]
    fn energies(&self) -> (u16, u16) {
        (self.energy_a, self.energy_b)
    }
    #[inline(always)]
    fn delayed(&self) -> bool {
        self.delayed
    }
}

/// A record in the layout of [`Event::decode`].
impl Fields for [u8; RECORD_LEN] {
    #[inline(always)]
    fn detectors(&self) -> (usize, usize) {
        let a = u16::from_le_bytes([self[0], self[1]]);
        let b = u16::from_le_bytes([self[2], self[3]]);
        (a as usize, b as usize)
    }
    #[inline(always)]
    fn rings(&self) -> (usize, usize) {
        (self[4] as usize, self[5] as usize)
    }
    #[inline(always)]
    fn energies(&self) -> (u16, u16) {
        (
            u16::from_le_bytes([self[6], self[7]]),
            u16::from_le_bytes([self[8], self[9]]),
        )
    }
    #[inline(always)]
    fn delayed(&self) -> bool {
        self[15] >> 7 == 1
    }
}

/// What the index pass counted.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Tallies {
    pub(crate) delayeds: u64,
    pub(crate) energy_rejected: u64,
    pub(crate) geometry_rejected: u64,
    pub(crate) accepted_delayeds: u64,
}

/// The fixed inputs of the index pass.
pub(crate) struct Tables<'a, T> {
    /// Transaxial table.
    pub(crate) lor: &'a [T],
    /// Ring pair -> sinogram offset, then the same for the swapped order.
    pub(crate) rings: &'a [u32],
    /// Detectors per ring.
    pub(crate) nd: usize,
    /// Rings.
    pub(crate) nr: usize,
    /// The energy window.
    pub(crate) window: EnergyWindow,
    /// Index of the trash bin.
    pub(crate) trash: usize,
}

impl<T: LorEntry> Tables<'_, T> {
    /// Writes one entry per event into `out` (as long as `events`).
    ///
    /// Branch-free apart from the table bounds checks: rejected events (energy, field of
    /// view, ring difference) go to the trash bin.
    #[inline(always)]
    pub(crate) fn entries<E: Fields>(&self, events: &[E], out: &mut [u32], t: &mut Tallies) {
        let (lo, hi) = (self.window.lower, self.window.upper);
        let (nd, nr, trash) = (self.nd, self.nr, self.trash);
        for (slot, e) in out.iter_mut().zip(events) {
            let (ea, eb) = e.energies();
            let in_window = (lo <= ea) & (ea <= hi) & (lo <= eb) & (eb <= hi);
            let (da, db) = e.detectors();
            let l = self.lor.get(da * nd + db).copied().unwrap_or(T::OUT);
            let (ra, rb) = e.rings();
            let half = l.swapped() * nr * nr;
            let r = self
                .rings
                .get(half + ra * nr + rb)
                .copied()
                .unwrap_or(OUTSIDE);
            let valid = (da < nd) & (db < nd) & (ra < nr) & (rb < nr);
            let inside = valid & (l != T::OUT) & (r != OUTSIDE);
            let ok = in_window & inside;
            // Select without a branch: `ok` is unpredictable.
            let keep = (ok as usize).wrapping_neg();
            let at = (r as usize + l.offset()).min(trash);
            let idx = (at & keep) | (trash & !keep);
            let delayed = e.delayed();
            *slot = idx as u32 | if delayed { MINUS } else { 0 };
            t.delayeds += delayed as u64;
            t.energy_rejected += (!in_window) as u64;
            t.geometry_rejected += (in_window & !inside) as u64;
            t.accepted_delayeds += (ok & delayed) as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::Scanner;

    #[test]
    fn narrow_table_keeps_every_entry() {
        let wide = crate::lor::build_table(&Scanner::demo());
        let LorTable::Narrow(narrow) = LorTable::new(wide.clone()) else {
            panic!("the demo plane (16384 bins) fits in 15 bits");
        };
        for (&w, &n) in wide.iter().zip(&narrow) {
            assert_eq!(w == OUTSIDE, n == u16::MAX);
            if w != OUTSIDE {
                assert_eq!((w.offset(), w.swapped()), (n.offset(), n.swapped()));
            }
        }
        assert!(matches!(
            LorTable::new(crate::lor::build_table(&Scanner::mmr())),
            LorTable::Wide(_)
        ));
    }
}
