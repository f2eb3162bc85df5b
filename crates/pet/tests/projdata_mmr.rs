//! The real mMR PETLINK sample histogrammed at span 11 into STIR's Interfile projection data
//! (`.hs` + `.s`), checked against numpy: the counts per sinogram and every touched bin of the
//! data file equal a numpy histogram of the same PETLINK words, which derives the span-11
//! segments and axial positions on its own from the mMR's span-1 segment order
//! (0, -1, +1, ... as STIR decodes PETLINK addresses) and reads the file through its header.

mod common;

use offhost_pet::{petlink, projdata, sinofile::SinoFlags, PetlinkHeader, PetlinkHistogrammer};

/// numpy: words -> (span-11 segment, axial position, view, tangential) -> net counts, and the
/// `.hs`/`.s` pair read through its own header (STIR's keys, view-major storage order).
const CHECK_PY: &str = r#"
import json, re, sys
import numpy as np
words = np.fromfile(sys.argv[1], dtype='<u4')
hs = sys.argv[2]
ev = words[(words >> 31) == 0]
prompt = ((ev >> 30) & 1).astype(np.int64)
net = 2 * prompt - 1
addr = (ev & 0x3FFFFFFF).astype(np.int64)
NT, NV, RINGS, MRD, SPAN = 344, 252, 64, 60, 11
tang, view, sino1 = addr % NT, (addr // NT) % NV, addr // (NT * NV)
# span-1 segments in storage order 0, -1, +1, ...: ring difference d, sizes RINGS - |d|
seg_d, seg_first, first = [], [], 0
for k in range(MRD + 1):
    for d in ([0] if k == 0 else [-k, k]):
        seg_d.append(d); seg_first.append(first); first += RINGS - abs(d)
seg_d, seg_first = np.array(seg_d), np.array(seg_first)
s = np.searchsorted(seg_first, sino1, side='right') - 1
d = seg_d[s]
ring_sum = 2 * (sino1 - seg_first[s]) + np.abs(d)       # r_a + r_b
k = np.sign(d) * ((np.abs(d) + SPAN // 2) // SPAN)      # span-11 segment number
lo = np.where(k == 0, 0, np.abs(k) * SPAN - SPAN // 2)  # smallest |d| of the segment
axial = ring_sum - lo
# the .hs file, through its header
h = open(hs).read()
def key(k): return re.search(r'^!?' + re.escape(k) + r'\s*:=\s*(.*)$', h, re.M | re.I).group(1).strip()
lst = lambda k: [int(x) for x in key(k).strip('{} ').split(',')]
assert key('matrix axis label [3]') == 'view' and key('matrix axis label [2]') == 'axial coordinate'
assert key('!number format') == 'float' and key('imagedata byte order') == 'LITTLEENDIAN'
mins, maxs, nax = lst('minimum ring difference per segment'), lst('maximum ring difference per segment'), lst('!matrix size [2]')
assert int(key('!matrix size [3]')) == NV and int(key('!matrix size [1]')) == NT
import os
data = np.memmap(os.path.join(os.path.dirname(hs), key('name of data file')), dtype='<f4', mode='r')
assert data.size == sum(nax) * NV * NT, (data.size, sum(nax))
# segment number of each file segment, from its ring differences
fseg = [int(np.sign(a + b)) * ((abs(a + b) // 2 + SPAN // 2) // SPAN) for a, b in zip(mins, maxs)]
start = np.cumsum([0] + [n * NV * NT for n in nax])
per_sino_np, per_sino_file, bins_checked, nonzero_elsewhere = [], [], 0, 0
for i, g in enumerate(fseg):
    m = k == g
    assert all(mins[i] <= x <= maxs[i] for x in np.unique(d[m])), (g, mins[i], maxs[i])
    assert axial[m].min(initial=0) >= 0 and axial[m].max(initial=0) < nax[i]
    per_sino_np += np.bincount(axial[m], weights=net[m], minlength=nax[i]).astype(np.int64).tolist()
    block = np.asarray(data[start[i]:start[i + 1]]).reshape(NV, nax[i], NT)
    per_sino_file += block.sum(axis=(0, 2), dtype=np.float64).astype(np.int64).tolist()
    # every bin the words touch, and nothing else
    flat = (view[m] * nax[i] + axial[m]) * NT + tang[m]
    u, inv = np.unique(flat, return_inverse=True)
    want = np.bincount(inv, weights=net[m]).astype(np.int64)
    got = block.reshape(-1)[u].astype(np.int64)
    assert (got == want).all(), (g, int((got != want).sum()))
    bins_checked += u.size
    rest = block.reshape(-1).copy(); rest[u] = 0
    nonzero_elsewhere += int(np.count_nonzero(rest))
print(json.dumps({"per_sino_numpy": per_sino_np, "per_sino_file": per_sino_file,
    "bins_checked": bins_checked, "nonzero_elsewhere": nonzero_elsewhere,
    "net": int(net.sum()), "segments": fseg}))
"#;

#[test]
fn span11_interfile_equals_a_numpy_histogram_of_the_words() {
    let dir = common::petlink_dir();
    let data = dir.join("small_listmode_file.l");
    let h = PetlinkHeader::read(&dir.join("PET_ACQ_small.l.hdr")).unwrap();
    let mut hist = PetlinkHistogrammer::new(&h.scanner, 11).unwrap();
    let mut r = petlink::PetlinkReader::open(&data, &h).unwrap();
    let mut buf = Vec::new();
    while r.read_words(&mut buf, 1 << 16).unwrap() > 0 {
        hist.add_words(&buf);
    }
    let (sino, st, _) = hist.finish();
    assert_eq!(st.geometry_rejected, 0);
    let tmp = tempfile::tempdir().unwrap();
    let hs = tmp.path().join("mmr_span11.hs");
    let flags = SinoFlags {
        last: true,
        detector_pairs: false,
    };
    let dp = projdata::write(&hs, &sino, flags).unwrap();
    assert_eq!(dp, tmp.path().join("mmr_span11.s"));
    assert_eq!(std::fs::metadata(&dp).unwrap().len(), 837 * 252 * 344 * 4);

    let py: serde_json::Value = serde_json::from_str(&common::python(
        CHECK_PY,
        &[data.to_str().unwrap(), hs.to_str().unwrap()],
    ))
    .unwrap();
    let ints = |k: &str| -> Vec<i64> {
        py[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect()
    };
    let (np, file) = (ints("per_sino_numpy"), ints("per_sino_file"));
    assert_eq!(np.len(), 837);
    assert_eq!(
        np, file,
        "counts per sinogram: numpy of the words vs the .s file"
    );
    assert_eq!(ints("segments"), (-5..=5).collect::<Vec<i64>>());
    assert_eq!(py["nonzero_elsewhere"], 0);
    assert!(py["bins_checked"].as_u64().unwrap() > 200_000);
    assert_eq!(py["net"].as_i64().unwrap(), sino.total());

    // offhost reads its file back to the same sinogram.
    let (back, fl) = projdata::read(&hs).unwrap();
    assert_eq!(back.data, sino.data);
    assert_eq!(fl, flags);
    assert_eq!(back.layout, sino.layout);
}

/// Only where `OFFHOST_STIR_MMR_SPAN11` names the `.hs` that STIR's `lm_to_projdata` wrote for
/// the mMR sample at span 11, prompts minus delayeds (`mmr_reference.sh`, `docs/notes/pet.md`):
/// offhost reads STIR's file (its own header keys, STIR's mMR scanner block) into the
/// sinogram offhost histograms from the same words, bin for bin.
#[test]
fn stirs_span11_file_reads_as_offhosts_histogram() {
    let Some(stir) = std::env::var_os("OFFHOST_STIR_MMR_SPAN11") else {
        eprintln!("OFFHOST_STIR_MMR_SPAN11 not set: STIR's file not compared");
        return;
    };
    let dir = common::petlink_dir();
    let h = PetlinkHeader::read(&dir.join("PET_ACQ_small.l.hdr")).unwrap();
    let mut hist = PetlinkHistogrammer::new(&h.scanner, 11).unwrap();
    let mut r = petlink::PetlinkReader::open(&dir.join("small_listmode_file.l"), &h).unwrap();
    let mut buf = Vec::new();
    while r.read_words(&mut buf, 1 << 16).unwrap() > 0 {
        hist.add_words(&buf);
    }
    let (sino, _, _) = hist.finish();
    let (theirs, flags) = projdata::read(std::path::Path::new(&stir)).unwrap();
    assert!(
        !flags.detector_pairs,
        "STIR's mMR data are not arc-corrected"
    );
    assert_eq!(theirs.layout, sino.layout);
    assert_eq!(theirs.data, sino.data);
}

#[test]
fn truncated_data_file_and_missing_key_are_named() {
    let s = offhost_pet::Sinogram::new(&offhost_pet::Scanner::demo().with_span(5)).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let hs = tmp.path().join("d.hs");
    let dp = projdata::write(&hs, &s, SinoFlags::default()).unwrap();
    let len = std::fs::metadata(&dp).unwrap().len();
    std::fs::File::options()
        .write(true)
        .open(&dp)
        .unwrap()
        .set_len(len - 6)
        .unwrap();
    let e = projdata::read(&hs).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "truncated projection data at byte offset 0: {} of {len} bytes",
            len - 6
        )),
        "{e}"
    );
    let text = std::fs::read_to_string(&hs).unwrap();
    std::fs::write(&hs, text.replace("Number of rings", "Number of ringz")).unwrap();
    let e = projdata::read(&hs).unwrap_err().to_string();
    assert!(e.contains("missing key \"number of rings\""), "{e}");
}
