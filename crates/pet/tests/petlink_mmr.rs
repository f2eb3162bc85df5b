//! The PETLINK reader on the real Siemens mMR file, checked against counts computed
//! independently by python, and against malformed copies of it.

mod common;

use std::path::Path;

use offhost_pet::petlink::{self, bin_coords, PetlinkReader, Word};
use offhost_pet::FormatError;
use offhost_pet::Layout;
use offhost_pet::PetlinkHeader;
use offhost_pet::PetlinkHistogrammer;
use offhost_pet::Scanner;

/// Independent counts: python's struct module, no code shared with the reader.
const COUNT_PY: &str = r#"
import struct, sys, json
d = open(sys.argv[1], 'rb').read()
n = len(d) // 4
w = struct.unpack('<%dI' % n, d[:4 * n])
ev = [x for x in w if x >> 31 == 0]
pr = sum(1 for x in ev if (x >> 30) & 1)
tt = [x & 0x1FFFFFFF for x in w if x >> 29 == 4]
print(json.dumps({"words": n, "events": len(ev), "prompts": pr, "delayeds": len(ev) - pr,
  "time_tags": len(tt), "first": tt[0], "last": tt[-1]}))
"#;

fn header(dir: &Path) -> PetlinkHeader {
    PetlinkHeader::read(&dir.join("PET_ACQ_small.l.hdr")).unwrap()
}

#[test]
fn header_gives_the_mmr_geometry_and_span11_segment_table() {
    let h = header(&common::petlink_dir());
    assert_eq!(
        Scanner {
            name: "mmr".into(),
            ..h.scanner.clone()
        },
        Scanner::mmr()
    );
    let span11 = Layout::new(&Scanner::mmr().with_span(11)).unwrap();
    assert_eq!(h.segment_table, span11.segment_table());
    assert_eq!(h.total_words, Some(331_257_106));
    assert_eq!(h.energy_window_kev, Some((430.0, 610.0)));
}

#[test]
fn counts_match_an_independent_count() {
    let dir = common::petlink_dir();
    let data = dir.join("small_listmode_file.l");
    let py: serde_json::Value =
        serde_json::from_str(&common::python(COUNT_PY, &[data.to_str().unwrap()])).unwrap();
    let st = petlink::stat(&data, &header(&dir)).unwrap();
    assert_eq!(st.words, py["words"].as_u64().unwrap());
    assert_eq!(st.events, py["events"].as_u64().unwrap());
    assert_eq!(st.prompts, py["prompts"].as_u64().unwrap());
    assert_eq!(st.delayeds, py["delayeds"].as_u64().unwrap());
    assert_eq!(st.time_tags, py["time_tags"].as_u64().unwrap());
    let span = py["last"].as_u64().unwrap() - py["first"].as_u64().unwrap();
    assert_eq!(st.duration_ms, span);
    assert_eq!(
        st.events
            + st.time_tags
            + st.deadtime_tags
            + st.motion_tags
            + st.monitor_tags
            + st.control_tags,
        st.words
    );
}

#[test]
fn every_bin_address_decodes_to_a_valid_span1_coordinate() {
    let dir = common::petlink_dir();
    let h = header(&dir);
    let total = Layout::new(&Scanner::mmr()).unwrap().total_sinograms();
    assert_eq!(total, 4084);
    let mut r = PetlinkReader::open(&dir.join("small_listmode_file.l"), &h).unwrap();
    let mut buf = Vec::new();
    let (mut n, mut max_sino) = (0u64, 0);
    while r.read_words(&mut buf, 4096).unwrap() > 0 {
        for &w in &buf {
            if let Word::Event { bin, .. } = Word::decode(w) {
                let c = bin_coords(bin, &h.scanner);
                assert!(c.tang < 344 && c.view < 252 && c.sinogram < total, "{c:?}");
                max_sino = max_sino.max(c.sinogram);
                n += 1;
            }
        }
    }
    assert!(n > 250_000);
    assert!(max_sino > 4000, "data reaches the oblique segments");
}

