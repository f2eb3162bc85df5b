//! Queue hooks added from C run on the queues that name them: `tests/c/hooks.c`, built with
//! `cc` against include/offhost.h and this crate's shared library.

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
