//! The example modules of `examples/wasm/` (Rust through `offhost-wasm-guest`, and C) beside
//! built-ins give the built-ins' bytes. They need the modules built first
//! (`examples/wasm/build.sh`, which `scripts/test.d/15-wasm.sh` runs and then runs these with
//! `--ignored`); `OFFHOST_WASM_EXAMPLES` names their directory (default
//! `target/wasm-examples`).

mod common;

use std::path::PathBuf;

use common::run;

fn examples() -> PathBuf {
    let dir = std::env::var_os("OFFHOST_WASM_EXAMPLES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/wasm-examples")
        });
    assert!(
        dir.join("mulaw.wasm").is_file(),
        "no example modules in {}: run examples/wasm/build.sh",
        dir.display()
    );
    dir
}

fn module(name: &str) -> String {
    examples().join(name).display().to_string()
}

#[test]
#[ignore = "needs examples/wasm/build.sh's modules (scripts/test.d/15-wasm.sh runs it)"]
fn the_example_pipeline_writes_the_same_bytes_three_ways() {
    let dir = tempfile::tempdir().unwrap();
    let text = include_str!("../../../examples/wasm/pipeline.ion")
        .replace(
            "target/wasm-examples/",
            &format!("{}/", examples().display()),
        )
        .replace(
            "path=ulaw-",
            &format!("path={}/ulaw-", dir.path().display()),
        );
    let stats = run(&text).unwrap();
    assert!(stats.finished);
    let read = |n: &str| std::fs::read(dir.path().join(n)).unwrap();
    let builtin = read("ulaw-builtin.raw");
    assert_eq!(builtin.len(), 44100);
    assert_eq!(read("ulaw-rust.raw"), builtin);
    assert_eq!(read("ulaw-c.raw"), builtin);
}

/// Samples split across buffers of odd length (4095 bytes), through each mu-law module and
/// the built-in.
#[test]
#[ignore = "needs examples/wasm/build.sh's modules (scripts/test.d/15-wasm.sh runs it)"]
fn mulaw_modules_join_samples_split_across_buffers() {
    let dir = tempfile::tempdir().unwrap();
    let out = |n: &str| dir.path().join(n).display().to_string();
    let text = format!(
        "random bytes=1000000 seed=3 >r:odd(8,4095)
dup <r >a >b >c
mulaw <a >x:px(8,4096)
wasm module={} <b >y:py(8,4096)
wasm module={} <c >z:pz(8,4096)
file path={} <x
file path={} <y
file path={} <z
",
        module("mulaw.wasm"),
        module("mulaw_c.wasm"),
        out("builtin"),
        out("rust"),
        out("c")
    );
    run(&text).unwrap();
    let builtin = std::fs::read(out("builtin")).unwrap();
    assert_eq!(builtin.len(), 500_000);
    assert_eq!(std::fs::read(out("rust")).unwrap(), builtin);
    assert_eq!(std::fs::read(out("c")).unwrap(), builtin);
}

/// Output larger than the output's buffers goes out in several (the interface's MORE), in
/// order, and the pass-through module passes every byte.
#[test]
#[ignore = "needs examples/wasm/build.sh's modules (scripts/test.d/15-wasm.sh runs it)"]
fn output_larger_than_a_buffer_goes_out_in_several() {
    let dir = tempfile::tempdir().unwrap();
    let out = |n: &str| dir.path().join(n).display().to_string();
    let text = format!(
        "random bytes=300000 seed=5 >r:big(4,16384)
dup <r >a >b
count <a >x
wasm module={} <b >y:small(4,1000)
file path={} <x
file path={} <y
",
        module("pass.wasm"),
        out("builtin"),
        out("wasm"),
    );
    let stats = run(&text).unwrap();
    let want = std::fs::read(out("builtin")).unwrap();
    assert_eq!(want.len(), 300_000);
    assert_eq!(std::fs::read(out("wasm")).unwrap(), want);
    let wasm = stats.tasks.iter().find(|t| t.name == "wasm").unwrap();
    assert_eq!(wasm.bytes_out, 300_000);
    // Each of 1000 bytes at most: more buffers out than came in.
    assert!(wasm.buffers_out >= 300, "{}", wasm.buffers_out);
    assert!(wasm.buffers_in <= 19, "{}", wasm.buffers_in);
}

/// A mu-law module that is handed an odd number of bytes in all says so at the end, as the
/// built-in does.
#[test]
#[ignore = "needs examples/wasm/build.sh's modules (scripts/test.d/15-wasm.sh runs it)"]
fn a_partial_sample_at_the_end_is_an_error_of_the_module() {
    for m in ["mulaw.wasm", "mulaw_c.wasm"] {
        let text = format!(
            "random bytes=4097 >r:p(4,4096)\nwasm module={} <r >y:q(4,4096)\nnull <y\n",
            module(m)
        );
        let e = run(&text).unwrap_err();
        assert!(
            e.contains(&format!(
                "{m}: offhost_end failed (-1): G.711 encoding: the stream ended with 1 bytes"
            )),
            "{e}"
        );
    }
}
