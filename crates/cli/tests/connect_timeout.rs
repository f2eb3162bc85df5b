//! A server address that drops SYNs: the client gives up after its connect timeout (10 s per
//! address) with an error naming the address, instead of waiting out the kernel's two minutes
//! of retries. The black hole is an nftables rule in a network namespace of the test's own.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_offhost");

/// A fresh network namespace whose loopback drops every TCP SYN to `port`; removed on drop.
struct BlackHole {
    ns: String,
}

impl BlackHole {
    /// `None` (the test skips) without root, `ip` or `nft`.
    fn make(port: u16) -> Option<BlackHole> {
        let ok = |args: &[&str]| {
            Command::new(args[0])
                .args(&args[1..])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !ok(&["ip", "netns", "list"]) || !ok(&["nft", "--version"]) {
            return None;
        }
        let hole = BlackHole {
            ns: format!("ohsyn{}", std::process::id() % 100_000),
        };
        let dport = port.to_string();
        let steps: [&[&str]; 5] = [
            &["ip", "netns", "add", &hole.ns],
            &["ip", "-n", &hole.ns, "link", "set", "lo", "up"],
            &[
                "ip", "netns", "exec", &hole.ns, "nft", "add", "table", "inet", "hole",
            ],
            &[
                "ip",
                "netns",
                "exec",
                &hole.ns,
                "nft",
                "add",
                "chain",
                "inet",
                "hole",
                "in",
                "{ type filter hook input priority 0; }",
            ],
            &[
                "ip", "netns", "exec", &hole.ns, "nft", "add", "rule", "inet", "hole", "in", "tcp",
                "dport", &dport, "drop",
            ],
        ];
        for s in steps {
            if !ok(s) {
                return None;
            }
        }
        Some(hole)
    }

    /// `offhost ARGS` run inside the namespace, and how long it took.
    fn run(&self, args: &[&str]) -> (Output, Duration) {
        let t = Instant::now();
        let o = Command::new("ip")
            .args(["netns", "exec", &self.ns, BIN])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run offhost in the namespace");
        (o, t.elapsed())
    }
}

impl Drop for BlackHole {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

fn certs(dir: &Path) -> String {
    let p = dir.join("pki");
    let o = Command::new(BIN)
        .args(["certs", p.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    p.to_str().unwrap().to_owned()
}

#[test]
fn a_server_that_drops_syns_fails_the_connect_after_its_timeout_naming_the_address() {
    const PORT: u16 = 7461;
    let Some(hole) = BlackHole::make(PORT) else {
        eprintln!("SKIPPED: needs root, iproute2 and nftables to make a namespace that drops SYNs");
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let pki = certs(d.path());
    let job = d.path().join("job.ion");
    std::fs::write(&job, "fill bytes=1k | null\n").unwrap();
    let url = format!("tls:127.0.0.1:{PORT}");
    let (o, took) = hole.run(&[
        "submit",
        "--engine",
        &url,
        "--tls-certificates",
        &pki,
        job.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "connected through a black hole: {err}");
    // It waited (the SYNs were dropped, not refused) and gave up long before the kernel's
    // retries would have (about 127 s).
    assert!(
        took >= Duration::from_secs(8),
        "failed after {took:?}: {err}"
    );
    assert!(
        took < Duration::from_secs(40),
        "failed only after {took:?}: {err}"
    );
    assert!(err.contains(&url), "the address is not named: {err}");
    assert!(err.contains("timed out"), "not called a timeout: {err}");
}
