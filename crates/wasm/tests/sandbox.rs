//! A module gets nothing it is not granted and no more than its bounds; each way it fails
//! gets an error that says which, and the other pipelines go on.

mod common;

use std::time::{Duration, Instant};

use common::*;

/// A pipeline that feeds `module` 64 KiB of bytes in 4 KiB buffers into a file, with `args`.
fn through(module: &std::path::Path, args: &str, out: &std::path::Path) -> String {
    format!(
        "random bytes=64k seed=7 >a:p(8,4096)\nwasm module={} {args} <a >b:q(8,4096)\nfile path={} <b\n",
        module.display(),
        out.display()
    )
}

#[test]
fn a_pass_through_module_passes_every_byte() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "pass.wasm", &pass());
    let out = dir.path().join("out");
    let stats = run(&through(&m, "", &out)).unwrap();
    assert!(stats.finished);
    let want = dir.path().join("want");
    run(&format!(
        "random bytes=64k seed=7 >a:p(8,4096)\nfile path={} <a\n",
        want.display()
    ))
    .unwrap();
    let got = std::fs::read(&out).unwrap();
    assert_eq!(got.len(), 65536);
    assert_eq!(got, std::fs::read(&want).unwrap());
}

#[test]
fn a_looping_module_ends_its_task_at_its_deadline_and_another_pipeline_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let looping = write(
        dir.path(),
        "loop.wasm",
        &wat::parse_str(module("(loop $l (br $l)) i32.const 0", RESUME)).unwrap(),
    );
    let good = write(dir.path(), "pass.wasm", &pass());
    let text = through(&looping, "deadline=50ms", &dir.path().join("never"));
    let bad = std::thread::spawn(move || {
        let t0 = Instant::now();
        (run(&text), t0.elapsed())
    });
    // Meanwhile, a good pipeline on the same engine's process runs, and runs after.
    for i in 0..3 {
        let out = dir.path().join(format!("out{i}"));
        run(&through(&good, "", &out)).unwrap();
        assert_eq!(std::fs::metadata(&out).unwrap().len(), 65536);
    }
    let (r, took) = bad.join().unwrap();
    let e = r.unwrap_err();
    assert!(
        e.contains("task 'wasm' (line 2) failed: module ")
            && e.contains("loop.wasm: offhost_buffer ran past its deadline, over the limit wasm_deadline of 50ms"),
        "{e}"
    );
    assert!(took >= Duration::from_millis(50), "{took:?}");
    let out = dir.path().join("after");
    run(&through(&good, "", &out)).unwrap();
    assert_eq!(std::fs::metadata(&out).unwrap().len(), 65536);
}

#[test]
fn a_module_that_grows_its_memory_without_end_is_stopped_at_its_cap() {
    let dir = tempfile::tempdir().unwrap();
    let grow =
        "(loop $l (br_if $l (i32.ne (memory.grow (i32.const 1)) (i32.const -1)))) unreachable";
    let m = write(
        dir.path(),
        "grow.wasm",
        &wat::parse_str(module(grow, RESUME)).unwrap(),
    );
    let e = run(&through(&m, "memory=1M", &dir.path().join("o"))).unwrap_err();
    assert!(
        e.contains("grow.wasm: offhost_buffer trapped after its memory was refused growth to 1114112 bytes, over the limit wasm_memory of 1048576 bytes"),
        "{e}"
    );
}

#[test]
fn a_module_whose_initial_memory_is_over_the_cap_is_refused_when_built() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "pass.wasm", &pass());
    // The module's 3 pages are 196608 bytes.
    let e = build_error(&through(&m, "memory=128k", &dir.path().join("o")));
    assert!(
        e.contains("line 2, column") && e.contains("pass.wasm: instantiation trapped after its memory was refused growth to 196608 bytes, over the limit wasm_memory of 131072 bytes"),
        "{e}"
    );
}

#[test]
fn a_trapping_module_says_its_trap() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(
        dir.path(),
        "trap.wasm",
        &wat::parse_str(module(
            "(drop (i32.div_u (i32.const 1) (i32.sub (local.get $len) (local.get $len)))) i32.const 0",
            RESUME,
        ))
        .unwrap(),
    );
    let e = run(&through(&m, "", &dir.path().join("o"))).unwrap_err();
    assert!(
        e.contains("trap.wasm: offhost_buffer trapped: ") && e.contains("divide by zero"),
        "{e}"
    );
}

#[test]
fn a_module_that_returns_an_error_says_its_message() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(
        dir.path(),
        "refuse.wasm",
        &wat::parse_str(module(
            "(call $error (i32.const 64) (i32.const 21)) i32.const -7",
            RESUME,
        ))
        .unwrap(),
    );
    let e = run(&through(&m, "", &dir.path().join("o"))).unwrap_err();
    assert!(
        e.contains("refuse.wasm: offhost_buffer failed (-7): the module refused it"),
        "{e}"
    );
}

