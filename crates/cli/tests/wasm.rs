//! The `wasm` task on a daemon: modules that loop, grow their memory without end, trap, fail
//! validation or import what the engine does not grant are each submitted to one `offhost
//! engine`; each gets its error, and a good pipeline on the same daemon runs meanwhile and
//! after.
#![cfg(feature = "wasm")]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

mod common;

fn offhost() -> Command {
    Command::new(env!("CARGO_BIN_EXE_offhost"))
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

/// A module of the interface whose `offhost_buffer` body is `buffer`, with `extra` first.
fn module(buffer: &str, extra: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module {extra}
  (import "offhost" "emit" (func $emit (param i32 i32)))
  (memory (export "memory") 3)
  (func (export "offhost_abi_version") (result i32) i32.const 1)
  (func (export "offhost_area") (param $kind i32) (param $index i32) (param $size i32) (result i32)
    (if (i32.gt_u (local.get $size) (i32.const 65536)) (then (return (i32.const 0))))
    (if (i32.eq (local.get $kind) (i32.const 1)) (then (return (i32.const 65536))))
    (if (i32.eq (local.get $kind) (i32.const 2)) (then (return (i32.const 131072))))
    i32.const 1024)
  (func (export "offhost_start") (param i32 i32 i32) (result i32) i32.const 0)
  (func (export "offhost_buffer") (param $in i32) (param $len i32) (result i32) {buffer})
  (func (export "offhost_end") (param i32) (result i32) i32.const 0)
  (func (export "offhost_resume") (result i32) i32.const 0))"#
    ))
    .unwrap()
}

const PASS: &str = "(memory.copy (i32.const 131072) (i32.const 65536) (local.get $len))
    (call $emit (i32.const 0) (local.get $len)) i32.const 0";

fn submit(dir: &Path, url: &str, ion: &str) -> Output {
    offhost()
        .current_dir(dir)
        .args(["submit", "--engine", url, ion])
        .output()
        .unwrap()
}

/// A pipeline through `module` (beneath the daemon's --files) with `args`, of `bytes`.
fn pipeline(dir: &Path, name: &str, module: &str, args: &str, bytes: &str) -> String {
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!("random bytes={bytes} seed=1 >a:p(8,4096)\nwasm module={module} {args} <a >b:q(8,4096)\ncrc32c <b\n"),
    )
    .unwrap();
    p.display().to_string()
}

