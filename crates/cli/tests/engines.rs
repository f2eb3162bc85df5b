//! One pipeline over several engines, against the real binary: three `offhost engine`
//! processes on loopback, linked by mutual TLS, run the parts of a placed file
//! (`offhost submit --engine NAME=URL ...`). The outputs must equal `offhost run`'s byte for
//! byte; killing any engine mid-run must end every part, fail the submitter naming the
//! engine, and leave no pipeline running; and submitted pipelines reach other engines over
//! TLS only.

mod common;
mod fleet;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use fleet::{kill_and_wait, offhost, spawn_offhost, submit, text, Engines, Netns, NAMES};

/// Buffers of a whole channel window (1 MiB: a full message and a 2-byte last part) and
/// larger (3 MiB: several parts) cross between engines in order and whole. The first stopped
/// for ever after 3 buffers while the receiver granted credit only in half windows.
#[test]
fn buffers_of_a_whole_window_and_larger_cross_whole() {
    let e = Engines::start(&[]);
    let work = tempfile::tempdir().unwrap();
    for (size, n) in [("1M", 12), ("3M", 4)] {
        let file = work.path().join(format!("big{size}.ion"));
        std::fs::write(
            &file,
            format!(
                "random bytes={}M seed=7 @a >x:p(2,{size})\nhost-out name=res @b <x\n",
                n * if size == "1M" { 1 } else { 3 }
            ),
        )
        .unwrap();
        let (one, two, _) = whole_and_placed(&e, &file, work.path());
        assert!(!one.is_empty() && one == two, "{size}: the bytes differ");
    }
}

/// Queues between two engines both ways (a -> b -> a -> b) split each engine by stage, and a
/// queue between two stages of one engine (w) crosses over that engine's link to itself;
/// the bytes are those of the whole file run in one process.
#[test]
fn queues_between_engines_both_ways_run_in_stages() {
    let e = Engines::start(&[]);
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("both.ion");
    std::fs::write(
        &file,
        "random bytes=3000000 seed=9 @a >s:p(8,64k)\n\
         dup @a <s >x >w\n\
         count @b <x >y\n\
         dup @b <y >y1 >y2\n\
         crc32c @a <y1 >z\n\
         null @a <w <y2\n\
         host-out name=res @b <z\n",
    )
    .unwrap();
    let (one, two, o) = whole_and_placed(&e, &file, work.path());
    assert_eq!(one.len(), 3_000_000);
    assert!(one == two, "host-out bytes differ");
    // Four parts on two engines, each row naming its part; w crossed from a to a+2.
    let table = text(&o.stdout);
    has_rows(
        &table,
        &[
            "a          random",
            "b          count",
            "a+2        crc32c",
            "a+2        null",
            "b+2        host-out",
            "a+2:w.from.a",
            "b+2:z.from.a.2",
        ],
    );
    // --json: one object per part, in the order submitted, each naming its engine and part.
    let o = submit(
        &e,
        &file,
        &["--json", "--out", "res=again.bin"],
        work.path(),
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let parts: Vec<(&str, &str)> = v["engines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert_eq!(p["state"], "finished", "{p}");
            (p["part"].as_str().unwrap(), p["engine"].as_str().unwrap())
        })
        .collect();
    assert_eq!(parts, [("b+2", "b"), ("a+2", "a"), ("b", "b"), ("a", "a")]);
}

/// Checks that a statistics table holds each of `rows`.
fn has_rows(table: &str, rows: &[&str]) {
    for row in rows {
        assert!(table.contains(row), "{row:?} not in:\n{table}");
    }
}

