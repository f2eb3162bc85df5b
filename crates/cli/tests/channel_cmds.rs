//! End-to-end tests of `offhost send`, `offhost recv`, `offhost cat` and the channel echo,
//! running the real binary against real engines over tcp, unix and shm.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use offhost_link::{Server, Session};

mod common;
use common::Reaped;

const BIN: &str = env!("CARGO_BIN_EXE_offhost");

fn random(len: usize, seed: u64) -> Vec<u8> {
    // xorshift: deterministic, no extra dependency
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// `offhost echo --listen URL`; returns the child and the URL it reports.
fn echo_engine(url: &str) -> (Reaped, String) {
    let mut child = Reaped(
        Command::new(BIN)
            .args(["echo", "--listen", url])
            .args(url.starts_with("tcp:").then_some("--insecure"))
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("start offhost echo"),
    );
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let served = line
        .trim()
        .strip_prefix("echo: serving channels on ")
        .unwrap_or_else(|| panic!("unexpected first line from echo: {line:?}"))
        .to_owned();
    (child, served)
}

fn run_with_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        stdin.write_all(&input).unwrap();
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

fn urls(dir: &std::path::Path) -> Vec<String> {
    vec![
        "tcp:127.0.0.1:0".to_owned(),
        format!("unix:{}", dir.join("echo.sock").display()),
        format!("shm:{}", dir.join("echo-shm.sock").display()),
    ]
}

#[test]
fn cat_through_the_echo_engine_is_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    for url in urls(dir.path()) {
        let (mut engine, served) = echo_engine(&url);
        for (len, seed) in [(0usize, 1u64), (1, 2), (5 << 20 | 777, 3)] {
            let data = random(len, seed);
            let out = run_with_stdin(&["cat", "--via", &served, "--channel", "cat"], &data);
            assert!(
                out.status.success(),
                "{served}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(
                out.stdout.len(),
                data.len(),
                "{served}: length for {len} bytes"
            );
            assert!(out.stdout == data, "{served}: bytes differ for {len} bytes");
        }
        // Small packets and messages, and synchronous sends, carry the same bytes.
        let data = random(100_000, 4);
        let out = run_with_stdin(
            &[
                "cat",
                "--via",
                &served,
                "--channel",
                "small",
                "--packet-size",
                "8",
                "--buffer",
                "4096",
                "--max-message",
                "1000",
                "--sync",
            ],
            &data,
        );
        assert!(
            out.status.success(),
            "{served}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout == data, "{served}: small-packet bytes differ");
        engine.kill().unwrap();
        engine.wait().unwrap();
    }
}

#[test]
fn send_delivers_stdin_to_the_engines_channel() {
    let dir = tempfile::tempdir().unwrap();
    for url in urls(dir.path()) {
        let server = Server::bind(&url).unwrap();
        let served = server.url().to_owned();
        let data = random(3 << 20 | 5, 7);
        let engine = std::thread::spawn(move || {
            let s = server.accept().unwrap();
            let ch = s.accept().unwrap();
            assert_eq!(ch.name(), "in");
            let mut got = Vec::new();
            ch.reader().read_to_end(&mut got).unwrap();
            got
        });
        let out = run_with_stdin(&["send", "--to", &served, "--channel", "in"], &data);
        assert!(
            out.status.success(),
            "{served}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            engine.join().unwrap() == data,
            "{served}: engine got other bytes"
        );
    }
}

#[test]
fn recv_writes_the_engines_channel_to_stdout() {
    let dir = tempfile::tempdir().unwrap();
    for url in urls(dir.path()) {
        let server = Server::bind(&url).unwrap();
        let served = server.url().to_owned();
        let data = random(2 << 20 | 3, 9);
        let expect = data.clone();
        let engine = std::thread::spawn(move || {
            let s = server.accept().unwrap();
            let ch = s.accept().unwrap();
            assert_eq!(ch.name(), "out");
            let mut w = ch.writer();
            w.write_all(&data).unwrap();
            w.finish().unwrap();
            // Keep the session until the host has everything.
            assert_eq!(ch.recv_wait(Duration::from_secs(30)).unwrap(), None);
            drop(s);
        });
        let out = run_with_stdin(&["recv", "--from", &served, "--channel", "out"], b"");
        assert!(
            out.status.success(),
            "{served}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout == expect, "{served}: stdout differs");
        engine.join().unwrap();
    }
}

#[test]
fn recv_from_several_engines_writes_each_message_as_it_comes() {
    let dir = tempfile::tempdir().unwrap();
    let mut engines = Vec::new();
    let mut args = vec!["recv".to_owned(), "--channel".into(), "out".into()];
    for (k, url) in urls(dir.path()).into_iter().enumerate() {
        let server = Server::bind(&url).unwrap();
        args.extend(["--from".into(), server.url().to_owned()]);
        engines.push(std::thread::spawn(move || {
            let s = server.accept().unwrap();
            let ch = s.accept().unwrap();
            for i in 0..50 {
                ch.send(format!("<{k}:{i}>").as_bytes()).unwrap();
            }
            ch.close().unwrap();
            assert_eq!(ch.recv_wait(Duration::from_secs(30)).unwrap(), None);
        }));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_with_stdin(&args, b"");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    for k in 0..engines.len() {
        // Every message of each engine, in its order, whatever came between them.
        let mine: Vec<&str> = text
            .split_inclusive('>')
            .filter(|m| m.starts_with(&format!("<{k}:")))
            .collect();
        let want: Vec<String> = (0..50).map(|i| format!("<{k}:{i}>")).collect();
        assert_eq!(mine, want, "engine {k}");
    }
    for e in engines {
        e.join().unwrap();
    }
}

#[test]
fn bad_urls_and_options_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = format!("unix:{}", dir.path().join("nobody").display());
    let out = run_with_stdin(&["cat", "--via", &missing, "--channel", "x"], b"");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("connect to unix:"),
        "{out:?}"
    );
    let out = run_with_stdin(&["send", "--to", "ftp:x", "--channel", "x"], b"");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown scheme"),
        "{out:?}"
    );
    let (mut engine, served) = echo_engine("tcp:127.0.0.1:0");
    let out = run_with_stdin(
        &[
            "cat",
            "--via",
            &served,
            "--channel",
            "x",
            "--packet-size",
            "100",
        ],
        b"",
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("power of two"),
        "{out:?}"
    );
    // The engine still serves after that.
    let s = Session::connect(&served).unwrap();
    let ch = s
        .open("still", offhost_link::ChannelOptions::default())
        .unwrap();
    ch.send(b"up").unwrap();
    assert_eq!(
        ch.recv_wait(Duration::from_secs(20)).unwrap().unwrap(),
        b"up"
    );
    engine.kill().unwrap();
    engine.wait().unwrap();
    let out = run_with_stdin(&["echo", "--listen", "mem:x"], b"");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("in-process only"),
        "{out:?}"
    );
}

