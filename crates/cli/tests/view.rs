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
    // `run --view` over HTTPS on the port, its view lingering after the pipeline.
    let start = || {
        Command::new(BIN)
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
            .unwrap()
    };
    let mut run = start();
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
    let mut run = start();
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

/// Kills a child process when dropped.
struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn submit_views_every_engines_part_and_the_links_between_them() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let o = Command::new(BIN).arg("certs").arg(&certs).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (pa, pb, pv) = (free_port(), free_port(), free_port());
    let engine = |port: u16| {
        Kill(
            Command::new(BIN)
                .args(["engine", "--listen", &format!("tls:127.0.0.1:{port}")])
                .arg("--tls-certificates")
                .arg(&certs)
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    let (_a, _b) = (engine(pa), engine(pb));
    for p in [pa, pb] {
        let t0 = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", p)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "engine on {p} never listened"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    std::fs::write(
        dir.path().join("p.ion"),
        "fill bytes=16M @a >x:p(8,64k)\ncount @b <x\n",
    )
    .unwrap();
    let submit = Kill(
        Command::new(BIN)
            .current_dir(dir.path())
            .arg("submit")
            .args(["--engine", &format!("a=tls:127.0.0.1:{pa}")])
            .args(["--engine", &format!("b=tls:127.0.0.1:{pb}")])
            .arg("--tls-certificates")
            .arg(&certs)
            .args([
                "--view",
                &format!("127.0.0.1:{pv}"),
                "--view-linger",
                "30s",
                "p.ion",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // On loopback the view is plain HTTP even with a certificate directory given.
    let url = format!("http://127.0.0.1:{pv}/api/pipelines/1");
    let t0 = Instant::now();
    let doc = loop {
        let o = Command::new("curl")
            .args(["-sS", "--max-time", "5", &url])
            .output()
            .unwrap();
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&o.stdout) {
            if v["state"] == "finished" {
                break v;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no finished job in the view"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    drop(submit);
    let tasks: Vec<(String, String)> = doc["shape"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().into(),
                t["engine"].as_str().unwrap().into(),
            )
        })
        .collect();
    for want in [
        ("fill", "a"),
        ("engine-out", "a"),
        ("host-in", "b"),
        ("count", "b"),
    ] {
        assert!(tasks.contains(&(want.0.into(), want.1.into())), "{tasks:?}");
    }
    let queues = doc["shape"]["queues"].as_array().unwrap();
    let link = queues
        .iter()
        .position(|q| q["name"] == "x (link)")
        .expect("a link");
    let q = &queues[link];
    assert_eq!(
        tasks[q["writers"][0].as_u64().unwrap() as usize].0,
        "engine-out"
    );
    assert_eq!(tasks[q["reader"].as_u64().unwrap() as usize].0, "host-in");
    assert_eq!(doc["stats"]["queues"][link]["bytes"], 16 << 20, "{doc}");
}
