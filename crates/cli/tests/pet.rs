//! End-to-end tests of `offhost pet ...` with the real binary.

use std::path::PathBuf;
use std::process::Command;

fn offhost() -> Command {
    Command::new(env!("CARGO_BIN_EXE_offhost"))
}

/// `data/petlink` of this repository: the mMR sample with its README and licence.
fn petlink_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/petlink");
    assert!(
        dir.join("small_listmode_file.l").is_file(),
        "test data missing: expected {}/small_listmode_file.l",
        dir.display()
    );
    dir
}

fn json_of(out: std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "offhost failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// Counts computed by python's struct module, independently of the reader.
const COUNT_PY: &str = r#"
import struct, sys, json
d = open(sys.argv[1], 'rb').read()
w = struct.unpack('<%dI' % (len(d) // 4), d[:len(d) // 4 * 4])
ev = [x for x in w if x >> 31 == 0]
pr = sum(1 for x in ev if (x >> 30) & 1)
tt = [x & 0x1FFFFFFF for x in w if x >> 29 == 4]
print(json.dumps({"words": len(w), "events": len(ev), "prompts": pr, "delayeds": len(ev) - pr,
  "time_tags": len(tt), "duration_ms": tt[-1] - tt[0]}))
"#;

#[test]
fn stat_petlink_json_matches_an_independent_count() {
    let data = petlink_dir().join("small_listmode_file.l");
    let got = json_of(
        offhost()
            .args([
                "pet",
                "stat",
                data.to_str().unwrap(),
                "--format",
                "petlink",
                "--json",
            ])
            .output()
            .unwrap(),
    );
    let py = Command::new("python3")
        .args(["-c", COUNT_PY, data.to_str().unwrap()])
        .output()
        .expect("python3 is required for this test");
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );
    let want: serde_json::Value = serde_json::from_slice(&py.stdout).unwrap();
    for key in [
        "words",
        "events",
        "prompts",
        "delayeds",
        "time_tags",
        "duration_ms",
    ] {
        assert_eq!(got[key], want[key], "{key}");
    }
}

#[test]
fn stat_petlink_truncated_file_names_the_byte_offset() {
    let dir = tempfile::tempdir().unwrap();
    let src = petlink_dir();
    let cut = dir.path().join("cut.l");
    let mut d = std::fs::read(src.join("small_listmode_file.l")).unwrap();
    d.truncate(4 * 5000 + 1);
    std::fs::write(&cut, d).unwrap();
    let hdr = src.join("PET_ACQ_small.l.hdr");
    let out = offhost()
        .args([
            "pet",
            "stat",
            cut.to_str().unwrap(),
            "--format",
            "petlink",
            "--header",
        ])
        .arg(&hdr)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("truncated word at byte offset 20000"), "{err}");
}

#[test]
fn sim_then_stat_then_hist_then_recon() {
    let dir = tempfile::tempdir().unwrap();
    let lm = dir.path().join("scan.lm");
    let sim = json_of(
        offhost()
            .args([
                "pet", "sim", "--events", "30000", "--seed", "9", "--json", "-o",
            ])
            .arg(&lm)
            .output()
            .unwrap(),
    );
    assert_eq!(sim["events"], 30000);
    let st = json_of(
        offhost()
            .args(["pet", "stat", "--json"])
            .arg(&lm)
            .output()
            .unwrap(),
    );
    assert_eq!(st["events"], 30000);
    assert_eq!(st["delayeds"], sim["delayeds"]);
    assert_eq!(
        st["prompts"].as_u64().unwrap(),
        30000 - sim["delayeds"].as_u64().unwrap()
    );
    let sino = dir.path().join("scan.sino");
    let h = json_of(
        offhost()
            .args(["pet", "hist", "--json", "--span", "ssrb", "-o"])
            .arg(&sino)
            .arg(&lm)
            .output()
            .unwrap(),
    );
    let accepted_p = h["accepted_prompts"].as_i64().unwrap();
    let accepted_d = h["accepted_delayeds"].as_i64().unwrap();
    assert_eq!(h["net_counts"].as_i64().unwrap(), accepted_p - accepted_d);
    assert_eq!(
        h["energy_rejected"].as_u64().unwrap()
            + h["geometry_rejected"].as_u64().unwrap()
            + (accepted_p + accepted_d) as u64,
        30000
    );
    let png = dir.path().join("scan.png");
    let out = offhost()
        .args(["pet", "recon", "--png"])
        .arg(&png)
        .arg(&sino)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::metadata(&png).unwrap().len() > 1000);
}

