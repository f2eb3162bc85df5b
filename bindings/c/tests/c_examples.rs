//! The C examples (examples/c), built with `cc` against include/offhost.h and the shared
//! library of this crate, run against Rust peers: the relay between a Rust host and the
//! Rust echo engine over shared memory, and the pipeline runner against the embedded engine.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use offhost_link::{ChannelOptions, LinkOptions, Server, Session};

mod common;
use common::lib_dir;

/// A command running the C program `exe` against this build's library: cargo's
/// `LD_LIBRARY_PATH` (which outranks the program's rpath) may name an older copy of it.
fn c_program(exe: &Path) -> Command {
    let mut c = Command::new(exe);
    c.env("LD_LIBRARY_PATH", lib_dir());
    c
}

/// Compiles examples/c/NAME.c into `out`, warnings as errors.
fn build(name: &str, out: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    common::compile(&root.join(format!("examples/c/{name}.c")), name, out)
}

fn fnv1a(mut h: u64, data: &[u8]) -> u64 {
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// Runs the C relay between a Rust host (at `listen`) and the Rust echo engine (at
/// `echo_url`), with `certs` for tls: URLs; checks every message comes back and the relay's
/// summary. Loans (shm only) every other message where `loans`.
fn relay_round_trip(listen: &str, echo: Server, certs: Option<&Path>, loans_too: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let relay = build("relay", dir.path());
    let echo_url = echo.url().to_owned();
    std::thread::spawn(move || offhost_link::serve_echo(&echo));
    let mut cmd = c_program(&relay);
    cmd.args([listen, &echo_url]);
    if let Some(c) = certs {
        cmd.arg(c);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the relay");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("relay's first line");
    let listen = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{line}"))
        .to_owned();
    let options = match certs {
        Some(c) => LinkOptions::new().tls_certificates(c),
        None => LinkOptions::new(),
    };
    let s = Session::connect_with(&listen, &options).expect("connect to the relay");
    let ch = s
        .open(
            "data",
            ChannelOptions {
                max_message: 1 << 20,
                recv_buffer: 4 << 20,
                ..ChannelOptions::default()
            },
        )
        .expect("open");
    let (mut hash, mut total, mut loans) = (0xcbf29ce484222325u64, 0u64, 0u64);
    let sizes = [1usize, 100, 4096, 4097, 70_000, 1 << 20];
    for (i, &n) in sizes.iter().chain(&sizes).enumerate() {
        let msg: Vec<u8> = (0..n).map(|k| (k * 31 + i * 7) as u8).collect();
        if loans_too && i % 2 == 1 {
            let mut loan = ch.loan(Some(Duration::from_secs(30))).expect("loan");
            loan[..n].copy_from_slice(&msg);
            loan.set_len(n).expect("length");
            ch.send_loan(loan).expect("send loan");
            loans += 1;
        } else {
            ch.send(&msg).expect("send");
        }
        let back = match ch.recv_wait(Duration::from_secs(60)) {
            Ok(Some(m)) => m,
            other => {
                let _ = child.kill();
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                panic!("message {i} of {n} bytes did not come back: {other:?}; relay: {err}");
            }
        };
        assert!(back == msg, "message {i} of {n} bytes came back changed");
        hash = fnv1a(hash, &back);
        total += n as u64;
    }
    ch.close().expect("close");
    let mut summary = String::new();
    out.read_line(&mut summary).expect("summary");
    let st = child.wait().expect("relay exits");
    assert!(st.success(), "relay failed: {summary}");
    assert_eq!(
        summary.trim(),
        format!("relayed 12 messages, {total} bytes ({loans} loans in), fnv1a {hash:016x}")
    );
}

#[test]
fn the_relay_carries_rust_messages_through_c_and_the_echo_engine() {
    let pid = std::process::id();
    let echo = Server::bind(&format!("shm:@offhost-c-test-echo-{pid}")).expect("echo server");
    relay_round_trip(
        &format!("shm:@offhost-c-test-relay-{pid}"),
        echo,
        None,
        true,
    );
}

#[test]
fn the_relay_listens_over_tls_with_a_certificate_directory() {
    // The host reaches the C relay over tls (mutual certificates); the relay forwards to the
    // echo engine over shared memory (it sends large messages as loans, which need shm).
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = dir.path().join("pki");
    offhost_access::certs::generate(&pki, &[]).expect("certificates");
    let pid = std::process::id();
    let echo = Server::bind(&format!("shm:@offhost-c-test-tls-echo-{pid}")).expect("echo server");
    relay_round_trip("tls:127.0.0.1:0", echo, Some(&pki), false);
}

fn tone_pipeline(dir: &Path) -> PathBuf {
    let f = dir.join("tone.ion");
    std::fs::write(
        &f,
        "tone seconds=0.5 freq=300 >stereo:audio(8,4096)\n\
         mix <stereo >mono:pcm(8,4096)\n\
         mulaw <mono >ulaw:law(8,2048)\n\
         host-out name=speech <ulaw\n",
    )
    .expect("write pipeline");
    f
}

#[test]
fn the_pipeline_runner_gives_the_engines_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let runner = build("pipeline", dir.path());
    let ion = tone_pipeline(dir.path());
    let r = c_program(&runner)
        .arg(&ion)
        .arg("speech")
        .arg(dir.path().join("c.out"))
        .output()
        .expect("run the C pipeline runner");
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let stats: serde_json::Value = serde_json::from_slice(&r.stdout).expect("stats as JSON");
    assert_eq!(stats["finished"], true);

    // The same pipeline on the engine, from Rust.
    let text = std::fs::read_to_string(&ion).expect("read");
    let p = offhost_bindings::Engine::embedded(None)
        .submit(&text)
        .expect("submit");
    let mut want = Vec::new();
    while let Some(b) = p.recv("speech", None).expect("recv") {
        want.extend_from_slice(&b);
    }
    assert_eq!(want.len(), 22_050);
    assert_eq!(
        std::fs::read(dir.path().join("c.out")).expect("c.out"),
        want
    );

    // offhost_run: no host channel taken, statistics printed.
    let r = c_program(&runner)
        .arg(&ion)
        .args(["-", "unused"])
        .output()
        .expect("run");
    assert!(r.status.success());
    let stats: serde_json::Value = serde_json::from_slice(&r.stdout).expect("JSON");
    assert_eq!(stats["tasks"].as_array().map(Vec::len), Some(4));
}

#[test]
fn errors_reach_c_with_their_codes_and_messages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let runner = build("pipeline", dir.path());
    let bad = dir.path().join("bad.ion");
    std::fs::write(&bad, "tone seconds=1 >a\nfitler <a\n").expect("write");
    let r = c_program(&runner)
        .arg(&bad)
        .args(["x", "out"])
        .output()
        .expect("run");
    assert_eq!(r.status.code(), Some(1));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("pipeline error: line 2, column 1: unknown task 'fitler'"),
        "{err}"
    );
    let ion = tone_pipeline(dir.path());
    let r = c_program(&runner)
        .arg(&ion)
        .args(["nope", "out"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains(
            "no such channel: the pipeline has no host-out channel \"nope\" (it has: speech)"
        ),
        "{err}"
    );
    let relay = build("relay", dir.path());
    let r = c_program(&relay)
        .args(["carrier-pigeon:home", "shm:@x"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1));
    assert!(err.contains("listen: bad url: bad url"), "{err}");
}

