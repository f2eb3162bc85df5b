//! Crafted file headers, with sizes that are valid numbers but absurd, given to the real
//! binary: each is an error naming the field and its limit (exit status 1), never an
//! allocation abort (134), a panic (101) or a loop.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `offhost ARGS` with a deadline; a run past it is a failure (it loops).
fn offhost(args: &[&str], files: &[&Path]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_offhost"));
    cmd.args(args)
        .args(files)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start offhost");
    let t0 = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("offhost {args:?} ran for a minute (it loops)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn refused(out: &Output, want: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(want), "expected {want:?} in: {err}");
}

/// A PETLINK header with the mMR's keys and the given overrides.
fn petlink_header(dir: &Path, overrides: &[(&str, &str)]) -> PathBuf {
    let mut keys = vec![
        ("number of rings", "64"),
        ("distance between rings (cm)", "0.40625"),
        ("gantry crystal radius (cm)", "32.8"),
        ("bin size (cm)", "0.20445"),
        ("number of projections", "344"),
        ("number of views", "252"),
        ("maximum ring difference", "60"),
        ("data offset in bytes", "0"),
    ];
    for (k, v) in overrides {
        match keys.iter_mut().find(|(key, _)| key == k) {
            Some(e) => e.1 = v,
            None => keys.push((k, v)),
        }
    }
    let text: String = keys.iter().map(|(k, v)| format!("{k}:={v}\n")).collect();
    let p = dir.join("crafted.l.hdr");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn crafted_petlink_headers_are_errors_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("crafted.l");
    std::fs::write(&data, [0u8; 64]).unwrap();
    let hist = |hdr: &Path| {
        let out = dir.path().join("out.sino");
        offhost(
            &["pet", "hist", "--format", "petlink", "--header"],
            &[hdr, Path::new("--out"), &out, &data],
        )
    };
    // Huge projections x views (an allocation abort before).
    let h = petlink_header(
        dir.path(),
        &[
            ("number of projections", "8000"),
            ("number of views", "8000"),
            ("bin size (cm)", "0.001"),
        ],
    );
    refused(&hist(&h), "exceed the limit of 536870912 bins");
    // Views past the per-axis limit, and views whose detector count overflows u32.
    let h = petlink_header(dir.path(), &[("number of views", "4294967295")]);
    refused(&hist(&h), "number of views");
    let h = petlink_header(dir.path(), &[("number of projections", "100000")]);
    refused(&hist(&h), "radial bins 100000 exceed the limit of 8192");
    // A span past single-slice rebinning (looped for ever before).
    let h = petlink_header(dir.path(), &[]);
    let out = dir.path().join("out.sino");
    let o = offhost(
        &["pet", "hist", "--format", "petlink", "--span", "4294967295"],
        &[Path::new("--header"), &h, Path::new("--out"), &out, &data],
    );
    refused(&o, "span 4294967295 exceeds the limit of 121");
    // A file longer than the header's total listmode word count.
    let h = petlink_header(dir.path(), &[("total listmode word counts", "10")]);
    let o = offhost(
        &["pet", "stat", "--format", "petlink", "--header"],
        &[&h, &data],
    );
    refused(
        &o,
        "more than the header's total listmode word counts of 10",
    );
    // Counts that are not integers, or past 2^53.
    let h = petlink_header(dir.path(), &[("total listmode word counts", "1e300")]);
    let o = offhost(
        &["pet", "stat", "--format", "petlink", "--header"],
        &[&h, &data],
    );
    refused(&o, "total listmode word counts");
}

#[test]
fn crafted_sinogram_files_are_errors_naming_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let lm = dir.path().join("scan.lm");
    let sino = dir.path().join("scan.sino");
    let o = offhost(&["pet", "sim", "--events", "1000", "-o"], &[&lm]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = offhost(&["pet", "hist", "-o"], &[&sino, &lm]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let good = std::fs::read(&sino).unwrap();
    let png = dir.path().join("x.png");
    let recon = |bytes: &[u8]| {
        let p = dir.path().join("crafted.sino");
        std::fs::write(&p, bytes).unwrap();
        offhost(&["pet", "recon", "--png"], &[&png, &p])
    };
    let with = |fields: &[(usize, u32)]| {
        let mut h = good[..64].to_vec();
        for &(at, v) in fields {
            h[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        // Bins small enough that the radial field of view fits whatever their count.
        h[48..56].copy_from_slice(&0.01f64.to_le_bytes());
        h
    };
    // views x bins multiplying past u64 (wrapped to 0 and passed the length check before).
    refused(
        &recon(&with(&[(16, u32::MAX), (20, u32::MAX)])),
        "exceed the limit of 8192",
    );
    // Petabytes in total.
    refused(
        &recon(&with(&[(16, 8192), (20, 8192)])),
        "exceed the limit of 536870912 bins",
    );
    // Span 0xFFFFFFFF (looped for ever while memory grew).
    refused(
        &recon(&with(&[(28, u32::MAX)])),
        "span 4294967295 exceeds the limit",
    );
    // A good header without its data.
    refused(&recon(&good[..64]), "header implies");
}
