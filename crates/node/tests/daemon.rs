//! The engine daemon over a real TCP link: submit, data channels, failures, departed hosts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use offhost_engine::{EngineConfig, Files, Registry};
use offhost_link::Server;
use offhost_node::daemon::{Client, Daemon, DaemonError};

fn daemon() -> String {
    daemon_with(Files::Denied)
}

fn daemon_with(files: Files) -> String {
    let server = Server::bind("tcp:127.0.0.1:0").expect("bind loopback");
    let url = server.url().to_string();
    let d = Daemon::with_files(
        Registry::with_builtins(),
        EngineConfig {
            workers: 2,
            pin: false,
            batch: 64,
        },
        files,
    );
    let d2 = Arc::clone(&d);
    std::thread::spawn(move || d2.serve(&server));
    url
}

fn state_within(c: &Client, id: u64, want: &str) -> offhost_node::daemon::Status {
    let t0 = Instant::now();
    loop {
        let v = c.status(id).unwrap();
        if v.state == want {
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
    while let Some(m) = output.recv_wait(Duration::from_secs(20)).unwrap() {
        got.extend_from_slice(&m);
    }
    sender.join().unwrap();
    assert_eq!(got, data);
    let v = c.wait(sub.id).unwrap();
    assert_eq!(v.state, "finished", "{v}");
    let crc = format!("crc32c=0x{:08x} over 100000 bytes", crc32c::crc32c(&data));
    assert_eq!(
        v.stats.as_ref().unwrap().tasks[1].report.as_deref(),
        Some(crc.as_str())
    );
}

#[test]
fn bad_pipelines_and_failing_tasks_leave_the_daemon_serving() {
    let url = daemon();
    let c = Client::connect(&url).unwrap();
    match c.submit("tone >a\nmix <a >b\n") {
        Err(DaemonError::Refused(e)) => assert!(e.contains("line 2, column 9: queue 'b'"), "{e}"),
        other => panic!("expected a refusal, got {:?}", other.map(|s| s.id)),
    }
    // A submitted pipeline has no file access: refused at submit, naming line and path.
    match c.submit("tone >b\nnull <b\nwav path=/nonexistent/x.wav >a\nnull <a\n") {
        Err(DaemonError::Refused(e)) => {
            assert!(e.contains("line 3"), "{e}");
            assert!(e.contains("task 'wav'"), "{e}");
            assert!(e.contains("\"/nonexistent/x.wav\""), "{e}");
            assert!(e.contains("file access refused"), "{e}");
        }
        other => panic!("expected a refusal, got {:?}", other.map(|s| s.id)),
    }

    // Still serving, on a new session too.
    let c2 = Client::connect(&url).unwrap();
    let sub = c2.submit("tone seconds=0.5 >a\ncount <a\n").unwrap();
    assert_eq!(c2.wait(sub.id).unwrap().state, "finished");
    assert!(c2.list().unwrap().pipelines.len() == 1);
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
        assert!(out.recv_wait(Duration::from_secs(20)).unwrap().is_some());
        sub
        // host and its channel drop here: the link closes.
    };
    state_within(&watcher, sub.id, "finished");
    // And stop works for pipelines still running.
    let sub = watcher.submit("tone >a\nnull <a\n").unwrap();
    assert_eq!(watcher.status(sub.id).unwrap().state, "running");
    watcher.stop(sub.id).unwrap();
    assert_eq!(watcher.wait(sub.id).unwrap().state, "finished");
}

#[test]
fn a_sandboxed_daemon_opens_files_beneath_its_directory_only() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("files");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("in.bin"), vec![7u8; 10_000]).unwrap();
    std::fs::write(root.join("bad.wav"), b"not a wav file at all").unwrap();
    std::fs::write(d.path().join("secret"), b"outside").unwrap();
    std::os::unix::fs::symlink(d.path().join("secret"), root.join("link")).unwrap();
    let url = daemon_with(Files::beneath(&root).unwrap());
    let c = Client::connect(&url).unwrap();

    let sub = c
        .submit("file path=in.bin >a\nfile path=copy.bin <a\n")
        .unwrap();
    assert_eq!(c.wait(sub.id).unwrap().state, "finished");
    assert_eq!(
        std::fs::read(root.join("copy.bin")).unwrap(),
        vec![7u8; 10_000]
    );

    let secret = d.path().join("secret").display().to_string();
    for (text, path) in [
        ("file path=../secret >a\nnull <a\n", "../secret"),
        (&*format!("file path={secret} >a\nnull <a\n"), &*secret),
        ("file path=link >a\nnull <a\n", "link"),
        ("fill bytes=10 >a\nfile path=../planted <a\n", "../planted"),
        (
            "fill bytes=10 >a\nfile path=/tmp/offhost-planted <a\n",
            "/tmp/offhost-planted",
        ),
    ] {
        match c.submit(text) {
            Err(DaemonError::Refused(e)) => {
                assert!(e.contains("file access refused"), "{text}: {e}");
                assert!(e.contains(&format!("{path:?}")), "{text}: {e}");
                assert!(e.contains("task 'file'"), "{text}: {e}");
            }
            other => panic!("{text}: expected a refusal, got {:?}", other.map(|s| s.id)),
        }
    }
    assert!(!d.path().join("planted").exists());
    assert_eq!(std::fs::read(d.path().join("secret")).unwrap(), b"outside");

    // A task that fails while running fails its pipeline only.
    let sub = c.submit("wav path=bad.wav >a\nnull <a\n").unwrap();
    let v = c.wait(sub.id).unwrap();
    assert_eq!(v.state, "failed", "{v}");
    assert!(v.error.as_deref().unwrap().contains("bad.wav"), "{v}");
}

