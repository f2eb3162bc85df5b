//! Off-host queues against real engine processes: delivery through two engines, a remote
//! engine and a local engine killed mid-stream, a lossy delayed link between two network
//! namespaces, a host faster than its link, and a host writing garbage records.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Reaped;
use offhost_link::offload::{ErrorCode, HostQueue, OpenOptions, Outcome, QueueError, RecvSize};

const BIN: &str = env!("CARGO_BIN_EXE_offhost");

fn engine(args: &[&str]) -> (Reaped, Vec<String>) {
    common::engine_in(&[], args)
}

/// Two engines on loopback: beta, and alpha with beta as its peer. Returns the children and
/// their shm addresses.
fn pair(dir: &Path, alpha_extra: &[&str]) -> (Reaped, Reaped, String, String) {
    let bs = format!("shm:{}", dir.join("beta.sock").display());
    let (b, bu) = engine(&[
        "--name",
        "beta",
        "--listen",
        &bs,
        "--listen",
        "tcp:127.0.0.1:0",
        "--insecure",
    ]);
    let as_ = format!("shm:{}", dir.join("alpha.sock").display());
    let peer = format!("beta={}", bu[1]);
    let mut args = vec![
        "--name",
        "alpha",
        "--listen",
        &as_,
        "--listen",
        "tcp:127.0.0.1:0",
        "--insecure",
        "--peer",
        &peer,
    ];
    args.extend_from_slice(alpha_extra);
    let (a, _) = engine(&args);
    (a, b, as_, bs)
}

fn kill9(c: &mut Reaped) {
    let _ = c.kill();
    let _ = c.wait();
}

/// A reader on `engine`'s channel `name` taking everything, on a thread (ends with its engine).
fn drain(engine: &str, name: &str) -> std::thread::JoinHandle<u64> {
    let (engine, name) = (engine.to_owned(), name.to_owned());
    std::thread::spawn(move || {
        let Ok(mut q) = HostQueue::connect(&engine) else {
            return 0;
        };
        let Ok(ch) = q.open(&name, OpenOptions::bulk()) else {
            return 0;
        };
        let mut n = 0;
        for t in 0..8 {
            let _ = q.push_recv(ch, RecvSize::Any, t);
        }
        let _ = q.submit();
        loop {
            match q.wait(1, Some(Duration::from_secs(30))) {
                Ok(0) | Err(_) => return n,
                Ok(_) => {}
            }
            while let Some(c) = q.pop() {
                match c.outcome {
                    Outcome::Ok(b) => n += b,
                    _ => return n,
                }
                if q.push_recv(ch, RecvSize::Any, 0).is_err() {
                    return n;
                }
            }
            if q.submit().is_err() {
                return n;
            }
        }
    })
}

/// Streams 16 KiB messages on `ch` until `stop()` says so, reaping as it goes, then fills
/// the window without reaping, so that messages are in flight when it returns; returns the
/// completions seen. (16 KiB go inline in the ring, so many are in flight at once; larger
/// ones go in the segment's 16 pool buffers, and a window of 16 can be gone in a moment.)
fn stream_until(
    q: &mut HostQueue,
    ch: offhost_link::offload::ChannelId,
    mut stop: impl FnMut(usize) -> bool,
) -> usize {
    let msg = vec![0x5au8; 16 << 10];
    let mut done = 0;
    let mut tag = 0;
    while !stop(done) {
        match q.push_send(ch, &msg, tag) {
            Ok(()) => tag += 1,
            Err(QueueError::Full(_)) => {
                q.submit().unwrap();
                q.wait(1, Some(Duration::from_secs(10))).unwrap();
            }
            Err(e) => panic!("push: {e}"),
        }
        if tag % 16 == 0 {
            q.submit().unwrap();
        }
        while let Some(c) = q.pop() {
            assert!(matches!(c.outcome, Outcome::Ok(_)), "{c:?}");
            done += 1;
        }
    }
    // Fill the queue, leaving room for one more submission (a test posts a receive next).
    let room = q.limits().max_outstanding as usize - 1;
    for _ in 0..256 {
        if q.outstanding() >= room {
            break;
        }
        match q.push_send(ch, &msg, tag) {
            Ok(()) => tag += 1,
            Err(QueueError::Full(_)) => break,
            Err(e) => panic!("push: {e}"),
        }
    }
    q.submit().unwrap();
    done
}

