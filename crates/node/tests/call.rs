//! `call`: a task's client/server calls to a pipeline on another engine (a daemon on a real
//! TCP link), answers in order and whole across parts, several callers sharing one service,
//! and every way a caller or a server can get it wrong.

use std::time::Duration;

use offhost_engine::{
    Args, Build, Context, EngineConfig, Files, Get, Pipeline, Registry, Status, Task, TaskError,
    TaskInfo,
};
use offhost_link::{Channel, Server};
use offhost_node::daemon::{Client, Daemon};
use offhost_node::remote::{register, Links};

const CONFIG: EngineConfig = EngineConfig {
    workers: 2,
    pin: false,
    batch: 64,
};

/// A daemon on loopback TCP: its URL and a client of it.
fn server_engine() -> (String, Client) {
    let server = Server::bind("tcp:127.0.0.1:0").expect("bind loopback");
    let url = server.url().to_string();
    let d = Daemon::with_files(Registry::with_builtins(), CONFIG, Files::Denied);
    std::thread::spawn(move || d.serve(&server));
    let c = Client::connect(&url).unwrap();
    (url, c)
}

/// The caller's registry: the built-in tasks and `engine-out`/`call` for any URL.
fn caller_registry() -> Registry {
    let mut r = Registry::with_builtins();
    register(&mut r, Links::own(Default::default()));
    r
}

/// Runs `call` in an embedded engine: each request through it, the answers it put out, and
/// how the caller's pipeline ended.
fn call_each(
    url: &str,
    id: impl std::fmt::Display,
    out_pool: &str,
    requests: &[Vec<u8>],
) -> (Vec<Vec<u8>>, Result<(), String>) {
    call_each_with(url, id, out_pool, "", requests)
}

/// [`call_each`] with more arguments for `call`.
fn call_each_with(
    url: &str,
    id: impl std::fmt::Display,
    out_pool: &str,
    args: &str,
    requests: &[Vec<u8>],
) -> (Vec<Vec<u8>>, Result<(), String>) {
    let text = format!(
        "host-in name=req >r:req(2,2M)\ncall url={url} pipeline={id} name=svc engine=far {args} <r >a:{out_pool}\nhost-out name=ans <a\n"
    );
    let mut run = Pipeline::parse(&text)
        .unwrap()
        .start(&caller_registry(), &CONFIG)
        .unwrap();
    let mut input = run.host_input("req").unwrap();
    let output = run.host_output("ans").unwrap();
    let reqs = requests.to_vec();
    let sender = std::thread::spawn(move || {
        for r in reqs {
            if input.send(r).is_err() {
                break;
            }
        }
        input.close();
    });
    let mut answers = Vec::new();
    while let Ok(Some(b)) = output.recv_timeout(Duration::from_secs(30)) {
        answers.push(b.to_vec());
    }
    sender.join().unwrap();
    let ended = run.wait().map(drop).map_err(|e| e.to_string());
    (answers, ended)
}

/// The echo service: each request back as its answer, through `count`.
const ECHO: &str =
    "host-in name=svc whole=true >a:a(4,2M)\ncount <a >b\nhost-out name=svc whole=true <b\n";

/// `n` requests of sizes around a link message (1 MiB: two parts) and a single byte, each
/// marked with `seed`.
fn requests(n: usize, seed: usize) -> Vec<Vec<u8>> {
    let sizes = [1usize, 100, 65536, (1 << 20) - 1, 1 << 20, 1_500_000, 7];
    (0..n)
        .map(|i| {
            let len = sizes[(i + seed) % sizes.len()];
            (0..len).map(|j| (j * 31 + i + seed) as u8).collect()
        })
        .collect()
}

/// Stops service `id` and checks it ended having passed `buffers` requests of `bytes`.
fn stop_and_count(c: &Client, id: u64, buffers: usize, bytes: usize) {
    c.stop(id).unwrap();
    let v = c.wait(id).unwrap();
    assert_eq!(v.state, "finished", "{v}");
    assert_eq!(
        v.stats.as_ref().unwrap().tasks[1].report.as_deref(),
        Some(format!("{buffers} buffers, {bytes} bytes").as_str())
    );
}

