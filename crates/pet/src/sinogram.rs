//! Sinograms and the histogramming hot loop.
//!
//! A [`Sinogram`] holds net counts (prompts minus delayeds, so randoms are subtracted) as
//! `i32` in the order `sinogram, view, radial bin`. A [`Histogrammer`] adds events to it
//! through precomputed lookup tables: one for the detector pair within a ring, one for the
//! ring pair, so the per-event work is two table reads, an add and a compare.

use serde::Serialize;

use crate::buckets::{Counts, Strategy};
use crate::error::GeometryError;
use crate::geometry::Scanner;
use crate::hist_index::{Fields, LorTable, Tables, Tallies};
use crate::layout::Layout;
use crate::listmode::{Event, RECORD_LEN};
use crate::lor::{self, OUTSIDE};

/// A stack of sinograms with net counts.
#[derive(Clone, Debug, PartialEq)]
pub struct Sinogram {
    /// The scanner (its span gives the layout).
    pub scanner: Scanner,
    /// The layout of the sinograms.
    pub layout: Layout,
    /// Net counts, `[sinogram][view][bin]`.
    pub data: Vec<i32>,
}

impl Sinogram {
    /// Moves the counting out to a [`Counts`] of this sinogram's size (its data is left
    /// empty; the sinogram keeps the scanner and layout for [`Sinogram::with_counts`]).
    pub(crate) fn take_counts(&mut self, strategy: Strategy) -> Counts {
        let counts = Counts::new(self.data.len(), strategy);
        self.data = Vec::new();
        counts
    }

    /// A sinogram of this scanner and layout holding a copy of `counts` (pending bucket
    /// increments included).
    pub(crate) fn with_counts(&self, counts: &Counts) -> Sinogram {
        let mut data = vec![0; counts.len()];
        counts.copy_to(&mut data);
        Sinogram {
            scanner: self.scanner.clone(),
            layout: self.layout.clone(),
            data,
        }
    }

    /// An empty sinogram for a scanner and its span.
    pub fn new(scanner: &Scanner) -> Result<Self, GeometryError> {
        let layout = Layout::new(scanner)?;
        let len = layout.bins(scanner)?;
        Ok(Sinogram {
            scanner: scanner.clone(),
            layout,
            data: vec![0; len],
        })
    }

    /// Sum of all bins.
    pub fn total(&self) -> i64 {
        self.data.iter().map(|&v| v as i64).sum()
    }

    /// Every plane summed: one `views * radial_bins` plane (views as rows), as `f32`; what
    /// a live view shows of a sinogram stack.
    pub fn summed(&self) -> Vec<f32> {
        let p = self.scanner.plane_size();
        let mut sum = vec![0f32; p];
        for plane in self.data.chunks_exact(p.max(1)) {
            for (s, &v) in sum.iter_mut().zip(plane) {
                *s += v as f32;
            }
        }
        sum
    }

    /// One sinogram plane (`views * radial_bins` values).
    pub fn plane(&self, sino: usize) -> &[i32] {
        let p = self.scanner.plane_size();
        &self.data[sino * p..(sino + 1) * p]
    }

    /// Single-slice rebinning: `2 * rings - 1` planes, plane `k` summing every sinogram whose
    /// rings add up to `k`, as `f32`.
    pub fn ssrb(&self) -> Vec<Vec<f32>> {
        let p = self.scanner.plane_size();
        let mut out = vec![vec![0f32; p]; 2 * self.scanner.rings as usize - 1];
        for s in 0..self.layout.total_sinograms() {
            let (_, sum) = self.layout.locate(s).expect("index in range");
            for (o, &v) in out[sum as usize].iter_mut().zip(self.plane(s as usize)) {
                *o += v as f32;
            }
        }
        out
    }
}

/// Energy window in units of 0.1 keV (the list-mode unit), inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct EnergyWindow {
    /// Lower level, 0.1 keV.
    pub lower: u16,
    /// Upper level, 0.1 keV.
    pub upper: u16,
}

