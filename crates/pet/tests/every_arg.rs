//! Every argument of every PET task takes the edge values (0, -1, NaN, ±inf, 1e300, 2^64,
//! empty, 10 KB) and proptest's numbers and strings: each is refused with an error naming
//! the argument, or runs to a finish or a task error; none panics, none takes the process
//! past its memory limit. The harness is the engine's (`crates/engine/tests/edge`). And the
//! reproductions of issue 46: `pet-sim pace=1e-300` (a worker's panic), `pace=NaN`, `inf`,
//! `-1`, `singles=NaN`, `sinogram lower=NaN` (accepted silently).

#[path = "../../engine/tests/edge/mod.rs"]
mod edge;

use offhost_engine::{Files, Registry};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// A value for argument `arg` of `task` where the test does not vary it.
fn base(task: &str, arg: &str) -> Option<&'static str> {
    Some(match (task, arg) {
        ("pet-sim", "events") => "2000",
        ("pet-read", "path") => "in.lm",
        ("petlink-read", "path") => "in.l",
        ("recon", "png") => "out.png",
        _ => return None,
    })
}

/// What feeds an input of `task`: records, or for `recon` a sinogram of them.
fn feed(task: &str) -> &'static str {
    match task {
        "recon" => "pet-sim events=2000 >r\nsinogram <r >QUEUE",
        _ => "pet-sim events=2000 >QUEUE",
    }
}

fn line(registry: &Registry, task: &str, arg: Option<(&str, &str)>) -> String {
    let (info, _) = registry.get(task).expect("registered");
    let mut l = task.to_string();
    for a in &info.args {
        let v = match arg {
            Some((n, v)) if n == a.name => edge::quote(v),
            _ => match base(task, &a.name) {
                Some(v) => v.to_string(),
                None => continue,
            },
        };
        l.push_str(&format!(" {}={v}", a.name));
    }
    l
}

/// The PET tasks (the engine's own are the engine test's).
fn pet_tasks(registry: &Registry) -> Vec<String> {
    let builtins = Registry::with_builtins().names();
    registry
        .names()
        .into_iter()
        .filter(|n| !builtins.contains(n))
        .collect()
}

