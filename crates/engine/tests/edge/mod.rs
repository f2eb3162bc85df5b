//! Every argument of every task given edge values: the harness the engine's and the PET
//! crate's `every_arg` tests share (the PET crate includes this file by path).
//!
//! For each task of a registry, each argument and each edge value (and proptest's numbers
//! and strings), a small pipeline is built around the task (a source feeding it, a sink
//! draining it), within a small [`Budget`], and run to its end or stopped after a second.
//! Each must be refused (a pipeline error: the argument's `ArgError`) or run to a finish or a
//! task error; none may panic (a panic while building or starting, or a task's panic that the
//! engine turned into a `panicked:` error, fails the test), and none may take the process
//! past its memory limit.
//!
//! The memory limit: the cases run in a child process (this test's own binary, run again
//! with [`CHILD_ENV`] set) under `RLIMIT_AS`. An allocation-counting global allocator
//! would need `unsafe` (a `GlobalAlloc` impl), which the engine's crates do not allow, and it
//! would not see what is mapped outside the allocator; the address-space limit bounds
//! everything, and an allocation past it aborts the child, which the parent reports with the
//! last case it started.

#![allow(dead_code)]

use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use offhost_engine::{Budget, EngineConfig, Files, Pipeline, Registry, TaskInfo};

/// Set in the child process that runs the cases.
pub const CHILD_ENV: &str = "OFFHOST_EDGE_CHILD";

/// The child's address-space limit: the test binary, its threads' stacks and allocator
/// arenas and the pipelines' 16 MiB budget fit; the allocations the edge values used to
/// cause (8 GiB for `mix channels=4294967295`) do not.
pub const ADDRESS_SPACE: u64 = 1536 << 20;

