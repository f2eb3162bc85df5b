//! The daemon's replies on the wire: typed replies write the bytes the daemon wrote when it
//! built them as JSON values, and replies of that form parse.

use offhost_engine::{EngineConfig, Registry, Stats};
use offhost_node::daemon::{
    Daemon, Keep, KeptBy, Listed, PipelineState, Pipelines, Reply, Status, Stopped, Submitted,
};
use serde_json::json;

/// Statistics as a daemon sent them (keys sorted, as a JSON value keeps them).
const STATS: &str = r#"{"elapsed_s":0.25,"finished":true,"pools":[],"queues":[],"tasks":[{"buffers_in":0,"buffers_out":3,"busy_ns":1000,"bytes_in":0,"bytes_out":12,"done":true,"line":1,"name":"tone","priority":"normal","report":null,"runs":4}]}"#;

fn stats() -> Stats {
    serde_json::from_str(STATS).unwrap()
}

/// `reply` on the wire is `want`, and `want` parses back to what writes it again.
fn pins<T>(reply: Reply<T>, want: &str)
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    assert_eq!(reply.to_wire(), want);
    let back = Reply::<T>::from_wire(want.as_bytes()).unwrap();
    assert_eq!(back.to_wire(), want);
}

#[test]
fn each_reply_writes_the_bytes_of_the_old_daemon() {
    let stats_v: serde_json::Value = serde_json::from_str(STATS).unwrap();
    assert_eq!(
        serde_json::to_string(&stats_v).unwrap(),
        STATS,
        "STATS is sorted"
    );
    let cases: Vec<(String, String)> = vec![
        (
            Reply::Ok(Submitted {
                id: 7,
                host_in: vec!["in".into()],
                host_out: vec!["out".into(), "log".into()],
                name: None,
            })
            .to_wire(),
            r#"{"host_in":["in"],"host_out":["out","log"],"id":7,"name":null,"ok":true}"#.into(),
        ),
        (
            Reply::Ok(Submitted {
                id: 8,
                host_in: vec![],
                host_out: vec![],
                name: Some("svc".into()),
            })
            .to_wire(),
            // What the old daemon built: json!({"ok": true, "id", "name", "host_in", "host_out"}).
            json!({"ok": true, "id": 8, "name": "svc", "host_in": [], "host_out": []})
                .to_string(),
        ),
        (
            Reply::Ok(Status {
                id: 3,
                name: None,
                state: PipelineState::Running,
                stats: Some(stats()),
                error: None,
                keep: Some(Keep {
                    by: KeptBy::Detached,
                    stops_in_s: Some(60.5),
                }),
            })
            .to_wire(),
            format!(
                r#"{{"id":3,"keep":{{"by":"detached","stops_in_s":60.5}},"name":null,"ok":true,"state":"running","stats":{STATS}}}"#
            ),
        ),
        (
            Reply::Ok(Status {
                id: 3,
                name: Some("svc".into()),
                state: PipelineState::Finished,
                stats: Some(stats()),
                error: None,
                keep: None,
            })
            .to_wire(),
            format!(
                r#"{{"error":null,"id":3,"name":"svc","ok":true,"state":"finished","stats":{STATS}}}"#
            ),
        ),
        (
            Reply::Ok(Status {
                id: 4,
                name: None,
                state: PipelineState::Failed,
                stats: None,
                error: Some("task 'x' (line 1) failed: no".into()),
                keep: None,
            })
            .to_wire(),
            json!({"ok": true, "id": 4, "name": null, "state": "failed", "stats": null,
                   "error": "task 'x' (line 1) failed: no"})
            .to_string(),
        ),
        (
            Reply::Ok(Stopped { id: 5 }).to_wire(),
            r#"{"id":5,"ok":true}"#.into(),
        ),
        (
            Reply::Ok(Pipelines {
                pipelines: vec![
                    Listed {
                        id: 1,
                        name: Some("echo".into()),
                        state: PipelineState::Finished,
                        keep: None,
                    },
                    Listed {
                        id: 2,
                        name: None,
                        state: PipelineState::Running,
                        keep: Some(Keep {
                            by: KeptBy::Submitter,
                            stops_in_s: None,
                        }),
                    },
                ],
            })
            .to_wire(),
            r#"{"ok":true,"pipelines":[{"id":1,"name":"echo","state":"finished"},{"id":2,"keep":{"by":"submitter"},"name":null,"state":"running"}]}"#.into(),
        ),
        (
            Reply::Ok(Pipelines { pipelines: vec![] }).to_wire(),
            r#"{"ok":true,"pipelines":[]}"#.into(),
        ),
        (
            Reply::<Stopped>::Refused("no pipeline 9".into()).to_wire(),
            r#"{"error":"no pipeline 9","ok":false}"#.into(),
        ),
    ];
    for (got, want) in cases {
        assert_eq!(got, want);
    }
}

