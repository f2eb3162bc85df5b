//! The real servers (`offhost engine`, `offhost echo`, `offhost nbd`) against peers that ask
//! for more than they give back: each is refused or dropped with an error naming the limit
//! and its flag, the server's memory and threads stay bounded, and the next peer is served.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{ChildStderr, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use common::Reaped;
use offhost_link::{ChannelOptions, Session};
use offhost_nbd::{hostile, ListenAddr};

fn offhost() -> Command {
    Command::new(env!("CARGO_BIN_EXE_offhost"))
}

/// Reads the first line that starts with `prefix` and keeps draining the pipe in the
/// background (a server must never block on a full log pipe); returns the rest of the line.
fn announced<R: Read + Send + 'static>(pipe: R, prefix: &str) -> String {
    let mut r = BufReader::new(pipe);
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "the server exited before announcing {prefix:?}"
        );
        if let Some(rest) = line.trim().strip_prefix(prefix) {
            let rest = rest.trim().to_string();
            std::thread::spawn(move || std::io::copy(&mut r, &mut std::io::sink()));
            return rest;
        }
    }
}

fn serve_stderr(args: &[&str], prefix: &str) -> (Reaped, String) {
    let mut child = offhost()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start offhost");
    let err: ChildStderr = child.stderr.take().unwrap();
    let url = announced(err, prefix);
    (Reaped(child), url)
}

fn serve_nbd(extra: &[&str]) -> (Reaped, ListenAddr) {
    let mut child = offhost()
        .args([
            "nbd",
            "--insecure",
            "--listen",
            "tcp:127.0.0.1:0",
            "--export",
            "disk=mem:1G",
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start offhost nbd");
    let out: ChildStdout = child.stdout.take().unwrap();
    let addr = announced(out, "listening on");
    (Reaped(child), addr.parse().unwrap())
}

/// A field of `/proc/PID/status` in its unit (kB for sizes).
fn status(pid: u32, key: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("server alive");
    s.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"))
}

fn alive(r: &mut Reaped) -> bool {
    r.0.try_wait().unwrap().is_none()
}

#[test]
fn engine_daemon_answers_bombs_with_errors_and_serves_the_next_host() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, url) = serve_stderr(
        &["engine", "--insecure", "--listen", "tcp:127.0.0.1:0"],
        "engine: listening on",
    );
    let submit = |text: &str| {
        let p = dir.path().join("p.ion");
        std::fs::write(&p, text).unwrap();
        offhost()
            .current_dir(dir.path())
            .args(["submit", "--engine", &url])
            .arg(&p)
            .output()
            .unwrap()
    };
    for (bomb, flag) in [
        (
            "fill bytes=1k >a:p(1000000,1G)\nnull <a\n",
            "--max-pool-bytes",
        ),
        (
            "fill bytes=1k >a:p(2,18446744073709551615)\nnull <a\n",
            "2^64",
        ),
        (
            "fill bytes=1k >a\nrate from=4294967295 to=1 <a >b\nnull <b\n",
            "coefficients",
        ),
    ] {
        let o = submit(bomb);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(flag), "{bomb:?}: {err}");
        assert!(alive(&mut d), "the daemon died on {bomb:?}");
    }
    // One 1 GiB message on the control channel (1.9 GB of daemon memory before): the
    // channel's window is refused at open.
    let s = Session::connect(&url).unwrap();
    let control = s
        .open(
            "control",
            ChannelOptions {
                recv_buffer: 1 << 30,
                max_message: 1 << 30,
                ..ChannelOptions::default()
            },
        )
        .unwrap();
    let _ = control.send(&vec![b' '; 1 << 20]);
    match control.recv_wait(Duration::from_secs(20)) {
        Err(e) => assert!(e.to_string().contains("--max-channel-window"), "{e}"),
        Ok(m) => panic!("the daemon took a 1 GiB window: {m:?}"),
    }
    let o = submit("fill bytes=64k >a:p(4,4096)\ncrc32c <a\n");
    assert!(
        o.status.success(),
        "a good pipeline after the bombs: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn echo_session_opening_10000_channels_is_refused_and_the_next_host_served() {
    let (mut e, url) = serve_stderr(
        &["echo", "--insecure", "--listen", "tcp:127.0.0.1:0"],
        "echo: serving channels on",
    );
    let s = Session::connect(&url).unwrap();
    let chans: Vec<_> = (0..10_000)
        .map_while(|i| s.open(&format!("c{i}"), ChannelOptions::default()).ok())
        .collect();
    let why = loop {
        match chans.last().unwrap().recv_wait(Duration::from_secs(20)) {
            Err(e) => break e.to_string(),
            Ok(Some(_)) => continue,
            Ok(None) => panic!("channel ended without a refusal"),
        }
    };
    assert!(why.contains("--max-channels"), "{why}");
    // A thread per admitted channel at most (the default limit is 256 per session).
    let threads = status(e.0.id(), "Threads:");
    assert!(threads < 300, "{threads} threads");
    drop(chans);
    drop(s);
    assert!(alive(&mut e), "the echo server exited");
    let s = Session::connect(&url).unwrap();
    let ch = s.open("next", ChannelOptions::default()).unwrap();
    ch.send(b"served").unwrap();
    assert_eq!(
        ch.recv_wait(Duration::from_secs(20)).unwrap().as_deref(),
        Some(&b"served"[..])
    );
}

