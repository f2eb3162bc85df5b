//! Pipelines that are valid syntax but absurd in size are refused before anything is
//! allocated, with errors that carry the limit (`OverLimit`); the daemon answers them (and
//! hosts past its limits) with an error, whose text names the limit and the `offhost engine`
//! flag that raises it, and goes on serving.

use std::sync::Arc;
use std::time::Duration;

use offhost_engine::{Budget, EngineConfig, Files, Pipeline, PipelineError, Registry};
use offhost_link::{ChannelOptions, Limits, Server, Session};
use offhost_node::daemon::{Client, Daemon, DaemonError, Reply, Status, Submitted};
use offhost_node::DaemonLimits;
use offhost_units::{Limit, OverLimit};

fn build(text: &str) -> Result<(), PipelineError> {
    Pipeline::parse(text)?
        .build(&Registry::with_builtins())
        .map(|_| ())
}

/// The limit `text` goes over when it is built.
fn over(text: &str) -> OverLimit {
    match build(text) {
        Err(e @ PipelineError::OverBudget { .. }) => {
            assert!(!e.to_string().contains("--"), "{e}");
            *OverLimit::find(&e).expect("the error's source")
        }
        Err(e) => panic!("{text:?}: not over the budget: {e}"),
        Ok(()) => panic!("{text:?} was accepted"),
    }
}

fn refused(text: &str, want: &str) {
    match build(text) {
        Err(e) => assert!(e.to_string().contains(want), "{text:?}: {e}"),
        Ok(()) => panic!("{text:?} was accepted"),
    }
}

/// The cases of issue 19: each aborted, panicked, wrapped or spun before.
#[test]
fn each_pipeline_bomb_is_an_error_naming_its_limit() {
    let pool_bytes = OverLimit::new(Limit::MaxPoolBytes, offhost_engine::DEFAULT_POOL_BYTES);
    assert_eq!(
        over("fill bytes=1k >a:p(1000000,1G)\nnull <a\n"),
        pool_bytes.asked(1_000_000u64 * ((1 << 30) + 128))
    );
    assert_eq!(
        over("fill bytes=1k >a:p(1000000000,1)\nnull <a\n"),
        pool_bytes.asked(1_000_000_000u64 * 129)
    );
    assert_eq!(
        over("fill bytes=1k >a:p(18446744073709551615,64)\nnull <a\n").limit,
        Limit::MaxPoolBytes
    );
    refused(
        "fill bytes=1k >a:p(2,18446744073709551615)\nnull <a\n",
        "more than 2^64 bytes",
    );
    assert_eq!(
        over("fill bytes=1k >a:p(100000,1)\nnull <a\n"),
        OverLimit::new(Limit::MaxBuffers, offhost_engine::DEFAULT_BUFFERS).asked(100_000u64)
    );
    refused(
        "fill bytes=1k >a\nrate from=4294967295 to=1 <a >b\nnull <b\n",
        "over the limit of 1048576 coefficients",
    );
    // 5,000 fill/null pairs (160 KB of text took 3.8 GB before).
    let pairs: String = (0..5000)
        .map(|i| format!("fill bytes=1 >q{i}\nnull <q{i}\n"))
        .collect();
    assert_eq!(
        over(&pairs),
        OverLimit::new(Limit::MaxTasks, offhost_engine::DEFAULT_TASKS).asked(10_000u64)
    );
    // Many small default pools: the sum counts.
    let pairs: String = (0..500)
        .map(|i| format!("fill bytes=1 >q{i}:p{i}(16,1M)\nnull <q{i}\n"))
        .collect();
    refused(&pairs, "with the free lists before it");
    assert_eq!(over(&pairs).limit, Limit::MaxPoolBytes);
}

