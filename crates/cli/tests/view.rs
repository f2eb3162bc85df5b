//! `offhost run --view` and `--dot` through the real binary: the graph written as dot, and
//! the view over HTTPS that admits only clients with a certificate of its directory (curl as
//! the client). The page in a browser: `crates/view/tests/browser/`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_offhost");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn run_writes_the_graph_as_dot_with_its_final_numbers() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("p.ion"),
        "fill bytes=64K @a >x:p(4,4K)\ncount @b <x\n",
    )
    .unwrap();
    let o = Command::new(BIN)
        .current_dir(dir.path())
        .args(["run", "-q", "--dot", "p.dot", "p.ion"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dot = std::fs::read_to_string(dir.path().join("p.dot")).unwrap();
    assert!(dot.starts_with("digraph pipeline {"), "{dot}");
    assert!(
        dot.contains("label=\"@a\"") && dot.contains("label=\"@b\""),
        "{dot}"
    );
    assert!(
        dot.contains("t0 -> t1 [label=\"x\\ndepth 0/4, 16 put\"]"),
        "{dot}"
    );
}

#[test]
fn the_view_over_tls_admits_only_certified_clients() {
    if Command::new("curl").arg("--version").output().is_err() {
        panic!("curl is needed (scripts/test installs it)");
    }
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let o = Command::new(BIN).arg("certs").arg(&certs).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::write(
        dir.path().join("p.ion"),
        "fill bytes=64K >x:p(4,4K)\ncount <x\n",
    )
    .unwrap();
    let port = free_port();
    let mut run = Command::new(BIN)
        .current_dir(dir.path())
        .args([
            "run",
            "-q",
            "--view",
            &format!("127.0.0.1:{port}"),
            "--view-linger",
            "30s",
        ])
        .arg("--tls-certificates")
        .arg(&certs)
        .arg("p.ion")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("https://localhost:{port}/api/pipelines");
    let curl = |with_cert: bool| {
        let mut c = Command::new("curl");
        c.args(["-sS", "--max-time", "5", "--cacert"])
            .arg(certs.join("ca-cert.pem"));
        if with_cert {
            c.arg("--cert")
                .arg(certs.join("client-cert.pem"))
                .arg("--key")
                .arg(certs.join("client-key.pem"));
        }
        c.arg(&url).output().unwrap()
    };
    let t0 = Instant::now();
    let mut ok = curl(true);
    while !ok.status.success() && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(200));
        ok = curl(true);
    }
    let _ = run.kill();
    let _ = run.wait();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let list: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(list[0]["id"], 1, "{list}");
    // Without a client certificate the handshake fails (the view had ended by now too, so
    // run one more to ask).
    let mut run = Command::new(BIN)
        .current_dir(dir.path())
        .args([
            "run",
            "-q",
            "--view",
            &format!("127.0.0.1:{port}"),
            "--view-linger",
            "30s",
        ])
        .arg("--tls-certificates")
        .arg(&certs)
        .arg("p.ion")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let mut refused = curl(false);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
        && t0.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(200));
        refused = curl(false);
    }
    refused = if refused.status.success() {
        refused
    } else {
        curl(false)
    };
    let _ = run.kill();
    let _ = run.wait();
    assert!(
        !refused.status.success(),
        "served without a client certificate"
    );
}
