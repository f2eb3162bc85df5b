//! C programs of `tests/c` that check behaviour across the binding, each built with `cc`
//! against include/offhost.h and this crate's shared library: queue hooks added from C
//! (`hooks.c`), and a select over channels of two sessions on different transports
//! (`select.c`).

use std::process::Command;

mod common;
use common::{build, lib_dir};

#[test]
fn hooks_added_from_c_run_on_the_queues_that_name_them() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build("hooks", dir.path());
    let out = Command::new(&exe)
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .expect("run the C program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("hooks: all passed"),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn select_from_c_spans_sessions_of_two_transports() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build("select", dir.path());
    let mut urls = Vec::new();
    for url in [
        format!("unix:{}", dir.path().join("echo.sock").display()),
        format!("shm:{}", dir.path().join("echo-shm.sock").display()),
    ] {
        let server = offhost_link::Server::bind(&url).unwrap();
        urls.push(server.url().to_owned());
        std::thread::spawn(move || offhost_link::serve_echo(&server));
    }
    let out = Command::new(&exe)
        .args(&urls)
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .expect("run the C program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("select: all passed"),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