#[test]
fn each_request_gets_its_answer_in_order_and_large_ones_cross_whole() {
    let (url, c) = server_engine();
    let sub = c.submit(ECHO).unwrap();
    let reqs = requests(40, 0);
    let (answers, ended) = call_each(&url, sub.id, "ans(2,2M)", &reqs);
    assert_eq!(ended, Ok(()));
    assert_eq!(answers.len(), reqs.len());
    for (i, (a, r)) in answers.iter().zip(&reqs).enumerate() {
        assert!(
            a == r,
            "answer {i}: {} bytes for a request of {}",
            a.len(),
            r.len()
        );
    }
    // The service outlives its caller, until stopped.
    assert_eq!(c.status(sub.id).unwrap().state, "running");
    stop_and_count(&c, sub.id, 40, reqs.iter().map(Vec::len).sum());
}

#[test]
fn several_callers_share_one_service_and_each_gets_its_own_answers() {
    let (url, c) = server_engine();
    let sub = c.submit(ECHO).unwrap();
    let callers: Vec<_> = (0..3)
        .map(|k| {
            let url = url.clone();
            std::thread::spawn(move || {
                let reqs = requests(15, 100 * (k + 1));
                let (answers, ended) = call_each(&url, sub.id, "ans(2,2M)", &reqs);
                assert_eq!(ended, Ok(()), "caller {k}");
                assert!(answers == reqs, "caller {k}: answers not its requests");
                reqs.iter().map(Vec::len).sum::<usize>()
            })
        })
        .collect();
    let bytes: usize = callers.into_iter().map(|t| t.join().unwrap()).sum();
    stop_and_count(&c, sub.id, 45, bytes);
}

#[test]
fn what_a_caller_or_its_answers_get_wrong_fails_that_call_only() {
    let (url, c) = server_engine();
    let sub = c
        .submit("host-in name=svc whole=true >a:a(4,1000)\nhost-out name=svc whole=true <a\n")
        .unwrap();
    // An answer larger than the caller's output buffers.
    let (answers, ended) = call_each(&url, sub.id, "ans(2,100)", &[vec![5; 90], vec![6; 500]]);
    assert_eq!(answers, [vec![5; 90]]);
    let e = ended.unwrap_err();
    assert!(
        e.contains("engine far")
            && e.contains("call 2")
            && e.contains("output's free list (100 bytes)"),
        "{e}"
    );
    // A request larger than the service's host-in buffers: refused, nothing passed on.
    let (answers, ended) = call_each(&url, sub.id, "ans(2,64K)", &[vec![1; 10], vec![2; 5000]]);
    assert_eq!(answers, [vec![1; 10]]);
    let e = ended.unwrap_err();
    assert!(
        e.contains("call 2") && e.contains("host-in's free list (1000 bytes)"),
        "{e}"
    );
    // The service still serves.
    let (answers, ended) = call_each(&url, sub.id, "ans(2,64K)", &[vec![3; 1000]]);
    assert_eq!((answers, ended), (vec![vec![3; 1000]], Ok(())));
    c.stop(sub.id).unwrap();
    assert_eq!(c.wait(sub.id).unwrap().state, "finished");
}

#[test]
fn a_pipeline_that_cannot_serve_is_refused_with_why() {
    let (url, c) = server_engine();
    let cases = [
        // host-out without whole=true: no service.
        (
            "host-in name=svc whole=true >a:a(4,64K)\nhost-out name=svc <a\n",
            "both whole=true",
        ),
        // Its answers end before the first.
        (
            "host-in name=svc whole=true >a:a(4,64K)\nnull <a\nfill bytes=0 >z\nhost-out name=svc whole=true <z\n",
            "ended without answering",
        ),
    ];
    for (server, want) in cases {
        let sub = c.submit(server).unwrap();
        let (_, ended) = call_each(&url, sub.id, "ans(2,64K)", &[vec![9; 10]]);
        let e = ended.unwrap_err();
        assert!(
            e.contains("engine far") && e.contains(want),
            "{server}: {e}"
        );
    }
    let (_, ended) = call_each(&url, 999, "ans(2,64K)", &[vec![9; 10]]);
    let e = ended.unwrap_err();
    assert!(
        e.contains("engine far") && e.contains("no such pipeline"),
        "{e}"
    );
}

