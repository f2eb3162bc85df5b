//! The view over real HTTP connections (a plain `TcpStream` client): its routes on a running
//! pipeline, read-only, bounded in clients, a client that does not read costs the others
//! nothing, and plain HTTP off loopback refused. The page in a browser: `tests/browser/`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use offhost_engine::watch::{Look, One};
use offhost_engine::{EngineConfig, Pipeline, Registry};
use offhost_view::{View, ViewConfig, ViewError};

/// One request on a fresh connection; the status code and the body.
fn get(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    let code = r[9..12].parse().unwrap();
    let body = r
        .split_once("\r\n\r\n")
        .map(|x| x.1.to_string())
        .unwrap_or_default();
    (code, body)
}

fn view_of(text: &str, clients: usize) -> (View, Arc<One>, offhost_engine::Running) {
    let run = Pipeline::parse(text)
        .unwrap()
        .start(&Registry::with_builtins(), &EngineConfig::default())
        .unwrap();
    let one = Arc::new(One::default());
    one.set(Look::at(1, Some("test".into()), &run));
    let config = ViewConfig {
        clients,
        ..ViewConfig::new("127.0.0.1:0".parse().unwrap())
    };
    let view = View::start(&config, one.clone()).unwrap();
    (view, one, run)
}

#[test]
fn routes_answer_with_the_pipelines_shape_numbers_and_dot() {
    let (view, one, run) = view_of("fill bytes=64K >x:p(4,4K)\ncount <x\n", 16);
    let addr = view.addr();
    let (code, page) = get(addr, "GET", "/");
    assert_eq!(code, 200);
    assert!(page.contains("/view.js"));
    let (_, list) = get(addr, "GET", "/api/pipelines");
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list[0]["id"], 1);
    assert_eq!(list[0]["name"], "test");
    let stats = run.wait().unwrap();
    one.set(Look {
        phase: offhost_engine::watch::Phase::Finished,
        stats: stats.clone(),
        ..one_look(&one)
    });
    let (code, doc) = get(addr, "GET", "/api/pipelines/1");
    assert_eq!(code, 200);
    let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(doc["state"], "finished");
    assert_eq!(doc["shape"]["tasks"][1]["name"], "count");
    assert_eq!(doc["shape"]["queues"][0]["capacity"], 4);
    assert_eq!(doc["stats"]["tasks"][1]["bytes_in"], 65536);
    assert_eq!(
        serde_json::to_value(&stats).unwrap(),
        doc["stats"],
        "the statistics are the engine's, as a daemon's status says them"
    );
    let (_, dot) = get(addr, "GET", "/api/pipelines/1/dot");
    assert!(dot.contains("t0 -> t1"), "{dot}");
    assert_eq!(get(addr, "GET", "/api/pipelines/7").0, 404);
    assert_eq!(get(addr, "GET", "/api/pipelines/1/shown/0/none.png").0, 404);
    assert_eq!(get(addr, "GET", "/etc/passwd").0, 404);
    let (code, why) = get(addr, "POST", "/api/pipelines");
    assert_eq!(code, 405);
    assert!(why.contains("read-only"), "{why}");
}

fn one_look(one: &One) -> Look {
    use offhost_engine::watch::Watched;
    one.look(1).unwrap()
}

#[test]
fn push_channel_starts_with_everything_and_a_silent_reader_costs_others_nothing() {
    let (view, _one, run) = view_of("fill bytes=64K >x:p(4,4K)\ncount <x\n", 3);
    let addr = view.addr();
    // A client that opens the push channel and never reads.
    let mut silent = TcpStream::connect(addr).unwrap();
    write!(
        silent,
        "GET /api/events?pipeline=1 HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    .unwrap();
    // Another reads its first message: the list and the pipeline, whole.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET /api/events?pipeline=1 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let t0 = Instant::now();
    while !String::from_utf8_lossy(&got).contains("\n\n") && t0.elapsed() < Duration::from_secs(10)
    {
        let mut b = [0u8; 4096];
        let n = s.read(&mut b).unwrap();
        assert!(n > 0, "the push channel closed");
        got.extend_from_slice(&b[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    assert!(text.contains("text/event-stream"), "{text}");
    assert!(
        text.contains("\"pipeline/shape/tasks/1/name\":\"count\""),
        "{text}"
    );
    assert!(text.contains("\"pipelines/0/id\":1"), "{text}");
    // A third connection still gets answers; a fourth is over the bound.
    assert_eq!(get(addr, "GET", "/api/pipelines").0, 200);
    let _third = TcpStream::connect(addr).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let (code, why) = get(addr, "GET", "/api/pipelines");
    assert_eq!(code, 503);
    assert!(why.contains("at most 3 clients"), "{why}");
    drop(silent);
    run.wait().unwrap();
}

#[test]
fn plain_http_off_loopback_is_refused_naming_the_setting() {
    let config = ViewConfig::new("0.0.0.0:0".parse().unwrap());
    let e = View::start(&config, Arc::new(One::default()))
        .err()
        .expect("refused");
    assert!(matches!(e, ViewError::Insecure(..)), "{e}");
    assert!(
        e.to_string().contains("TLS with client certificates"),
        "{e}"
    );
}