impl EnergyWindow {
    /// A window from keV levels.
    pub fn kev(lower: f64, upper: f64) -> Self {
        EnergyWindow {
            lower: (lower * 10.0).round().clamp(0.0, 65535.0) as u16,
            upper: (upper * 10.0).round().clamp(0.0, 65535.0) as u16,
        }
    }

    /// The mMR window, 430-610 keV.
    pub fn mmr() -> Self {
        Self::kev(430.0, 610.0)
    }

    /// Accepts everything.
    pub fn open() -> Self {
        EnergyWindow {
            lower: 0,
            upper: u16::MAX,
        }
    }
}

/// What happened to the events given to a histogrammer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HistStats {
    /// Events seen.
    pub events: u64,
    /// Prompts seen.
    pub prompts: u64,
    /// Delayeds seen.
    pub delayeds: u64,
    /// Events with a photon outside the energy window.
    pub energy_rejected: u64,
    /// Events inside the window whose line is outside the field of view or ring difference.
    pub geometry_rejected: u64,
    /// Prompts added to the sinogram.
    pub accepted_prompts: u64,
    /// Delayeds subtracted from the sinogram.
    pub accepted_delayeds: u64,
}

impl HistStats {
    /// Events added or subtracted.
    pub fn accepted(&self) -> u64 {
        self.accepted_prompts + self.accepted_delayeds
    }
}

/// Histograms events into a [`Sinogram`].
#[derive(Clone, Debug)]
pub struct Histogrammer {
    /// `a * n + b` -> in-plane offset and orientation, or outside.
    lor: LorTable,
    /// `r_first * rings + r_second` -> sinogram offset in bins, or OUTSIDE; then the same
    /// indexed by `r_second * rings + r_first` (for entries of `lor` with [`lor::SWAP`]).
    rings: Vec<u32>,
    n_det: usize,
    n_rings: usize,
    window: EnergyWindow,
    /// Net counts plus one trash bin at the end for rejected events.
    counts: Counts,
    sino: Sinogram,
    stats: HistStats,
}

impl Histogrammer {
    /// A histogrammer for a scanner (span from the scanner) and an energy window.
    pub fn new(scanner: &Scanner, window: EnergyWindow) -> Result<Self, GeometryError> {
        Self::with_strategy(scanner, window, Strategy::Auto)
    }

    /// As [`Histogrammer::new`], choosing how increments reach the counts.
    pub fn with_strategy(
        scanner: &Scanner,
        window: EnergyWindow,
        strategy: Strategy,
    ) -> Result<Self, GeometryError> {
        let mut sino = Sinogram::new(scanner)?;
        let counts = sino.take_counts(strategy);
        let plane = scanner.plane_size() as u32;
        let rings = sino
            .layout
            .ring_pair_table()
            .iter()
            .map(|&s| if s == u32::MAX { OUTSIDE } else { s * plane })
            .collect::<Vec<u32>>();
        // The same table for the swapped ring order, after it: the orientation bit of the
        // transaxial entry picks the half without a branch.
        let nr = scanner.rings as usize;
        let swapped: Vec<u32> = (0..nr * nr).map(|i| rings[i % nr * nr + i / nr]).collect();
        let rings = [rings, swapped].concat();
        Ok(Histogrammer {
            lor: LorTable::new(lor::build_table(scanner)),
            rings,
            n_det: scanner.detectors_per_ring as usize,
            n_rings: scanner.rings as usize,
            window,
            counts,
            sino,
            stats: HistStats::default(),
        })
    }

    /// Whether increments go through per-region buckets (see the bucketed counts).
    pub fn is_bucketed(&self) -> bool {
        self.counts.is_bucketed()
    }

    /// Bin index of an event's line, or `None` when outside the field of view.
    pub fn bin_of(&self, e: &Event) -> Option<usize> {
        self.index(e).filter(|&i| i < self.counts.len())
    }