/// How a hostile server answers a request: the messages it sends back.
type Answers = fn(&[u8]) -> Vec<Vec<u8>>;

/// A server of our own that answers each call on `call/1/svc` as `answer` says (given the
/// request, the messages to send back), sends `after` once the caller is done, and ends the
/// channel after an answer whose last message is a `MORE` part.
fn hostile_server(answer: fn(&[u8]) -> Vec<Vec<u8>>, after: Option<Vec<u8>>) -> String {
    let server = Server::bind("tcp:127.0.0.1:0").expect("bind loopback");
    let url = server.url().to_string();
    std::thread::spawn(move || {
        let s = server.accept().unwrap();
        let ch: Channel = s.accept().unwrap();
        assert_eq!(ch.name(), "call/1/svc");
        let mut req = Vec::new();
        while let Ok(Some(m)) = ch.recv() {
            req.extend_from_slice(&m[1..]);
            if m[0] == 0 {
                let msgs = answer(&req);
                for a in &msgs {
                    if ch.send(a).is_err() {
                        return;
                    }
                }
                req.clear();
                // An answer left unfinished: the channel ends there.
                if msgs.last().is_some_and(|m| m.first() == Some(&1)) {
                    break;
                }
            }
        }
        if let Some(a) = after {
            let _ = ch.send(&a);
        }
        let _ = ch.close();
        // Keep the session until the caller has read it all.
        std::thread::sleep(Duration::from_secs(2));
    });
    url
}

#[test]
fn a_server_that_answers_wrong_fails_the_call_with_what_it_did() {
    let cases: [(Answers, Option<Vec<u8>>, &str); 4] = [
        (|r| vec![[&[9u8][..], r].concat()], None, "starts with 9"),
        (|_| vec![Vec::new()], None, "an empty message"),
        (
            |r| vec![[&[0u8][..], r].concat()],
            Some(vec![0, 7]),
            "an answer after the last of 1 calls",
        ),
        (|_| vec![vec![1, 1, 2]], None, "the answer was cut off"),
    ];
    for (answer, after, want) in cases {
        let url = hostile_server(answer, after);
        let (_, ended) = call_each(&url, 1, "ans(2,64K)", &[vec![4; 10]]);
        let e = ended.unwrap_err();
        assert!(e.contains("engine far") && e.contains(want), "{want}: {e}");
    }
}

#[test]
fn a_pipeline_from_outside_calls_over_tls_only() {
    let mut r = Registry::with_builtins();
    register(&mut r, Links::outside(Default::default()));
    for url in ["tcp:127.0.0.1:9", "unix:/tmp/x.sock"] {
        let e = Pipeline::parse(&format!(
            "fill bytes=10 >r\ncall url={url} pipeline=1 name=svc <r >a\nnull <a\n"
        ))
        .unwrap()
        .build(&r)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(e.contains("tls:"), "{url}: {e}");
    }
}

#[test]
fn a_call_without_an_answer_in_its_timeout_fails_and_timeouts_are_checked() {
    let (url, c) = server_engine();
    // Its answers would come from a host-in nobody opens: never.
    let sub = c
        .submit("host-in name=svc whole=true >a:a(4,64K)\nnull <a\nhost-in name=never >z:z(2,64)\nhost-out name=svc whole=true <z\n")
        .unwrap();
    let t0 = std::time::Instant::now();
    let (answers, ended) =
        call_each_with(&url, sub.id, "ans(2,64K)", "timeout=0.3", &[vec![1; 10]]);
    let e = ended.unwrap_err();
    assert!(answers.is_empty());
    assert!(
        e.contains("engine far")
            && e.contains("call 1")
            && e.contains("no answer within timeout=0.3"),
        "{e}"
    );
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    for bad in ["0", "-1", "abc", "inf", "NaN", "100000"] {
        let e = Pipeline::parse(&format!(
            "fill bytes=10 >r\ncall url=tcp:127.0.0.1:9 pipeline=1 name=svc timeout={bad} <r >a\nnull <a\n"
        ))
        .unwrap()
        .build(&caller_registry())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(e.contains("timeout") && e.contains("line 2"), "{bad}: {e}");
    }
}