/// An engine serving hosts' off-host queues in this process, on an abstract shm socket; its
/// address.
fn queue_engine() -> String {
    use offhost_node::offload::{Offload, OffloadConfig};
    let name = format!("@c-queue-{}", std::process::id());
    let config = OffloadConfig::new(offhost_link::peer::PeerConfig::new("alpha"));
    let offload = Offload::new(config, None).expect("offload service");
    let listener = offhost_shm::Listener::bind(&name).expect("bind shm");
    std::thread::spawn(move || {
        offload.serve_shm(
            listener,
            std::sync::Arc::new(|s: offhost_link::Session| s.close()),
        )
    });
    format!("shm:{name}")
}

#[test]
fn the_queue_example_streams_through_an_engine_and_reaps_every_completion() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = build("queue", dir.path());
    let engine = queue_engine();
    let o = c_program(&exe)
        .args([engine.as_str(), "box", "500"])
        .output()
        .expect("run the queue example");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.starts_with("queue: 500 messages (125 from loans), ")
            && out.contains("delivered and received in order"),
        "{out}"
    );
    // A peer the engine does not know: the open fails with its reason.
    let o = c_program(&exe)
        .args([engine.as_str(), "nowhere/box", "1"])
        .output()
        .expect("run the queue example");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("queue: open: engine error") && err.contains("nowhere"),
        "{err}"
    );
    // No engine there.
    let o = c_program(&exe)
        .args(["shm:@no-such-engine", "box", "1"])
        .output()
        .expect("run the queue example");
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("queue: connect: "),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn the_pipeline_runner_submits_to_a_daemon_under_a_name() {
    use offhost_node::daemon::{Client, Daemon};
    let server = Server::bind("tcp:127.0.0.1:0").expect("bind loopback");
    let url = server.url().to_string();
    let d = Daemon::new(
        offhost_engine::Registry::with_builtins(),
        offhost_engine::EngineConfig::default(),
    );
    std::thread::spawn(move || d.serve(&server));
    let dir = tempfile::tempdir().expect("tempdir");
    let runner = build("pipeline", dir.path());
    let ion = tone_pipeline(dir.path());
    let run = |name: &str| {
        c_program(&runner)
            .args(["--engine", &url, "--name", name])
            .arg(&ion)
            .arg("speech")
            .arg(dir.path().join("named.out"))
            .output()
            .expect("run the C pipeline runner")
    };
    let r = run("tone-1");
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(
        std::fs::read(dir.path().join("named.out"))
            .map(|v| v.len())
            .ok(),
        Some(22_050)
    );
    // The daemon finds it by that name.
    let v = Client::connect(&url)
        .expect("client")
        .status("tone-1")
        .expect("status");
    assert_eq!(
        (v.name.as_deref(), v.state.as_str()),
        (Some("tone-1"), "finished")
    );
    // A malformed name is the daemon's refusal, with its reason.
    let r = run("1tone");
    assert_eq!(r.status.code(), Some(1));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("ENGINE") || err.contains("engine"), "{err}");
    assert!(err.contains("must start with a letter"), "{err}");
}

