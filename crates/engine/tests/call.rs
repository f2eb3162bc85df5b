//! `call`: a task's client/server calls to a pipeline on another engine (a daemon on a real
//! TCP link), answers in order, whole across parts, and every way a server can answer wrong.

use std::time::Duration;

use offhost_engine::daemon::{Client, Daemon};
use offhost_engine::remote::{register, Links};
use offhost_engine::{EngineConfig, Files, Pipeline, Registry};
use offhost_link::Server;

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
    id: u64,
    out_pool: &str,
    requests: &[Vec<u8>],
) -> (Vec<Vec<u8>>, Result<(), String>) {
    call_each_with(url, id, out_pool, "", requests)
}

/// [`call_each`] with more arguments for `call`.
fn call_each_with(
    url: &str,
    id: u64,
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

#[test]
fn each_request_gets_its_answer_in_order_and_large_ones_cross_whole() {
    let (url, c) = server_engine();
    // The server passes each request back as its answer.
    let sub = c
        .submit("host-in name=svc whole=true >a:a(4,2M)\ncount <a >b\nhost-out name=svc whole=true <b\n")
        .unwrap();
    // Sizes around a link message (1 MiB: two parts) and a single byte.
    let sizes = [1usize, 100, 65536, (1 << 20) - 1, 1 << 20, 1_500_000, 7];
    let requests: Vec<Vec<u8>> = (0..40)
        .map(|i| {
            let n = sizes[i % sizes.len()];
            (0..n).map(|j| (j * 31 + i) as u8).collect()
        })
        .collect();
    let (answers, ended) = call_each(&url, sub.id, "ans(2,2M)", &requests);
    assert_eq!(ended, Ok(()));
    assert_eq!(answers.len(), requests.len());
    for (i, (a, r)) in answers.iter().zip(&requests).enumerate() {
        assert!(
            a == r,
            "answer {i}: {} bytes for a request of {}",
            a.len(),
            r.len()
        );
    }
    let v = c.wait(sub.id).unwrap();
    assert_eq!(v["state"], "finished", "{v}");
    assert_eq!(
        v["stats"]["tasks"][1]["report"],
        format!(
            "{} buffers, {} bytes",
            requests.len(),
            requests.iter().map(Vec::len).sum::<usize>()
        )
        .as_str()
    );
}

#[test]
fn an_answer_larger_than_the_output_buffers_names_the_limit_and_the_server_goes_on() {
    let (url, c) = server_engine();
    let sub = c
        .submit("host-in name=svc whole=true >a:a(4,64K)\nhost-out name=svc whole=true <a\n")
        .unwrap();
    let (answers, ended) = call_each(&url, sub.id, "ans(2,1000)", &[vec![5; 900], vec![6; 5000]]);
    assert_eq!(answers, [vec![5; 900]]);
    let e = ended.unwrap_err();
    assert!(
        e.contains("engine far") && e.contains("call 2") && e.contains("(1000 bytes)"),
        "{e}"
    );
    // The serving engine still serves.
    let again = c
        .submit("host-in name=svc whole=true >a:a(4,64K)\nhost-out name=svc whole=true <a\n")
        .unwrap();
    let (answers, ended) = call_each(&url, again.id, "ans(2,1000)", &[vec![1; 10]]);
    assert_eq!((answers, ended), (vec![vec![1; 10]], Ok(())));
}

#[test]
fn a_server_that_answers_wrong_fails_the_call_with_what_it_did() {
    let (url, c) = server_engine();
    let cases = [
        // No framing: the answer's first byte is not MORE or LAST.
        (
            "host-in name=svc whole=true >a:a(4,64K)\nhost-out name=svc <a\n",
            "starts with 9",
        ),
        // Answers ended before the first.
        (
            "host-in name=svc whole=true >a:a(4,64K)\nnull <a\nfill bytes=0 >z\nhost-out name=svc whole=true <z\n",
            "ended without answering",
        ),
        // Two answers for one call.
        (
            "host-in name=svc whole=true >a:a(4,64K)\nnull <a\nfill bytes=200 >z:z(2,100)\nhost-out name=svc whole=true <z\n",
            "an answer after the last of 1 calls",
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
    // No such pipeline: the daemon refuses the channels.
    let (_, ended) = call_each(&url, 999, "ans(2,64K)", &[vec![9; 10]]);
    let e = ended.unwrap_err();
    assert!(
        e.contains("engine far") && e.contains("no such pipeline"),
        "{e}"
    );
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