#[test]
fn a_caller_whose_parts_are_not_whole_is_refused_and_the_service_goes_on() {
    let (url, c) = server_engine();
    let sub = c.submit(ECHO).unwrap();
    let session = offhost_link::Session::connect(&url).unwrap();
    let name = format!("call/{}/svc", sub.id);
    for bad in [&[9u8, 1, 2][..], &[]] {
        let ch = session.open(&name, Default::default()).unwrap();
        ch.send(bad).unwrap();
        let e = match ch.recv_wait(Duration::from_secs(10)) {
            Err(e) => e.to_string(),
            Ok(m) => panic!("{bad:?}: answered {m:?}"),
        };
        assert!(
            e.contains("starts with 9") || e.contains("an empty message"),
            "{bad:?}: {e}"
        );
    }
    let (answers, ended) = call_each(&url, sub.id, "ans(2,64K)", &[vec![4; 10]]);
    assert_eq!((answers, ended), (vec![vec![4; 10]], Ok(())));
    stop_and_count(&c, sub.id, 1, 10);
}

#[test]
fn a_service_that_answers_twice_is_stopped_before_an_answer_goes_astray() {
    let (url, c) = server_engine();
    // mu-law halves each request into buffers of 16 bytes: a request of 64 bytes is answered
    // with two buffers, one of 32 with one.
    let sub = c
        .submit("host-in name=svc whole=true >a:a(4,64K)\nmulaw <a >b:b(4,16)\nhost-out name=svc whole=true <b\n")
        .unwrap();
    let (answers, ended) = call_each(&url, sub.id, "ans(2,64K)", &[vec![0; 32]]);
    assert_eq!((answers.len(), ended), (1, Ok(())));
    // A caller gets the first buffer of its answer (the second one answers nobody)...
    let (answers, ended) = call_each(&url, sub.id, "ans(2,64K)", &[vec![0; 64]]);
    assert_eq!((answers.len(), ended), (1, Ok(())));
    // ... and the next caller is refused rather than handed it (it would be 16 bytes too,
    // but of 0s, where its own would be of 0x7f).
    let (answers, ended) = call_each(&url, sub.id, "ans(2,64K)", &[vec![0x7f; 32]]);
    let e = ended.unwrap_err();
    assert!(answers.is_empty(), "{answers:?}");
    assert!(
        e.contains("engine far")
            && (e.contains("more than one buffer") || e.contains("pipeline has ended")),
        "{e}"
    );
    let v = c.wait(sub.id).unwrap();
    assert_eq!(v.state, "failed", "{v}");
    assert!(
        v.error.as_deref().unwrap_or("").contains("out of step"),
        "{v}"
    );
}

#[test]
fn a_caller_that_goes_while_waiting_for_its_turn_is_let_go() {
    let (url, c) = server_engine();
    // mu-law keeps the odd byte of a one-byte request: the first call is never answered.
    let sub = c
        .submit("host-in name=svc whole=true >q:q(4,64)\nmulaw <q >z:z(2,64)\nhost-out name=svc whole=true <z\n")
        .unwrap();
    let s = offhost_link::Session::connect(&url).unwrap();
    let name = format!("call/{}/svc", sub.id);
    let open = || {
        s.open(&name, offhost_link::ChannelOptions::default())
            .unwrap()
    };
    let first = open();
    first.send(&[offhost_engine::LAST, 1]).unwrap();
    // Its request is in once mu-law has it: the first call holds the service.
    let t0 = std::time::Instant::now();
    while c.status(sub.id).unwrap().stats.unwrap().tasks[1].buffers_in != 1 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the first request never went in"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // A second caller waits in line behind it, then goes.
    let second = open();
    second.send(&[offhost_engine::LAST, 2]).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    second.close().unwrap();
    // The daemon lets it go: its channel ends (before, its thread waited for its turn for as
    // long as the first call took, here for ever).
    match second.recv_wait(Duration::from_secs(10)) {
        Ok(None) => {}
        other => panic!("the second caller's channel was kept: {other:?}"),
    }
    // The first still waits for its answer; ending the service by force ends it.
    assert!(matches!(
        first.recv_wait(Duration::from_millis(100)),
        Err(offhost_link::LinkError::Timeout)
    ));
    c.abort(sub.id).unwrap();
    match first.recv_wait(Duration::from_secs(20)) {
        Err(e) => assert!(e.to_string().contains("ended without answering"), "{e}"),
        Ok(m) => panic!("the first caller got {m:?}"),
    }
}

