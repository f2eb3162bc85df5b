//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// `<workspace root>/../shared/data/petlink`, where CI keeps the mMR file beside the clone.
/// A git worktree nested one level deeper finds it one more level up.
pub fn petlink_dir() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = root.canonicalize().unwrap_or(root);
    let found = root
        .ancestors()
        .skip(1)
        .take(3)
        .map(|a| a.join("shared/data/petlink"))
        .find(|d| d.join("small_listmode_file.l").is_file());
    found.unwrap_or_else(|| {
        panic!(
            "test data missing: expected {}/../shared/data/petlink/small_listmode_file.l",
            root.display()
        )
    })
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