/// The error a channel the daemon refused ends with, after a send that crosses the refusal
/// on the way: sent once the daemon has refused the channel and let go of it (a while after
/// the open), before this side has read the refusal. The daemon drops it; the link lives.
fn refusal(ch: &offhost_link::Channel) -> String {
    std::thread::sleep(Duration::from_millis(200));
    ch.send(b"x")
        .expect("a send before the refusal is read is taken");
    match ch.recv_wait(Duration::from_secs(10)) {
        Err(e) => e.to_string(),
        Ok(m) => panic!("the channel was not refused: {m:?}"),
    }
}

#[test]
fn channels_to_no_pipeline_or_no_host_in_are_refused_and_the_host_served() {
    let url = daemon();
    let c = Client::connect(&url).unwrap();
    let e = refusal(&c.open_input(999, "in").unwrap());
    assert!(e.contains("in/999/in: no such pipeline here"), "{e}");
    let sub = c
        .submit("host-in name=in >a:p(8,4096)\nhost-out name=out <a\n")
        .unwrap();
    let e = refusal(&c.open_input(sub.id, "nope").unwrap());
    assert!(e.contains("no open host-in nope"), "{e}");
    let e = refusal(&c.open_output(sub.id, "nope").unwrap());
    assert!(e.contains("no open host-out nope"), "{e}");
    // The same host, on the same link, is served.
    let input = c.open_input(sub.id, "in").unwrap();
    let output = c.open_output(sub.id, "out").unwrap();
    input.send(&[5u8; 10_000]).unwrap();
    input.close().unwrap();
    let mut got = Vec::new();
    while let Some(m) = output.recv_wait(Duration::from_secs(20)).unwrap() {
        got.extend_from_slice(&m);
    }
    assert_eq!(got, vec![5u8; 10_000]);
    assert_eq!(c.wait(sub.id).unwrap().state, "finished");
}

#[test]
fn a_named_pipeline_is_found_by_its_name_and_one_running_pipeline_holds_a_name() {
    let url = daemon();
    let c = Client::connect(&url).unwrap();
    const ECHO: &str = "host-in name=in >a:p(8,4096)\nhost-out name=out <a\n";
    let first = c.submit_as(ECHO, Some("echo")).unwrap();
    assert_eq!(first.name.as_deref(), Some("echo"));
    // Taken while it runs; the refusal names the holder.
    let e = c.submit_as(ECHO, Some("echo")).unwrap_err().to_string();
    assert!(
        e.contains("\"echo\" is taken by running pipeline") && e.contains(&first.id.to_string()),
        "{e}"
    );
    for (bad, why) in [
        ("9lives", "must start with a letter"),
        ("a/b", "holds '/'"),
        ("", "must start with a letter"),
    ] {
        let e = c.submit_as(ECHO, Some(bad)).unwrap_err().to_string();
        assert!(e.contains(why), "{bad:?}: {e}");
    }
    let long = "x".repeat(10_000);
    let e = c.submit_as(ECHO, Some(&long)).unwrap_err().to_string();
    assert!(e.contains("over the limit of 64") && e.len() < 300, "{e}");
    // Its channels, status and list by name.
    let input = c.open_input("echo", "in").unwrap();
    let output = c.open_output("echo", "out").unwrap();
    input.send(&[3u8; 5000]).unwrap();
    input.close().unwrap();
    let mut got = Vec::new();
    while let Some(m) = output.recv_wait(Duration::from_secs(20)).unwrap() {
        got.extend_from_slice(&m);
    }
    assert_eq!(got, vec![3u8; 5000]);
    let v = c.wait("echo").unwrap();
    assert_eq!(
        (v.id, v.name.as_deref(), v.state.as_str()),
        (first.id, Some("echo"), "finished")
    );
    let list = c.list().unwrap();
    assert_eq!(list.pipelines[0].name.as_deref(), Some("echo"), "{list}");
    // Unknown names are errors, not another pipeline.
    let e = c.status("nobody").unwrap_err().to_string();
    assert!(e.contains("no pipeline named \"nobody\""), "{e}");
    let e = refusal(&c.open_input("nobody", "in").unwrap());
    assert!(e.contains("in/nobody/in: no such pipeline here"), "{e}");
    // Once it has finished, the name goes to the next pipeline submitted with it.
    let second = c.submit_as(ECHO, Some("echo")).unwrap();
    assert_ne!(second.id, first.id);
    assert_eq!(c.status("echo").unwrap().state, "running");
    c.stop("echo").unwrap();
    c.open_input(second.id, "in").unwrap().close().unwrap();
    assert_eq!(c.wait("echo").unwrap().id, second.id);
    assert_eq!(c.status(first.id).unwrap().name, None);
}