#[test]
fn a_caller_finds_a_service_by_its_name_across_restarts() {
    let (url, c) = server_engine();
    let first = c.submit_as(ECHO, Some("echo")).unwrap();
    let (answers, ended) = call_each(&url, "echo", "ans(2,64K)", &[vec![1; 10]]);
    assert_eq!((answers, ended), (vec![vec![1; 10]], Ok(())));
    stop_and_count(&c, first.id, 1, 10);
    // Started again under a new id: the same caller's text still reaches it.
    let second = c.submit_as(ECHO, Some("echo")).unwrap();
    assert_ne!(second.id, first.id);
    let (answers, ended) = call_each(&url, "echo", "ans(2,64K)", &[vec![2; 20], vec![3; 5]]);
    assert_eq!((answers, ended), (vec![vec![2; 20], vec![3; 5]], Ok(())));
    stop_and_count(&c, second.id, 2, 25);
    // A name nobody holds is refused; a malformed one is a build error naming the argument.
    let (_, ended) = call_each(&url, "nobody", "ans(2,64K)", &[vec![1]]);
    let e = ended.unwrap_err();
    assert!(
        e.contains("engine far") && e.contains("no such pipeline"),
        "{e}"
    );
    let e = Pipeline::parse(
        "fill bytes=10 >r\ncall url=tcp:127.0.0.1:9 pipeline=a/b name=svc <r >a\nnull <a\n",
    )
    .unwrap()
    .build(&caller_registry())
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(
        e.contains("pipeline") && e.contains("holds '/'") && e.contains("line 2"),
        "{e}"
    );
}

/// Runs `text` in an embedded engine with the caller's registry (`run_bounded`); how it
/// ended, with the report of the task on `line`.
fn run_whole(text: &str, line: usize) -> Result<String, String> {
    run_bounded(text, CONFIG.workers, &[line]).map(|mut r| r.remove(0))
}

/// A service and its caller in one file: the echo through `count`, called with 3000 bytes
/// of `random` in buffers of 1000, whose answers reach a CRC.
const OWN: &str = "host-in name=svc whole=true >q:q(4,64k)\ncount <q >r\nhost-out name=svc whole=true <r\nrandom seed=5 bytes=300000 >req:req(4,1000)\ncall name=svc <req >ans:ans(4,1000)\ncrc32c <ans\n";

#[test]
fn a_call_without_url_calls_its_own_pipelines_service() {
    let plain = run_whole(
        "random seed=5 bytes=300000 >req:req(4,1000)\ncrc32c <req\n",
        2,
    )
    .unwrap();
    assert_eq!(run_whole(OWN, 6), Ok(plain));
    // Several calls share one service.
    let two = format!(
        "{OWN}random seed=6 bytes=50000 >b:b(4,500)\ncall name=svc <b >c:c(2,500)\ncount <c\n"
    );
    assert_eq!(
        run_whole(&two, 2).as_deref(),
        Ok("400 buffers, 350000 bytes")
    );
    // Its host ports are the calls', not the host's.
    let built = Pipeline::parse(OWN)
        .unwrap()
        .build(&caller_registry())
        .unwrap();
    assert!(built.host_inputs().is_empty() && built.host_outputs().is_empty());
}

/// Starts `text` in an embedded engine of `workers` and waits for it at most a minute: the
/// report of each of `lines`, or the pipeline's error.
fn run_bounded(text: &str, workers: usize, lines: &[usize]) -> Result<Vec<String>, String> {
    let run = Pipeline::parse(text)
        .unwrap()
        .start(&caller_registry(), &EngineConfig { workers, ..CONFIG })
        .map_err(|e| e.to_string())?;
    assert!(
        run.wait_timeout(Duration::from_secs(60)),
        "still running after a minute: {text}"
    );
    let stats = run.wait().map_err(|e| e.to_string())?;
    Ok(lines
        .iter()
        .map(|&l| {
            let t = stats.tasks.iter().find(|t| t.line == l);
            t.and_then(|t| t.report.clone()).unwrap_or_default()
        })
        .collect())
}

