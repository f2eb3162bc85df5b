//! What the tests share: modules written as text, pipelines run on a registry with `wasm`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use offhost_engine::{EngineConfig, Pipeline, Registry, Stats};

/// A module of the interface in text, whose `offhost_buffer` body is `buffer` (the input lies
/// at 65536, the window at 131072, each 64 KiB) and which has `extra` besides.
pub fn module(buffer: &str, extra: &str) -> String {
    format!(
        r#"(module
  (import "offhost" "emit" (func $emit (param i32 i32)))
  (import "offhost" "error" (func $error (param i32 i32)))
  (memory (export "memory") 3)
  (data (i32.const 64) "the module refused it")
  (func (export "offhost_abi_version") (result i32) i32.const 1)
  (func (export "offhost_area") (param $kind i32) (param $index i32) (param $size i32) (result i32)
    (if (i32.gt_u (local.get $size) (i32.const 65536)) (then (return (i32.const 0))))
    (if (i32.eq (local.get $kind) (i32.const 1)) (then (return (i32.const 65536))))
    (if (i32.eq (local.get $kind) (i32.const 2)) (then (return (i32.const 131072))))
    i32.const 1024)
  (func (export "offhost_start") (param i32 i32 i32) (result i32) i32.const 0)
  (func (export "offhost_buffer") (param $in i32) (param $len i32) (result i32)
    {buffer})
  (func (export "offhost_end") (param i32) (result i32) i32.const 0)
  {extra})"#
    )
}

/// The body of a pass-through `offhost_buffer`.
pub const PASS: &str = "(memory.copy (i32.const 131072) (i32.const 65536) (local.get $len))
    (call $emit (i32.const 0) (local.get $len))
    i32.const 0";

/// The `offhost_resume` every module here has unless a test leaves it out.
pub const RESUME: &str = r#"(func (export "offhost_resume") (result i32) i32.const 0)"#;

/// A pass-through module.
pub fn pass() -> Vec<u8> {
    wat::parse_str(module(PASS, RESUME)).expect("the text is a module")
}

/// Writes `bytes` as `name` in `dir`.
pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// The built-ins and `wasm`.
pub fn registry() -> Registry {
    let mut r = Registry::with_builtins();
    offhost_wasm::register(&mut r);
    r
}

/// Runs `text` to its end: its statistics, or the error of its run (it must start).
pub fn run(text: &str) -> Result<Stats, String> {
    let p = Pipeline::parse(text).expect("the pipeline parses");
    let run = p
        .start(&registry(), &EngineConfig::default())
        .unwrap_or_else(|e| panic!("the pipeline did not start: {e}"));
    run.wait().map_err(|e| e.to_string())
}

/// The error of building `text` (its text), which must fail.
pub fn build_error(text: &str) -> String {
    let p = Pipeline::parse(text).expect("the pipeline parses");
    match p.start(&registry(), &EngineConfig::default()) {
        Ok(_) => panic!("the pipeline started: {text}"),
        Err(e) => e.to_string(),
    }
}
