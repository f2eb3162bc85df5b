//! Bucketed histogramming gives exactly the counts of the direct path: on random events
//! (out-of-range detectors and rings, energies outside the window, delayeds), on simulated
//! events, and on the real mMR PETLINK file; with snapshots taken while increments are
//! still pending in the buckets.

mod common;

use offhost_pet::listmode::Event;
use offhost_pet::petlink::PetlinkReader;
use offhost_pet::PetlinkHeader;
use offhost_pet::PetlinkHistogrammer;
use offhost_pet::Scanner;
use offhost_pet::Strategy;
use offhost_pet::{EnergyWindow, Histogrammer};
use offhost_pet::{SimConfig, Source};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Random events, some of them invalid in every way the histogrammer checks.
fn random_events(n: usize, s: &Scanner, seed: u64) -> Vec<Event> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let (nd, nr) = (s.detectors_per_ring as u16, s.rings as u8);
    (0..n)
        .map(|_| Event {
            det_a: rng.gen_range(0..nd + 3),
            det_b: rng.gen_range(0..nd + 3),
            ring_a: rng.gen_range(0..nr + 1),
            ring_b: rng.gen_range(0..nr + 1),
            energy_a: rng.gen_range(3000..7000),
            energy_b: rng.gen_range(3000..7000),
            tof_ps: 0,
            time_us: 0,
            delayed: rng.gen_bool(0.25),
        })
        .collect()
}

/// Feeds both histogrammers the same batches (random sizes), comparing snapshots on the
/// way and the final sinograms and statistics.
fn same_counts(scanner: &Scanner, events: &[Event]) {
    let w = EnergyWindow::kev(435.0, 650.0);
    let mut direct = Histogrammer::with_strategy(scanner, w, Strategy::Direct).unwrap();
    let mut bucketed = Histogrammer::with_strategy(scanner, w, Strategy::Bucketed).unwrap();
    assert!(bucketed.is_bucketed() && !direct.is_bucketed());
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let mut rest = events;
    let mut snapshots = 0;
    while !rest.is_empty() {
        let n = rng.gen_range(1..20_000).min(rest.len());
        direct.add(&rest[..n]);
        bucketed.add(&rest[..n]);
        rest = &rest[n..];
        if snapshots == 0 || rng.gen_bool(0.05) {
            snapshots += 1;
            assert!(direct.snapshot() == bucketed.snapshot(), "snapshot differs");
        }
    }
    assert!(snapshots > 0);
    let (a, sa) = direct.finish();
    let (b, sb) = bucketed.finish();
    assert_eq!(sa, sb);
    assert!(a == b, "final sinogram differs");
    assert!(sa.accepted() > 0 && sa.energy_rejected > 0);
    assert_eq!(
        a.total(),
        sa.accepted_prompts as i64 - sa.accepted_delayeds as i64
    );
}

#[test]
fn bucketed_equals_direct_on_random_events() {
    let s = Scanner::demo();
    let events = random_events(1_500_000, &s, 3);
    same_counts(&s, &events);
    same_counts(&s.with_span(3), &events);
}

#[test]
fn bucketed_equals_direct_on_simulated_events() {
    let s = Scanner::demo();
    let mut src = Source::new(&s, SimConfig::default()).unwrap();
    let mut events = Vec::new();
    src.fill(&mut events, 400_000);
    same_counts(&s, &events);
}

#[test]
fn bucketed_equals_direct_on_the_mmr_file() {
    let dir = common::petlink_dir();
    let h = PetlinkHeader::read(&dir.join("PET_ACQ_small.l.hdr")).unwrap();
    let mut words = Vec::new();
    let mut r = PetlinkReader::open(&dir.join("small_listmode_file.l"), &h).unwrap();
    let mut buf = Vec::new();
    while r.read_words(&mut buf, 10_000).unwrap() > 0 {
        words.extend_from_slice(&buf);
    }
    for span in [11, h.scanner.ssrb_span()] {
        let mut direct =
            PetlinkHistogrammer::with_strategy(&h.scanner, span, Strategy::Direct).unwrap();
        let mut bucketed =
            PetlinkHistogrammer::with_strategy(&h.scanner, span, Strategy::Bucketed).unwrap();
        for (i, chunk) in words.chunks(7_777).enumerate() {
            direct.add_words(chunk);
            bucketed.add_words(chunk);
            if i == 10 {
                assert!(direct.snapshot() == bucketed.snapshot(), "span {span}");
            }
        }
        let (a, sa, wa) = direct.finish();
        let (b, sb, wb) = bucketed.finish();
        assert_eq!((sa, wa), (sb, wb));
        assert!(a == b, "span {span}: final sinogram differs");
        assert!(a.total() > 150_000);
    }
}