/// The stated bound: 64 MiB for the server itself, and per connection its bytes in flight
/// (`--max-in-flight`, 64 MiB by default) and 8 MiB of buffers.
const NBD_BOUND_KB: u64 = (64 + 10 * (64 + 8)) << 10;

#[test]
fn nbd_memory_stays_bounded_while_10_clients_pipeline_80_reads_of_32_mib() {
    let (mut srv, addr) = serve_nbd(&[]);
    let pid = srv.0.id();
    // Before: about 2 GiB per connection (20 GiB for these ten).
    let clients: Vec<_> = (0..10)
        .map(|_| hostile::pipelined_reads(&addr, "disk", 80, 32 << 20).unwrap())
        .collect();
    let mut peak = 0;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        peak = peak.max(status(pid, "VmRSS:"));
        std::thread::sleep(Duration::from_millis(100));
    }
    peak = peak.max(status(pid, "VmHWM:"));
    eprintln!(
        "offhost nbd: peak RSS {} MiB under 10 x 80 reads of 32 MiB",
        peak >> 10
    );
    assert!(
        peak < NBD_BOUND_KB,
        "peak RSS {} MiB over the bound of {} MiB",
        peak >> 10,
        NBD_BOUND_KB >> 10
    );
    drop(clients);
    assert!(alive(&mut srv));
    hostile::idle(&addr, "disk").expect("the next client is served");
}

#[test]
fn nbd_slow_clients_are_dropped_within_their_deadlines() {
    let (mut srv, addr) = serve_nbd(&[
        "--handshake-timeout",
        "1",
        "--idle-timeout",
        "1",
        "--io-timeout",
        "1",
    ]);
    let long = Duration::from_secs(30);
    hostile::trickle_handshake(&addr, Duration::from_millis(100), long)
        .expect("a trickling handshake is dropped");
    hostile::option_flood(&addr, long).expect("an option flood is dropped");
    let idle = hostile::idle(&addr, "disk").unwrap();
    assert!(hostile::dropped_within(&idle, long).is_some(), "idle kept");
    let stalled = hostile::stalled_write(&addr, "disk", 32 << 20).unwrap();
    assert!(
        hostile::dropped_within(&stalled, long).is_some(),
        "stalled write kept"
    );
    assert!(alive(&mut srv));
}

#[test]
fn nbd_connections_past_the_limit_are_refused_and_nbdinfo_says_why() {
    let (_srv, addr) = serve_nbd(&["--max-connections", "1"]);
    let ListenAddr::Tcp(hp) = &addr else {
        unreachable!("tcp listener")
    };
    let uri = format!("nbd://{hp}/disk");
    let holder = hostile::idle(&addr, "disk").unwrap();
    // libnbd shows the server's message in its debug output.
    let o = Command::new("nbdinfo")
        .env("LIBNBD_DEBUG", "1")
        .arg(&uri)
        .output()
        .expect("nbdinfo is required by this test: install libnbd-bin");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "nbdinfo was served past the limit");
    assert!(
        err.contains("server error message: the server has 1 connections open")
            && err.contains("--max-connections"),
        "{err}"
    );
    drop(holder);
    let t0 = Instant::now();
    loop {
        let o = Command::new("nbdinfo").arg(&uri).output().unwrap();
        if o.status.success() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the slot never came back"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