#[test]
fn bytes_that_fail_validation_are_refused_when_built() {
    let dir = tempfile::tempdir().unwrap();
    // Parses as text, but the function returns an i64 where it says i32.
    let invalid =
        wat::parse_str(r#"(module (func (export "f") (result i32) i64.const 1))"#).unwrap();
    let m = write(dir.path(), "invalid.wasm", &invalid);
    let e = build_error(&through(&m, "", &dir.path().join("o")));
    assert!(
        e.contains("line 2, column")
            && e.contains("invalid.wasm: not a valid WebAssembly module: ")
            && e.contains("type mismatch"),
        "{e}"
    );
    let m = write(dir.path(), "junk.wasm", b"\0asm\x01\0\0\0\x99junk");
    let e = build_error(&through(&m, "", &dir.path().join("o")));
    assert!(
        e.contains("junk.wasm: not a valid WebAssembly module"),
        "{e}"
    );
}

#[test]
fn an_import_the_engine_does_not_grant_is_refused_when_built() {
    let dir = tempfile::tempdir().unwrap();
    let text = module(PASS, RESUME).replacen(
        "(module",
        r#"(module (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))"#,
        1,
    );
    let m = write(dir.path(), "wasi.wasm", &wat::parse_str(text).unwrap());
    let e = build_error(&through(&m, "", &dir.path().join("o")));
    assert!(
        e.contains("wasi.wasm: it imports wasi_snapshot_preview1.fd_write (func (type (func (param i32 i32 i32 i32) (result i32)))), which the engine does not grant"),
        "{e}"
    );
}

#[test]
fn a_missing_export_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(
        dir.path(),
        "noresume.wasm",
        &wat::parse_str(module(PASS, "")).unwrap(),
    );
    let e = build_error(&through(&m, "", &dir.path().join("o")));
    assert!(
        e.contains("noresume.wasm: it lacks the export offhost_resume (func (result i32))"),
        "{e}"
    );
}

#[test]
fn another_interface_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let text = module(PASS, RESUME).replace(
        r#"(func (export "offhost_abi_version") (result i32) i32.const 1)"#,
        r#"(func (export "offhost_abi_version") (result i32) i32.const 2)"#,
    );
    let m = write(dir.path(), "v2.wasm", &wat::parse_str(text).unwrap());
    let e = build_error(&through(&m, "", &dir.path().join("o")));
    assert!(
        e.contains("v2.wasm: it speaks version 2 of the interface; this engine speaks version 1"),
        "{e}"
    );
}

#[test]
fn an_emit_larger_than_the_window_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(
        dir.path(),
        "big.wasm",
        &wat::parse_str(module(
            "(call $emit (i32.const 0) (i32.const 5000)) i32.const 0",
            RESUME,
        ))
        .unwrap(),
    );
    let e = run(&through(&m, "", &dir.path().join("o"))).unwrap_err();
    assert!(
        e.contains(
            "big.wasm: offhost_buffer: emit of 5000 bytes to output 0, whose window holds 4096"
        ),
        "{e}"
    );
}

#[test]
fn a_module_is_read_only_as_the_pipelines_files_allow() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "pass.wasm", &pass());
    let p = offhost_engine::Pipeline::parse(&through(&m, "", &dir.path().join("o"))).unwrap();
    let e = p
        .build_with(&registry(), &offhost_engine::Files::Denied)
        .err()
        .expect("no file access, no module")
        .to_string();
    assert!(
        e.contains("line 2, column")
            && e.contains("file access refused")
            && e.contains("pass.wasm"),
        "{e}"
    );
}

#[test]
fn arguments_out_of_range_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "pass.wasm", &pass());
    let long = format!("arg={}", "x".repeat(70_000));
    for (args, says) in [
        (
            "memory=8G",
            "memory=8589934592: must be between 65536 and 4294967296 bytes",
        ),
        ("memory=-1", "memory=-1: expected a size"),
        ("memory=NaN", "memory=NaN: expected a size"),
        ("deadline=0s", "deadline=0s: must be above 0 and at most 1h"),
        ("deadline=2h", "deadline=2h: must be above 0 and at most 1h"),
        ("deadline=soon", "deadline=soon"),
        ("deadline=-1s", "deadline=-1s"),
        (&long, "arg=(70000 bytes): must be at most 65536 bytes"),
    ] {
        let e = build_error(&through(&m, args, &dir.path().join("o")));
        let shown: String = args.chars().take(20).collect();
        assert!(e.contains(says), "{shown}: {e}");
        assert!(e.contains("line 2, column"), "{shown}: {e}");
    }
}

/// An instance's memory cap counts, with the free lists, in the pipeline's budget
/// (`Budget::pool_bytes`, 1 GiB by default): one cap of 600 MiB fits, a second brings the
/// pipeline over, and the error points at its line and names the limit.
#[test]
fn memory_caps_count_in_the_pipelines_budget() {
    let dir = tempfile::tempdir().unwrap();
    let m = write(dir.path(), "pass.wasm", &pass());
    let one = through(&m, "memory=256M", &dir.path().join("o"));
    assert!(run(&one).unwrap().finished);
    let text = format!(
        "random bytes=64k seed=7 >a:p(8,4096)\n\
         wasm module={m} memory=600M <a >b:q(8,4096)\n\
         wasm module={m} memory=600M <b >c:r(8,4096)\n\
         null <c\n",
        m = m.display()
    );
    let e = build_error(&text);
    assert!(
        e.contains("line 3") && e.contains("over the limit max_pool_bytes"),
        "{e}"
    );
}
