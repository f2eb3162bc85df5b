//! Failures a socket cannot see, against the real binary: an engine of a placed job that is
//! frozen (`kill -STOP`) or cut off (its packets dropped by nftables in its own network
//! namespace) ends the job within its peer deadline, naming it, and every other part stops;
//! a submitter killed with `kill -9` leaves no part running on any engine, while a job
//! submitted with `--detach` runs on until its lifetime passes.

mod common;
mod fleet;

use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use common::Reaped;
use fleet::{offhost, spawn_offhost, text, Engines, Netns};

/// Runs for minutes unless something ends it.
const LONG: &str = "fill bytes=200000000000 @a >x:p(8,64k)\ncount @b <x >y\ncrc32c @c <y\n";

/// Engines and submitter hear nothing from a frozen peer for this long before it is dead
/// (seconds; long enough that a loaded test machine does not starve a live peer's
/// heartbeats past it).
const DEADLINE: [&str; 2] = ["--peer-deadline", "3"];

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid}");
}

/// Resumes a stopped process when dropped, so that a failing test leaves none stopped.
struct Resume(u32);

impl Drop for Resume {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

/// Submits `file` to `e` with `extra` flags (before the file) and waits until every part
/// runs and data flows.
fn start_job(e: &Engines, file: &Path, extra: &[&str], dir: &Path) -> Reaped {
    let mut args: Vec<String> = vec!["submit".into()];
    args.extend(e.args());
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push(file.to_str().unwrap().into());
    let sub = spawn_offhost(&args, dir);
    let t0 = Instant::now();
    while (0..3).any(|i| e.states(i).is_empty()) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the parts never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    sub
}

/// Waits at most `within` for `sub` to end: its status, how long after `since`, and what it
/// said on standard error.
fn ended(sub: &mut Reaped, since: Instant, within: Duration) -> (ExitStatus, Duration, String) {
    let status = loop {
        if let Some(s) = sub.try_wait().unwrap() {
            break s;
        }
        assert!(since.elapsed() < within, "the submitter still runs");
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = since.elapsed();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut sub.stderr.take().unwrap(), &mut err).unwrap();
    (status, took, err)
}

/// Waits at most `within` until engine `i` of `e` runs no pipeline.
fn none_running_within(e: &Engines, i: usize, within: Duration) {
    let t = Instant::now();
    loop {
        let st = e.states(i);
        if !st.iter().any(|s| s == "running") {
            return;
        }
        assert!(t.elapsed() < within, "engine {i} still runs {st:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Ends engine b's part of a running job by `cut`, and checks that the job fails naming b
/// within its deadline and a little, and that a and c stop their parts.
fn engine_b_lost(e: &Engines, cut: impl FnOnce()) -> Duration {
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("long.ion");
    std::fs::write(&file, LONG).unwrap();
    let mut sub = start_job(e, &file, &DEADLINE, work.path());
    cut();
    let since = Instant::now();
    let (status, took, err) = ended(&mut sub, since, Duration::from_secs(30));
    assert!(!status.success(), "the submitter succeeded");
    let last = err
        .lines()
        .rev()
        .find(|l| l.starts_with("Error"))
        .unwrap_or("");
    assert!(last.contains("engine b"), "error: {err}");
    assert!(
        last.contains("sent nothing for 3.0 s"),
        "the error does not say b went silent: {last}"
    );
    assert!(
        took >= Duration::from_secs(2),
        "b declared lost after {took:?}"
    );
    for i in [0, 2] {
        none_running_within(e, i, Duration::from_secs(15));
    }
    took
}

#[test]
fn a_frozen_engine_ends_the_job_naming_it_and_every_part_stops() {
    let e = Engines::start(&DEADLINE);
    let pid = e.procs[1].id();
    let took = {
        let _resume = Resume(pid);
        engine_b_lost(&e, || signal(pid, "-STOP"))
    };
    // Resumed, b finds its links and its submitter gone, and stops its part too.
    none_running_within(&e, 1, Duration::from_secs(20));
    eprintln!("froze b: the submitter ended {took:?} later");
}

#[test]
fn an_engine_cut_off_by_the_network_ends_the_job_naming_it() {
    let Some(net) = Netns::make_or_skip() else {
        return;
    };
    let e = Engines::start_in(Some(&net), &DEADLINE);
    let ns = net.names[1].clone();
    let nft = |rule: &str| {
        let o = Command::new("ip")
            .args(["netns", "exec", &ns, "nft", rule])
            .output()
            .expect("run nft");
        assert!(o.status.success(), "nft {rule}: {}", text(&o.stderr));
    };
    let took = engine_b_lost(&e, || {
        // Every packet into and out of b's namespace is dropped: b's sockets stay open and
        // nothing tells anyone.
        nft("add table inet cut");
        nft("add chain inet cut in { type filter hook input priority -300 ; policy drop ; }");
        nft("add chain inet cut out { type filter hook output priority -300 ; policy drop ; }");
    });
    eprintln!("cut b off: the submitter ended {took:?} later");
}

#[test]
fn a_killed_submitter_leaves_no_part_running_and_a_detached_job_runs_its_lifetime() {
    let e = Engines::start(&["--orphan-grace", "1"]);
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("long.ion");
    std::fs::write(&file, LONG).unwrap();
    let mut sub = start_job(&e, &file, &[], work.path());
    sub.kill().unwrap();
    let killed = Instant::now();
    for i in 0..3 {
        none_running_within(&e, i, Duration::from_secs(20));
    }
    assert!(
        killed.elapsed() >= Duration::from_secs(1),
        "stopped before the grace"
    );
    eprintln!(
        "the parts of a killed submitter ended {:?} later",
        killed.elapsed()
    );
    // Detached, with a lifetime: the submitter returns at once and the parts run on.
    let mut args = vec!["submit".to_string()];
    args.extend(e.args());
    args.extend(["--detach", "--lifetime", "4"].map(String::from));
    args.push(file.to_str().unwrap().into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = offhost(&args, work.path());
    assert!(o.status.success(), "{}", text(&o.stderr));
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(2));
    for i in 0..3 {
        assert!(
            e.states(i).iter().any(|s| s == "running"),
            "engine {i}: the detached part ended with its submitter"
        );
    }
    // `--status` says which: the part on a (the first line of the output names engine and id).
    let a_id = text(&o.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("a ").map(str::to_owned))
        .expect("submit --detach prints `ENGINE ID` per part");
    let status = e.submit_to(0, &["--status", &a_id], work.path());
    let said = text(&status.stdout);
    assert!(said.contains("detached"), "{said}");
    for i in 0..3 {
        none_running_within(&e, i, Duration::from_secs(20));
    }
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "ended before its lifetime"
    );
}
