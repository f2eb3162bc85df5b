//! Helpers shared by the CLI's integration tests.

use std::io::{BufRead, BufReader, Read};
use std::ops::{Deref, DerefMut};
use std::process::{Child, Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_offhost");

/// A child process that is killed and reaped when the guard drops, however the test ends: a
/// failed assertion must not leave a server running (holding the descriptors it inherited).
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Deref for Reaped {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

/// `offhost engine` with `args` (prefixed by `prefix`, e.g. `ip netns exec NS`); waits for
/// its listening lines and returns the child and the URLs.
#[allow(dead_code)] // not every test file starts engines
pub fn engine_in(prefix: &[&str], args: &[&str]) -> (Reaped, Vec<String>) {
    let (prog, pre) = match prefix.split_first() {
        Some((p, rest)) => (*p, rest.to_vec()),
        None => (BIN, Vec::new()),
    };
    let mut cmd = Command::new(prog);
    cmd.args(&pre);
    if !prefix.is_empty() {
        cmd.arg(BIN);
    }
    let mut child = Reaped(
        cmd.arg("engine")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start offhost engine"),
    );
    let listens = args.iter().filter(|a| **a == "--listen").count();
    let mut r = BufReader::new(child.stderr.take().unwrap());
    let mut urls = Vec::new();
    while urls.len() < listens {
        let mut line = String::new();
        assert!(r.read_line(&mut line).unwrap() > 0, "engine exited early");
        let url = line
            .trim()
            .strip_prefix("engine: listening on ")
            .unwrap_or_else(|| panic!("engine did not start: {line:?}"))
            .to_owned();
        urls.push(url);
    }
    // Keep draining its log so it never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = String::new();
        let _ = r.read_to_string(&mut sink);
    });
    (child, urls)
}

/// `offhost ARGS --json` (`args` split at spaces) with `TMPDIR` set to `tmp` (so a test can
/// check that nothing is left there): asserts that it succeeds and returns what it printed,
/// parsed.
#[allow(dead_code)] // not every test file runs benches
pub fn json_in(tmp: &std::path::Path, args: &str) -> serde_json::Value {
    let out = Command::new(BIN)
        .args(args.split_whitespace())
        .arg("--json")
        .env("TMPDIR", tmp)
        .output()
        .expect("run offhost");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}