#[test]
fn a_larger_budget_admits_what_the_default_refuses() {
    let text = "fill bytes=1k >a:p(100000,1)\nnull <a\n";
    let budget = Budget {
        buffers: 200_000,
        ..Budget::default()
    };
    let built = Pipeline::parse(text)
        .unwrap()
        .build_within(&Registry::with_builtins(), &Files::Ambient, &budget)
        .unwrap();
    assert_eq!(built.pool_bytes(), 100_000 * 129);
    let stats = built
        .try_start(&EngineConfig {
            workers: 1,
            pin: false,
            batch: 64,
        })
        .unwrap()
        .wait()
        .unwrap();
    assert!(stats.finished);
    // Workers past the budget.
    let e = Pipeline::parse(text)
        .unwrap()
        .build_within(&Registry::with_builtins(), &Files::Ambient, &budget)
        .unwrap()
        .try_start(&EngineConfig {
            workers: 65,
            pin: false,
            batch: 64,
        })
        .err()
        .expect("65 workers refused");
    assert_eq!(
        OverLimit::find(&e),
        Some(&OverLimit::new(Limit::MaxWorkers, 64u8).asked(65u8)),
        "{e}"
    );
}

#[test]
fn links_to_other_engines_past_the_budget_are_refused_before_any_opens() {
    // Each engine-out and each call with url= opens a link (a connection and a thread) when
    // it first runs; a pipeline that would open more than its budget is refused at build,
    // naming the first task over it. Nothing listens at the URL: nothing is reached.
    let mut r = Registry::with_builtins();
    offhost_node::remote::register(&mut r, offhost_node::remote::Links::own(Default::default()));
    let text = |n: usize| -> String {
        (0..n)
            .map(|i| {
                let task = match i % 2 {
                    0 => format!("engine-out url=tls:127.0.0.1:9 pipeline=1 name=q{i} <a{i}"),
                    _ => format!(
                        "call url=tls:127.0.0.1:9 pipeline=1 name=s <a{i} >b{i}\nnull <b{i}"
                    ),
                };
                format!("fill bytes=1 >a{i}\n{task}\n")
            })
            .collect()
    };
    let build = |n: usize, links: usize| {
        Pipeline::parse(&text(n))
            .unwrap()
            .build_within(
                &r,
                &Files::Ambient,
                &Budget {
                    links,
                    ..Budget::default()
                },
            )
            .map(drop)
    };
    build(3, 3).expect("three links within a budget of three");
    // Own calls open no link, and count for nothing.
    let own = "host-in name=svc whole=true >q:q(4,64)\nhost-out name=svc whole=true <q\nfill bytes=1 >a:a(1,1)\ncall name=svc <a >b\nnull <b\n";
    Pipeline::parse(own)
        .unwrap()
        .build_within(
            &r,
            &Files::Ambient,
            &Budget {
                links: 0,
                ..Budget::default()
            },
        )
        .expect("an own call within a budget of no links");
    let e = build(3, 2).unwrap_err();
    // The third link is the engine-out of line 7 (fill, engine-out; fill, call, null; fill, ...).
    assert!(
        matches!(e, PipelineError::OverBudget { line: 7, .. })
            && e.to_string().contains("more than 2 links"),
        "{e}"
    );
    assert_eq!(
        OverLimit::find(&e),
        Some(&OverLimit::new(Limit::MaxTaskLinks, 2u8).asked(3u8))
    );
    let e = build(65, offhost_engine::DEFAULT_LINKS).unwrap_err();
    assert_eq!(
        OverLimit::find(&e),
        Some(&OverLimit::new(Limit::MaxTaskLinks, 64u8).asked(65u8)),
        "{e}"
    );
}

fn daemon(limits: DaemonLimits, link: Limits) -> String {
    let mut server = Server::bind("tcp:127.0.0.1:0").expect("bind loopback");
    server.set_limits(link);
    let url = server.url().to_string();
    let d = Daemon::with_limits(
        Registry::with_builtins(),
        EngineConfig {
            workers: 1,
            pin: false,
            batch: 64,
        },
        limits,
    );
    let d2 = Arc::clone(&d);
    std::thread::spawn(move || d2.serve(&server));
    url
}

/// A daemon that holds 10 MiB of free lists at most, and a client of it.
fn holding_10_mib() -> (String, Client) {
    let limits = DaemonLimits {
        pool_bytes: 10 << 20,
        ..DaemonLimits::default()
    };
    let url = daemon(limits, Limits::default());
    let c = Client::connect(&url).unwrap();
    (url, c)
}