#[test]
fn histogram_totals_equal_accepted_events() {
    let dir = common::petlink_dir();
    let h = header(&dir);
    let mut hist = PetlinkHistogrammer::new(&h.scanner, h.scanner.ssrb_span()).unwrap();
    let mut r = PetlinkReader::open(&dir.join("small_listmode_file.l"), &h).unwrap();
    let mut buf = Vec::new();
    while r.read_words(&mut buf, 10_000).unwrap() > 0 {
        hist.add_words(&buf);
    }
    let (sino, st, words) = hist.finish();
    assert_eq!(st.geometry_rejected, 0);
    assert_eq!(st.accepted(), words.events);
    assert_eq!(
        sino.total(),
        st.accepted_prompts as i64 - st.accepted_delayeds as i64
    );
    assert_eq!(sino.layout.total_sinograms(), 127);
}

fn copy_with(dir: &Path, f: impl FnOnce(&mut Vec<u8>)) -> tempfile::NamedTempFile {
    let mut d = std::fs::read(dir.join("small_listmode_file.l")).unwrap();
    f(&mut d);
    let t = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(t.path(), d).unwrap();
    t
}

#[test]
fn truncated_word_names_its_offset() {
    let dir = common::petlink_dir();
    let t = copy_with(&dir, |d| d.truncate(4 * 1000 + 3));
    let e = petlink::stat(t.path(), &header(&dir)).unwrap_err();
    assert!(
        matches!(
            e,
            FormatError::Truncated {
                offset: 4000,
                have: 3,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("byte offset 4000"), "{e}");
}

#[test]
fn bin_address_beyond_the_header_geometry_names_its_offset() {
    let dir = common::petlink_dir();
    // Word 777 becomes a prompt with a bin address past the last span-1 sinogram.
    let t = copy_with(&dir, |d| {
        let bad = 0x4000_0000u32 | (4084 * 344 * 252);
        d[4 * 777..4 * 778].copy_from_slice(&bad.to_le_bytes());
    });
    let e = petlink::stat(t.path(), &header(&dir)).unwrap_err();
    assert!(
        matches!(e, FormatError::Mismatch { offset: 3108, .. }),
        "{e}"
    );
}

#[test]
fn header_with_fewer_rings_than_the_data_is_a_mismatch() {
    let dir = common::petlink_dir();
    let text = std::fs::read_to_string(dir.join("PET_ACQ_small.l.hdr")).unwrap();
    let text = text
        .replace("number of rings:=64", "number of rings:=32")
        .replace(
            "%maximum ring difference:=60",
            "%maximum ring difference:=31",
        );
    let h = PetlinkHeader::parse(&text).unwrap();
    // Independently: the first event word whose span-1 sinogram is beyond 32 rings' count.
    let n32: u32 = 32 + 2 * (1..32).map(|d| 32 - d).sum::<u32>();
    let d = std::fs::read(dir.join("small_listmode_file.l")).unwrap();
    let first_bad = d
        .chunks_exact(4)
        .position(|c| {
            let w = u32::from_le_bytes(c.try_into().unwrap());
            w >> 31 == 0 && (w & 0x3FFF_FFFF) / (344 * 252) >= n32
        })
        .unwrap() as u64
        * 4;
    let e = petlink::stat(&dir.join("small_listmode_file.l"), &h).unwrap_err();
    match e {
        FormatError::Mismatch { offset, .. } => assert_eq!(offset, first_bad),
        other => panic!("expected a mismatch, got {other}"),
    }
}

#[test]
fn more_words_than_the_header_declares_names_the_first_extra_word() {
    let dir = common::petlink_dir();
    let mut h = header(&dir);
    h.total_words = Some(100_000);
    let e = petlink::stat(&dir.join("small_listmode_file.l"), &h).unwrap_err();
    assert!(
        matches!(
            e,
            FormatError::Mismatch {
                offset: 400_000,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn data_offset_beyond_the_file_is_reported() {
    let dir = common::petlink_dir();
    let mut h = header(&dir);
    h.data_offset = 10_000_000;
    let e = petlink::stat(&dir.join("small_listmode_file.l"), &h).unwrap_err();
    assert!(e.to_string().contains("data offset"), "{e}");
}
