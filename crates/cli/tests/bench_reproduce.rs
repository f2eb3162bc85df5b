//! `offhost bench reproduce --quick` writes the report, the plots and the raw rows. No test
//! asserts a timing: only that every section, finding and plot is there.

use std::process::Command;

#[test]
fn quick_reproduce_writes_report_plots_and_rows() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let run = Command::new(env!("CARGO_BIN_EXE_offhost"))
        .args(["bench", "reproduce", "--quick", "--out"])
        .arg(&out)
        .output()
        .expect("run offhost");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for section in [
        "## Findings checked",
        "Tables 1-3",
        "Tables 4-5",
        "Figure 6",
        "Figure 7",
        "Figure 8",
        "Table 2",
        "Table 3",
        "[Off-host], Table 1",
        "[Off-host] §4",
        "[DS-link] Part 1, Figures 1 and 5",
        "[DS-link] Part 1, Figure 5",
        "[ION], Table 1",
        "remote processor null client/server call",
        "[ION], Figures 6 and 7",
        "[ION] §6.2, Figure 7",
        "[ION], Table 2",
        "[ION] §7.1, Table 2",
    ] {
        assert!(md.contains(section), "report lacks {section}");
    }
    // Every finding row has a verdict.
    let verdicts = md
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains("§"))
        .filter(|l| {
            [
                "| yes",
                "| no",
                "| partly",
                "| not measured",
                "| not measurable",
                "| inconclusive on this machine",
            ]
            .iter()
            .any(|v| l.contains(v))
        })
        .count();
    assert!(verdicts >= 10, "{verdicts} findings with a verdict:\n{md}");
    assert!(
        md.contains("widened by 5 % on each side"),
        "the report states the verdicts' margin"
    );
    for plot in [
        "000-transfers.svg",
        "000-copies.svg",
        "002-fig6-comms1-throughput.svg",
        "002-fig7-comms2-throughput.svg",
        "002-fig8-comms1-latency.svg",
        "002-table3-cpu-load.svg",
        "mux-bandwidth.svg",
        "mux-short-rate.svg",
        "seed003_fig6_7.svg",
    ] {
        let svg = std::fs::read_to_string(out.join(plot)).unwrap();
        assert!(svg.starts_with("<svg"), "{plot}");
        assert!(md.contains(plot), "report does not show {plot}");
    }
    // [ION]: every characteristic time, a traced sweep and the three disks.
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("seed003.json")).unwrap()).unwrap();
    for k in [
        "task_switch_ns",
        "local_call_ns",
        "own_call_us",
        "host_call_us",
        "remote_call_us",
        "task_call_us",
    ] {
        assert!(d["rpc"][k].as_f64().unwrap() > 0.0, "{k}: {}", d["rpc"]);
    }
    let traced = d["trace"]["rows"].as_array().expect("fio ran the sweep");
    assert_eq!(traced.len(), 16, "8 sizes of reads and writes: {traced:?}");
    assert_eq!(d["disks"].as_array().unwrap().len(), 6);
    let mux: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("seed002_links.json")).unwrap())
            .unwrap();
    assert!(mux["peak_msgs_per_s"].as_f64().unwrap() > 0.0);
    let rows: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let rows = rows.as_array().unwrap();
    for t in ["unbuffered", "fifo-full", "fifo-half", "interrupt"] {
        assert!(rows.iter().any(|r| r["transport"] == t), "no {t} rows");
    }
    assert!(rows
        .iter()
        .any(|r| r["bench"] == "comms2" && r.get("one_way_ns_median").is_some()));
    for mode in ["in-host", "off-host"] {
        assert!(
            rows.iter()
                .any(|r| r["bench"] == "offload" && r["mode"] == mode && r["size"] == 65536),
            "no [Off-host] row for {mode}"
        );
    }
}

#[test]
fn reproduce_refuses_bad_flags() {
    for (args, want) in [
        (&["--transport", "smoke"][..], "--transport"),
        (&["--fifo", "1"][..], "--fifo"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_offhost"))
            .args([
                "bench",
                "reproduce",
                "--quick",
                "--out",
                "/nonexistent/never",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
