//! Fixtures shared by the link tests: a server per transport.
#![allow(dead_code)] // each test binary uses a different part

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use offhost_link::{LinkError, LinkOptions, Server, Session};

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A listening URL for `transport` that no other test uses; the directory lives as long as
/// the returned guard.
pub fn fresh_url(transport: &str) -> (String, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let url = match transport {
        "tcp" => "tcp:127.0.0.1:0".to_owned(),
        "tls" => "tls:127.0.0.1:0".to_owned(),
        "unix" => format!("unix:{}", dir.path().join("engine.sock").display()),
        "mem" => format!("mem:test-{}-{n}", std::process::id()),
        "shm" => format!("shm:{}", dir.path().join("engine.sock").display()),
        other => panic!("unknown transport {other}"),
    };
    (url, dir)
}

/// This test binary re-executed as a child process that runs only the ignored test
/// `child_engine`, with `url` in the environment variable `var`.
pub fn spawn_child_engine(var: &str, url: &str) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "--exact",
            "child_engine",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(var, url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the child engine")
}

/// A URL for `transport` that a child process can listen on and this one connect to (a
/// free TCP port rather than port 0); the directory lives as long as the returned guard.
pub fn child_url(transport: &str) -> (String, tempfile::TempDir) {
    let (url, dir) = fresh_url(transport);
    if transport != "tcp" {
        return (url, dir);
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    (format!("tcp:127.0.0.1:{port}"), dir)
}

/// A bound server at a fresh URL for `transport`.
pub fn server(transport: &str) -> (Server, tempfile::TempDir) {
    let (url, dir) = fresh_url(transport);
    (Server::bind_with(&url, &options()).expect("bind"), dir)
}

/// One certificate directory for the whole test process (made by `offhost certs`' library
/// call), kept until the process exits.
pub fn cert_dir() -> PathBuf {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = tempfile::tempdir().expect("temp dir");
        let p = d.path().join("pki");
        offhost_access::certs::generate(&p, &[]).expect("generate certificates");
        (d, p)
    })
    .1
    .clone()
}

/// Options every test uses: the shared certificate directory, plain tcp allowed.
pub fn options() -> LinkOptions {
    LinkOptions::new()
        .tls_certificates(cert_dir())
        .insecure(true)
}

/// Connects to `url` with [`options`] (so `tls:` works too).
pub fn connect(url: &str) -> Result<Session, LinkError> {
    Session::connect_with(url, &options())
}

/// A server running the echo service in the background; returns its URL.
pub fn echo_server(transport: &str) -> (String, tempfile::TempDir) {
    let (server, dir) = server(transport);
    let url = server.url().to_owned();
    std::thread::spawn(move || offhost_link::serve_echo(&server));
    (url, dir)
}

/// Deterministic pseudo-random bytes.
pub fn bytes(len: usize, seed: u64) -> Vec<u8> {
    use rand::{RngCore, SeedableRng};
    let mut v = vec![0u8; len];
    rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut v);
    v
}
