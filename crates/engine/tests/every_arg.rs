//! Every argument of every built-in task takes the edge values (0, -1, NaN, ±inf, 1e300,
//! 2^64, empty, 10 KB) and proptest's numbers and strings: each is refused with an error
//! naming the argument, or runs to a finish or a task error; none panics, none takes the
//! process past its memory limit (see `edge/mod.rs`). And the reproductions of issue 46:
//! `mix channels=4294967295`, input that does not fit a task's framing.

mod edge;

use offhost_engine::{Files, Pipeline, Registry};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// A value for argument `arg` of `task` (in the form with `ins` inputs) where the test does
/// not vary it: the required ones, and short streams for sources.
fn base(task: &str, arg: &str, ins: usize) -> Option<&'static str> {
    Some(match (task, arg) {
        ("file", "path") if ins == 0 => "in.bin",
        ("file", "path") => "out.bin",
        ("wav", "path") if ins == 0 => "in.wav",
        ("wav", "path") => "out.wav",
        (_, "name") => "h",
        ("random" | "fill", "bytes") => "64k",
        ("tone", "seconds") => "0.05",
        _ => return None,
    })
}

/// The line of `task` with `arg` (if any) set to `value` and every other argument at its
/// base value (or default).
fn line(registry: &Registry, task: &str, ins: usize, arg: Option<(&str, &str)>) -> String {
    let (info, _) = registry.get(task).expect("registered");
    let mut l = task.to_string();
    for a in &info.args {
        let v = match arg {
            Some((n, v)) if n == a.name => edge::quote(v),
            _ => match base(task, &a.name, ins) {
                Some(v) => v.to_string(),
                None => continue,
            },
        };
        l.push_str(&format!(" {}={v}", a.name));
    }
    l
}

const FEED: &str = "random bytes=64k >QUEUE";

/// Every (task, form, argument, value) case of the registry.
fn cases(registry: &Registry, values: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for info in registry.infos() {
        for (ins, outs) in edge::forms(info) {
            let t = &info.name;
            out.push((
                format!("{t} ({ins} in, {outs} out) with its defaults"),
                edge::around(&line(registry, t, ins, None), ins, outs, FEED),
            ));
            for a in &info.args {
                for v in values {
                    let shown: String = v.chars().take(24).collect();
                    out.push((
                        format!("{t} ({ins} in, {outs} out) {}={shown}", a.name),
                        edge::around(&line(registry, t, ins, Some((&a.name, v))), ins, outs, FEED),
                    ));
                }
            }
        }
    }
    out
}

/// The scratch directory's input files: bytes, and a short stereo WAV.
fn scratch() -> tempfile::TempDir {
    let d = edge::scratch();
    edge::put(d.path(), "in.bin", &[7u8; 10_000]);
    let wav = d.path().join("in.wav");
    let text = format!(
        "tone seconds=0.1 channels=2 >a\nwav channels=2 path=\"{}\" <a\n",
        wav.display()
    );
    Pipeline::parse(&text)
        .unwrap()
        .start(&Registry::with_builtins(), &Default::default())
        .unwrap()
        .wait()
        .unwrap();
    d
}