#[test]
fn bad_modules_each_get_their_error_and_good_pipelines_run_meanwhile_and_after() {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("files");
    std::fs::create_dir(&files).unwrap();
    let modules = [
        ("pass.wasm", module(PASS, "")),
        ("loop.wasm", module("(loop $l (br $l)) i32.const 0", "")),
        (
            "grow.wasm",
            module(
                "(loop $l (br_if $l (i32.ne (memory.grow (i32.const 1)) (i32.const -1)))) unreachable",
                "",
            ),
        ),
        ("trap.wasm", module("unreachable", "")),
        (
            "wasi.wasm",
            module(
                PASS,
                r#"(import "wasi_snapshot_preview1" "clock_time_get" (func (param i32 i64 i32) (result i32)))"#,
            ),
        ),
        ("invalid.wasm", b"\0asm\x01\0\0\0\x01\xff".to_vec()),
    ];
    for (name, bytes) in &modules {
        std::fs::write(files.join(name), bytes).unwrap();
    }
    // The daemon says where it listens once it does: no port to guess, no retries.
    let files_arg = files.to_str().unwrap();
    let (_d, urls) = common::engine_in(
        &[],
        &[
            "--insecure",
            "--listen",
            "tcp:127.0.0.1:0",
            "--files",
            files_arg,
        ],
    );
    let url = urls[0].clone();
    let good = pipeline(dir.path(), "good.ion", "pass.wasm", "", "1M");
    let o = submit(dir.path(), &url, &good);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // A good pipeline runs while the bad ones are submitted: its source is this test's
    // bytes, the last of which it sends after them.
    let long = dir.path().join("long.ion");
    std::fs::write(
        &long,
        "host-in name=x >a\nwasm module=pass.wasm <a >b:q(8,65536)\ncrc32c <b\n",
    )
    .unwrap();
    let mut meanwhile = offhost()
        .current_dir(dir.path())
        .args(["submit", "--engine", &url])
        .arg(&long)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = meanwhile.stdin.take().unwrap();
    stdin.write_all(&[7u8; 100_000]).unwrap();
    let cases = [
        ("loop.wasm", "deadline=100ms", "loop.wasm: offhost_buffer ran past its deadline, over the limit wasm_deadline of 100ms"),
        ("grow.wasm", "memory=1M", "grow.wasm: offhost_buffer trapped after its memory was refused growth to 1114112 bytes, over the limit wasm_memory of 1048576 bytes"),
        ("trap.wasm", "", "trap.wasm: offhost_buffer trapped: "),
        ("wasi.wasm", "", "wasi.wasm: it imports wasi_snapshot_preview1.clock_time_get"),
        ("invalid.wasm", "", "invalid.wasm: not a valid WebAssembly module"),
    ];
    for (m, args, says) in cases {
        let ion = pipeline(dir.path(), &format!("{m}.ion"), m, args, "1M");
        let o = submit(dir.path(), &url, &ion);
        assert!(!o.status.success(), "{m}: {}", text(&o.stdout));
        let err = text(&o.stderr);
        assert!(err.contains(says), "{m}: {err}");
        assert!(err.contains("line 2"), "{m}: {err}");
    }
    if meanwhile.try_wait().unwrap().is_some() {
        let o = meanwhile.wait_with_output().unwrap();
        panic!(
            "the good pipeline ended before its input did: {}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
    }
    stdin.write_all(&[9u8; 100_000]).unwrap();
    drop(stdin);
    let o = meanwhile.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("finished") && out.contains("over 200000 bytes"),
        "{out}"
    );
    let o = submit(dir.path(), &url, &good);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("crc32c="), "{}", text(&o.stdout));
}

/// `submit --module NAME=FILE`: a module carried with the pipeline to a daemon that grants
/// no files, run as `wasm module=NAME`; it stays the submitting session's (another finds no
/// module of that name); one past `--max-module-bytes` is refused naming the limit.
#[test]
fn modules_sent_with_a_pipeline_run_on_a_daemon_without_files() {
    let dir = tempfile::tempdir().unwrap();
    let pass = dir.path().join("pass.wasm");
    std::fs::write(&pass, module(PASS, "")).unwrap();
    let big = dir.path().join("big.wasm");
    std::fs::write(&big, vec![0u8; 300_000]).unwrap();
    let (_d, urls) = common::engine_in(
        &[],
        &[
            "--insecure",
            "--listen",
            "tcp:127.0.0.1:0",
            "--max-module-bytes",
            "256K",
        ],
    );
    let url = urls[0].clone();
    let with = pipeline(dir.path(), "with.ion", "pass", "", "1M");
    let plain = dir.path().join("plain.ion");
    std::fs::write(&plain, "random bytes=1M seed=1 >a:p(8,4096)\ncrc32c <a\n").unwrap();
    let send = |ion: &str, modules: &[String]| {
        let mut c = offhost();
        c.current_dir(dir.path()).args(["submit", "--engine", &url]);
        for m in modules {
            c.args(["--module", m]);
        }
        c.arg(ion).output().unwrap()
    };
    let o = send(&with, &[format!("pass={}", pass.display())]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let crc = |out: &str| {
        out.split_whitespace()
            .find(|w| w.starts_with("crc32c="))
            .map(str::to_owned)
    };
    let through = crc(&text(&o.stdout)).expect("a crc32c");
    let o = send(plain.to_str().unwrap(), &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        Some(through),
        crc(&text(&o.stdout)),
        "the module passes the bytes on"
    );
    // Another session never sent it: the name is a file there, which this daemon denies.
    let o = send(&with, &[]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("line 2"), "{}", text(&o.stderr));
    // Over the session's budget.
    let o = send(&with, &[format!("pass={}", big.display())]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("module pass") && err.contains("max_module_bytes"),
        "{err}"
    );
    assert!(err.contains("--max-module-bytes"), "{err}");
}
