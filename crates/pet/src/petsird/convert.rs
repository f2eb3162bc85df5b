//! PETLINK list mode to PETSIRD: each event's span-1 bin address becomes its detector pair.
//!
//! The address is `(sinogram * views + view) * bins + bin`; the sinogram gives the ring pair
//! through offhost's span-1 [`Layout`] (segment order 0, -1, +1, ...: ring 2 - ring 1 = the
//! segment's ring difference, the axial position the lower ring), and `(view v, tangential
//! position t = bin - bins/2)` the detector pair of the CTI convention that STIR uses for
//! Siemens data (`ProjDataInfoCylindricalNoArcCorr`): detector 1 = `(v + floor(t/2)) mod N`
//! on ring 1, detector 2 = `(v - floor((t+1)/2) + N/2) mod N` on ring 2, `N` detectors per
//! ring. Both photons get 511 keV (PETLINK words carry no energy), stored in the writer's
//! 510-520 keV bin (read back as 515 keV); an event's time is the last time tag before it. The PETSIRD scanner is offhost's ring scanner of the PETLINK header
//! ([`super::PetsirdWriter`]), detector `d` at angle `2 pi d / N`: the detector numbering is
//! STIR's; its orientation against the gantry is not checked.

use std::io::Write;
use std::path::Path;

use serde::Serialize;

use super::PetsirdWriter;
use crate::error::FormatError;
use crate::interfile::PetlinkHeader;
use crate::layout::Layout;
use crate::listmode::Event;
use crate::petlink::{PetlinkReader, Word};

/// What a conversion did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Converted {
    /// PETLINK words read.
    pub words: u64,
    /// Events written.
    pub events: u64,
    /// Prompts written.
    pub prompts: u64,
    /// Delayeds written.
    pub delayeds: u64,
    /// Time tags seen.
    pub time_tags: u64,
}

/// Converts PETLINK file `file` (header `h`) into PETSIRD written to `out`.
pub fn petlink_to_petsird<W: Write>(
    file: &Path,
    h: &PetlinkHeader,
    out: W,
) -> Result<(Converted, W), FormatError> {
    let s = h.scanner.with_span(1);
    let layout = Layout::new(&s).map_err(|e| FormatError::BadHeader {
        offset: 0,
        what: e.to_string(),
    })?;
    let rings: Vec<(u8, u8)> = (0..layout.total_sinograms())
        .map(|i| {
            let (seg, sum) = layout.locate(i).expect("index in range");
            let d = seg.min_rd;
            (((sum as i32 - d) / 2) as u8, ((sum as i32 + d) / 2) as u8)
        })
        .collect();
    let n = s.detectors_per_ring as i64;
    let (nv, nt) = (s.views, s.radial_bins);
    let det = |v: i64, t: i64| -> (u16, u16) {
        let d1 = (v + t.div_euclid(2)).rem_euclid(n);
        let d2 = (v - (t + 1).div_euclid(2) + n / 2).rem_euclid(n);
        (d1 as u16, d2 as u16)
    };
    let mut w = PetsirdWriter::new(out, &s)?;
    let mut r = PetlinkReader::open(file, h)?;
    let mut c = Converted::default();
    let (mut words, mut events) = (Vec::new(), Vec::new());
    let mut ms = 0u32;
    while r.read_words(&mut words, 1 << 16)? > 0 {
        events.clear();
        for &x in &words {
            match Word::decode(x) {
                Word::Event { prompt, bin } => {
                    let tang = i64::from(bin % nt) - i64::from(nt / 2);
                    let view = i64::from(bin / nt % nv);
                    let (r1, r2) = rings[(bin / nt / nv) as usize];
                    let (d1, d2) = det(view, tang);
                    events.push(Event {
                        det_a: d1,
                        det_b: d2,
                        ring_a: r1,
                        ring_b: r2,
                        energy_a: 5110,
                        energy_b: 5110,
                        tof_ps: 0,
                        time_us: ms.saturating_mul(1000) & 0x7FFF_FFFF,
                        delayed: !prompt,
                    });
                    c.prompts += u64::from(prompt);
                    c.delayeds += u64::from(!prompt);
                }
                Word::Time(t) => {
                    // Events before the next tag keep this time: write those of the last one.
                    w.write_events(&events)?;
                    events.clear();
                    ms = t;
                    c.time_tags += 1;
                }
                _ => {}
            }
        }
        w.write_events(&events)?;
        c.words += words.len() as u64;
    }
    c.events = c.prompts + c.delayeds;
    Ok((c, w.finish()?))
}
