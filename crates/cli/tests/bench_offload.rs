//! `offhost bench offload` end to end on tiny sizes: the output contract (a JSON array, one
//! object per mode and size, with mode, size, host_cpu_us_per_msg, host_wakeups_per_msg,
//! mb_per_s, latency_us_median), the rate and priority experiments' keys, plots. No timing is
//! asserted.

use std::process::Command;

fn offhost(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_offhost"))
        .args(args)
        .output()
        .expect("run offhost");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_table_keeps_its_contract_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let plots = dir.path().join("plots");
    let (ok, out, err) = offhost(&[
        "bench",
        "offload",
        "--sizes",
        "64,4K",
        "--round-trips",
        "20",
        "--stream-seconds",
        "0.2",
        "--rounds",
        "2",
        "--network",
        "loopback",
        "--json",
        "--plot",
        plots.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.len(), 4, "{out}");
    let mut seen = Vec::new();
    for r in &rows {
        for k in [
            "host_cpu_us_per_msg",
            "host_wakeups_per_msg",
            "mb_per_s",
            "latency_us_median",
        ] {
            let v = r[k].as_f64().unwrap_or_else(|| panic!("{k} missing: {r}"));
            assert!(v.is_finite() && v >= 0.0, "{k} = {v}");
        }
        assert!(r["mb_per_s"].as_f64().unwrap() > 0.0);
        seen.push((
            r["mode"].as_str().unwrap().to_owned(),
            r["size"].as_u64().unwrap(),
        ));
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            ("in-host".to_owned(), 64),
            ("in-host".to_owned(), 4096),
            ("off-host".to_owned(), 64),
            ("off-host".to_owned(), 4096)
        ]
    );
    for f in [
        "offload-throughput.svg",
        "offload-latency.svg",
        "offload-host-cpu.svg",
        "offload-host-wakeups.svg",
    ] {
        let svg = std::fs::read_to_string(plots.join(f)).unwrap();
        assert!(svg.contains("off-host") && svg.contains("in-host"), "{f}");
    }
}

#[test]
fn rate_and_priority_report_their_figures() {
    let (ok, out, err) = offhost(&[
        "bench",
        "offload",
        "--experiment",
        "rate",
        "--rate",
        "4000000",
        "--seconds",
        "1",
        "--network",
        "loopback",
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["rate"], 4_000_000);
    assert!(v["achieved"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["error_pct"].as_f64().is_some());
    let (ok, out, err) = offhost(&[
        "bench",
        "offload",
        "--experiment",
        "priority",
        "--round-trips",
        "30",
        "--rounds",
        "2",
        "--network",
        "loopback",
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["rounds"], 2, "{v}");
    for k in [
        "idle_us",
        "loaded_urgent_us",
        "loaded_bulk_us",
        "urgent_ratio",
        "bulk_mb_per_s",
    ] {
        assert!(v[k].as_f64().is_some_and(|x| x > 0.0), "{k}: {v}");
    }
}

#[test]
fn bad_options_are_explained() {
    let (ok, _, err) = offhost(&["bench", "offload", "--experiment", "nope"]);
    assert!(!ok);
    assert!(err.contains("table, rate or priority"), "{err}");
    let (ok, _, err) = offhost(&["bench", "offload", "--modes", "sideways"]);
    assert!(!ok);
    assert!(err.contains("in-host or off-host"), "{err}");
}