#[test]
fn every_argument_of_every_pet_task_takes_edge_values() {
    const NAME: &str = "every_argument_of_every_pet_task_takes_edge_values";
    if !edge::is_child() {
        edge::run_in_child(NAME);
        return;
    }
    let registry = offhost_pet::tasks::registry();
    let dir = edge::scratch();
    edge::put(dir.path(), "in.lm", &[0u8; 4096]);
    edge::put(dir.path(), "in.l", &[0u8; 4096]);
    let files = Files::beneath(dir.path()).unwrap();
    edge::limit_memory();
    let mut cases = Vec::new();
    for t in pet_tasks(&registry) {
        let (info, _) = registry.get(&t).unwrap();
        for (ins, outs) in edge::forms(info) {
            cases.push((
                format!("{t} ({ins} in, {outs} out) with its defaults"),
                edge::around(&line(&registry, &t, None), ins, outs, feed(&t)),
            ));
            for a in &info.args {
                for v in edge::edge_values() {
                    let shown: String = v.chars().take(24).collect();
                    cases.push((
                        format!("{t} ({ins} in, {outs} out) {}={shown}", a.name),
                        edge::around(
                            &line(&registry, &t, Some((&a.name, &v))),
                            ins,
                            outs,
                            feed(&t),
                        ),
                    ));
                }
            }
        }
    }
    let mut failures = edge::run_all(&registry, &files, &cases);
    let value = prop_oneof![
        any::<f64>().prop_map(|x| x.to_string()),
        any::<i64>().prop_map(|x| x.to_string()),
        (0u32..2000).prop_map(|x| x.to_string()),
        "[a-zA-Z0-9.+-]{0,16}",
    ];
    for t in pet_tasks(&registry) {
        let (info, _) = registry.get(&t).unwrap();
        let (ins, outs) = edge::forms(info)[0];
        for a in &info.args {
            let mut runner = TestRunner::new(Config {
                cases: 4,
                failure_persistence: None,
                ..Config::default()
            });
            let r = runner.run(&value, |v| {
                let text = edge::around(
                    &line(&registry, &t, Some((&a.name, &v))),
                    ins,
                    outs,
                    feed(&t),
                );
                println!("case: {t} {}={v}", a.name);
                edge::run(&registry, &files, &text)
                    .map(drop)
                    .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))
            });
            if let Err(e) = r {
                failures.push(format!("{t} {}: {e}", a.name));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    println!("edge cases: all passed");
}

fn refused(text: &str) -> String {
    let reg = offhost_pet::tasks::registry();
    let dir = edge::scratch();
    let files = Files::beneath(dir.path()).unwrap();
    match edge::run(&reg, &files, text).expect("no panic") {
        edge::Outcome::Refused(m) => m,
        other => panic!("{text}: expected a refusal, got {other:?}"),
    }
}

#[test]
fn pace_and_rates_that_are_not_sound_numbers_are_refused_naming_the_argument() {
    for (text, want) in [
        (
            "pet-sim pace=1e-300 events=10 >a\nnull <a\n",
            "pace=1e-300: must be 0 (full speed) or between 1 and 1000000000000",
        ),
        (
            "pet-sim pace=NaN events=10 >a\nnull <a\n",
            "pace=NaN: not a finite number",
        ),
        (
            "pet-sim pace=inf events=10 >a\nnull <a\n",
            "pace=inf: not a finite number",
        ),
        (
            "pet-sim pace=-1 events=10 >a\nnull <a\n",
            "pace=-1: must be between 0 and 1000000000000",
        ),
        (
            "pet-sim singles=NaN events=10 >a\nnull <a\n",
            "singles=NaN: not a finite number",
        ),
        (
            "pet-sim events=10 >a\nsinogram lower=NaN <a\n",
            "lower=NaN: not a finite number",
        ),
        (
            "pet-sim events=10 >a\nsinogram lower=600 upper=500 <a\n",
            "upper=500: must be between 600 and 6553.5",
        ),
        (
            "pet-sim events=10 >a\nenergy-window lower=-1 <a >b\nnull <b\n",
            "lower=-1: must be between 0 and 6553.5",
        ),
        (
            "pet-sim events=10 >a\nsinogram <a >s\nrecon columns=0 png=x.png <s\n",
            "columns=0: must be between 1 and 1024",
        ),
    ] {
        let m = refused(text);
        assert!(m.contains(want), "{text}: {m}");
    }
    let m = refused("pet-sim pace=0.5 events=10 >a\nnull <a\n");
    assert!(m.contains("0 (full speed) or between 1 and"), "{m}");
}

#[test]
fn a_pace_of_zero_or_a_huge_rate_runs_to_its_end() {
    let reg = offhost_pet::tasks::registry();
    for text in [
        "pet-sim pace=0 events=1000 >a\nnull <a\n",
        "pet-sim pace=1e12 events=1000 >a\nnull <a\n",
    ] {
        let r = edge::run(&reg, &Files::Denied, text).expect("no panic");
        assert!(matches!(r, edge::Outcome::Finished), "{text}: {r:?}");
    }
}

/// A slow pace is a legitimate value: `pet-sim pace=1` emits an event a second, and a stop
/// ends it within a slice (it slept for a whole buffer's worth, 4096 s, inside one turn, and
/// did not end within the 20 s the harness gives a stopped pipeline; found by the property
/// test above).
#[test]
fn a_slow_pet_sim_ends_when_stopped() {
    let registry = offhost_pet::tasks::registry();
    let dir = edge::scratch();
    let files = Files::beneath(dir.path()).unwrap();
    let text = "pet-sim events=2000 pace=1 >o0\nnull <o0\n";
    if let Err(e) = edge::run(&registry, &files, text) {
        panic!("{text}: {e}");
    }
}