#[test]
fn stat_of_a_corrupt_own_file_names_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let lm = dir.path().join("scan.lm");
    let out = offhost()
        .args(["pet", "sim", "--events", "100", "-o"])
        .arg(&lm)
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut d = std::fs::read(&lm).unwrap();
    d.truncate(32 + 16 * 50 + 7);
    std::fs::write(&lm, d).unwrap();
    let out = offhost().args(["pet", "stat"]).arg(&lm).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("truncated record at byte offset 832"), "{err}");
}

/// `pet hist` into STIR's Interfile projection data (`.hs` + `.s`) and into `OHSINO01` from
/// the same list mode: `pet recon` of either gives the same PNG, byte for byte.
#[test]
fn hist_to_interfile_then_recon_equals_the_sino_path() {
    let dir = tempfile::tempdir().unwrap();
    let lm = dir.path().join("scan.lm");
    json_of(
        offhost()
            .args([
                "pet", "sim", "--events", "20000", "--seed", "4", "--json", "-o",
            ])
            .arg(&lm)
            .output()
            .unwrap(),
    );
    let mut pngs = Vec::new();
    for out in ["scan.hs", "scan.sino"] {
        let out = dir.path().join(out);
        let h = json_of(
            offhost()
                .args(["pet", "hist", "--json", "--span", "3", "-o"])
                .arg(&out)
                .arg(&lm)
                .output()
                .unwrap(),
        );
        assert!(h["net_counts"].as_i64().unwrap() > 10_000);
        let png = out.with_extension("png");
        let r = offhost()
            .args(["pet", "recon", "--png"])
            .arg(&png)
            .arg(&out)
            .output()
            .unwrap();
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        pngs.push(std::fs::read(&png).unwrap());
    }
    assert!(pngs[0].len() > 1000);
    assert_eq!(
        pngs[0], pngs[1],
        "the .hs and .sino paths reconstruct alike"
    );
    let hs = std::fs::read_to_string(dir.path().join("scan.hs")).unwrap();
    assert!(hs.contains("name of data file := scan.s"), "{hs}");
    assert!(
        hs.contains("applied corrections := {arc correction}"),
        "{hs}"
    );
    // demo scanner (16 rings), span 3: 11 segments of 31, 2 x 27, 2 x 21, 2 x 15, 2 x 9 and
    // 2 x 3 sinograms, each 128 views x 128 bins of 4 bytes.
    let sinos: u64 = 31 + 2 * (27 + 21 + 15 + 9 + 3);
    assert_eq!(
        std::fs::metadata(dir.path().join("scan.s")).unwrap().len(),
        sinos * 128 * 128 * 4
    );
}

/// The mMR sample at span 11 into `.hs`: the data file's sum is the net count `pet hist`
/// reports (prompts minus delayeds, 183,561).
#[test]
fn petlink_span11_to_interfile_sums_to_the_net_count() {
    let dir = tempfile::tempdir().unwrap();
    let hs = dir.path().join("mmr.hs");
    let data = petlink_dir().join("small_listmode_file.l");
    let h = json_of(
        offhost()
            .args([
                "pet", "hist", "--format", "petlink", "--span", "11", "--json", "-o",
            ])
            .arg(&hs)
            .arg(&data)
            .output()
            .unwrap(),
    );
    assert_eq!(h["sinograms"], 837);
    let bytes = std::fs::read(dir.path().join("mmr.s")).unwrap();
    assert_eq!(bytes.len(), 837 * 252 * 344 * 4);
    let sum: f64 = bytes
        .chunks_exact(4)
        .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())))
        .sum();
    assert_eq!(sum as i64, h["net_counts"].as_i64().unwrap());
    assert_eq!(sum as i64, 218_881 - 35_320);
}