/// `text` submitted once the daemon has room for its free lists (refused for them until
/// then), within 30 s; else the test fails saying `what`.
fn admitted_within_30_s(c: &Client, text: &str, what: &str) -> offhost_node::daemon::Submitted {
    let t0 = std::time::Instant::now();
    loop {
        match c.submit(text) {
            Ok(s) => return s,
            Err(DaemonError::Refused(e)) if t0.elapsed() < Duration::from_secs(30) => {
                assert!(e.contains("--max-total-pool-bytes"), "{e}");
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

fn refusal(r: Result<offhost_node::daemon::Submitted, DaemonError>) -> String {
    match r {
        Err(DaemonError::Refused(e)) => e,
        Err(other) => panic!("expected a refusal, got {other}"),
        Ok(s) => panic!("accepted as pipeline {}", s.id),
    }
}

const GOOD: &str = "fill bytes=64k >a:p(4,4096)\ncrc32c <a\n";
/// Runs until its host closes the input.
const WAITS: &str = "host-in name=in >a:p(2,64)\nnull <a\n";

#[test]
fn the_daemon_answers_a_bomb_with_an_error_then_serves_a_good_pipeline() {
    let limits = DaemonLimits {
        text_bytes: 64 << 10,
        ..DaemonLimits::default()
    };
    let url = daemon(limits, Limits::default());
    let c = Client::connect(&url).unwrap();
    // A refusal is text for the client: the limit by its id, and the flag of the engine.
    let e = refusal(c.submit("fill bytes=1k >a:p(1000000,1G)\nnull <a\n"));
    assert!(
        e.contains("over the limit max_pool_bytes of 1073741824 bytes (the engine raises it with offhost engine --max-pool-bytes)"),
        "{e}"
    );
    let big: String = "# padding\n".repeat(10_000);
    let e = refusal(c.submit(&big));
    assert!(
        e.contains("over the limit max_text_bytes of 65536 bytes")
            && e.contains("--max-text-bytes"),
        "{e}"
    );
    let sub = c.submit(GOOD).unwrap();
    let v = c.wait(sub.id).unwrap();
    assert_eq!(v.state, "finished", "{v}");
}

#[test]
fn pipelines_past_the_daemons_limits_are_refused_and_others_served() {
    let limits = DaemonLimits {
        pipelines: 2,
        pool_bytes: 3 * 16 * (64 + 65536 + 64),
        ..DaemonLimits::default()
    };
    let url = daemon(limits, Limits::default());
    let c = Client::connect(&url).unwrap();
    let a = c.submit(WAITS).unwrap();
    let b = c.submit(WAITS).unwrap();
    let e = refusal(c.submit(WAITS));
    assert!(
        e.contains("runs 2 pipelines, over the limit max_pipelines of 2")
            && e.contains("offhost engine --max-pipelines"),
        "{e}"
    );
    // One finishes: room for the next.
    drop(c.open_input(a.id, "in").unwrap());
    c.wait(a.id).unwrap();
    let d = c.submit(WAITS).unwrap();
    // Free lists: two default pools of 16 x 64 KiB fit, three more do not.
    drop(c.open_input(b.id, "in").unwrap());
    drop(c.open_input(d.id, "in").unwrap());
    c.wait(b.id).unwrap();
    c.wait(d.id).unwrap();
    let e = refusal(c.submit(
        "fill bytes=1 >a\nfill bytes=1 >b\nfill bytes=1 >c\nfill bytes=1 >d\nnull <a <b <c <d\n",
    ));
    assert!(e.contains("--max-total-pool-bytes"), "{e}");
    let ok = c.submit(GOOD).unwrap();
    assert_eq!(c.wait(ok.id).unwrap().state, "finished");
}

#[test]
fn finished_pipelines_nobody_asked_about_count_against_the_free_list_limit() {
    // A pipeline's free list is 4 buffers of 1 MiB, and the daemon holds 10 MiB of free
    // lists at most: two pipelines fit, three do not.
    let (_, c) = holding_10_mib();
    // It finishes at once, its buffers waiting at an output nobody takes, and nobody asks
    // its status (before, such a pipeline held its free lists uncounted for ever: a client
    // submitting these in a loop took the daemon's memory without bound).
    let text = "fill bytes=4M >a:p(4,1M)\nhost-out name=out <a\n";
    let a = c.submit(text).unwrap();
    let b = c.submit(text).unwrap();
    // A third needs the room of the oldest finished one (it waits while the two still run).
    admitted_within_30_s(&c, text, "the third pipeline was never admitted");
    // One of the two finished ones let go of its free lists and its untaken output (the
    // oldest finished: the first, unless it still ran when the second had finished); the
    // other kept both. Before, both kept them, and the third took memory past the limit.
    let out = |id: u64| -> Result<usize, String> {
        match c
            .open_output(id, "out")
            .unwrap()
            .recv_wait(Duration::from_secs(20))
        {
            Ok(Some(m)) => Ok(m.len()),
            Ok(None) => Err("an empty stream".into()),
            Err(e) => Err(e.to_string()),
        }
    };
    let (oa, ob) = (out(a.id), out(b.id));
    let gone = |r: &Result<usize, String>| r.as_ref().is_err_and(|e| e.contains("ended"));
    let kept = |r: &Result<usize, String>| r.as_ref().is_ok_and(|n| *n > 0);
    assert!(
        (gone(&oa) && kept(&ob)) || (kept(&oa) && gone(&ob)),
        "first {oa:?}, second {ob:?}"
    );
    assert_eq!(c.wait(a.id).unwrap().state, "finished");
    assert_eq!(c.wait(b.id).unwrap().state, "finished");
}

#[test]
fn a_daemon_out_of_threads_refuses_the_channel_and_serves_the_next_host() {
    // Session threads and channel threads share a budget of 4: one host's session thread and
    // three of its control channels (each waits for requests on its thread); a fourth channel
    // finds none (before, the daemon panicked or the host saw only "control channel closed").
    let link = Limits {
        max_threads: 4,
        ..Limits::default()
    };
    let url = daemon(DaemonLimits::default(), link);
    let s = Session::connect(&url).unwrap();
    let held: Vec<_> = (0..3)
        .map(|_| s.open("control", ChannelOptions::default()).unwrap())
        .collect();
    let c = s.open("control", ChannelOptions::default()).unwrap();
    c.send(br#"{"op":"list"}"#).unwrap();
    match c.recv_wait(Duration::from_secs(20)) {
        Err(e) => assert!(e.to_string().contains("--max-threads"), "{e}"),
        Ok(m) => panic!("a fifth thread ran: {m:?}"),
    }
    drop(held);
    drop(s);
    // The daemon lives on: a new host is served once threads are back.
    served_within(&url, Duration::from_secs(30), "never served");
}

/// A new host's client, once the daemon at `url` serves one (a session and a control
/// channel, each a thread) within `within`; else the test fails saying `what`.
fn served_within(url: &str, within: Duration, what: &str) -> Client {
    let t0 = std::time::Instant::now();
    loop {
        match Client::connect(url).and_then(|c| c.list().map(|v| (c, v))) {
            Ok((c, _)) => return c,
            Err(e) => {
                assert!(t0.elapsed() < within, "{what}: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

#[test]
fn a_wait_whose_client_has_gone_frees_its_thread() {
    // A budget of 2 threads: one session's thread and one control channel's. The first host
    // submits a pipeline that runs until its input closes (nobody opens it), asks to wait for
    // it, and goes. Its wait must give its thread back: before, it held it until the pipeline
    // ended, so no other host was served.
    let link = Limits {
        max_threads: 2,
        ..Limits::default()
    };
    let url = daemon(DaemonLimits::default(), link);
    let s = Session::connect(&url).unwrap();
    let c = s.open("control", ChannelOptions::default()).unwrap();
    c.send(format!(r#"{{"op":"submit","text":{WAITS:?}}}"#).as_bytes())
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&c.recv().unwrap().unwrap()).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    let id = v["id"].as_u64().unwrap();
    c.send(format!(r#"{{"op":"wait","id":{id}}}"#).as_bytes())
        .unwrap();
    // The wait holds the thread while its host is there.
    assert!(matches!(
        c.recv_wait(Duration::from_millis(300)),
        Err(offhost_link::LinkError::Timeout)
    ));
    drop(c);
    drop(s);
    let other = served_within(
        &url,
        Duration::from_secs(10),
        "the gone host's wait still holds its thread",
    );
    assert_eq!(other.status(id).unwrap().state, "running");
    other.abort(id).unwrap();
}

#[test]
fn a_wait_whose_client_only_closed_its_side_still_gets_its_reply() {
    let url = daemon(DaemonLimits::default(), Limits::default());
    let s = Session::connect(&url).unwrap();
    let c = s.open("control", ChannelOptions::default()).unwrap();
    c.send(format!(r#"{{"op":"submit","text":{WAITS:?}}}"#).as_bytes())
        .unwrap();
    let Reply::Ok(Submitted { id, .. }) = Reply::from_wire(&c.recv().unwrap().unwrap()).unwrap()
    else {
        panic!("not submitted");
    };
    c.send(format!(r#"{{"op":"wait","id":{id}}}"#).as_bytes())
        .unwrap();
    c.close().unwrap();
    // The session carries frames in order: the daemon has read the close before the input
    // opens, so the pipeline ends after its wait has seen the close.
    let input = s
        .open(&format!("in/{id}/in"), ChannelOptions::default())
        .unwrap();
    input.send(b"x").unwrap();
    input.close().unwrap();
    let reply = c.recv_wait(Duration::from_secs(30)).unwrap().unwrap();
    let Reply::Ok(v) = Reply::<Status>::from_wire(&reply).unwrap() else {
        panic!("refused: {}", String::from_utf8_lossy(&reply));
    };
    assert_eq!(v.state, "finished", "{v}");
}

#[test]
fn free_lists_an_unread_output_still_holds_count_after_their_pipeline_ended() {
    // The daemon holds 10 MiB of free lists at most; a pipeline's is 8 buffers of 1 MiB.
    let (url, c) = holding_10_mib();
    let text = "fill bytes=8M >a:p(8,1M)\nhost-out name=out <a\n";
    let a = c.submit(text).unwrap();
    // A host takes the output and never reads it: the daemon's thread for the channel
    // holds the buffers that its window leaves unsent, after the pipeline has ended.
    let host = Session::connect(&url).unwrap();
    let unread = host
        .open(&format!("out/{}/out", a.id), ChannelOptions::default())
        .unwrap();
    // Its first message shows the daemon's thread has taken the output.
    let first = unread.recv_wait(Duration::from_secs(20)).unwrap();
    assert!(first.is_some_and(|m| !m.is_empty()));
    // Ended, and settled (the status of a finished pipeline lets go of what it holds).
    assert_eq!(c.wait(a.id).unwrap().state, "finished");
    // Its free list is still there, so a second does not fit. Before, it was let go of
    // from the count at the status, and each pipeline like it took 8 MiB past the limit.
    let e = refusal(c.submit(text));
    assert!(
        e.contains("--max-total-pool-bytes") && e.contains("held by ended pipelines"),
        "{e}"
    );
    // The host goes: the thread ends and lets the buffers go, and the next one fits.
    drop(unread);
    drop(host);
    let b = admitted_within_30_s(&c, text, "the free list was never let go");
    assert_eq!(c.wait(b.id).unwrap().state, "finished");
}

#[test]
fn an_output_whose_host_has_gone_frees_its_thread_while_the_pipeline_sends_nothing() {
    // A budget of 4 threads: the submitting client's session and control channel, and a
    // host's session and the output channel it opens. The pipeline sends nothing (it waits
    // for an input nobody opens). Before, the output's thread waited for its next buffer for
    // as long as that took, after its host had gone, and no other host was served.
    let link = Limits {
        max_threads: 4,
        ..Limits::default()
    };
    let url = daemon(DaemonLimits::default(), link);
    let c = Client::connect(&url).unwrap();
    let a = c
        .submit("host-in name=in >a:p(2,64)\nhost-out name=out <a\n")
        .unwrap();
    let host = Session::connect(&url).unwrap();
    let out = host
        .open(&format!("out/{}/out", a.id), ChannelOptions::default())
        .unwrap();
    assert!(matches!(
        out.recv_wait(Duration::from_millis(300)),
        Err(offhost_link::LinkError::Timeout)
    ));
    drop(out);
    drop(host);
    served_within(
        &url,
        Duration::from_secs(10),
        "the gone host's output still holds its thread",
    );
    c.abort(a.id).unwrap();
}

#[test]
fn a_service_that_has_ended_leaves_nothing_counted_against_the_free_list_limit() {
    // The daemon holds 10 MiB of free lists at most; the service's and the next pipeline's
    // are 8 buffers of 1 MiB each: the next fits only once nothing holds the service's.
    let (url, c) = holding_10_mib();
    let svc = c
        .submit("host-in name=svc whole=true >a:a(8,1M)\ncrc32c <a >b\nhost-out name=svc whole=true <b\n")
        .unwrap();
    let s = Session::connect(&url).unwrap();
    let call = s
        .open(&format!("call/{}/svc", svc.id), ChannelOptions::default())
        .unwrap();
    call.send(&[offhost_engine::LAST, 1, 2, 3]).unwrap();
    let answer = call.recv_wait(Duration::from_secs(20)).unwrap();
    assert_eq!(
        answer.as_deref(),
        Some(&[offhost_engine::LAST, 1, 2, 3][..])
    );
    call.close().unwrap();
    assert_eq!(call.recv_wait(Duration::from_secs(20)).unwrap(), None);
    c.stop(svc.id).unwrap();
    assert_eq!(c.wait(svc.id).unwrap().state, "finished");
    let next = c
        .submit("fill bytes=8M >a:p(8,1M)\nnull <a\n")
        .expect("the ended service's free lists are let go");
    assert_eq!(c.wait(next.id).unwrap().state, "finished");
}

/// A module channel (`module/NAME`) that breaks its protocol is refused naming what was
/// wrong: a header that is not `{"bytes": N}`, more bytes than announced, an end before them,
/// a name that is no name; one that keeps it is answered, and the daemon goes on serving.
#[test]
fn module_channels_that_break_their_protocol_are_refused_and_the_daemon_serves_on() {
    let url = daemon(DaemonLimits::default(), Limits::default());
    let s = Session::connect(&url).unwrap();
    let answer = |name: &str, msgs: &[&[u8]], close: bool| {
        let ch = s
            .open(&format!("module/{name}"), ChannelOptions::default())
            .unwrap();
        for m in msgs {
            ch.send(m).unwrap();
        }
        if close {
            ch.close().unwrap();
        }
        let reply = ch.recv_wait(Duration::from_secs(30)).unwrap().unwrap();
        String::from_utf8(reply).unwrap()
    };
    let e = answer("a", &[br#"{"size": 4}"#], false);
    assert!(e.contains("module a: header"), "{e}");
    let e = answer("b", &[br#"{"bytes": 4}"#, b"12345678"], false);
    assert!(e.contains("more than the 4 bytes announced"), "{e}");
    let e = answer("c", &[br#"{"bytes": 4}"#, b"12"], true);
    assert!(e.contains("ended after 2 of 4 bytes"), "{e}");
    let e = answer("no name", &[br#"{"bytes": 2}"#, b"ok"], false);
    assert!(e.contains("\"ok\":false"), "{e}");
    let ok = answer("d", &[br#"{"bytes": 2}"#, b"ok"], false);
    assert!(
        ok.contains("\"ok\":true") && ok.contains("\"bytes\":2"),
        "{ok}"
    );
    Client::connect(&url).unwrap().list().unwrap();
}

/// A peer's pipeline may not name the `status` hook (its buffers are outside every free list:
/// passed on to a queue nobody drains they would grow it without bound); a put hook and a
/// free list's headroom are within the budget like any other.
#[test]
fn a_daemon_refuses_the_status_hook_and_budgets_headroom() {
    let url = daemon(DaemonLimits::default(), Limits::default());
    let c = Client::connect(&url).unwrap();
    let e = refusal(c.submit("dup <st[get=status] >a >b\nnull <a\nnull <b\n"));
    assert!(e.contains("unknown get hook 'status'; known: none"), "{e}");
    let e = refusal(c.submit("fill bytes=1k >a:p(4,64,headroom=1G)\nnull <a\n"));
    assert!(e.contains("max_pool_bytes"), "{e}");
    let sub = c
        .submit("fill bytes=64k >a:p(4,4096,headroom=128)[put=log]\ncrc32c <a\n")
        .unwrap();
    assert_eq!(c.wait(sub.id).unwrap().state, "finished");
}
