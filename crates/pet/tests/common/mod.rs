//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// `data/petlink` of this repository: the mMR sample with its README and licence.
pub fn petlink_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/petlink");
    assert!(
        dir.join("small_listmode_file.l").is_file(),
        "test data missing: expected {}/small_listmode_file.l",
        dir.display()
    );
    dir
}

/// Runs a python3 script and returns its stdout; fails clearly when python3 or a module is missing.
pub fn python(script: &str, args: &[&str]) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("python3 is required for this test (install python3, numpy, scikit-image)");
    assert!(
        out.status.success(),
        "python3 failed (numpy and scikit-image are required): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}