/// The edge values every argument is given.
pub fn edge_values() -> Vec<String> {
    let mut v: Vec<String> = [
        "0",
        "-1",
        "NaN",
        "inf",
        "-inf",
        "1e300",
        "1e-300",
        "18446744073709551616",
        "9223372036854775808",
        "4294967295",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(String::new());
    v.push("x".repeat(10 * 1024));
    v
}

/// The budget the pipelines run within.
pub fn budget() -> Budget {
    Budget {
        pool_bytes: 16 << 20,
        buffers: 1024,
        tasks: 16,
        workers: 2,
        ..Budget::default()
    }
}

/// How one case ended.
#[derive(Debug)]
pub enum Outcome {
    /// The pipeline was refused (its text, an argument, a budget).
    Refused(String),
    /// It ran and a task failed with an error.
    Failed(String),
    /// It ran to its end (or to the stop).
    Finished,
}

/// A value as pipeline text: quoted where it is empty.
pub fn quote(v: &str) -> String {
    if v.is_empty() {
        "\"\"".into()
    } else {
        v.to_string()
    }
}

/// The ports a task is tried with: as a source or filter (its fewest inputs, an output if it
/// may have one) and as a sink (an input, its fewest outputs), where those differ.
pub fn forms(info: &TaskInfo) -> Vec<(usize, usize)> {
    let a = (info.inputs.0, info.outputs.0.max(info.outputs.1.min(1)));
    let b = (info.inputs.0.max(info.inputs.1.min(1)), info.outputs.0);
    let mut v = vec![a];
    if b != a && b.0 <= info.inputs.1 && b.1 >= info.outputs.0 {
        v.push(b);
    }
    v
}

/// The pipeline text around task line `line` with `ins` inputs and `outs` outputs: `feed`
/// (a source line writing to queue `QUEUE`) for each input, a `null` for each output.
pub fn around(line: &str, ins: usize, outs: usize, feed: &str) -> String {
    let mut text = String::new();
    let mut task = line.to_string();
    for i in 0..ins {
        text.push_str(&feed.replace("QUEUE", &format!("i{i}")));
        text.push('\n');
        task.push_str(&format!(" <i{i}"));
    }
    for o in 0..outs {
        task.push_str(&format!(" >o{o}"));
    }
    text.push_str(&task);
    text.push('\n');
    for o in 0..outs {
        text.push_str(&format!("null <o{o}\n"));
    }
    text
}

/// Builds, starts and runs `text` (stopped after a second if it has not finished); `Err`
/// for what the test forbids: a panic, a task's panic turned into an error, or a pipeline
/// that does not end once stopped.
pub fn run(registry: &Registry, files: &Files, text: &str) -> Result<Outcome, String> {
    let p = match catch_unwind(|| Pipeline::parse(text)) {
        Err(_) => return Err("parsing panicked".into()),
        Ok(Err(e)) => return Ok(Outcome::Refused(e.to_string())),
        Ok(Ok(p)) => p,
    };
    let built = match catch_unwind(AssertUnwindSafe(|| {
        p.build_within(registry, files, &budget())
    })) {
        Err(_) => return Err("building panicked".into()),
        Ok(Err(e)) => return Ok(Outcome::Refused(e.to_string())),
        Ok(Ok(b)) => b,
    };
    let (ins, outs) = (built.host_inputs(), built.host_outputs());
    let config = EngineConfig {
        workers: 2,
        pin: false,
        batch: 16,
    };
    let mut running = match catch_unwind(AssertUnwindSafe(|| built.try_start(&config))) {
        Err(_) => return Err("starting panicked".into()),
        Ok(Err(e)) => return Ok(Outcome::Refused(e.to_string())),
        Ok(Ok(r)) => r,
    };
    // No host: its inputs end at once and its outputs are discarded.
    for n in &ins {
        drop(running.host_input(n));
    }
    for n in &outs {
        drop(running.host_output(n));
    }
    if !running.wait_timeout(Duration::from_secs(1)) {
        running.stop();
        if !running.wait_timeout(Duration::from_secs(20)) {
            running.abort("the edge test gave up on it");
            return Err("the pipeline did not end within 20 s of its stop".into());
        }
    }
    match catch_unwind(AssertUnwindSafe(|| running.wait())) {
        Err(_) => Err("waiting panicked".into()),
        Ok(Ok(_)) => Ok(Outcome::Finished),
        Ok(Err(e)) => {
            let m = e.to_string();
            if m.contains("panicked") {
                Err(format!("a task panicked: {m}"))
            } else {
                Ok(Outcome::Failed(m))
            }
        }
    }
}

/// Runs `cases` (name, pipeline text) in order, printing each before it starts, and returns
/// the failures. A case whose text is refused must say why in words that name an argument
/// of it or the pipeline (checked by the caller if it wants).
pub fn run_all(registry: &Registry, files: &Files, cases: &[(String, String)]) -> Vec<String> {
    let mut failures = Vec::new();
    let out = std::io::stdout();
    for (name, text) in cases {
        {
            let mut o = out.lock();
            let _ = writeln!(o, "case: {name}");
            let _ = o.flush();
        }
        match run(registry, files, text) {
            Ok(_) => {}
            Err(why) => failures.push(format!("{name}: {why}\n{text}")),
        }
    }
    failures
}

/// Limits this process's address space (in the child, before any case runs).
pub fn limit_memory() {
    let lim = rustix::process::Rlimit {
        current: Some(ADDRESS_SPACE),
        maximum: Some(ADDRESS_SPACE),
    };
    rustix::process::setrlimit(rustix::process::Resource::As, lim)
        .expect("set RLIMIT_AS in the child");
}

/// In the parent: runs test `test` of this binary again in a child process with
/// [`CHILD_ENV`] set and asserts that it succeeded; its output is shown when it did not
/// (the last `case:` line names the case that aborted it).
pub fn run_in_child(test: &str) {
    let exe = std::env::current_exe().expect("test executable");
    let out = Command::new(exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        // Few malloc arenas: each reserves 64 MiB of address space.
        .env("MALLOC_ARENA_MAX", "2")
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("case: "))
        .unwrap_or("(no case started)");
    // The last 40 lines of a stream.
    let tail = |s: &str| {
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    };
    assert!(
        out.status.success() && stdout.contains("edge cases: all passed"),
        "the child failed ({}); last {last}\nstderr tail:\n{}\nstdout tail:\n{}",
        out.status,
        tail(&stderr),
        tail(&stdout)
    );
}

/// Whether this process is the child.
pub fn is_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// A scratch directory the pipelines' files live in.
pub fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// Writes `bytes` to `dir/name`.
pub fn put(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(name), bytes).expect("write a scratch file");
}