/// The pass-through module of `examples/wasm/pass.wat`, in the text format.
const PASS_WAT: &str = include_str!("../../../examples/wasm/pass.wat");

#[test]
fn the_pipeline_runner_adds_a_module_that_its_pipeline_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let runner = build("pipeline", dir.path());
    let module = dir.path().join("pass.wasm");
    std::fs::write(&module, wat::parse_str(PASS_WAT).expect("wat")).expect("write");
    let plain = tone_pipeline(dir.path());
    let through = dir.path().join("through.ion");
    let text = std::fs::read_to_string(&plain).expect("read");
    std::fs::write(
        &through,
        text.replace(
            "host-out name=speech <ulaw",
            "wasm module=pass <ulaw >passed:p(8,2048)\nhost-out name=speech <passed",
        ),
    )
    .expect("write");
    let run = |ion: &Path, out: &str, module: Option<&Path>| {
        let mut c = c_program(&runner);
        if let Some(m) = module {
            c.arg("--module").arg(format!("pass={}", m.display()));
        }
        let r = c.arg(ion).arg("speech").arg(dir.path().join(out)).output();
        let r = r.expect("run the C pipeline runner");
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        std::fs::read(dir.path().join(out)).expect("output")
    };
    let want = run(&plain, "plain.out", None);
    assert_eq!(want.len(), 22_050);
    assert_eq!(run(&through, "through.out", Some(&module)), want);
}
