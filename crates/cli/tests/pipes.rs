//! A command whose output goes to a pipe that its reader has left (`offhost tasks | head`)
//! ends as Unix tools do, by SIGPIPE, without a panic's message.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_offhost");

#[test]
fn a_listing_to_a_pipe_nobody_reads_ends_by_sigpipe_not_a_panic() {
    for args in [&["tasks"][..], &["version"]] {
        let (reader, writer) = std::io::pipe().unwrap();
        // The reader is gone before the command writes anything: its first write fails.
        drop(reader);
        let out = Command::new(BIN)
            .args(args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .expect("run offhost");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.signal(), Some(13), "{args:?}: {:?}", out.status);
    }
}
