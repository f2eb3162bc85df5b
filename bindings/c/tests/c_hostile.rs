//! The C entry points given hostile values: `tests/c/hostile.c`, built with `cc` against
//! include/offhost.h and this crate's shared library, run against a Rust echo server. Every
//! call must return an error status with a message; none may crash or report a panic.

use std::process::Command;

use offhost_link::Server;

mod common;
use common::{build, lib_dir};

#[test]
fn every_c_entry_point_refuses_hostile_values_with_an_error_status() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build("hostile", dir.path());
    let echo = Server::bind(&format!("unix:{}", dir.path().join("echo.sock").display())).unwrap();
    let url = echo.url().to_owned();
    std::thread::spawn(move || offhost_link::serve_echo(&echo));
    let out = Command::new(&exe)
        .arg(&url)
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .expect("run the C program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("hostile: all passed"),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
