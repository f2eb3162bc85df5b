//! The engine daemon over a real TCP link: submit, data channels, failures, departed hosts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use offhost_engine::daemon::{Client, Daemon, DaemonError};
use offhost_engine::{EngineConfig, Registry};
use offhost_link::Server;

fn daemon() -> String {
    let server = Server::bind("tcp:127.0.0.1:0").expect("bind loopback");
    let url = server.url().to_string();
    let d = Daemon::new(
        Registry::with_builtins(),
        EngineConfig {
            workers: 2,
            pin: false,
            batch: 64,
        },
    );
    let d2 = Arc::clone(&d);
    std::thread::spawn(move || d2.serve(&server));
    url
}

fn state_within(c: &Client, id: u64, want: &str) -> serde_json::Value {
    let t0 = Instant::now();
    loop {
        let v = c.status(id).unwrap();
        if v["state"] == want {
            return v;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "pipeline {id} never became {want}: {v}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn submit_stream_in_and_out_and_wait() {
    let url = daemon();
    let c = Client::connect(&url).unwrap();
    let sub = c
        .submit("host-in name=in >a:p(8,4096)\ncrc32c <a >b\nhost-out name=out <b\n")
        .unwrap();
    assert_eq!(
        (sub.host_in.as_slice(), sub.host_out.as_slice()),
        (&["in".to_string()][..], &["out".to_string()][..])
    );
    let input = c.open_input(sub.id, "in").unwrap();
    let output = c.open_output(sub.id, "out").unwrap();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 241) as u8).collect();
    let d = data.clone();
    let sender = std::thread::spawn(move || {
        for chunk in d.chunks(7000) {
            input.send(chunk).unwrap();
        }
        input.close().unwrap();
    });
    let mut got = Vec::new();
    while let Some(m) = output.recv_timeout(Duration::from_secs(20)).unwrap() {
        got.extend_from_slice(&m);
    }
    sender.join().unwrap();
    assert_eq!(got, data);
    let v = c.wait(sub.id).unwrap();
    assert_eq!(v["state"], "finished", "{v}");
    let crc = format!("crc32c=0x{:08x} over 100000 bytes", crc32c::crc32c(&data));
    assert_eq!(v["stats"]["tasks"][1]["report"], crc.as_str());
}

#[test]
fn bad_pipelines_and_failing_tasks_leave_the_daemon_serving() {
    let url = daemon();
    let c = Client::connect(&url).unwrap();
    match c.submit("tone >a\nmix <a >b\n") {
        Err(DaemonError::Refused(e)) => assert!(e.contains("line 2, column 9: queue 'b'"), "{e}"),
        other => panic!("expected a refusal, got {:?}", other.map(|s| s.id)),
    }
    let sub = c
        .submit("wav path=/nonexistent/x.wav >a\nnull <a\n")
        .unwrap();
    let v = c.wait(sub.id).unwrap();
    assert_eq!(v["state"], "failed");
    assert!(
        v["error"].as_str().unwrap().contains("/nonexistent/x.wav"),
        "{v}"
    );
    // Still serving, on a new session too.
    let c2 = Client::connect(&url).unwrap();
    let sub = c2.submit("tone seconds=0.5 >a\ncount <a\n").unwrap();
    assert_eq!(c2.wait(sub.id).unwrap()["state"], "finished");
    assert!(c2.list().unwrap()["pipelines"].as_array().unwrap().len() == 2);
}

#[test]
fn a_host_that_disconnects_ends_its_branch_only() {
    let url = daemon();
    let watcher = Client::connect(&url).unwrap();
    let sub = {
        let host = Client::connect(&url).unwrap();
        // An endless source: only the departure of the host can end this pipeline.
        let sub = host
            .submit("tone >a:p(8,4096)\nhost-out name=out <a\n")
            .unwrap();
        let out = host.open_output(sub.id, "out").unwrap();
        assert!(out.recv_timeout(Duration::from_secs(20)).unwrap().is_some());
        sub
        // host and its channel drop here: the link closes.
    };
    state_within(&watcher, sub.id, "finished");
    // And stop works for pipelines still running.
    let sub = watcher.submit("tone >a\nnull <a\n").unwrap();
    assert_eq!(watcher.status(sub.id).unwrap()["state"], "running");
    watcher.stop(sub.id).unwrap();
    assert_eq!(watcher.wait(sub.id).unwrap()["state"], "finished");
}
