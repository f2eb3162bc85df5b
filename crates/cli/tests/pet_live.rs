//! A live scan (`offhost pet replay`): the real mMR sample, looped, split over engines
//! (in this process, and two `offhost engine` processes over TLS), merged into a sinogram
//! equal bin for bin to the offline histogram of the same words; every event sent counted
//! by a histogram; images handed back; a killed engine fails the scan naming it.

mod common;
mod fleet;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fleet::{kill_and_wait, offhost, spawn_offhost, text, Engines};

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/petlink/small_listmode_file.l")
}

/// The counts of an OHSINO01 file.
fn counts(path: &Path) -> Vec<i32> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    offhost_pet::sinofile::decode(&b).unwrap().0.data
}

/// The offline SSRB histogram of the sample, once.
fn offline(dir: &Path) -> Vec<i32> {
    let one = dir.join("one.sino");
    let o = offhost(
        &[
            "pet",
            "hist",
            "--format",
            "petlink",
            "--span",
            "ssrb",
            "-o",
            one.to_str().unwrap(),
            sample().to_str().unwrap(),
        ],
        dir,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    counts(&one)
}

fn json(o: &std::process::Output) -> serde_json::Value {
    assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Each share's prompts and delayeds were all histogrammed, and the shares add up to the
/// words of `loops` passes.
fn every_event_counted(v: &serde_json::Value, shares: usize, loops: u64) {
    let s = v["shares"].as_array().unwrap();
    assert_eq!(s.len(), shares, "{v}");
    for share in s {
        assert_eq!(
            share["sent"]["prompts"], share["histogrammed_prompts"],
            "{v}"
        );
        assert_eq!(
            share["sent"]["delayeds"], share["histogrammed_delayeds"],
            "{v}"
        );
        assert!(share["sent"]["prompts"].as_u64().unwrap() > 0, "{v}");
    }
    // The sample: 254,201 events, 218,881 prompts and 35,320 delayeds.
    assert_eq!(v["replay"]["sent"]["prompts"], 218_881 * loops, "{v}");
    assert_eq!(v["replay"]["sent"]["delayeds"], 35_320 * loops, "{v}");
    assert!(v["failure"].is_null(), "{v}");
}

#[test]
fn a_looped_replay_in_this_process_merges_to_the_offline_histogram() {
    let dir = tempfile::tempdir().unwrap();
    let once = offline(dir.path());
    let o = offhost(
        &[
            "pet",
            "replay",
            sample().to_str().unwrap(),
            "--final",
            "live",
            "--loop",
            "3",
            "--shares",
            "3",
            "--sinogram",
            "m.sino",
            "--png",
            "scan.png",
            "--live",
            "live.png",
            "--json",
        ],
        dir.path(),
    );
    let v = json(&o);
    every_event_counted(&v, 3, 3);
    let merged = counts(&dir.path().join("m.sino"));
    assert_eq!(merged.len(), once.len());
    let differ = merged
        .iter()
        .zip(&once)
        .filter(|(m, o)| **m != 3 * **o)
        .count();
    assert_eq!(differ, 0, "bins differing from 3x the offline histogram");
    assert_eq!(v["merged_net_counts"], 3 * 183_561, "{v}");
    // The final image at least came back, and was written with the live one.
    assert!(v["images"].as_u64().unwrap() >= 1, "{v}");
    assert!(
        std::fs::metadata(dir.path().join("scan.png"))
            .unwrap()
            .len()
            > 1000
    );
}

#[test]
fn a_paced_replay_over_two_engines_merges_exactly_and_images_come_back() {
    let e = Engines::start(&[]);
    let work = tempfile::tempdir().unwrap();
    let once = offline(work.path());
    let pki = e.pki.to_str().unwrap();
    let (a, b) = (format!("a={}", e.urls[0]), format!("b={}", e.urls[1]));
    // 4 loops of 254,201 events at 400 k events/s: about 2.5 s, snapshots every 0.5 s.
    let o = offhost(
        &[
            "pet",
            "replay",
            sample().to_str().unwrap(),
            "--final",
            "live",
            "--loop",
            "4",
            "--rate",
            "4e5",
            "--period",
            "0.5",
            "--engine",
            &a,
            "--engine",
            &b,
            "--tls-certificates",
            pki,
            "--sinogram",
            "m.sino",
            "--json",
        ],
        work.path(),
    );
    let v = json(&o);
    every_event_counted(&v, 2, 4);
    assert_eq!(v["replay"]["kept_rate"], true, "{v}");
    let merged = counts(&e.files[0].join("m.sino"));
    let differ = merged
        .iter()
        .zip(&once)
        .filter(|(m, o)| **m != 4 * **o)
        .count();
    assert_eq!(differ, 0, "bins differing from 4x the offline histogram");
    // Live images while it ran, and the final one.
    assert!(v["images"].as_u64().unwrap() >= 2, "{v}");
    assert!(e.files[0].join("scan.png").exists());
}

#[test]
fn a_killed_engine_fails_the_scan_and_names_it() {
    let mut e = Engines::start(&[]);
    let work = tempfile::tempdir().unwrap();
    let pki = e.pki.to_str().unwrap().to_owned();
    // 40 loops at 500 k events/s: 20 s unless something ends it.
    let args: Vec<String> = [
        "pet",
        "replay",
        sample().to_str().unwrap(),
        "--final",
        "live",
        "--loop",
        "40",
        "--rate",
        "5e5",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        "--engine".into(),
        format!("a={}", e.urls[0]),
        "--engine".into(),
        format!("b={}", e.urls[1]),
        "--tls-certificates".into(),
        pki,
    ])
    .collect();
    let mut sub = spawn_offhost(&args, work.path());
    let t0 = Instant::now();
    while e.states(1).is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the scan never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    let (status, _, err) = kill_and_wait(&mut e, 1, &mut sub);
    assert!(!status.success(), "the scan succeeded: {err}");
    assert!(err.contains("engine b"), "{err}");
}

#[test]
fn a_replay_through_a_local_engine_reaches_the_engines_whole() {
    let e = Engines::start(&[]);
    let work = tempfile::tempdir().unwrap();
    let once = offline(work.path());
    let pki = e.pki.to_str().unwrap();
    // The local engine, on shared memory, knows engines a and b as its peers.
    let sock = work.path().join("local.sock");
    let listen = format!("shm:{}", sock.display());
    let (pa, pb) = (format!("a={}", e.urls[0]), format!("b={}", e.urls[1]));
    let (_local, urls) = common::engine_in(
        &[],
        &[
            "--name",
            "local",
            "--listen",
            &listen,
            "--peer",
            &pa,
            "--peer",
            &pb,
            "--tls-certificates",
            pki,
        ],
    );
    let o = offhost(
        &[
            "pet",
            "replay",
            sample().to_str().unwrap(),
            "--final",
            "live",
            "--loop",
            "5",
            "--via",
            &urls[0],
            "--engine",
            &pa,
            "--engine",
            &pb,
            "--tls-certificates",
            pki,
            "--sinogram",
            "m.sino",
            "--json",
        ],
        work.path(),
    );
    let v = json(&o);
    every_event_counted(&v, 2, 5);
    let merged = counts(&e.files[0].join("m.sino"));
    let differ = merged
        .iter()
        .zip(&once)
        .filter(|(m, o)| **m != 5 * **o)
        .count();
    assert_eq!(differ, 0, "bins differing from 5x the offline histogram");
    // Without the engines as its peers the local engine cannot carry the shares: the scan
    // fails, saying so.
    let (_bare, bare) = common::engine_in(
        &[],
        &[
            "--name",
            "bare",
            "--listen",
            &format!("shm:{}", work.path().join("bare.sock").display()),
        ],
    );
    let o = offhost(
        &[
            "pet",
            "replay",
            sample().to_str().unwrap(),
            "--final",
            "live",
            "--via",
            &bare[0],
            "--engine",
            &pa,
            "--engine",
            &pb,
            "--tls-certificates",
            pki,
        ],
        work.path(),
    );
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("through shm:"),
        "{}",
        text(&o.stderr)
    );
}
