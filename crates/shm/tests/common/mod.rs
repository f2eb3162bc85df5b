//! Helpers shared by the integration tests: child processes (this test binary re-executed with
//! an environment variable naming its role) and segment fault injection through the memfd.
#![allow(dead_code)]

use offhost_shm::{connect, Config, Endpoint, ShmError};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Environment variable naming the role a re-executed test binary plays.
pub const ROLE: &str = "OFFHOST_SHM_TEST_ROLE";
/// Environment variable with the socket address for a child.
pub const ADDR: &str = "OFFHOST_SHM_TEST_ADDR";

/// A unique abstract socket address for this test.
pub fn abstract_addr(tag: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "@offhost-test-{}-{tag}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Re-executes this test binary running only `entry`, with `role` and `addr` in its environment.
pub fn spawn_child(entry: &str, role: &str, addr: &str) -> Child {
    Command::new(std::env::current_exe().expect("current exe"))
        .args([entry, "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(ADDR, addr)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn child test process")
}

/// Connects to `addr`, retrying while the child is still binding (at most 10 s).
pub fn connect_retry(addr: &str, config: &Config) -> Endpoint {
    let start = Instant::now();
    loop {
        match connect(addr, config) {
            Ok(ep) => return ep,
            Err(ShmError::Io { .. }) if start.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Err(e) => panic!("connect to {addr}: {e}"),
        }
    }
}

/// Waits for `child` to exit (at most `limit`), killing it past that; returns code and stderr.
pub fn wait_child(mut child: Child, limit: Duration) -> (Option<i32>, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            return (status.code(), err);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Reads a little-endian u64 from the segment behind `ep`.
pub fn peek_u64(ep: &Endpoint, off: u64) -> u64 {
    let mut b = [0u8; 8];
    rustix::io::pread(ep.segment_fd(), &mut b, off).expect("pread");
    u64::from_le_bytes(b)
}

/// Writes bytes into the segment behind `ep` (as a misbehaving peer would).
pub fn poke(ep: &Endpoint, off: u64, bytes: &[u8]) {
    let n = rustix::io::pwrite(ep.segment_fd(), bytes, off).expect("pwrite");
    assert_eq!(n, bytes.len());
}

/// Names of the entries of a directory.
pub fn dir_entries(dir: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}