#[test]
fn old_replies_parse_and_write_back_the_same() {
    pins::<Submitted>(
        Reply::Ok(Submitted {
            id: 1,
            host_in: vec![],
            host_out: vec!["out".into()],
            name: None,
        }),
        r#"{"host_in":[],"host_out":["out"],"id":1,"name":null,"ok":true}"#,
    );
    let running = format!(r#"{{"id":3,"name":null,"ok":true,"state":"running","stats":{STATS}}}"#);
    let Reply::Ok(s) = Reply::<Status>::from_wire(running.as_bytes()).unwrap() else {
        panic!("refused")
    };
    assert_eq!((s.id, s.state, s.error), (3, PipelineState::Running, None));
    assert_eq!(s.stats.unwrap().tasks[0].bytes_out, 12);
    let failed = r#"{"error":"task 'x' (line 1) failed: no","id":4,"name":"svc","ok":true,"state":"failed","stats":null}"#;
    let Reply::Ok(s) = Reply::<Status>::from_wire(failed.as_bytes()).unwrap() else {
        panic!("refused")
    };
    assert_eq!(s.state, PipelineState::Failed);
    assert_eq!(s.state, "failed");
    assert_eq!(s.name.as_deref(), Some("svc"));
    assert_eq!(s.error.as_deref(), Some("task 'x' (line 1) failed: no"));
    assert!(s.stats.is_none());
    assert_eq!(
        Reply::Ok(s).to_wire(),
        failed,
        "a parsed reply writes what it read"
    );
    // A stop's reply once was `{"ok":true}` alone (the module's table says so): a client
    // reading it needs no id.
    assert!(matches!(
        Reply::<serde::de::IgnoredAny>::from_wire(br#"{"ok":true}"#).unwrap(),
        Reply::Ok(_)
    ));
    // Refusals: the error, or "refused" when a reply names none.
    for (text, want) in [
        (r#"{"error":"no pipeline 9","ok":false}"#, "no pipeline 9"),
        (r#"{"ok":false}"#, "refused"),
        (r#"{}"#, "refused"),
    ] {
        match Reply::<Status>::from_wire(text.as_bytes()).unwrap() {
            Reply::Refused(e) => assert_eq!(e, want, "{text}"),
            Reply::Ok(s) => panic!("{text}: not refused but {s}"),
        }
    }
    // A reply that is not what its request gets is an error, not a guess.
    assert!(Reply::<Status>::from_wire(br#"{"ok":true,"id":1}"#).is_err());
    assert!(Reply::<Status>::from_wire(b"not json").is_err());
}

/// Replies a real daemon writes parse as their types and write back the same bytes.
#[test]
fn a_daemons_replies_round_trip_through_their_types() {
    let d = Daemon::new(Registry::with_builtins(), EngineConfig::default());
    let ask = |req: &str| d.answer(req.as_bytes());
    let sub = ask(r#"{"op":"submit","text":"tone seconds=0.05 >a\ncount <a\n","name":"t"}"#);
    let Reply::Ok(s) = Reply::<Submitted>::from_wire(sub.as_bytes()).unwrap() else {
        panic!("refused: {sub}")
    };
    assert_eq!(Reply::Ok(s.clone()).to_wire(), sub);
    let wait = ask(&format!(r#"{{"op":"wait","id":{}}}"#, s.id));
    let Reply::Ok(st) = Reply::<Status>::from_wire(wait.as_bytes()).unwrap() else {
        panic!("refused: {wait}")
    };
    assert_eq!(st.state, PipelineState::Finished, "{wait}");
    assert!(wait.starts_with(r#"{"error":null,"id":"#), "{wait}");
    assert_eq!(Reply::Ok(st).to_wire(), wait);
    let stop = ask(r#"{"op":"stop","id":"t"}"#);
    assert_eq!(stop, format!(r#"{{"id":{},"ok":true}}"#, s.id));
    let list = ask(r#"{"op":"list"}"#);
    assert_eq!(
        list,
        format!(
            r#"{{"ok":true,"pipelines":[{{"id":{},"name":"t","state":"finished"}}]}}"#,
            s.id
        )
    );
    let Reply::Ok(l) = Reply::<Pipelines>::from_wire(list.as_bytes()).unwrap() else {
        panic!("refused: {list}")
    };
    assert_eq!(Reply::Ok(l).to_wire(), list);
    assert_eq!(
        ask(r#"{"op":"status","id":99}"#),
        r#"{"error":"no pipeline 99","ok":false}"#
    );
}