fn json_rows(args: &[&str]) -> Vec<serde_json::Value> {
    let out = Command::new(BIN).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Vec<serde_json::Value>>(&out.stdout).expect("a JSON array")
}

#[test]
fn bench_rows_through_channels_and_raw_peers_keep_the_contract() {
    let rows = json_rows(&[
        "bench",
        "pingpong",
        "--transport",
        "tcp,unix,shm-chan,tcp-raw,unix-raw,pipe-raw",
        "--sizes",
        "64",
        "--iters",
        "50",
        "--mode",
        "block",
        "--json",
    ]);
    let names: Vec<_> = rows
        .iter()
        .map(|r| r["transport"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        ["tcp", "unix", "shm-chan", "tcp-raw", "unix-raw", "pipe-raw"]
    );
    for r in &rows {
        for key in [
            "bench",
            "transport",
            "mode",
            "size",
            "one_way_ns_median",
            "one_way_ns_p99",
            "mb_per_s",
        ] {
            assert!(!r[key].is_null(), "{key} missing in {r}");
        }
        assert!(r["one_way_ns_median"].as_f64().unwrap() > 0.0);
    }
    let rows = json_rows(&[
        "bench",
        "rate",
        "--transport",
        "shm",
        "--sizes",
        "64,65536",
        "--path",
        "copy,loan",
        "--count",
        "300",
        "--runs",
        "1",
        "--json",
    ]);
    assert_eq!(rows.len(), 4);
    for r in &rows {
        assert_eq!(r["bench"], "rate");
        assert!(r["msgs_per_s"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["iters"], 300);
    }
    let out = Command::new(BIN)
        .args(["bench", "rate", "--transport", "tcp", "--path", "loan"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs --transport shm"));
}

/// `cat` sends each read of stdin at once (a typed line comes back while the terminal stays
/// open), `--timeout` ends it with an error naming the wait when nothing comes, and size flags
/// take 64K-style sizes.
#[test]
fn cat_sends_each_line_at_once_and_gives_up_past_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let (_echo, served) = echo_engine(&format!("unix:{}", dir.path().join("e.sock").display()));
    let mut child = Command::new(BIN)
        .args(["cat", "--via", &served, "--channel", "t", "--timeout", "1"])
        .args([
            "--buffer",
            "256K",
            "--max-message",
            "64K",
            "--packet-size",
            "4K",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"a line\n").unwrap();
    // The line comes back with stdin still open: it was sent when read, not when a message
    // filled up or stdin ended.
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "a line\n");
    // Nothing more comes: past one second the wait for the next message gives up, though
    // stdin is still open.
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "cat did not give up"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(stdin);
    assert!(!status.success());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        err.contains("copy the channel to stdout: timed out"),
        "{err}"
    );
    // A size that does not fit its flag says the largest that does.
    let out = run_with_stdin(
        &["cat", "--via", &served, "--channel", "t", "--buffer", "8G"],
        b"",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("more than the largest this takes, 4294967295"),
        "{err}"
    );
}
