//! Queue hooks and free-list headroom written in the language (`q[put=H,get=H]`,
//! `free(count,size,headroom=N,tailroom=N)`): parsed, checked against the registry, and run.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use offhost_engine::{Buffer, EngineConfig, Pipeline, PipelineError, Registry};

fn cfg() -> EngineConfig {
    EngineConfig {
        workers: 2,
        pin: false,
        batch: 16,
    }
}

fn check(text: &str) -> PipelineError {
    match Pipeline::parse(text).and_then(|p| p.build(&Registry::with_builtins()).map(|_| ())) {
        Ok(()) => panic!("pipeline was accepted:\n{text}"),
        Err(e) => e,
    }
}

#[test]
fn a_put_hook_named_in_the_text_fires_on_the_empty_queue() {
    let kicks = Arc::new(AtomicUsize::new(0));
    let mut r = Registry::with_builtins();
    let k = Arc::clone(&kicks);
    r.register_put_hook("kick", "counts kicks", move |site| {
        assert_eq!(site.queue(), "a");
        let k = Arc::clone(&k);
        Arc::new(move || {
            k.fetch_add(1, Ordering::Relaxed);
        })
    });
    let text = "host-in name=in >a:p(4,64)[put=kick]\ncount <a >b\nhost-out name=out <b\n";
    let mut run = Pipeline::parse(text).unwrap().start(&r, &cfg()).unwrap();
    let (input, out) = (
        run.host_input("in").unwrap(),
        run.host_output("out").unwrap(),
    );
    for i in 0..3u8 {
        input.send(vec![i; 10]).unwrap();
        // One at a time: each lands on an empty queue.
        let b = out.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
        assert_eq!(&b[..], &[i; 10]);
    }
    drop(input);
    assert!(out.recv_timeout(Duration::from_secs(10)).unwrap().is_none());
    run.wait().unwrap();
    assert_eq!(kicks.load(Ordering::Relaxed), 3);
}

#[test]
fn a_queue_fed_by_its_get_hook_needs_no_writer_and_ends_when_it_returns_nothing() {
    let mut r = Registry::with_builtins();
    r.register_get_hook("three", "three buffers, then the end", |_| {
        let n = AtomicUsize::new(0);
        Arc::new(move || {
            let i = n.fetch_add(1, Ordering::Relaxed);
            (i < 3).then(|| Buffer::from_vec(vec![b'0' + i as u8]))
        })
    });
    let text = "count <s[get=three] >b\nhost-out name=out <b\n";
    let mut run = Pipeline::parse(text).unwrap().start(&r, &cfg()).unwrap();
    let out = run.host_output("out").unwrap();
    let mut got = Vec::new();
    while let Some(b) = out.recv_timeout(Duration::from_secs(10)).unwrap() {
        got.extend_from_slice(&b);
    }
    assert_eq!(got, b"012");
    let stats = run.wait().unwrap();
    assert_eq!(stats.tasks[0].buffers_in, 3);
}

#[test]
fn the_status_hook_hands_the_pipelines_statistics_as_json() {
    let text = "fill bytes=64k >a:p(4,16k)\ncount <a\nhead buffers=2 <st[get=status] >b\nhost-out name=out <b\n";
    let mut run = Pipeline::parse(text)
        .unwrap()
        .start(&Registry::with_builtins(), &cfg())
        .unwrap();
    let out = run.host_output("out").unwrap();
    let mut lines = Vec::new();
    while let Some(b) = out.recv_timeout(Duration::from_secs(10)).unwrap() {
        lines.push(b.to_vec());
    }
    run.wait().unwrap();
    assert_eq!(lines.len(), 2, "head passes two status lines");
    for l in &lines {
        assert_eq!(l.last(), Some(&b'\n'));
        let v: serde_json::Value = serde_json::from_slice(l).unwrap();
        let names: Vec<&str> = v["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["fill", "count", "head", "host-out"]);
        assert!(v["queues"]
            .as_array()
            .unwrap()
            .iter()
            .any(|q| q["name"] == "st"));
    }
}

#[test]
fn headroom_and_tailroom_written_on_a_free_list_shape_its_buffers() {
    let text = "host-in name=in >a:p(2,64,headroom=200,tailroom=0)\nhost-out name=out <a\n";
    let mut run = Pipeline::parse(text)
        .unwrap()
        .start(&Registry::with_builtins(), &cfg())
        .unwrap();
    let (input, out) = (
        run.host_input("in").unwrap(),
        run.host_output("out").unwrap(),
    );
    input.send(b"x".to_vec()).unwrap();
    let b = out.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
    assert_eq!(b.offset(), 200);
    let m = b.try_into_mut().expect("the only reference");
    assert_eq!(m.headroom(), 200);
    assert_eq!(m.remaining(), 63);
    assert_eq!(m.tailroom(), 63, "no tailroom beyond the data area");
    drop((m, input));
    run.wait().unwrap();
    // The budget counts the room: a headroom past it is refused before anything is allocated.
    let e = check("fill >a:p(2,64,headroom=1G)\nnull <a\n");
    assert!(matches!(e, PipelineError::OverBudget { .. }), "{e}");
    assert_eq!(e.position(), (1, 9));
}

#[test]
fn hook_errors_name_the_queue_the_hook_and_what_is_known() {
    let e = check("fill >a[put=kik]\nnull <a\n");
    assert_eq!(e.position(), (1, 9));
    let m = e.to_string();
    assert!(
        m.contains("queue 'a'") && m.contains("unknown put hook 'kik'; known: log"),
        "{m}"
    );
    let e = check("fill >a[get=log]\nnull <a\n").to_string();
    assert!(e.contains("unknown get hook 'log'; known: status"), "{e}");
    let e = check("fill >a[put=log]\nnull <a[put=other]\n");
    assert_eq!(e.position(), (2, 9));
    assert!(
        e.to_string().contains("has the put hook 'log' (line 1)"),
        "{e}"
    );
    // A put hook alone does not feed a queue: it still needs a writer.
    let e = check("null <a[put=log]\n");
    assert!(matches!(e, PipelineError::NoWriter { .. }), "{e}");
    let e = check("fill >a:p(2,64,headroom=8)\nnull <a\nfill >b:p(2,64)\nnull <b:p\n");
    assert!(
        e.to_string()
            .contains("headroom and tailroom (8, default) on line 1"),
        "{e}"
    );
}

#[test]
fn written_wrong_the_brackets_and_room_say_what_they_expected() {
    for (text, want, col) in [
        ("fill >a[pot=log]\n", "expected put= or get=", 9),
        ("fill >a[put=log,put=log]\n", "one put hook per queue", 17),
        ("fill >a[put=]\n", "a hook name", 13),
        ("fill >a[put=log\n", "',' or ']'", 16),
        ("fill >a:p(2,64,room=1)\n", "headroom= or tailroom=", 16),
        ("fill >a:p(2,64,headroom=1,headroom=2)\n", "once", 27),
        ("fill >a:p(2,64,headroom=x)\n", "a number of bytes", 25),
        ("fill >a:p(2,64;\n", "')' closing the free list", 15),
    ] {
        let e = Pipeline::parse(text).unwrap_err();
        let m = e.to_string();
        assert!(m.contains(want), "{text:?}: {m}");
        assert_eq!(e.position(), (1, col), "{text:?}: {m}");
    }
}