#[test]
fn every_argument_of_every_builtin_task_takes_edge_values() {
    const NAME: &str = "every_argument_of_every_builtin_task_takes_edge_values";
    if !edge::is_child() {
        edge::run_in_child(NAME);
        return;
    }
    let registry = Registry::with_builtins();
    let dir = scratch();
    let files = Files::beneath(dir.path()).unwrap();
    edge::limit_memory();
    let mut failures = edge::run_all(&registry, &files, &cases(&registry, &edge::edge_values()));
    // Then proptest's numbers and words for each argument, a few cases each.
    let value = prop_oneof![
        any::<f64>().prop_map(|x| x.to_string()),
        any::<i64>().prop_map(|x| x.to_string()),
        any::<u64>().prop_map(|x| x.to_string()),
        (0u32..400).prop_map(|x| x.to_string()),
        "[a-zA-Z0-9.+-]{0,16}",
    ];
    for info in registry.infos() {
        for (ins, outs) in edge::forms(info) {
            for a in &info.args {
                let mut runner = TestRunner::new(Config {
                    cases: 4,
                    failure_persistence: None,
                    ..Config::default()
                });
                let r = runner.run(&value, |v| {
                    let text = edge::around(
                        &line(&registry, &info.name, ins, Some((&a.name, &v))),
                        ins,
                        outs,
                        FEED,
                    );
                    println!("case: {} {}={v}", info.name, a.name);
                    edge::run(&registry, &files, &text)
                        .map(drop)
                        .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))
                });
                if let Err(e) = r {
                    failures.push(format!("{} {}: {e}", info.name, a.name));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    println!("edge cases: all passed");
}

fn refused(text: &str) -> String {
    let reg = Registry::with_builtins();
    match edge::run(&reg, &Files::Denied, text).expect("no panic") {
        edge::Outcome::Refused(m) => m,
        other => panic!("{text}: expected a refusal, got {other:?}"),
    }
}

fn failed(text: &str) -> String {
    let reg = Registry::with_builtins();
    match edge::run(&reg, &Files::Denied, text).expect("no panic") {
        edge::Outcome::Failed(m) => m,
        other => panic!("{text}: expected a task error, got {other:?}"),
    }
}

#[test]
fn a_channel_count_that_would_take_gigabytes_is_refused_naming_its_range() {
    let m = refused("random bytes=1k >a\nmix channels=4294967295 <a >b\nnull <b\n");
    assert!(m.contains("channels=4294967295"), "{m}");
    assert!(m.contains("between 1 and 1024"), "{m}");
}

#[test]
fn numbers_that_are_not_finite_are_refused_naming_the_argument() {
    for (text, arg) in [
        ("tone amp=NaN seconds=0.1 >a\nnull <a\n", "amp=NaN"),
        ("tone seconds=inf >a\nnull <a\n", "seconds=inf"),
        ("tone seconds=1e400 >a\nnull <a\n", "seconds=1e400"),
        (
            "random bytes=1k >a\nrate atten=-inf <a >b\nnull <b\n",
            "atten=-inf",
        ),
        (
            "random bytes=1k >a\nrate passband=NaN <a >b\nnull <b\n",
            "passband=NaN",
        ),
    ] {
        let m = refused(text);
        assert!(m.contains(arg), "{text}: {m}");
        assert!(m.contains("not a finite number"), "{text}: {m}");
    }
    let m = refused("tone seconds=1e300 >a\nnull <a\n");
    assert!(
        m.contains("seconds=1e300: must be between 0 and 1000000000"),
        "{m}"
    );
    let m = refused("fill value=256 >a\nnull <a\n");
    assert!(m.contains("value=256: must be between 0 and 255"), "{m}");
}

#[test]
fn input_that_does_not_fit_a_tasks_framing_is_an_error_not_dropped() {
    // 1001 bytes: 166 frames of 6 bytes and 5 bytes over.
    let m = failed("random bytes=1001 >a\nmix channels=3 <a >b\nnull <b\n");
    assert!(
        m.contains("5 bytes that are not a whole frame of 6 bytes"),
        "{m}"
    );
    for t in ["mulaw", "alaw", "rate"] {
        let m = failed(&format!("random bytes=1001 >a\n{t} <a >b\nnull <b\n"));
        assert!(m.contains("not a whole frame of 2 bytes"), "{t}: {m}");
    }
    // Whole frames pass.
    let reg = Registry::with_builtins();
    let ok = edge::run(
        &reg,
        &Files::Denied,
        "random bytes=1002 >a\nmix channels=3 <a >b\nnull <b\n",
    );
    assert!(matches!(ok, Ok(edge::Outcome::Finished)), "{ok:?}");
}

#[test]
fn a_submitted_pipeline_reads_regular_files_only_unless_devices_are_allowed() {
    let d = edge::scratch();
    let fifo = d.path().join("fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let reg = Registry::with_builtins();
    let files = Files::beneath(d.path()).unwrap();
    let text = "file path=fifo >a\nnull <a\n";
    let e = Pipeline::parse(text)
        .unwrap()
        .build_with(&reg, &files)
        .err()
        .expect("refused");
    let m = e.to_string();
    assert!(m.contains("it is a fifo, not a regular file"), "{m}");
    assert!(m.contains("--files-allow-devices"), "{m}");
    // Allowed, it builds (and would read the fifo).
    assert!(Pipeline::parse(text)
        .unwrap()
        .build_with(&reg, &files.allow_devices(true))
        .is_ok());
}