/// The bytes `file` sends to `host-out name=res`, run whole by `offhost run` and split over
/// the engines by `offhost submit` (both must succeed), and the submitter's output.
fn whole_and_placed(e: &Engines, file: &Path, dir: &Path) -> (Vec<u8>, Vec<u8>, Output) {
    let o = offhost(
        &["run", file.to_str().unwrap(), "--out", "res=whole.bin"],
        dir,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = submit(e, file, &["--out", "res=placed.bin"], dir);
    assert!(
        o.status.success(),
        "{}: {}",
        file.display(),
        text(&o.stderr)
    );
    let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
    (read("whole.bin"), read("placed.bin"), o)
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn pet_over_three_engines_draws_the_same_image_as_one_process() {
    pet_over_three_engines(None);
}

#[test]
fn pet_over_three_network_namespaces_draws_the_same_image() {
    let Some(net) = Netns::make_or_skip() else {
        return;
    };
    pet_over_three_engines(Some(&net));
}

fn pet_over_three_engines(net: Option<&Netns>) {
    let e = Engines::start_in(net, &[]);
    let work = tempfile::tempdir().unwrap();
    let pet = root().join("examples/pet.ion");
    let o = offhost(&["run", pet.to_str().unwrap()], work.path());
    assert!(o.status.success(), "{}", text(&o.stderr));
    let one = std::fs::read(work.path().join("pet.png")).unwrap();
    // examples/pet.ion names source, histogram and recon.
    let mut args: Vec<String> = Vec::new();
    for (n, u) in ["source", "histogram", "recon"].iter().zip(&e.urls) {
        args.push("--engine".into());
        args.push(format!("{n}={u}"));
    }
    args.extend(["--tls-certificates".into(), e.pki.to_str().unwrap().into()]);
    args.extend(["--json".into(), pet.to_str().unwrap().into()]);
    let mut all = vec!["submit".to_string()];
    all.extend(args);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let o = offhost(&all, work.path());
    assert!(o.status.success(), "{}", text(&o.stderr));
    let three = std::fs::read(e.files[2].join("pet.png")).expect("recon wrote pet.png");
    assert!(one.len() > 1000);
    assert!(
        one == three,
        "pet.png differs between one process and three engines"
    );
    // One report, each part naming its engine.
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let engines: Vec<&str> = v["engines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert_eq!(p["state"], "finished", "{p}");
            p["engine"].as_str().unwrap()
        })
        .collect();
    assert_eq!(engines, ["recon", "histogram", "source"]);
}

#[test]
fn host_channels_and_statistics_span_the_engines() {
    let e = Engines::start(&[]);
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("t.ion");
    // A source on a, a filter on b, a checksum and the host's output on c.
    std::fs::write(
        &file,
        "fill bytes=3000000 value=7 rewrite=false @a >x:p(8,64k)\n\
         count @b <x >y\n\
         dup @c <y >z >w\n\
         crc32c @c <z\n\
         host-out name=res @c <w\n",
    )
    .unwrap();
    let (one, three, o) = whole_and_placed(&e, &file, work.path());
    assert_eq!(one.len(), 3_000_000);
    // Each of the 8 buffers carries 64 KiB about six times over, fill writing it only the
    // first time: fill's bytes every time.
    assert!(one.iter().all(|&b| b == 7), "fill's bytes changed");
    assert!(one == three, "host-out bytes differ");
    let table = text(&o.stdout);
    has_rows(
        &table,
        &[
            "a          fill",
            "b          count",
            "c          crc32c",
            "a:x",
            "c:y",
        ],
    );
    let crc = table.lines().find(|l| l.contains("crc32c=")).unwrap();
    assert!(crc.contains("over 3000000 bytes"), "{crc}");
}

#[test]
fn a_killed_engine_ends_every_part_and_the_error_names_it() {
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("long.ion");
    // Runs for minutes unless something ends it.
    std::fs::write(
        &file,
        "fill bytes=200000000000 @a >x:p(8,64k)\ncount @b <x >y\ncrc32c @c <y\n",
    )
    .unwrap();
    for (victim, name) in NAMES.iter().enumerate() {
        let mut e = Engines::start(&[]);
        let mut args: Vec<String> = vec!["submit".into()];
        args.extend(e.args());
        args.push(file.to_str().unwrap().into());
        let mut sub = spawn_offhost(&args, work.path());
        // Wait until data flows through all three (every part started), then kill one.
        let t0 = Instant::now();
        while e.states(2).is_empty() || e.states(0).is_empty() {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "the parts never started"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(300));
        let (status, took, err) = kill_and_wait(&mut e, victim, &mut sub);
        assert!(!status.success(), "the submitter succeeded");
        let last = err
            .lines()
            .rev()
            .find(|l| l.starts_with("Error"))
            .unwrap_or("");
        assert!(
            last.contains(&format!("engine {name}")),
            "killed {name}, error: {err}"
        );
        // The others ended their parts (failed or stopped), within the same bound.
        for i in (0..3).filter(|&i| i != victim) {
            let t = Instant::now();
            loop {
                let st = e.states(i);
                if !st.iter().any(|s| s == "running") {
                    break;
                }
                assert!(
                    t.elapsed() < Duration::from_secs(10),
                    "engine {i} still runs {st:?}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        eprintln!("killed {name}: the submitter ended {took:?} later");
    }
}

#[test]
fn submitted_pipelines_reach_other_engines_over_tls_only() {
    let e = Engines::start(&[]);
    let work = tempfile::tempdir().unwrap();
    for (url, why) in [
        ("unix:/tmp/x.sock", "not local sockets"),
        (
            "tcp:127.0.0.1:1",
            "plain tcp: only when this engine allows insecure links",
        ),
    ] {
        let file = work.path().join("out.ion");
        std::fs::write(
            &file,
            format!("fill bytes=10 >x\nengine-out url={url} pipeline=1 name=q <x\n"),
        )
        .unwrap();
        let o = e.submit_to(0, &[file.to_str().unwrap()], work.path());
        assert!(!o.status.success(), "accepted {url}");
        let err = text(&o.stderr);
        assert!(err.contains(why) && err.contains("line 2"), "{url}: {err}");
    }
}

#[test]
fn a_task_calls_a_pipeline_on_another_engine_until_that_engine_is_killed() {
    let mut e = Engines::start(&[]);
    let work = tempfile::tempdir().unwrap();
    let submit = |engine: usize, file: &Path, extra: &[&str]| {
        let mut args = extra.to_vec();
        args.push(file.to_str().unwrap());
        e.submit_to(engine, &args, work.path())
    };
    // The service on b answers each request with the request, through crc32c.
    let serve = work.path().join("serve.ion");
    std::fs::write(
        &serve,
        "host-in name=svc whole=true >a:a(4,64k)\ncrc32c <a >b\nhost-out name=svc whole=true <b\n",
    )
    .unwrap();
    // Started under a name, which the callers' files use instead of its id.
    let service = || {
        let o = submit(1, &serve, &["--name", "svc", "--detach"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stdout).trim().parse::<u64>().expect("an id")
    };
    let caller = |bytes: u64, id: &str| {
        let f = work.path().join(format!("call-{bytes}.ion"));
        std::fs::write(
            &f,
            format!(
                "random seed=7 bytes={bytes} >r:r(4,1000)\ncall url={} pipeline={id} name=svc engine=b <r >x:x(4,1000)\ncrc32c <x\n",
                e.urls[1]
            ),
        )
        .unwrap();
        f
    };
    // 300 calls of 1000 bytes: the answers are the requests, in order.
    let id = service();
    let o = submit(1, &serve, &["--name", "svc", "--detach"]);
    assert!(!o.status.success(), "a second service took the name");
    assert!(
        text(&o.stderr).contains(&format!("taken by running pipeline {id}")),
        "{}",
        text(&o.stderr)
    );
    let o = submit(1, &serve, &["--status", "svc"]);
    assert_eq!(
        text(&o.stdout).lines().next(),
        Some(format!("pipeline {id} (svc) running").as_str()),
        "{}",
        text(&o.stderr)
    );
    // By its id too (clap once read "7" as a name, which no pipeline can hold).
    let o = submit(1, &serve, &["--status", &id.to_string()]);
    assert_eq!(
        text(&o.stdout).lines().next(),
        Some(format!("pipeline {id} (svc) running").as_str()),
        "{}",
        text(&o.stderr)
    );
    let o = submit(0, &caller(300_000, "svc"), &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let here = work.path().join("here.ion");
    std::fs::write(
        &here,
        "random seed=7 bytes=300000 >r:r(4,1000)\ncrc32c <r\n",
    )
    .unwrap();
    let local = offhost(&["run", here.to_str().unwrap()], work.path());
    assert!(local.status.success(), "{}", text(&local.stderr));
    let crc = |out: &str| {
        out.split_whitespace()
            .find(|w| w.starts_with("crc32c=0x"))
            .map(str::to_owned)
    };
    let want = crc(&text(&local.stdout)).expect("offhost run reports a CRC");
    assert_eq!(crc(&text(&o.stdout)), Some(want), "{}", text(&o.stdout));

    // The service outlives its caller: calls that would go on for minutes, until b is killed.
    let file = caller(200_000_000_000, "svc");
    let mut args = e.submit_args(0);
    args.push(file.to_string_lossy().into_owned());
    let mut sub = spawn_offhost(&args, work.path());
    let t0 = Instant::now();
    while !e.states(0).iter().any(|s| s == "running") {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the caller never ran"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let (status, _, err) = kill_and_wait(&mut e, 1, &mut sub);
    assert!(!status.success(), "the caller succeeded");
    assert!(err.contains("engine b"), "{err}");
    assert!(!e.states(0).iter().any(|s| s == "running"));
}

#[test]
fn a_files_own_service_serves_callers_on_other_engines_as_in_one_process() {
    let e = Engines::start(&[]);
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("svc.ion");
    // The service on b; a caller on a and one on c share it.
    std::fs::write(
        &file,
        "host-in name=svc whole=true @b >q:q(4,64k)\n\
         count @b <q >r\n\
         host-out name=svc whole=true @b <r\n\
         random seed=3 bytes=200000 @a >req:req(4,1000)\n\
         call name=svc timeout=30 @a <req >ans:ans(4,1000)\n\
         crc32c @a <ans\n\
         random seed=4 bytes=100000 @c >req2:req2(4,1000)\n\
         call name=svc timeout=30 @c <req2 >ans2:ans2(4,1000)\n\
         host-out name=res @c <ans2\n",
    )
    .unwrap();
    let (one, three, o) = whole_and_placed(&e, &file, work.path());
    assert_eq!(one.len(), 100_000);
    assert!(one == three, "host-out bytes differ");
    let table = text(&o.stdout);
    has_rows(
        &table,
        &[
            "b          count",
            "a          call",
            "c          call",
            "300 buffers, 300000 bytes",
        ],
    );
    // One daemon runs it whole, its call local.
    let (out, file) = ("res=one.bin", file.to_str().unwrap());
    let o = e.submit_to(0, &["--out", out, file], work.path());
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(std::fs::read(work.path().join("one.bin")).unwrap() == one);
    // Every part has ended: the service's was stopped once its callers were done.
    for i in 0..3 {
        assert!(!e.states(i).iter().any(|s| s == "running"), "engine {i}");
    }
}

#[test]
fn a_failed_job_ends_by_force_a_part_that_a_stop_does_not_end() {
    let e = Engines::start(&[]);
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("stuck.ion");
    // b's call waits for ever (mu-law holds its request's one byte for a second one); a's
    // call reaches no pipeline, which fails the job.
    std::fs::write(
        &file,
        format!(
            "host-in name=svc whole=true @b >q:q(4,64)\n\
             mulaw @b <q >z:z(2,64)\n\
             host-out name=svc whole=true @b <z\n\
             fill bytes=1 @b >r:r(1,1)\n\
             call name=svc @b <r >s:s(1,64)\n\
             null @b <s\n\
             fill bytes=1 @a >x:x(1,1)\n\
             call url={} pipeline=nobody name=svc @a <x >y:y(1,64)\n\
             null @a <y\n",
            e.urls[1]
        ),
    )
    .unwrap();
    let t0 = Instant::now();
    let o = submit(&e, &file, &[], work.path());
    assert!(!o.status.success(), "the job succeeded");
    let err = text(&o.stderr);
    assert!(err.contains("no such pipeline"), "{err}");
    // The stop after the failure did not end b's part; the force after AFTER_FAILURE did.
    assert!(
        t0.elapsed() >= Duration::from_secs(10),
        "{:?}",
        t0.elapsed()
    );
    let t = Instant::now();
    while e.states(1).iter().any(|s| s == "running") {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "b still runs {:?}",
            e.states(1)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
