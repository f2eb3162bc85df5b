//! Fixtures shared by the link tests: a server per transport.
#![allow(dead_code)] // each test binary uses a different part

use std::sync::atomic::{AtomicUsize, Ordering};

use offhost_link::Server;

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A listening URL for `transport` that no other test uses; the directory lives as long as
/// the returned guard.
pub fn fresh_url(transport: &str) -> (String, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let url = match transport {
        "tcp" => "tcp:127.0.0.1:0".to_owned(),
        "unix" => format!("unix:{}", dir.path().join("engine.sock").display()),
        "mem" => format!("mem:test-{}-{n}", std::process::id()),
        "shm" => format!("shm:{}", dir.path().join("engine.sock").display()),
        other => panic!("unknown transport {other}"),
    };
    (url, dir)
}

/// A bound server at a fresh URL for `transport`.
pub fn server(transport: &str) -> (Server, tempfile::TempDir) {
    let (url, dir) = fresh_url(transport);
    (Server::bind(&url).expect("bind"), dir)
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