#[test]
fn calls_of_one_service_take_turns_on_one_worker() {
    // Four callers, each with a stream of its own; one worker runs them and the service.
    let mut text = String::from(
        "host-in name=svc whole=true >q:q(4,64k)\ncount <q >r\nhost-out name=svc whole=true <r\n",
    );
    let mut want = vec!["400 buffers, 400000 bytes".to_string()];
    for i in 0..4 {
        text += &format!(
            "random seed={i} bytes=100000 >a{i}:a{i}(2,1000)\ncall name=svc <a{i} >b{i}:b{i}(2,1000)\ncrc32c <b{i}\n"
        );
        let plain = format!("random seed={i} bytes=100000 >a:a(2,1000)\ncrc32c <a\n");
        want.push(run_whole(&plain, 2).unwrap());
    }
    for workers in [1, 2] {
        let got = run_bounded(&text, workers, &[2, 6, 9, 12, 15]).unwrap();
        assert_eq!(got, want, "{workers} worker(s)");
    }
}

#[test]
fn an_own_call_fails_when_its_service_ends_or_keeps_its_answer_past_timeout() {
    // mu-law keeps the odd byte of a one-byte request for the next sample: no answer comes.
    let held = "host-in name=svc whole=true >q:q(4,64)\nmulaw <q >z:z(2,64)\nhost-out name=svc whole=true <z\nfill bytes=1 >r:r(1,1)\ncall name=svc timeout=0.3 <r >a:a(1,64)\nnull <a\n";
    let t0 = std::time::Instant::now();
    let e = run_bounded(held, 1, &[]).unwrap_err();
    assert!(
        e.contains("service svc of this pipeline: call 1: no answer within timeout=0.3"),
        "{e}"
    );
    assert!(
        t0.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t0.elapsed()
    );
    // A service that answers twice, with calls waiting in line: every call ends, the one
    // that finds the extra answer with why.
    let mut twice = String::from(
        "host-in name=svc whole=true >q:q(4,64k)\nmulaw <q >r:r(4,250)\nhost-out name=svc whole=true <r\n",
    );
    for i in 0..3 {
        twice += &format!(
            "random seed={i} bytes=100000 >a{i}:a{i}(2,1000)\ncall name=svc <a{i} >b{i}:b{i}(2,250)\nnull <b{i}\n"
        );
    }
    for workers in [1, 2] {
        let e = run_bounded(&twice, workers, &[]).unwrap_err();
        assert!(e.contains("more than one buffer"), "{e}");
    }
    // A service that ends after two answers: the third call is told so.
    let ends = OWN.replace("count <q >r", "head buffers=2 <q >r");
    let e = run_bounded(&ends, 2, &[]).unwrap_err();
    assert!(
        e.contains("service svc of this pipeline: call 3:")
            && (e.contains("ended without answering") || e.contains("no longer reads")),
        "{e}"
    );
}

#[test]
fn a_stopped_pipeline_drains_through_its_own_service() {
    let text = OWN.replace("bytes=300000", "bytes=100G");
    let run = Pipeline::parse(&text)
        .unwrap()
        .start(&caller_registry(), &CONFIG)
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    run.stop();
    let stats = run.wait().expect("a stop ends the calls, then the service");
    let count = |line: usize| {
        stats
            .tasks
            .iter()
            .find(|t| t.line == line)
            .unwrap()
            .bytes_in
    };
    // Every request the source put out was answered before the service ended.
    assert!(count(5) > 0);
    assert_eq!(count(2), count(5));
    assert_eq!(count(6), count(5));
}