    #[inline(always)]
    fn index(&self, e: &Event) -> Option<usize> {
        let (a, b) = (e.det_a as usize, e.det_b as usize);
        let (ra, rb) = (e.ring_a as usize, e.ring_b as usize);
        let nr = self.n_rings;
        if a >= self.n_det || b >= self.n_det || ra >= nr || rb >= nr {
            return None;
        }
        let (offset, swapped) = self.lor.get(a * self.n_det + b)?;
        // The second half of `rings` is the table for the swapped ring order.
        let r = self.rings[swapped * nr * nr + ra * nr + rb];
        if r == OUTSIDE {
            return None;
        }
        Some(r as usize + offset)
    }

    /// Adds a batch of events: prompts add one, delayeds subtract one.
    ///
    /// Bin indices are computed a block at a time (rejected events go to a trash bin past
    /// the sinogram, see the private `hist_index` module) and handed to `Counts::add`.
    pub fn add(&mut self, events: &[Event]) {
        self.add_any(events);
    }

    /// As [`Histogrammer::add`], for list-mode records as they lie in a file or a buffer
    /// (the layout of [`Event::decode`]): each field is read where the pass needs it, so no
    /// decoded copy of the events is made.
    pub fn add_records(&mut self, records: &[[u8; RECORD_LEN]]) {
        self.add_any(records);
    }

    fn add_any<E: Fields>(&mut self, events: &[E]) {
        let mut t = Tallies::default();
        let mut entries = [0u32; 1024];
        let (rings, nd, nr) = (&self.rings[..], self.n_det, self.n_rings);
        let (window, trash) = (self.window, self.counts.trash() as usize);
        for block in events.chunks(entries.len()) {
            let out = &mut entries[..block.len()];
            // The same pass over either width of transaxial table (monomorphised per width).
            macro_rules! pass {
                ($lor:expr) => {
                    Tables {
                        lor: &$lor[..],
                        rings,
                        nd,
                        nr,
                        window,
                        trash,
                    }
                    .entries(block, out, &mut t)
                };
            }
            match &self.lor {
                LorTable::Narrow(lor) => pass!(lor),
                LorTable::Wide(lor) => pass!(lor),
            }
            self.counts.add(out);
        }
        let (delayeds, e_rej, g_rej, acc_d) = (
            t.delayeds,
            t.energy_rejected,
            t.geometry_rejected,
            t.accepted_delayeds,
        );
        let st = &mut self.stats;
        st.events += events.len() as u64;
        st.delayeds += delayeds;
        st.prompts = st.events - st.delayeds;
        st.energy_rejected += e_rej;
        st.geometry_rejected += g_rej;
        st.accepted_delayeds += acc_d;
        st.accepted_prompts =
            st.events - st.energy_rejected - st.geometry_rejected - st.accepted_delayeds;
    }

    /// Applies increments still pending in buckets (see the bucketed counts); snapshots and
    /// [`Histogrammer::finish`] include them anyway, so this only moves work in time (a
    /// benchmark calls it to count all of it).
    pub fn flush(&mut self) {
        self.counts.flush();
    }

    /// The sinogram so far without a copy: its scanner and its counts, every pending
    /// increment applied (what [`snapshot`](Self::snapshot) copies).
    pub fn counts(&mut self) -> (&Scanner, &[i32]) {
        (&self.sino.scanner, self.counts.flushed())
    }

    /// Statistics so far.
    pub fn stats(&self) -> HistStats {
        self.stats
    }

    /// A copy of the sinogram so far (acquisition can go on).
    pub fn snapshot(&self) -> Sinogram {
        self.sino.with_counts(&self.counts)
    }

    /// The final sinogram and statistics.
    pub fn finish(mut self) -> (Sinogram, HistStats) {
        self.sino.data = self.counts.into_vec();
        (self.sino, self.stats)
    }
}
