//! PETSIRD list mode against the `petsird` package from PyPI (0.12, in the test venv): files
//! its generator writes read with the counts its own reader finds; a ring scanner built with
//! the generator's functions histograms into STIR Interfile projection data that reconstructs;
//! the generator's own two-module-type scanner is refused as not rings; damaged files are
//! errors with byte offsets.

mod common;

use std::path::Path;

use offhost_pet::files::{self, HistJob, ListFormat};
use offhost_pet::petsird::{self, RingMap};

/// Writes a PETSIRD file: `generator` runs the package's generator (`generate()`), `rings`
/// builds a 4-ring, 32-crystal cylinder with the generator's functions and writes 5 event
/// blocks of random prompts and delayeds. Then reads the file with the package's reader and
/// prints its counts as JSON.
const MAKE_PY: &str = r#"
import contextlib, io, json, random, sys
import petsird
from petsird.helpers import generator as g
from petsird.helpers import get_num_detection_bins
kind, path = sys.argv[1], sys.argv[2]
if kind == 'generator':
    buf = io.BytesIO()
    class Out:  # generate() writes to sys.stdout.buffer
        buffer = buf
    with contextlib.redirect_stdout(Out()):
        g.generate()
    open(path, 'wb').write(buf.getvalue())
else:
    d = g.CylindricalBlocksInfo(radius=200., crystal_length=(10., 4., 4.),
        num_crystals_per_module=(1, 1, 1), num_modules_along_ring=32, num_modules_along_axis=4,
        arc=2 * 3.141592653589793, start_angle=0., module_spacing_along_axis=4.5,
        number_of_tof_bins=3, tof_resolution=9., LLD=430., ULD=650., number_of_event_energy_bins=2,
        energy_resolution=0.1, material_id=1)
    header = petsird.Header(scanner=g.get_scanner_info([d]))
    header.scanner.delayed_event_policy = petsird.CoincidencePolicy.REJECT_HIGHER_MULTIPLES
    nbins = get_num_detection_bins(header.scanner, 0)
    rnd = random.Random(5)
    def ev(n):
        out = []
        for _ in range(n):
            a = rnd.randrange(nbins); b = rnd.randrange(a + 1)
            out.append(petsird.CoincidenceEvent(detection_bins=[a, b], tof_idx=rnd.randrange(3)))
        return out
    with petsird.BinaryPETSIRDWriter(path) as w:
        w.write_header(header)
        for t in range(5):
            blk = petsird.EventTimeBlock(time_interval=petsird.TimeInterval(start=10 * t, stop=10 * t + 10),
                prompt_events=[[ev(3000 + 100 * t)]], delayed_events=[[ev(400)]])
            w.write_time_blocks((petsird.TimeBlock.EventTimeBlock(blk),))
        w.write_time_blocks((petsird.TimeBlock.ExternalSignalTimeBlock(
            petsird.ExternalSignalTimeBlock(time_interval=petsird.TimeInterval(start=50, stop=51),
                signal_id=1, signal_values=[0.5, 1.5])),))
blocks = prompts = delayeds = events_blocks = 0
first = last = None
with petsird.BinaryPETSIRDReader(path) as r:
    h = r.read_header()
    for tb in r.read_time_blocks():
        blocks += 1
        if isinstance(tb, petsird.TimeBlock.EventTimeBlock):
            events_blocks += 1
            v = tb.value
            first = v.time_interval.start if first is None else first
            last = v.time_interval.stop
            prompts += sum(len(x) for a in v.prompt_events for x in a)
            delayeds += sum(len(x) for a in (v.delayed_events or []) for x in a)
print(json.dumps({"time_blocks": blocks, "event_blocks": events_blocks, "prompts": prompts,
    "delayeds": delayeds, "duration_ms": last - first, "model_name": h.scanner.model_name,
    "module_types": len(h.scanner.scanner_geometry.replicated_modules)}))
"#;

fn make(kind: &str, path: &Path) -> serde_json::Value {
    serde_json::from_str(&common::python(MAKE_PY, &[kind, path.to_str().unwrap()])).unwrap()
}