#[test]
fn calls_of_an_own_service_that_cannot_serve_say_why() {
    let r = caller_registry();
    let build_error = |text: &str| {
        Pipeline::parse(text)
            .unwrap()
            .build(&r)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let line = |text: &str, line: usize, want: &str| {
        let e = build_error(text);
        assert!(
            e.contains(want) && e.contains(&format!("line {line}")),
            "{want}: {e}"
        );
    };
    line(
        "host-in name=svc whole=true >q:q(4,64k)\nnull <q\nrandom seed=1 bytes=10 >req:req(4,1000)\ncall name=svc <req >ans:ans(4,1000)\nhost-out name=svc whole=true <ans\n",
        4,
        "its answers flow into the service's own host-out (line 5)",
    );
    line(
        "host-in name=svc whole=true >q:q(4,64k)\ncall name=svc <q >r:r(4,64k)\nhost-out name=svc whole=true <r\n",
        2,
        "the call is part of the service it calls (after its host-in, line 1)",
    );
    for (text, want) in [
        (
            OWN.replace("host-out name=svc whole=true", "host-out name=svc"),
            "no host-in and host-out svc, both whole=true",
        ),
        (
            OWN.replace("call name=svc", "call name=other"),
            "no host-in and host-out other",
        ),
        (
            OWN.replace("call name=svc", "call url=tls:h:1 name=svc"),
            "url= and pipeline= go together",
        ),
        (
            OWN.replace("call name=svc", "call name=svc engine=b"),
            "engine= names another engine",
        ),
    ] {
        let e = build_error(&text);
        assert!(e.contains(want) && e.contains("line 5"), "{want}: {e}");
    }
    // A request larger than the service's buffers, and a service that answers twice.
    let big = OWN.replace("q:q(4,64k)", "q:q(4,100)");
    let e = run_whole(&big, 6).unwrap_err();
    assert!(
        e.contains("service svc of this pipeline: call 1: a request of 1000 bytes")
            && e.contains("(100 bytes)"),
        "{e}"
    );
    let twice = OWN
        .replace("count <q >r", "mulaw <q >r:r(4,250)")
        .replace("ans:ans(4,1000)", "ans:ans(4,250)");
    let e = run_whole(&twice, 6).unwrap_err();
    assert!(e.contains("more than one buffer"), "{e}");
}

#[test]
fn a_pipeline_that_a_stop_does_not_end_is_ended_by_force() {
    // A daemon whose pipelines may call.
    let server = Server::bind("tcp:127.0.0.1:0").expect("bind loopback");
    let url = server.url().to_string();
    let d = Daemon::with_files(caller_registry(), CONFIG, Files::Denied);
    std::thread::spawn(move || d.serve(&server));
    let c = Client::connect(&url).unwrap();
    // Its call waits for ever: mu-law holds the request's one byte for a second one that
    // never comes, and the call (with no timeout) keeps the service's host-in open.
    let sub = c
        .submit(
            "host-in name=svc whole=true >q:q(4,64)\nmulaw <q >z:z(2,64)\nhost-out name=svc whole=true <z\nfill bytes=1 >r:r(1,1)\ncall name=svc <r >a:a(1,64)\nnull <a\n",
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    c.stop(sub.id).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        c.status(sub.id).unwrap().state,
        "running",
        "a stop ended it"
    );
    let t0 = std::time::Instant::now();
    c.abort(sub.id).unwrap();
    let v = loop {
        let v = c.status(sub.id).unwrap();
        if v.state != "running" {
            break v;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "still running after being ended by force: {v}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(v.state, "failed", "{v}");
    assert!(
        v.error
            .as_deref()
            .unwrap_or("")
            .contains("ended by force: stopped with force"),
        "{v}"
    );
    // The daemon goes on serving.
    assert_eq!(
        c.submit("fill bytes=10 >x\nnull <x\n")
            .map(|s| s.id > sub.id)
            .ok(),
        Some(true)
    );
}

/// The names of the threads a `whose` task ran each buffer on.
type Whose = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// A pass-through that notes the name of the thread each buffer passed on.
struct WhoseTask(Whose);

impl Task for WhoseTask {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        loop {
            match cx.get(0) {
                Get::Buf(b) => {
                    let name = std::thread::current().name().unwrap_or("").to_string();
                    self.0.lock().unwrap().push(name);
                    cx.put(0, b);
                }
                Get::Empty => return Ok(Status::Blocked),
                Get::Closed => return Ok(Status::Done),
            }
        }
    }
}

/// Registry `r` with `whose`, which notes its threads in the list returned.
fn with_whose(mut r: Registry) -> (Registry, Whose) {
    let whose = Whose::default();
    let w = whose.clone();
    r.register(
        TaskInfo::new("whose", "notes the thread each buffer passed on")
            .inputs(1, 1)
            .outputs(1, 1),
        move |_: &Args, _: &mut Build<'_>| Ok(Box::new(WhoseTask(w.clone()))),
    );
    (r, whose)
}

/// How many of `names` are `name`, and all of them, for messages.
fn how_many(names: &Whose, name: &str) -> (usize, Vec<String>) {
    let names = names.lock().unwrap().clone();
    (names.iter().filter(|n| *n == name).count(), names)
}

/// Runs `f` on a thread held to one core, as the threads it starts are (so the engines it
/// starts count one CPU, where a helper wakes no worker).
fn on_one_core(f: impl FnOnce() + Send + 'static) {
    std::thread::spawn(move || {
        let core = core_affinity::get_core_ids()
            .and_then(|ids| ids.into_iter().next())
            .expect("a core to run on");
        assert!(core_affinity::set_for_current(core), "held to one core");
        f();
    })
    .join()
    .unwrap();
}

#[test]
fn a_services_tasks_run_on_the_thread_that_waits_for_its_answer() {
    on_one_core(a_service_answers_on_the_thread_that_waits);
}

fn a_service_answers_on_the_thread_that_waits() {
    let server = Server::bind("tcp:127.0.0.1:0").expect("bind loopback");
    let url = server.url().to_string();
    let (registry, whose) = with_whose(Registry::with_builtins());
    let d = Daemon::with_files(registry, CONFIG, Files::Denied);
    std::thread::spawn(move || d.serve(&server));
    let c = Client::connect(&url).unwrap();
    let sub = c
        .submit("host-in name=svc whole=true >a:a(4,64)\nwhose <a >b\nhost-out name=svc whole=true <b\n")
        .unwrap();
    let session = offhost_link::Session::connect(&url).unwrap();
    let ch = session
        .open(&format!("call/{}/svc", sub.id), Default::default())
        .unwrap();
    let calls = 10;
    for i in 0..calls {
        // The workers are asleep by now: the request wakes none of them, and the daemon's
        // thread runs the service's tasks itself.
        std::thread::sleep(Duration::from_millis(50));
        ch.send(&[offhost_engine::LAST, i]).unwrap();
        let answer = ch.recv_wait(Duration::from_secs(20)).unwrap().unwrap();
        assert_eq!(answer, [offhost_engine::LAST, i]);
    }
    // A worker that wakes on its own (every 200 ms) may take a turn first now and then, and
    // on more than one CPU a woken worker may come first.
    let (on_channel, names) = how_many(&whose, "offhost-daemon-channel");
    assert!(on_channel >= calls as usize - 2, "{names:?}");
    c.stop(sub.id).unwrap();
}

#[test]
fn a_callers_thread_runs_its_pipeline_between_answers() {
    on_one_core(a_caller_runs_its_pipeline_on_its_thread);
}

fn a_caller_runs_its_pipeline_on_its_thread() {
    let (url, c) = server_engine();
    let sub = c.submit(ECHO).unwrap();
    let (registry, whose) = with_whose(caller_registry());
    let text = format!(
        "host-in name=req >r:req(2,64)\ncall url={url} pipeline={} name=svc <r >a:ans(2,64)\nwhose <a >b\nhost-out name=ans <b\n",
        sub.id
    );
    let mut run = Pipeline::parse(&text)
        .unwrap()
        .start(&registry, &CONFIG)
        .unwrap();
    let mut input = run.host_input("req").unwrap();
    let output = run.host_output("ans").unwrap();
    let calls = 10u8;
    for i in 0..calls {
        std::thread::sleep(Duration::from_millis(50));
        input.send(vec![i]).unwrap();
        let b = output
            .recv_timeout(Duration::from_secs(20))
            .unwrap()
            .unwrap();
        assert_eq!(b.to_vec(), [i]);
    }
    input.close();
    assert!(output
        .recv_timeout(Duration::from_secs(20))
        .unwrap()
        .is_none());
    run.wait().unwrap();
    // The thread that received each answer handed it to the call and ran the task after it,
    // waking no worker for either.
    let (on_call, names) = how_many(&whose, "offhost-call");
    assert!(on_call >= calls as usize - 2, "{names:?}");
    stop_and_count(&c, sub.id, calls.into(), calls.into());
}