/// Reaps every outstanding submission, with a bound on the whole wait; returns the failures
/// and how long it took.
fn reap_all(q: &mut HostQueue, bound: Duration) -> (Vec<Outcome>, Duration) {
    let t0 = Instant::now();
    let mut out = Vec::new();
    while q.outstanding() > 0 {
        assert!(
            t0.elapsed() < bound,
            "completions did not come within {bound:?}"
        );
        q.wait(1, Some(Duration::from_millis(200))).unwrap();
        while let Some(c) = q.pop() {
            out.push(c.outcome);
        }
    }
    (out, t0.elapsed())
}

#[test]
fn cli_send_and_recv_via_two_engines_over_tls_are_byte_exact() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    assert!(Command::new(BIN)
        .args(["certs", pki.to_str().unwrap()])
        .status()
        .unwrap()
        .success());
    let pki = pki.to_str().unwrap();
    let (_b, bs, peer) = tls_beta(dir.path(), pki, &[]);
    let as_ = format!("shm:{}", dir.path().join("a.sock").display());
    let (_a, _) = engine(&[
        "--name",
        "alpha",
        "--listen",
        &as_,
        "--peer",
        &peer,
        "--tls-certificates",
        pki,
    ]);
    let data: Vec<u8> = (0..5_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let recv = recv_film(&bs, "60");
    let s = send_via(&as_, &["--max-message", "300000"], &data);
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    assert!(String::from_utf8_lossy(&s.stderr).contains("5000000 bytes delivered"));
    let r = recv.wait_with_output().unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(
        r.stdout == data,
        "received {} bytes, not the {} sent",
        r.stdout.len(),
        data.len()
    );
    // A peer that is not in the table is a clear error.
    let o = Command::new(BIN)
        .args(["send", "--via", &as_, "--channel", "gamma/x"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no peer named \"gamma\""),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Engine beta in `dir`, on shm and `tls:` with the certificates in `pki`, and `extra`
/// flags; the child, its shm address and `beta=URL` for its peers' --peer.
fn tls_beta(dir: &Path, pki: &str, extra: &[&str]) -> (Reaped, String, String) {
    let bs = format!("shm:{}", dir.join("b.sock").display());
    let mut args = vec![
        "--name",
        "beta",
        "--listen",
        &bs,
        "--listen",
        "tls:127.0.0.1:0",
        "--tls-certificates",
        pki,
    ];
    args.extend_from_slice(extra);
    let (b, bu) = engine(&args);
    let peer = format!("beta={}", bu[1]);
    (b, bs, peer)
}

/// `offhost recv --via ENGINE --channel film --idle-timeout SECS`, started.
fn recv_film(engine: &str, secs: &str) -> std::process::Child {
    Command::new(BIN)
        .args([
            "recv",
            "--via",
            engine,
            "--channel",
            "film",
            "--idle-timeout",
            secs,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `offhost send --via ENGINE --channel beta/film EXTRA...` with `data` on stdin.
fn send_via(engine: &str, extra: &[&str], data: &[u8]) -> std::process::Output {
    let mut send = Command::new(BIN)
        .args(["send", "--via", engine, "--channel", "beta/film"])
        .args(extra)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    send.stdin.take().unwrap().write_all(data).unwrap();
    send.wait_with_output().unwrap()
}

#[test]
fn an_engine_with_certified_peers_takes_only_the_name_a_certificate_proves() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    assert!(Command::new(BIN)
        .args(["certs", pki.to_str().unwrap(), "--engine", "alpha"])
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success());
    let alpha_pki = pki.join("engines/alpha");
    let (pki, alpha_pki) = (pki.to_str().unwrap(), alpha_pki.to_str().unwrap());
    let (_b, bs, peer) = tls_beta(dir.path(), pki, &["--certified-peers"]);
    let start = |name: &str| {
        let shm = format!("shm:{}", dir.path().join(format!("{name}.sock")).display());
        let args = [
            "--name",
            name,
            "--listen",
            &shm,
            "--peer",
            &peer,
            "--tls-certificates",
            alpha_pki,
        ];
        (engine(&args).0, shm)
    };
    // alpha, with its own certificate: delivered.
    let (_a, as_) = start("alpha");
    let recv = recv_film(&bs, "20");
    let s = send_via(&as_, &[], b"certified");
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    let got = recv.wait_with_output().unwrap();
    assert_eq!(
        got.stdout,
        b"certified",
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    // Another engine with alpha's certificate: beta refuses the name.
    let (_m, ms) = start("mallory");
    let s = send_via(&ms, &[], b"forged");
    let err = String::from_utf8_lossy(&s.stderr);
    assert!(
        !s.status.success(),
        "delivered under another engine's certificate"
    );
    assert!(
        err.contains("certificate does not name that engine"),
        "{err}"
    );
}

#[test]
fn remote_engine_killed_mid_stream_fails_what_it_had_not_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let (_a, mut b, as_, bs) = pair(dir.path(), &[]);
    let reader = drain(&bs, "sink");
    let mut q = HostQueue::connect(&as_).unwrap();
    let ch = q.open("beta/sink", OpenOptions::bulk()).unwrap();
    let ok_before = stream_until(&mut q, ch, |done| done >= 200);
    // Messages are in flight now; kill the remote engine under them.
    assert!(q.outstanding() > 0);
    let t_kill = Instant::now();
    kill9(&mut b);
    let (outcomes, _) = reap_all(&mut q, Duration::from_secs(5));
    let took = t_kill.elapsed();
    // In flight at the kill: the link failed under them. Queued behind them: the link failed,
    // or (when the engine had already tried to make it again) the peer could not be reached.
    let link_error = |o: &Outcome| matches!(o, Outcome::Failed(f) if matches!(f.code, ErrorCode::LinkFailed | ErrorCode::Unreachable));
    let failed = outcomes.iter().filter(|o| link_error(o)).count();
    let other = outcomes
        .iter()
        .filter(|o| !matches!(o, Outcome::Ok(_)) && !link_error(o))
        .count();
    eprintln!(
        "{ok_before} delivered before the kill; after it {} completions in {took:?}: {failed} link failed",
        outcomes.len()
    );
    assert_eq!(other, 0, "{outcomes:?}");
    assert!(failed > 0, "some messages were in flight at the kill");
    // The next send says the peer cannot be reached, promptly.
    q.push_send(ch, b"after", 0).unwrap();
    q.submit().unwrap();
    let (o, _) = reap_all(&mut q, Duration::from_secs(5));
    assert!(
        matches!(&o[0], Outcome::Failed(f) if matches!(f.code, ErrorCode::Unreachable | ErrorCode::LinkFailed)),
        "{o:?}"
    );
    let _ = reader.join();
}

#[test]
fn local_engine_killed_mid_stream_ends_every_submission() {
    let dir = tempfile::tempdir().unwrap();
    let (mut a, _b, as_, bs) = pair(dir.path(), &[]);
    let _reader = drain(&bs, "sink");
    let mut q = HostQueue::connect(&as_).unwrap();
    let ch = q.open("beta/sink", OpenOptions::bulk()).unwrap();
    stream_until(&mut q, ch, |done| done >= 100);
    q.push_recv(ch, RecvSize::Any, 7).unwrap();
    q.submit().unwrap();
    let n = q.outstanding();
    let t_kill = Instant::now();
    kill9(&mut a);
    let (outcomes, _) = reap_all(&mut q, Duration::from_secs(5));
    let took = t_kill.elapsed();
    eprintln!("{n} outstanding at the kill, all ended in {took:?}");
    assert!(outcomes
        .iter()
        .any(|o| matches!(o, Outcome::Failed(f) if f.code == ErrorCode::EngineGone)));
    assert!(outcomes.iter().all(|o| matches!(o, Outcome::Ok(_))
        || matches!(o, Outcome::Failed(f) if f.code == ErrorCode::EngineGone)));
    assert!(matches!(
        q.push_send(ch, b"x", 1),
        Err(QueueError::EngineGone)
    ));
}

fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn a_host_faster_than_its_link_is_held_back_with_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _b, as_, bs) = pair(dir.path(), &["--host-bytes", "4194304"]);
    let reader = drain(&bs, "slow");
    let mut q = HostQueue::connect(&as_).unwrap();
    // 4 MB/s with 64 KiB bursts; the host offers as much as it can for 3 s.
    let ch = q
        .open("beta/slow", OpenOptions::bulk().rate(4_000_000, 64 << 10))
        .unwrap();
    let rss0 = rss_kib(a.id());
    let msg = vec![1u8; 64 << 10];
    let t0 = Instant::now();
    let (mut pushed, mut full, mut peak) = (0u64, 0u64, 0u64);
    while t0.elapsed() < Duration::from_secs(3) {
        match q.push_send(ch, &msg, pushed) {
            Ok(()) => pushed += 1,
            Err(QueueError::Full(_)) => {
                full += 1;
                q.submit().unwrap();
                q.wait(1, Some(Duration::from_secs(2))).unwrap();
                while let Some(c) = q.pop() {
                    assert!(matches!(c.outcome, Outcome::Ok(_)), "{c:?}");
                }
            }
            Err(e) => panic!("{e}"),
        }
        peak = peak.max(q.bytes_in_flight());
        if pushed % 8 == 0 {
            q.submit().unwrap();
            peak = peak.max(rss_kib(a.id()).saturating_sub(rss0) * 1024);
        }
    }
    q.submit().unwrap();
    let growth = rss_kib(a.id()).saturating_sub(rss0);
    let (o, _) = reap_all(&mut q, Duration::from_secs(10));
    assert!(o.iter().all(|o| matches!(o, Outcome::Ok(_))), "{o:?}");
    eprintln!("pushed {pushed} x 64 KiB in 3 s, refused for budget {full} times, engine RSS +{growth} KiB");
    assert!(full > 0, "the queue pushed back");
    // 3 s at 4 MB/s is about 12 MB: far less than the host offered without the budget.
    assert!(
        pushed * 65536 < 3 * 4_000_000 + 8 * 1024 * 1024,
        "{pushed} messages went through a 4 MB/s channel"
    );
    assert!(growth < 48 * 1024, "engine grew by {growth} KiB");
    let _ = reader;
}

#[test]
fn garbage_records_get_that_host_refused_while_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let s = format!("shm:{}", dir.path().join("e.sock").display());
    let (_e, _) = engine(&["--name", "solo", "--listen", &s]);
    let mut good = HostQueue::connect(&s).unwrap();
    let c1 = good.open("box", OpenOptions::bulk()).unwrap();
    let garbage: Vec<Vec<u8>> = vec![
        vec![9; 32], // unknown op
        {
            let mut v = vec![0u8; 40]; // a send whose length lies
            v[0] = 3;
            v[16] = 200;
            v
        },
        vec![1, 2, 3], // shorter than a header
        {
            let mut v = vec![0u8; 48]; // a second hello
            v[0] = 1;
            v[16] = 16;
            v[32..40].copy_from_slice(b"OFFHQ\0\0\x01");
            v[40] = 1;
            v
        },
    ];
    for g in garbage {
        let path = s.strip_prefix("shm:").unwrap();
        let mut ep = offhost_shm::connect(path, &offhost_shm::Config::default()).unwrap();
        let mut hello = vec![0u8; 48];
        hello[0] = 1;
        hello[16] = 16;
        hello[32..40].copy_from_slice(b"OFFHQ\0\0\x01");
        hello[40] = 1;
        ep.sender()
            .send(&hello, Some(Duration::from_secs(5)))
            .unwrap();
        let limits = ep
            .receiver()
            .recv(Some(Duration::from_secs(5)))
            .unwrap()
            .bytes()
            .to_vec();
        assert_eq!((limits[0], limits[1]), (1, 0), "hello answered");
        ep.sender().send(&g, Some(Duration::from_secs(5))).unwrap();
        let refusal = ep
            .receiver()
            .recv(Some(Duration::from_secs(5)))
            .unwrap()
            .bytes()
            .to_vec();
        assert_eq!(refusal[0], 6, "a refusal record: {refusal:?}");
        let why = String::from_utf8_lossy(&refusal[32..]).into_owned();
        eprintln!("refused: {why}");
        assert!(matches!(
            ep.receiver().recv(Some(Duration::from_secs(5))).map(|_| ()),
            Err(offhost_shm::ShmError::PeerGone)
        ));
        // The good host goes on.
        good.send(c1, b"still here").unwrap();
        assert_eq!(
            &*good
                .recv(c1, Some(Duration::from_secs(5)))
                .unwrap()
                .unwrap(),
            b"still here"
        );
    }
}

/// Root, `ip` and `tc` with netem: two namespaces joined by a veth pair.
struct Netns {
    a: String,
    b: String,
}

impl Netns {
    fn make(tag: &str, netem: &str) -> Option<Netns> {
        let ok = |args: &[&str]| {
            Command::new(args[0])
                .args(&args[1..])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !ok(&["ip", "netns", "list"]) {
            return None;
        }
        let n = Netns {
            a: format!("oh{tag}a{}", std::process::id() % 100_000),
            b: format!("oh{tag}b{}", std::process::id() % 100_000),
        };
        let va = format!("v{tag}a{}", std::process::id() % 100_000);
        let vb = format!("v{tag}b{}", std::process::id() % 100_000);
        let steps: Vec<Vec<String>> = vec![
            vec!["ip", "netns", "add", &n.a],
            vec!["ip", "netns", "add", &n.b],
            vec![
                "ip", "link", "add", &va, "type", "veth", "peer", "name", &vb,
            ],
            vec!["ip", "link", "set", &va, "netns", &n.a],
            vec!["ip", "link", "set", &vb, "netns", &n.b],
            vec!["ip", "-n", &n.a, "addr", "add", "10.231.0.1/24", "dev", &va],
            vec!["ip", "-n", &n.b, "addr", "add", "10.231.0.2/24", "dev", &vb],
            vec!["ip", "-n", &n.a, "link", "set", &va, "up"],
            vec!["ip", "-n", &n.b, "link", "set", &vb, "up"],
            vec!["ip", "-n", &n.a, "link", "set", "lo", "up"],
            vec!["ip", "-n", &n.b, "link", "set", "lo", "up"],
        ]
        .into_iter()
        .map(|v| v.into_iter().map(String::from).collect())
        .collect();
        for s in steps {
            let s: Vec<&str> = s.iter().map(String::as_str).collect();
            if !ok(&s) {
                return None;
            }
        }
        // netem where the kernel has it; else 1% random drops by nftables and a 100 Mbit/s
        // token bucket whose queue delays packets under load (this VM's kernel has no netem).
        for (ns, dev) in [(&n.a, &va), (&n.b, &vb)] {
            let mut args = vec![
                "ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "netem",
            ];
            args.extend(netem.split_whitespace());
            if ok(&args) {
                continue;
            }
            let tbf = [
                "ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate",
                "100mbit", "burst", "64kb", "latency", "50ms",
            ];
            let nft = [
                vec![
                    "ip", "netns", "exec", ns, "nft", "add", "table", "inet", "lossy",
                ],
                vec![
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    "nft",
                    "add",
                    "chain",
                    "inet",
                    "lossy",
                    "out",
                    "{ type filter hook output priority 0; }",
                ],
                vec![
                    "ip", "netns", "exec", ns, "nft", "add", "rule", "inet", "lossy", "out",
                    "numgen", "random", "mod", "100", "<", "1", "drop",
                ],
            ];
            if !ok(&tbf) || !nft.iter().all(|a| ok(a)) {
                return None;
            }
            eprintln!("{ns}: no netem here; 1% loss by nftables, 100 Mbit/s token bucket");
        }
        Some(n)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

#[test]
fn a_lossy_delayed_link_carries_a_large_transfer_byte_exact() {
    let Some(ns) = Netns::make("l", "loss 1% delay 2ms") else {
        eprintln!(
            "SKIPPED: needs root, iproute2, and netem or nftables, to make two lossy namespaces"
        );
        return;
    };
    let bytes: usize = std::env::var("OFFHOST_NETEM_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48 << 20);
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    assert!(Command::new(BIN)
        .args(["certs", pki.to_str().unwrap(), "--host", "10.231.0.2"])
        .status()
        .unwrap()
        .success());
    let pki = pki.to_str().unwrap();
    let bs = format!("shm:{}", dir.path().join("b.sock").display());
    let as_ = format!("shm:{}", dir.path().join("a.sock").display());
    let (_b, _) = common::engine_in(
        &["ip", "netns", "exec", &ns.b],
        &[
            "--name",
            "beta",
            "--listen",
            &bs,
            "--listen",
            "tls:10.231.0.2:7461",
            "--tls-certificates",
            pki,
        ],
    );
    let (_a, _) = common::engine_in(
        &["ip", "netns", "exec", &ns.a],
        &[
            "--name",
            "alpha",
            "--listen",
            &as_,
            "--peer",
            "beta=tls:10.231.0.2:7461",
            "--tls-certificates",
            pki,
            "--retry-for",
            "30",
        ],
    );
    let input = dir.path().join("in.bin");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
        let mut x = 0x1234_5678u32;
        let mut block = vec![0u8; 1 << 20];
        for _ in 0..bytes.div_ceil(1 << 20) {
            for b in block.iter_mut() {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *b = x as u8;
            }
            f.write_all(&block).unwrap();
        }
    }
    let output = dir.path().join("out.bin");
    let mut recv = Reaped(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns.b,
                BIN,
                "recv",
                "--via",
                &bs,
                "--channel",
                "big",
                "--idle-timeout",
                "60",
            ])
            .stdout(std::fs::File::create(&output).unwrap())
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    let mut send = Reaped(
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns.a,
                BIN,
                "send",
                "--via",
                &as_,
                "--channel",
                "beta/big",
            ])
            .stdin(std::fs::File::open(&input).unwrap())
            .spawn()
            .unwrap(),
    );
    let bound = Duration::from_secs(540);
    for c in [&mut send, &mut recv] {
        loop {
            if let Some(st) = c.try_wait().unwrap() {
                assert!(st.success(), "{st}");
                break;
            }
            assert!(t0.elapsed() < bound, "transfer did not finish in {bound:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    eprintln!(
        "{} MiB over a link losing 1% of packets each way, in {:?}",
        bytes >> 20,
        t0.elapsed()
    );
    let same = Command::new("cmp")
        .arg(&input)
        .arg(&output)
        .status()
        .unwrap();
    assert!(same.success(), "output differs from input");
}