fn same_counts(path: &Path, want: &serde_json::Value) -> petsird::Header {
    let (h, st) = petsird::stat(path).unwrap();
    assert_eq!(st.time_blocks, want["time_blocks"].as_u64().unwrap());
    assert_eq!(st.event_blocks, want["event_blocks"].as_u64().unwrap());
    assert_eq!(st.prompts, want["prompts"].as_u64().unwrap());
    assert_eq!(st.delayeds, want["delayeds"].as_u64().unwrap());
    assert_eq!(st.duration_ms, want["duration_ms"].as_u64().unwrap());
    assert_eq!(h.model_name, want["model_name"].as_str().unwrap());
    assert_eq!(
        h.module_types.len() as u64,
        want["module_types"].as_u64().unwrap()
    );
    h
}

#[test]
fn the_packages_generator_file_reads_with_its_counts_and_is_not_rings() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("gen.petsird");
    let want = make("generator", &f);
    assert!(want["prompts"].as_u64().unwrap() > 1000);
    let h = same_counts(&f, &want);
    let e = RingMap::new(&h).unwrap_err().to_string();
    assert!(
        e.contains("PETSIRD geometry not expressible as rings: 2 module types"),
        "{e}"
    );
}

#[test]
fn a_ring_scanner_histograms_into_interfile_that_reconstructs() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("rings.petsird");
    let want = make("rings", &f);
    let h = same_counts(&f, &want);
    let (scanner, map) = RingMap::new(&h).unwrap();
    assert_eq!((scanner.rings, scanner.detectors_per_ring), (4, 32));
    assert!((scanner.ring_spacing_mm - 4.5).abs() < 1e-3);
    assert!((scanner.crystal_radius_mm - 205.0_f64.hypot(2.0)).abs() < 1e-3);
    assert_eq!(map.len(), 4 * 32 * 2);
    let hs = tmp.path().join("rings.hs");
    let job = HistJob {
        file: f.clone(),
        format: ListFormat::Petsird,
        out: hs.clone(),
        scanner: String::new(),
        header: None,
        span: "1".into(),
        lower: 0.0,
        upper: 1000.0,
    };
    let (v, _) = files::histogram(&job).unwrap();
    let (p, d) = (
        want["prompts"].as_u64().unwrap(),
        want["delayeds"].as_u64().unwrap(),
    );
    assert_eq!(v["events"].as_u64().unwrap(), p + d);
    assert_eq!(v["delayeds"].as_u64().unwrap(), d);
    assert_eq!(v["energy_rejected"], 0);
    let acc_p = v["accepted_prompts"].as_i64().unwrap();
    let acc_d = v["accepted_delayeds"].as_i64().unwrap();
    assert!(acc_p > (p as i64) / 4, "{v}");
    assert_eq!(
        acc_p + acc_d + v["geometry_rejected"].as_i64().unwrap(),
        (p + d) as i64
    );
    let (s, flags) = offhost_pet::projdata::read(&hs).unwrap();
    assert!(flags.detector_pairs);
    assert_eq!(s.total(), acc_p - acc_d);
    let png = tmp.path().join("rings.png");
    files::reconstruct(&hs, "fbp", 1, &png, &|_, _| {}).unwrap();
    assert!(std::fs::metadata(&png).unwrap().len() > 500);
    // The same .hs in 3D (OSEM over every segment) into an Interfile image.
    let hv = tmp.path().join("rings3d.hv");
    let job = offhost_pet::recon3d::ReconJob {
        sino: hs.clone(),
        out: vec![hv.clone()],
        png: None,
        method: "osem".into(),
        three_d: true,
        iterations: 2,
        subsets: 2,
        norm: None,
        attenuation: None,
        mu: None,
        threads: 2,
        nema: false,
        stir_model: false,
        projector: None,
    };
    let line = offhost_pet::recon3d::run(&job, &|_, _, _| {}).unwrap();
    assert!(line.contains("3D OSEM (2 subsets x 2 iterations"), "{line}");
    let img = offhost_pet::image_hv::read(&hv).unwrap();
    assert_eq!(img.slices, 2 * s.scanner.rings as usize - 1);
    assert_eq!(img.n, s.scanner.radial_bins as usize);
    let sum: f64 = img.data.iter().map(|&v| v as f64).sum();
    assert!(sum > 0.0 && img.data.iter().all(|v| v.is_finite() && *v >= 0.0));
}

