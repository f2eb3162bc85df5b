//! Our list-mode format end to end: simulate, write, read back, histogram; malformed files.

use offhost_pet::listmode::{Event, Reader, Writer, HEADER_LEN, RECORD_LEN};
use offhost_pet::FormatError;
use offhost_pet::Scanner;
use offhost_pet::{EnergyWindow, Histogrammer};
use offhost_pet::{SimConfig, Source};

fn simulated(n: usize) -> Vec<Event> {
    let mut src = Source::new(&Scanner::demo(), SimConfig::default()).unwrap();
    let mut v = Vec::new();
    src.fill(&mut v, n);
    v
}

fn write(events: &[Event]) -> tempfile::NamedTempFile {
    let t = tempfile::NamedTempFile::new().unwrap();
    let mut w = Writer::create(t.path(), &Scanner::demo()).unwrap();
    w.write_events(&events[..events.len() / 2]).unwrap();
    w.write_events(&events[events.len() / 2..]).unwrap();
    w.finish().unwrap();
    t
}

#[test]
fn round_trip_preserves_every_event() {
    let ev = simulated(10_000);
    let t = write(&ev);
    let len = std::fs::metadata(t.path()).unwrap().len() as usize;
    assert_eq!(len, HEADER_LEN + RECORD_LEN * ev.len());
    let mut r = Reader::open(t.path()).unwrap();
    assert_eq!(r.header().count, 10_000);
    assert_eq!(r.read_all().unwrap(), ev);
}

#[test]
fn sinogram_total_equals_accepted_events_and_rejections_are_counted() {
    let ev = simulated(50_000);
    let window = EnergyWindow::kev(435.0, 585.0);
    let mut h = Histogrammer::new(&Scanner::demo(), window).unwrap();
    h.add(&ev);
    let st = h.stats();
    // Independent count of the energy rejections.
    let outside = |e: u16| !(4350..=5850).contains(&e);
    let rejected = ev
        .iter()
        .filter(|e| outside(e.energy_a) || outside(e.energy_b))
        .count() as u64;
    assert_eq!(st.energy_rejected, rejected);
    assert!(rejected > 1000, "the window cuts scatter: {rejected}");
    assert_eq!(st.events, 50_000);
    assert_eq!(st.delayeds, ev.iter().filter(|e| e.delayed).count() as u64);
    assert_eq!(
        st.accepted() + st.energy_rejected + st.geometry_rejected,
        st.events
    );
    let (sino, _) = h.finish();
    assert_eq!(
        sino.total(),
        st.accepted_prompts as i64 - st.accepted_delayeds as i64
    );
    // Only prompts: the total is the accepted count itself.
    let prompts: Vec<Event> = ev.iter().filter(|e| !e.delayed).copied().collect();
    let mut h = Histogrammer::new(&Scanner::demo(), window).unwrap();
    h.add(&prompts);
    let st = h.stats();
    let (sino, _) = h.finish();
    assert_eq!(sino.total() as u64, st.accepted());
}

#[test]
fn snapshot_while_acquiring_matches_the_events_so_far() {
    let ev = simulated(20_000);
    let mut h = Histogrammer::new(&Scanner::demo(), EnergyWindow::open()).unwrap();
    h.add(&ev[..5_000]);
    let snap = h.snapshot();
    h.add(&ev[5_000..]);
    let mut first = Histogrammer::new(&Scanner::demo(), EnergyWindow::open()).unwrap();
    first.add(&ev[..5_000]);
    assert_eq!(snap, first.finish().0);
    assert_ne!(snap, h.snapshot());
}

fn read_err(bytes: Vec<u8>) -> FormatError {
    let t = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(t.path(), bytes).unwrap();
    match Reader::open(t.path()) {
        Err(e) => e,
        Ok(mut r) => r.read_all().unwrap_err(),
    }
}

#[test]
fn truncated_record_names_its_offset() {
    let mut b = std::fs::read(write(&simulated(100)).path()).unwrap();
    b.truncate(HEADER_LEN + 16 * 40 + 5);
    let e = read_err(b);
    assert!(
        matches!(e, FormatError::Truncated { offset, have: 5, .. } if offset == 32 + 640),
        "{e}"
    );
}

#[test]
fn count_mismatch_names_where_data_ends() {
    let mut b = std::fs::read(write(&simulated(100)).path()).unwrap();
    b.truncate(HEADER_LEN + 16 * 60);
    let e = read_err(b);
    assert!(
        matches!(e, FormatError::Mismatch { offset, .. } if offset == 32 + 960),
        "{e}"
    );
}

#[test]
fn detector_outside_the_header_geometry_names_the_record() {
    let mut b = std::fs::read(write(&simulated(100)).path()).unwrap();
    let at = HEADER_LEN + 16 * 17;
    b[at..at + 2].copy_from_slice(&999u16.to_le_bytes());
    let e = read_err(b);
    assert!(
        matches!(e, FormatError::Mismatch { offset, .. } if offset == at as u64),
        "{e}"
    );
}

#[test]
fn bad_magic_is_reported() {
    let e = read_err(b"NOTPETLM and some more bytes to fill a header....".to_vec());
    assert!(matches!(e, FormatError::BadMagic { .. }), "{e}");
}

#[test]
fn events_outside_the_scanner_are_rejected_not_misfiled() {
    let s = Scanner::demo();
    let good = Event {
        det_a: 0,
        det_b: 128,
        ring_a: 0,
        ring_b: 0,
        energy_a: 5110,
        energy_b: 5110,
        ..Event::default()
    };
    let bad_ring = Event { ring_b: 17, ..good };
    let bad_det = Event { det_b: 300, ..good };
    let mut h = Histogrammer::new(&s, EnergyWindow::open()).unwrap();
    h.add(&[good, bad_ring, bad_det]);
    let st = h.stats();
    assert_eq!(st.geometry_rejected, 2);
    assert_eq!(h.finish().0.total(), 1);
}

proptest::proptest! {
    // Each case builds the tables of a scanner (the mMR's take a while in a debug build).
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]

    /// Records histogrammed as they lie in memory give the sinogram and the counts of the
    /// same events decoded first: in and out of the window and the scanner, prompts and
    /// delayeds, on a narrow (demo) and a wide (mMR) transaxial table.
    #[test]
    fn records_histogram_as_their_decoded_events_do(
        raw in proptest::collection::vec(proptest::array::uniform16(proptest::prelude::any::<u8>()), 0..400),
        mmr in proptest::prelude::any::<bool>(),
    ) {
        let s = if mmr { Scanner::mmr() } else { Scanner::demo() };
        // Fields drawn mostly within the scanner, so most events land in a bin.
        let rings = s.rings as u8 + 2;
        let records: Vec<[u8; RECORD_LEN]> = raw
            .into_iter()
            .map(|mut r| {
                r[1] &= 0x01;
                r[3] &= if mmr { 0x01 } else { 0x00 };
                r[4] %= rings;
                r[5] %= rings;
                r[7] = 0x13 | (r[7] & 0x04);
                r[9] = 0x13 | (r[9] & 0x04);
                r
            })
            .collect();
        let events: Vec<Event> = records.iter().map(Event::decode).collect();
        let window = EnergyWindow::kev(435.0, 585.0);
        let mut a = Histogrammer::new(&s, window).unwrap();
        let mut b = Histogrammer::new(&s, window).unwrap();
        a.add(&events);
        b.add_records(&records);
        proptest::prop_assert_eq!(a.stats(), b.stats());
        proptest::prop_assert!(a.finish().0.data == b.finish().0.data);
    }
}
