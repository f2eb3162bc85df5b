//! End-to-end tests of `offhost echo` and `offhost bench floors|pingpong`, running the binary.

use offhost_shm::{connect, Config, Mode};
use std::process::{Command, Output, Stdio};

mod common;
use common::Reaped;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_offhost");
const T: Option<Duration> = Some(Duration::from_secs(10));

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run offhost")
}

/// Asserts that the command failed and that its error output says `what`.
fn fails_saying(out: &Output, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "succeeded: {err}");
    assert!(err.contains(what), "{err}");
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "offhost failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

fn config() -> Config {
    Config {
        ring_bytes: 4096,
        pool_buffers: 2,
        buffer_size: 4096,
        mode: Mode::Block,
        spin: Duration::from_micros(10),
        event_limit: None,
    }
}

fn connect_retry(addr: &str) -> offhost_shm::Endpoint {
    let start = Instant::now();
    loop {
        match connect(addr, &config()) {
            Ok(ep) => return ep,
            Err(e) if start.elapsed() > Duration::from_secs(10) => panic!("connect {addr}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

fn echo_some(ep: &mut offhost_shm::Endpoint) {
    for i in 0..100u32 {
        let msg = vec![i as u8; i as usize];
        ep.sender().send(&msg, T).unwrap();
        assert_eq!(ep.receiver().recv(T).unwrap().bytes(), &msg[..]);
    }
    let mut b = ep.sender().alloc(T).unwrap();
    b.set_len(3000).unwrap();
    b.fill(0xab);
    ep.sender().send_buf(b, T).unwrap();
    assert_eq!(ep.receiver().recv(T).unwrap().bytes(), &[0xab; 3000][..]);
}

#[test]
fn echo_serves_successive_hosts_then_exits_cleanly_with_once() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("echo.sock");
    let addr = sock.to_str().unwrap().to_owned();
    // A long-running server: two hosts one after the other.
    let mut server = Reaped(
        Command::new(BIN)
            .args(["echo", "--raw", "--listen", &format!("shm:{addr}")])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    for _ in 0..2 {
        let mut ep = connect_retry(&addr);
        echo_some(&mut ep);
    }
    server.kill().unwrap();
    server.wait().unwrap();
    // --once: serves one host, exits, and removes its socket file.
    std::fs::remove_file(&sock).ok();
    let server = Command::new(BIN)
        .args([
            "echo",
            "--raw",
            "--listen",
            &format!("shm:{addr}"),
            "--once",
            "--mode",
            "adaptive",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ep = connect_retry(&addr);
    echo_some(&mut ep);
    drop(ep);
    let out = server.wait_with_output().unwrap();
    assert!(out.status.success());
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("host left after 101 records"), "{log}");
    assert!(
        std::fs::read_dir(dir.path()).unwrap().next().is_none(),
        "socket file left behind"
    );
}

#[test]
fn echo_rejects_bad_addresses_clearly() {
    let out = run(&["echo", "--listen", "mem:"]);
    fails_saying(&out, "in-process only");
    let out = run(&["echo", "--raw", "--listen", "tcp:1"]);
    fails_saying(&out, "unknown address");
}

#[test]
fn bench_floors_json_has_the_contract_keys() {
    let v = json(&run(&["bench", "floors", "--json", "--samples", "2000"]));
    for key in ["cacheline_ns", "futex_ns", "memcpy_gb_per_s"] {
        let x = v[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key} missing: {v}"));
        assert!(x > 0.0, "{key} = {x}");
    }
}

/// Each row's (transport, size), in order.
fn transports_and_sizes(rows: &[serde_json::Value]) -> Vec<(&str, u64)> {
    rows.iter()
        .map(|r| {
            (
                r["transport"].as_str().unwrap(),
                r["size"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// A row's per-round (or per-block) medians.
fn round_medians(row: &serde_json::Value) -> Vec<f64> {
    row["round_medians_ns"]
        .as_array()
        .expect("round medians")
        .iter()
        .map(|m| m.as_f64().unwrap())
        .collect()
}

fn check_rows(v: &serde_json::Value, transport: &str, mode: &str, sizes: &[u64]) {
    let rows = v.as_array().expect("array");
    assert_eq!(rows.len(), sizes.len());
    for (row, &size) in rows.iter().zip(sizes) {
        assert_eq!(row["bench"], "pingpong");
        assert_eq!(row["transport"], transport);
        assert_eq!(row["mode"], mode);
        assert_eq!(row["size"].as_u64(), Some(size));
        for key in ["one_way_ns_median", "one_way_ns_p99", "mb_per_s"] {
            assert!(row[key].as_f64().unwrap() > 0.0, "{key}: {row}");
        }
        assert!(row["one_way_ns_median"].as_f64() <= row["one_way_ns_p99"].as_f64());
    }
}

#[test]
fn bench_pingpong_shm_spawns_its_echo_engine() {
    let out = run(&[
        "bench",
        "pingpong",
        "--transport",
        "shm",
        "--mode",
        "adaptive",
        "--sizes",
        "8,65536",
        "--iters",
        "50",
        "--idle-secs",
        "0.2",
        "--json",
    ]);
    let v = json(&out);
    check_rows(&v, "shm", "adaptive", &[8, 65536]);
    assert_eq!(v[0]["path"], "inline");
    assert_eq!(v[1]["path"], "loan");
    assert!(v[0]["cpu_idle_pct"].as_f64().is_some(), "{v}");
}

#[test]
fn bench_pingpong_mem_block_and_table() {
    let v = json(&run(&[
        "bench",
        "pingpong",
        "--transport",
        "mem",
        "--mode",
        "block",
        "--sizes",
        "64",
        "--iters",
        "50",
        "--idle-secs",
        "0",
        "--json",
    ]));
    check_rows(&v, "mem", "block", &[64]);
    let out = run(&[
        "bench",
        "pingpong",
        "--transport",
        "mem",
        "--mode",
        "poll",
        "--sizes",
        "8",
        "--iters",
        "20",
        "--idle-secs",
        "0",
    ]);
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("median ns") && table.contains("mem"),
        "{table}"
    );
}

#[test]
fn bench_pingpong_rounds_pool_the_samples_of_transports_measured_in_turn() {
    let v = json(&run(&[
        "bench",
        "pingpong",
        "--transport",
        "mem,unix-raw",
        "--mode",
        "poll",
        "--sizes",
        "64,128",
        "--iters",
        "31",
        "--rounds",
        "3",
        "--idle-secs",
        "0",
        "--json",
    ]));
    let rows = v.as_array().expect("rows");
    let names = transports_and_sizes(rows);
    assert_eq!(
        names,
        [
            ("mem", 64),
            ("mem", 128),
            ("unix-raw", 64),
            ("unix-raw", 128)
        ]
    );
    for r in rows {
        // The rounds' shares (11 + 10 + 10) add up to --iters; each round has its median.
        assert_eq!(r["iters"], 31, "{r}");
        let medians = r["round_medians_ns"].as_array().expect("round medians");
        assert_eq!(medians.len(), 3, "{r}");
        assert!(medians.iter().all(|m| m.as_f64().unwrap() > 0.0), "{r}");
    }
    // One round (the default) keeps the row as it was: no per-round medians.
    let v = json(&run(&[
        "bench",
        "pingpong",
        "--transport",
        "mem",
        "--sizes",
        "64",
        "--iters",
        "10",
        "--idle-secs",
        "0",
        "--json",
    ]));
    assert!(v[0].get("round_medians_ns").is_none(), "{v}");
    let out = run(&["bench", "pingpong", "--transport", "mem", "--rounds", "0"]);
    fails_saying(&out, "--rounds");
}

#[test]
fn bench_pingpong_interleave_runs_every_peer_at_once_and_compares_channels_with_raw() {
    let v = json(&run(&[
        "bench",
        "pingpong",
        "--transport",
        "unix-raw,unix,shm,shm-chan",
        "--mode",
        "poll",
        "--sizes",
        "64,100",
        "--iters",
        "25",
        "--interleave",
        "10",
        "--json",
    ]));
    let rows = v.as_array().expect("rows");
    let names = transports_and_sizes(rows);
    assert_eq!(
        names,
        [
            ("unix-raw", 64),
            ("unix", 64),
            ("shm", 64),
            ("shm-chan", 64),
            ("unix-raw", 100),
            ("unix", 100),
            ("shm", 100),
            ("shm-chan", 100)
        ]
    );
    for (i, r) in rows.iter().enumerate() {
        // 25 round trips in blocks of 10, 10 and 5; each block has its median.
        assert_eq!(r["iters"], 25, "{r}");
        let medians = round_medians(r);
        assert_eq!(medians.len(), 3, "{r}");
        assert!(medians.iter().all(|&m| m > 0.0), "{r}");
        match r["transport"].as_str().unwrap() {
            // A channel row carries the median of its per-block ratios to its raw peer.
            "unix" | "shm-chan" => {
                let raw = round_medians(&rows[i - 1]);
                let mut ratios: Vec<f64> = medians.iter().zip(&raw).map(|(a, b)| a / b).collect();
                ratios.sort_by(f64::total_cmp);
                let vs = r["vs_raw"].as_f64().expect("vs_raw");
                assert!((vs - ratios[1]).abs() < 1e-9, "{r}");
            }
            _ => assert!(r.get("vs_raw").is_none(), "{r}"),
        }
    }
    // The table lists each channel row's ratio under its own heading.
    let out = run(&[
        "bench",
        "pingpong",
        "--transport",
        "shm,shm-chan",
        "--mode",
        "poll",
        "--sizes",
        "64",
        "--iters",
        "20",
        "--interleave",
        "10",
        "--idle-secs",
        "0",
    ]);
    assert!(out.status.success(), "{out:?}");
    let table = String::from_utf8_lossy(&out.stdout);
    let ratio_line = table
        .lines()
        .skip_while(|l| !l.contains("x raw peer"))
        .nth(1)
        .unwrap_or_default();
    assert!(ratio_line.starts_with("shm-chan"), "{table}");
    let ratio: f64 = ratio_line
        .split_whitespace()
        .last()
        .unwrap()
        .parse()
        .unwrap();
    assert!(ratio > 0.0, "{table}");
    let out = run(&[
        "bench",
        "pingpong",
        "--transport",
        "mem",
        "--interleave",
        "10",
        "--rounds",
        "2",
    ]);
    fails_saying(&out, "--rounds");
    let out = run(&[
        "bench",
        "pingpong",
        "--transport",
        "mem",
        "--interleave",
        "0",
    ]);
    fails_saying(&out, "--interleave");
}

#[test]
fn bench_overhead_compares_a_channel_round_trip_with_the_ring() {
    let v = json(&run(&[
        "bench", "overhead", "--sizes", "8,300", "--iters", "200", "--trials", "2", "--json",
    ]));
    let rows = v.as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{v}");
    for (r, size) in rows.iter().zip([8, 300]) {
        assert_eq!(r["bench"], "overhead");
        assert_eq!(r["size"], size);
        let chan = r["channel_round_trip_ns"].as_f64().unwrap();
        let raw = r["raw_round_trip_ns"].as_f64().unwrap();
        assert!(chan > 0.0 && raw > 0.0, "{r}");
        let ratio = r["ratio"].as_f64().unwrap();
        assert!((ratio - chan / raw).abs() < 1e-9, "{r}");
        let extra = r["extra_ns_per_hop"].as_f64().unwrap();
        assert!((extra - (chan - raw) / 2.0).abs() < 1e-6, "{r}");
    }
    let out = run(&["bench", "overhead", "--iters", "0"]);
    fails_saying(&out, "--iters");
}

#[test]
fn bench_pingpong_connects_to_a_running_engine() {
    let addr = format!("@offhost-cli-test-{}", std::process::id());
    let mut server = Reaped(
        Command::new(BIN)
            .args([
                "echo",
                "--raw",
                "--listen",
                &format!("shm:{addr}"),
                "--once",
            ])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    let v = loop {
        let out = run(&[
            "bench",
            "pingpong",
            "--connect",
            &format!("shm:{addr}"),
            "--mode",
            "block",
            "--sizes",
            "8",
            "--iters",
            "20",
            "--json",
        ]);
        if out.status.success() {
            break json(&out);
        }
        assert!(start.elapsed() < Duration::from_secs(10), "never connected");
        std::thread::sleep(Duration::from_millis(20));
    };
    check_rows(&v, "shm", "block", &[8]);
    assert!(
        v[0]["cpu_idle_pct"].is_null(),
        "not measurable for a remote engine"
    );
    assert!(server.wait().unwrap().success());
}

#[test]
fn bench_pingpong_bad_input_is_explained() {
    let out = run(&["bench", "pingpong", "--sizes", "0"]);
    fails_saying(&out, "at least 1 byte");
    let out = run(&["bench", "pingpong", "--mode", "sleepy"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown doorbell mode"));
    let out = run(&[
        "bench",
        "pingpong",
        "--connect",
        "shm:@offhost-nobody-listens",
        "--sizes",
        "8",
    ]);
    fails_saying(&out, "connect to echo engine");
}

/// Arguments of a short shm/poll pingpong over three sizes, plus `extra`.
fn short_pingpong(extra: &[&str]) -> Output {
    let mut args = vec![
        "bench",
        "pingpong",
        "--transport",
        "shm",
        "--mode",
        "poll",
        "--sizes",
        "8,64,4096",
        "--iters",
        "200",
        "--idle-secs",
        "0",
    ];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn bench_pingpong_fit_json_is_rows_and_fit() {
    let v = json(&short_pingpong(&["--fit", "--json"]));
    check_rows(&v["rows"], "shm", "poll", &[8, 64, 4096]);
    let fits = v["fit"].as_array().expect("fit is an array");
    assert_eq!(fits.len(), 1, "one series: {v}");
    let f = &fits[0];
    assert_eq!(f["bench"], "pingpong");
    assert_eq!(f["transport"], "shm");
    assert_eq!(f["mode"], "poll");
    for k in [
        "t0_ns",
        "r_inf_mb_per_s",
        "n_half_bytes",
        "rms_rel_residual",
    ] {
        assert!(f.get(k).is_some(), "missing {k}: {f}");
    }
    // Three sizes: no two-segment fit (it needs six).
    assert!(f.get("two_segment").is_none(), "{f}");
    match f.get("error") {
        // Timing noise may leave no growth with size; then the fit says why.
        Some(e) => assert!(e.as_str().unwrap().contains("does not grow"), "{f}"),
        None => {
            let t0 = f["t0_ns"].as_f64().unwrap();
            let r = f["r_inf_mb_per_s"].as_f64().unwrap();
            let n_half = f["n_half_bytes"].as_f64().unwrap();
            assert!(r > 0.0, "{f}");
            assert!(
                (n_half - t0 * r / 1e3).abs() <= 1e-6 * n_half.abs().max(1.0),
                "{f}"
            );
        }
    }
}

#[test]
fn bench_pingpong_csv_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let plots = dir.path().join("plots");
    let out = short_pingpong(&["--csv", "--plot", plots.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0]
            .starts_with("bench,transport,mode,size,one_way_ns_median,one_way_ns_p99,mb_per_s,"),
        "{stdout}"
    );
    assert_eq!(lines.len(), 4, "{stdout}");
    let columns = lines[0].split(',').count();
    for (line, size) in lines[1..].iter().zip(["8", "64", "4096"]) {
        assert!(
            line.starts_with(&format!("pingpong,shm,poll,{size},")),
            "{line}"
        );
        assert_eq!(line.split(',').count(), columns, "{line}");
    }
    for f in ["pingpong-throughput.svg", "pingpong-latency.svg"] {
        let svg = std::fs::read_to_string(plots.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(svg.starts_with("<svg"), "{f}");
        assert!(svg.contains("shm/poll"), "{f}: no series label");
    }
    // The table with --fit ends with the fit line; --json and --csv exclude each other.
    let out = short_pingpong(&["--fit"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{table}");
    assert!(table.starts_with("transport"), "{table}");
    assert!(table.contains("fit pingpong shm poll: "), "{table}");
    let out = short_pingpong(&["--csv", "--json"]);
    fails_saying(&out, "cannot be used with");
}

/// TLS channels and the raw rustls connection beside their plain TCP counterparts, in one run
/// of the real binary: each TLS row carries its throughput over TCP's, `tls` its ratio to
/// `tls-raw`, and the table shows the TLS ratios under their heading. No certificate
/// directory is left behind.
#[test]
fn bench_pingpong_and_rate_compare_tls_with_tcp_in_one_run() {
    let tmp = tempfile::tempdir().unwrap();
    let pingpong = |extra: &[&str]| {
        let mut args = vec![
            "bench",
            "pingpong",
            "--transport",
            "tls,tcp,tls-raw,tcp-raw",
            "--sizes",
            "64,65536",
            "--iters",
            "40",
            "--rounds",
            "2",
        ];
        args.extend_from_slice(extra);
        Command::new(BIN)
            .args(&args)
            .env("TMPDIR", tmp.path())
            .output()
            .unwrap()
    };
    let v = json(&pingpong(&["--json"]));
    let rows = v.as_array().unwrap();
    assert_eq!(
        transports_and_sizes(rows),
        [
            ("tls", 64),
            ("tls", 65536),
            ("tcp", 64),
            ("tcp", 65536),
            ("tls-raw", 64),
            ("tls-raw", 65536),
            ("tcp-raw", 64),
            ("tcp-raw", 65536)
        ]
    );
    for r in rows {
        let tls = r["transport"].as_str().unwrap().starts_with("tls");
        assert_eq!(r["throughput_vs_tcp"].as_f64().is_some(), tls, "{r}");
        assert_eq!(r["peer"], "thread");
    }
    assert!(rows[0]["vs_raw"].as_f64().unwrap() > 0.0, "{}", rows[0]);
    let out = pingpong(&[]);
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("throughput x tcp"), "{table}");
    let v = json(
        &Command::new(BIN)
            .args([
                "bench",
                "rate",
                "--transport",
                "tls,tcp",
                "--sizes",
                "65536",
            ])
            .args(["--count", "200", "--runs", "2", "--json"])
            .env("TMPDIR", tmp.path())
            .output()
            .unwrap(),
    );
    let rows = v.as_array().unwrap();
    assert_eq!(transports_and_sizes(rows), [("tls", 65536), ("tcp", 65536)]);
    assert!(rows[0]["throughput_vs_tcp"].as_f64().unwrap() > 0.0);
    assert_eq!(round_medians(&rows[0]).len(), 2);
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