#[test]
fn damaged_files_name_the_byte_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("rings.petsird");
    make("rings", &f);
    let bytes = std::fs::read(&f).unwrap();
    // Cut inside the time blocks: a truncated value at the end of the file.
    let cut = tmp.path().join("cut.petsird");
    std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
    let e = petsird::stat(&cut).unwrap_err().to_string();
    assert!(e.contains("byte offset"), "{e}");
    // Another magic.
    let mut m = bytes.clone();
    m[..5].copy_from_slice(b"yardX");
    let bad = tmp.path().join("magic.petsird");
    std::fs::write(&bad, &m).unwrap();
    let e = petsird::stat(&bad).unwrap_err().to_string();
    assert!(e.contains("bad magic at byte offset 0"), "{e}");
    // A changed schema is not read as 0.12.
    let mut s = bytes.clone();
    let at = s.windows(7).position(|w| w == b"PETSIRD").unwrap() + 20;
    s[at] ^= 0x20;
    let sch = tmp.path().join("schema.petsird");
    std::fs::write(&sch, &s).unwrap();
    let e = petsird::stat(&sch).unwrap_err().to_string();
    assert!(e.contains("schema differs from version 0.12"), "{e}");
    // Trailing bytes after the end of the stream.
    let mut t = bytes;
    t.push(0);
    let tr = tmp.path().join("trailing.petsird");
    std::fs::write(&tr, &t).unwrap();
    let e = petsird::stat(&tr).unwrap_err().to_string();
    assert!(
        e.contains("data after the end of the time-block stream"),
        "{e}"
    );
}

/// The package's analysis tool (`petsird.helpers.analysis`) on a file offhost wrote: its
/// prompt and delayed counts and last time block.
const ANALYSIS_PY: &str = r#"
import contextlib, io, json, re, runpy, sys
from petsird.helpers import analysis
sys.argv = ['petsird_analysis', '-i', sys.argv[1]]
out = io.StringIO()
with contextlib.redirect_stdout(out):
    runpy.run_path(analysis.__file__, run_name='__main__')
t = out.getvalue()
num = lambda k: int(re.search(k + r':?\s*(\d+)', t).group(1))
print(json.dumps({"prompts": num('Number of prompt events'), "delayeds": num('Number of delayed events'),
    "last_ms": num('Last time block at'), "name": re.search(r'Scanner name: (.*)', t).group(1)}))
"#;

#[test]
fn simulated_petsird_passes_the_packages_analysis_and_maps_back_to_its_crystals() {
    let tmp = tempfile::tempdir().unwrap();
    let lm = tmp.path().join("sim.lm");
    let ps = tmp.path().join("sim.petsird");
    let mut job = files::SimJob {
        out: lm.clone(),
        scanner: "demo".into(),
        phantom: "nema".into(),
        events: 50_000,
        seed: 21,
        rate: 4.0e6,
        pace: 0.0,
        scatter: 0.3,
    };
    let a = files::simulate(&job, |_| {}).unwrap();
    job.out = ps.clone();
    let b = files::simulate(&job, |_| {}).unwrap();
    assert_eq!((a.events, a.delayeds), (b.events, b.delayeds));
    let py: serde_json::Value =
        serde_json::from_str(&common::python(ANALYSIS_PY, &[ps.to_str().unwrap()])).unwrap();
    assert_eq!(py["prompts"].as_u64().unwrap(), b.events - b.delayeds);
    assert_eq!(py["delayeds"].as_u64().unwrap(), b.delayeds);
    assert_eq!(py["name"], "demo");
    let (h, st) = petsird::stat(&ps).unwrap();
    assert_eq!(
        (st.prompts, st.delayeds),
        (b.events - b.delayeds, b.delayeds)
    );
    let mut r = petsird::PetsirdReader::open(&ps).unwrap();
    let Some(petsird::Block::Events { start, .. }) = r.next_block(&mut Vec::new()).unwrap() else {
        panic!("the first block holds events");
    };
    assert_eq!(
        st.duration_ms,
        py["last_ms"].as_u64().unwrap() - u64::from(start)
    );
    // The ring map gives back the simulated crystals: the PETSIRD file histograms exactly as
    // the offhost file does on the scanner the map describes (energy window open).
    let (scanner, _) = RingMap::new(&h).unwrap();
    assert_eq!((scanner.rings, scanner.detectors_per_ring), (16, 256));
    assert!(
        (scanner.crystal_radius_mm - 250.0).abs() < 1e-3,
        "{scanner:?}"
    );
    assert!((scanner.ring_spacing_mm - 6.0).abs() < 1e-3, "{scanner:?}");
    let mut hist =
        offhost_pet::Histogrammer::new(&scanner, offhost_pet::EnergyWindow::open()).unwrap();
    let mut r = offhost_pet::listmode::Reader::open(&lm).unwrap();
    let mut buf = Vec::new();
    while r.read_events(&mut buf, 8192).unwrap() > 0 {
        hist.add(&buf);
    }
    let want = hist.finish().0;
    let out = tmp.path().join("sim.hs");
    let job = HistJob {
        file: ps,
        format: ListFormat::Petsird,
        out: out.clone(),
        scanner: String::new(),
        header: None,
        span: "1".into(),
        lower: 0.0,
        upper: 6553.5,
    };
    files::histogram(&job).unwrap();
    let got = offhost_pet::projdata::read(&out).unwrap().0;
    assert!(want.total() > 10_000);
    assert_eq!(got.data, want.data);
}

