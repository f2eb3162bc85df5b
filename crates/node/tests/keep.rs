//! Who keeps a daemon's pipelines running: a pipeline whose submitter has gone is stopped
//! after the grace period, a detached one runs on until its lifetime passes, and budgets of
//! time and bytes end a pipeline by force, naming the limit.

use std::sync::Arc;
use std::time::{Duration, Instant};

use offhost_engine::{EngineConfig, Registry};
use offhost_link::Server;
use offhost_node::daemon::{Client, Daemon, KeptBy, PipelineState, Status};
use offhost_node::DaemonLimits;

/// Runs until stopped: its input is never opened.
const WAITS: &str = "host-in name=in >a:p(2,64)\nnull <a\n";
/// Runs for minutes unless stopped: 100 GB of bytes.
const ENDLESS: &str = "fill bytes=100000000000 >a:p(4,64k)\nnull <a\n";

fn daemon(limits: DaemonLimits) -> String {
    let server = Server::bind("tcp:127.0.0.1:0").expect("bind loopback");
    let url = server.url().to_string();
    let d = Daemon::with_limits(Registry::with_builtins(), EngineConfig::default(), limits);
    let d2 = Arc::clone(&d);
    std::thread::spawn(move || d2.serve(&server));
    url
}

fn quick_orphans() -> DaemonLimits {
    DaemonLimits {
        orphan_grace: Duration::from_millis(300),
        ..DaemonLimits::default()
    }
}

/// Pipeline `id`'s status once it is no longer running, within `within`.
fn ended_within(c: &Client, id: u64, within: Duration) -> Status {
    let t0 = Instant::now();
    loop {
        let s = c.status(id).unwrap();
        if s.state != PipelineState::Running {
            return s;
        }
        assert!(t0.elapsed() < within, "pipeline {id} still runs: {s}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_pipeline_whose_submitter_has_gone_is_stopped_after_the_grace() {
    let url = daemon(quick_orphans());
    let submitter = Client::connect(&url).unwrap();
    let id = submitter.submit(WAITS).unwrap().id;
    let watcher = Client::connect(&url).unwrap();
    let s = watcher.status(id).unwrap();
    assert_eq!(
        s.keep.as_ref().map(|k| k.by),
        Some(KeptBy::Submitter),
        "{s}"
    );
    // Kept while its submitter is there, past the grace.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(watcher.status(id).unwrap().state, PipelineState::Running);
    drop(submitter);
    let left = Instant::now();
    let s = ended_within(&watcher, id, Duration::from_secs(10));
    assert!(
        left.elapsed() >= Duration::from_millis(300),
        "stopped before its grace"
    );
    assert_eq!(s.state, PipelineState::Finished, "{s}");
}

#[test]
fn a_detached_pipeline_outlives_its_submitter_until_its_lifetime_passes() {
    let url = daemon(quick_orphans());
    let submitter = Client::connect(&url).unwrap();
    let id = submitter
        .submit_detached(WAITS, None, Some(Duration::from_secs(2)))
        .unwrap()
        .id;
    drop(submitter);
    let watcher = Client::connect(&url).unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let s = watcher.status(id).unwrap();
    assert_eq!(s.state, PipelineState::Running, "{s}");
    let keep = s.keep.expect("a running pipeline says who keeps it");
    assert_eq!(keep.by, KeptBy::Detached);
    let left = keep.stops_in_s.expect("its lifetime");
    assert!(left > 0.0 && left < 2.0, "{left}");
    ended_within(&watcher, id, Duration::from_secs(10));
}

#[test]
fn a_detached_lifetime_is_checked() {
    let url = daemon(DaemonLimits {
        pipeline_time: Some(Duration::from_secs(60)),
        ..DaemonLimits::default()
    });
    let c = Client::connect(&url).unwrap();
    let e = c
        .submit_detached(WAITS, None, Some(Duration::from_secs(61)))
        .unwrap_err()
        .to_string();
    assert!(e.contains("max_pipeline_time"), "{e}");
    for bad in ["0", "-1", "NaN", "1e400"] {
        let req = format!(r#"{{"op":"submit","text":"null","detach":true,"lifetime_s":{bad}}}"#);
        let d = Daemon::new(Registry::with_builtins(), EngineConfig::default());
        let reply = d.answer(req.as_bytes());
        assert!(reply.contains(r#""ok":false"#), "{bad}: {reply}");
    }
    let d = Daemon::new(Registry::with_builtins(), EngineConfig::default());
    let reply = d.answer(br#"{"op":"submit","text":"null","lifetime_s":5}"#);
    assert!(
        reply.contains("a lifetime is for a detached pipeline"),
        "{reply}"
    );
}

#[test]
fn a_pipeline_past_its_bytes_is_ended_by_force_naming_the_limit() {
    let url = daemon(DaemonLimits {
        pipeline_bytes: Some(64 << 20),
        ..DaemonLimits::default()
    });
    let c = Client::connect(&url).unwrap();
    let id = c.submit(ENDLESS).unwrap().id;
    let s = ended_within(&c, id, Duration::from_secs(30));
    assert_eq!(s.state, PipelineState::Failed, "{s}");
    let e = s.error.unwrap();
    assert!(e.contains("max_pipeline_bytes"), "{e}");
    let entered = s.stats.unwrap().source_bytes();
    assert!(entered > 64 << 20, "{entered}");
}

#[test]
fn a_pipeline_past_its_time_is_ended_by_force_naming_the_limit() {
    let url = daemon(DaemonLimits {
        pipeline_time: Some(Duration::from_secs(1)),
        ..DaemonLimits::default()
    });
    let c = Client::connect(&url).unwrap();
    let t0 = Instant::now();
    let id = c.submit(WAITS).unwrap().id;
    let s = ended_within(&c, id, Duration::from_secs(10));
    assert!(t0.elapsed() >= Duration::from_secs(1));
    assert_eq!(s.state, PipelineState::Failed, "{s}");
    assert!(s.error.unwrap().contains("max_pipeline_time"));
}