/// The converted mMR file read by the `petsird` package: every coincidence's detection bins
/// (module = ring x 504 + detector, 100 energy bins) taken back through the CTI detector-pair
/// table (built here from its formula, both orders) to a span-1 PETLINK bin address; the
/// multiset of addresses, prompts and delayeds apart, equals the PETLINK file's (numpy).
const BACK_PY: &str = r#"
import json, sys
import numpy as np
import petsird
N, NV, NT, RINGS, MRD, NE = 504, 252, 344, 64, 60, 100
table = {}
for v in range(NV):
    for t in range(-NT // 2, NT // 2):
        d1, d2 = (v + (t >> 1)) % N, (v - ((t + 1) >> 1) + N // 2) % N
        assert (d1, d2) not in table and (d2, d1) not in table
        table[(d1, d2)] = (v, t + NT // 2)
sino, first = {}, 0
for k in range(MRD + 1):
    for d in ([0] if k == 0 else [-k, k]):
        for a in range(RINGS - abs(d)):
            r1, r2 = (a, a + d) if d >= 0 else (a - d, a)
            sino[(r1, r2)] = first + a
        first += RINGS - abs(d)
got = {False: [], True: []}
with petsird.BinaryPETSIRDReader(sys.argv[1]) as r:
    h = r.read_header()
    for tb in r.read_time_blocks():
        v = tb.value
        for delayed, lists in ((False, v.prompt_events), (True, v.delayed_events)):
            for e in lists[0][0]:
                (ma, ea), (mb, eb) = divmod(e.detection_bins[0], NE), divmod(e.detection_bins[1], NE)
                assert ea == eb == 51
                (ra, da), (rb, db) = divmod(ma, N), divmod(mb, N)
                if (da, db) in table:
                    (vw, tg), s = table[(da, db)], sino[(ra, rb)]
                else:
                    (vw, tg), s = table[(db, da)], sino[(rb, ra)]
                got[delayed].append((s * NV + vw) * NT + tg)
w = np.fromfile(sys.argv[2], dtype='<u4')
ev = w[(w >> 31) == 0]
want = {False: np.sort(ev[((ev >> 30) & 1) == 1] & 0x3FFFFFFF), True: np.sort(ev[((ev >> 30) & 1) == 0] & 0x3FFFFFFF)}
print(json.dumps({k: [len(got[d]), bool((np.sort(np.array(got[d], dtype=np.uint32)) == want[d]).all())]
    for k, d in (("prompts", False), ("delayeds", True))} | {"model": h.scanner.model_name}))
"#;

#[test]
fn petlink_converts_to_petsird_with_every_bin_address_recoverable() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = common::petlink_dir();
    let out = tmp.path().join("mmr.petsird");
    let job = files::ConvertJob {
        file: dir.join("small_listmode_file.l"),
        out: out.clone(),
        header: None,
    };
    let (v, _) = files::convert(&job).unwrap();
    assert_eq!(v["prompts"], 218_881);
    assert_eq!(v["delayeds"], 35_320);
    let py: serde_json::Value = serde_json::from_str(&common::python(
        BACK_PY,
        &[
            out.to_str().unwrap(),
            dir.join("small_listmode_file.l").to_str().unwrap(),
        ],
    ))
    .unwrap();
    assert_eq!(py["prompts"], serde_json::json!([218_881, true]));
    assert_eq!(py["delayeds"], serde_json::json!([35_320, true]));
    let ana: serde_json::Value =
        serde_json::from_str(&common::python(ANALYSIS_PY, &[out.to_str().unwrap()])).unwrap();
    assert_eq!(ana["prompts"], 218_881);
    assert_eq!(ana["delayeds"], 35_320);
    let (_, st) = petsird::stat(&out).unwrap();
    assert_eq!((st.prompts, st.delayeds), (218_881, 35_320));
}
