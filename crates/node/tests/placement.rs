//! Splitting a placed pipeline into one part per engine: which engine runs what, the queues
//! between engines, the order of submission, free lists on both sides, and the errors.

use std::collections::HashMap;

use offhost_engine::lang::parse;
use offhost_engine::{Pipeline, Registry};
use offhost_node::placement::{plan, PlacementError};

fn engines(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn targets(list: &[(&str, &str, u64)]) -> HashMap<String, (String, u64)> {
    list.iter()
        .map(|(e, u, id)| (e.to_string(), (u.to_string(), *id)))
        .collect()
}

#[test]
fn a_chain_splits_into_parts_that_keep_their_lines() {
    let text = "fill bytes=1000 @a >x:p(4,4096)\ncount @b <x >y\n# a comment\ncrc32c <y @c\n";
    let p = plan(
        &parse(text).unwrap(),
        &engines(&["a", "b", "c"]),
        &Registry::with_builtins(),
    )
    .unwrap();
    assert_eq!(p.order(), ["c", "b", "a"]);
    let cross: Vec<_> = p
        .cross_queues()
        .iter()
        .map(|c| {
            (
                c.queue.as_str(),
                c.from.as_str(),
                c.to.as_str(),
                c.channel.as_str(),
            )
        })
        .collect();
    assert_eq!(cross, [("x", "a", "b", "x@a"), ("y", "b", "c", "y@b")]);
    let t = targets(&[("b", "tls:hb:7460", 7), ("c", "tls:hc:7460", 9)]);
    assert_eq!(
        p.text("a", &t).unwrap(),
        "fill bytes=1000 >x:p(4,4096)\n\n\n\nengine-out url=tls:hb:7460 pipeline=7 name=x@a engine=b <x\n"
    );
    // x's free list is written on the queue: b receives into one of the same shape.
    assert_eq!(
        p.text("b", &t).unwrap(),
        "\ncount <x >y\n\n\nhost-in name=x@a whole=true >x:p(4,4096)\nengine-out url=tls:hc:7460 pipeline=9 name=y@b engine=c <y\n"
    );
    // y has no free list of its own: c's is shaped like the one its buffers come from.
    assert_eq!(
        p.text("c", &t).unwrap(),
        "\n\n\ncrc32c <y\nhost-in name=y@b whole=true >y:y.from.b(4,4096)\n"
    );
    // Every part is a pipeline the engine accepts.
    let mut r = Registry::with_builtins();
    offhost_node::remote::register(&mut r, offhost_node::remote::Links::own(Default::default()));
    for e in p.order() {
        let part = p.text(e, &t).unwrap();
        Pipeline::parse(&part)
            .unwrap()
            .build(&r)
            .unwrap_or_else(|err| panic!("{e}: {err}\n{part}"));
    }
    assert_eq!(p.tasks_on("b"), "count (line 2)");
    assert_eq!(p.file_lines(), 4);
}

#[test]
fn unplaced_tasks_go_to_the_first_engine_and_local_queues_stay_local() {
    let text = "fill bytes=10 >x\ncount <x >y\ncrc32c @z <y\n";
    let p = plan(
        &parse(text).unwrap(),
        &engines(&["m", "z"]),
        &Registry::with_builtins(),
    )
    .unwrap();
    assert_eq!(p.order(), ["z", "m"]);
    assert_eq!(p.cross_queues().len(), 1);
    let m = p.text("m", &targets(&[("z", "tls:z:1", 1)])).unwrap();
    assert!(m.starts_with("fill bytes=10 >x\ncount <x >y\n"), "{m}");
    // fill allocates from its default free list: z receives into one of that shape.
    let z = p.text("z", &HashMap::new()).unwrap();
    assert!(
        z.contains("host-in name=y@m whole=true >y:y.from.m(16,65536)"),
        "{z}"
    );
    // One engine: the whole file, no queue between engines.
    let one = plan(
        &parse(text).unwrap(),
        &engines(&["z"]),
        &Registry::with_builtins(),
    )
    .unwrap();
    assert!(one.cross_queues().is_empty());
    assert_eq!(
        one.text("z", &HashMap::new()).unwrap(),
        "fill bytes=10 >x\ncount <x >y\ncrc32c <y\n"
    );
}

#[test]
fn values_that_need_quotes_keep_them() {
    let text = "fill bytes=10 @a >x\nwav-out \"out file.wav\" @b <x\n";
    let p = plan(
        &parse(text).unwrap(),
        &engines(&["a", "b"]),
        &Registry::with_builtins(),
    )
    .unwrap();
    let b = p.text("b", &HashMap::new()).unwrap();
    assert!(b.contains("wav-out \"out file.wav\" <x"), "{b}");
    assert_eq!(parse(&b).unwrap().tasks[0].args[0].value, "out file.wav");
}

#[test]
fn placements_that_cannot_work_say_why() {
    let r = Registry::with_builtins();
    let e = plan(
        &parse("fill bytes=1 @nowhere >x\nnull <x\n").unwrap(),
        &engines(&["a", "b"]),
        &r,
    )
    .unwrap_err();
    assert!(
        matches!(e, PlacementError::UnknownEngine { line: 1, .. }),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("@nowhere is not one of the engines given (a, b)"),
        "{e}"
    );
    // Queues that lead back to where they come from cannot be placed on any engines.
    let cycle = "count @a <z >x\ncount @b <x >z\n";
    let e = plan(&parse(cycle).unwrap(), &engines(&["a", "b"]), &r).unwrap_err();
    assert!(matches!(e, PlacementError::Cycle { .. }), "{e}");
    assert!(e.to_string().contains("(a cycle)"), "{e}");
    assert_eq!(
        plan(&parse("null <x\n").unwrap(), &[], &r).unwrap_err(),
        PlacementError::NoEngines
    );
}

#[test]
fn queues_between_engines_both_ways_split_an_engine_by_stage() {
    // a -> b -> a -> b: one part per engine would name each other's pipeline ids.
    let text = "fill bytes=1000 @a >x:p(4,4096)\ncount @b <x >y\ncount @a <y >z\ncrc32c @b <z\n";
    let p = plan(
        &parse(text).unwrap(),
        &engines(&["a", "b"]),
        &Registry::with_builtins(),
    )
    .unwrap();
    assert_eq!(p.order(), ["b+2", "a+2", "b", "a"]);
    assert_eq!(p.engine_of("a+2"), "a");
    assert_eq!(p.engine_of("b"), "b");
    let cross: Vec<_> = p
        .cross_queues()
        .iter()
        .map(|c| (c.from.as_str(), c.to.as_str(), c.channel.as_str()))
        .collect();
    assert_eq!(
        cross,
        [
            ("a", "b", "x@a"),
            ("b", "a+2", "y@b"),
            ("a+2", "b+2", "z@a+2")
        ]
    );
    let t = targets(&[
        ("b+2", "tls:hb:7460", 4),
        ("a+2", "tls:ha:7460", 3),
        ("b", "tls:hb:7460", 2),
    ]);
    // Every part is a pipeline the engine accepts, with the tasks of its stage only; the
    // engine named in engine-out is the engine, not the part.
    let mut r = Registry::with_builtins();
    offhost_node::remote::register(&mut r, offhost_node::remote::Links::own(Default::default()));
    for part in p.order() {
        let text = p.text(part, &t).unwrap();
        Pipeline::parse(&text)
            .unwrap()
            .build(&r)
            .unwrap_or_else(|err| panic!("{part}: {err}\n{text}"));
    }
    assert_eq!(
        p.text("a+2", &t).unwrap(),
        "\n\ncount <y >z\n\nhost-in name=y@b whole=true >y:y.from.b(4,4096)\nengine-out url=tls:hb:7460 pipeline=4 name=z@a+2 engine=b <z\n"
    );
    assert_eq!(p.tasks_on("a"), "fill (line 1)");
    assert_eq!(p.tasks_on("a+2"), "count (line 3)");
    // Without queues both ways, one part per engine as before.
    let one_way = "fill bytes=10 @a >x\ncount @a <x >y\ncrc32c @b <y\n";
    let q = plan(
        &parse(one_way).unwrap(),
        &engines(&["a", "b"]),
        &Registry::with_builtins(),
    )
    .unwrap();
    assert_eq!(q.order(), ["b", "a"]);
}

/// A file with a service on `b` and its caller on `a`.
const CALLED: &str = "host-in name=svc whole=true @b >q:q(4,64k)\ncrc32c @b <q >r\nhost-out name=svc whole=true @b <r\nrandom seed=7 bytes=3000 @a >req:req(4,1000)\ncall name=svc timeout=5 @a <req >ans:ans(4,1000)\ncrc32c @a <ans\n";

#[test]
fn a_call_of_the_files_own_service_on_another_engine_names_its_part() {
    let mut r = Registry::with_builtins();
    offhost_node::remote::register(&mut r, offhost_node::remote::Links::own(Default::default()));
    let p = plan(&parse(CALLED).unwrap(), &engines(&["a", "b"]), &r).unwrap();
    // The service goes first: the call names its pipeline id.
    assert_eq!(p.order(), ["b", "a"]);
    assert!(p.cross_queues().is_empty());
    assert_eq!(
        p.serving().get("b").map(Vec::as_slice),
        Some(&["svc".to_string()][..])
    );
    let t = targets(&[("b", "tls:hb:7460", 4)]);
    assert_eq!(
        p.text("a", &t).unwrap(),
        "\n\n\nrandom seed=7 bytes=3000 >req:req(4,1000)\ncall name=svc timeout=5 url=tls:hb:7460 pipeline=4 engine=b <req >ans:ans(4,1000)\ncrc32c <ans\n"
    );
    let b = p.text("b", &t).unwrap();
    assert!(
        b.starts_with("host-in name=svc whole=true >q:q(4,65536)\n"),
        "{b}"
    );
    // Both parts are pipelines an engine accepts; on one engine the call stays local.
    for text in [p.text("a", &t).unwrap(), b] {
        Pipeline::parse(&text).unwrap().build(&r).unwrap();
    }
    let one = plan(
        &parse(&CALLED.replace("@a", "@b")).unwrap(),
        &engines(&["b"]),
        &r,
    )
    .unwrap();
    assert!(one.serving().is_empty());
    assert!(one
        .text("b", &HashMap::new())
        .unwrap()
        .contains("call name=svc timeout=5 <req"));
}

#[test]
fn a_service_split_over_engines_or_beside_a_source_is_refused() {
    let r = Registry::with_builtins();
    let split = CALLED.replace(
        "host-out name=svc whole=true @b",
        "host-out name=svc whole=true @a",
    );
    let e = plan(&parse(&split).unwrap(), &engines(&["a", "b"]), &r).unwrap_err();
    assert!(
        matches!(e, PlacementError::SplitService { ref name, host_in: 1, host_out: 3 } if name == "svc"),
        "{e}"
    );
    let both = format!(
        "{CALLED}random seed=1 bytes=10 @b >z:z(2,10)\ncall name=svc @b <z >y\nnull @b <y\n"
    );
    let e = plan(&parse(&both).unwrap(), &engines(&["a", "b"]), &r).unwrap_err();
    assert!(
        e.to_string()
            .contains("called from its own engine (line 8) and from another (line 5)"),
        "{e}"
    );
    let beside = format!("{CALLED}fill bytes=10 @b >z\nnull @b <z\n");
    let e = plan(&parse(&beside).unwrap(), &engines(&["a", "b"]), &r).unwrap_err();
    assert!(
        e.to_string().contains("line 7: fill is a source on part b"),
        "{e}"
    );
}

#[test]
fn hooks_and_headroom_travel_with_their_queues() {
    let text = "fill bytes=10 @a >x:p(4,4k,headroom=96,tailroom=8)[put=log]\ncount @b <x[get=status] >y\nnull @b <y\n";
    let p = plan(
        &parse(text).unwrap(),
        &engines(&["a", "b"]),
        &Registry::with_builtins(),
    )
    .unwrap();
    let a = p.text("a", &HashMap::new()).unwrap();
    assert!(
        a.starts_with("fill bytes=10 >x:p(4,4096,headroom=96,tailroom=8)[put=log]\n"),
        "{a}"
    );
    let b = p.text("b", &HashMap::new()).unwrap();
    assert!(b.contains("count <x[get=status] >y\n"), "{b}");
    for part in [a, b] {
        let q = &parse(&part).unwrap().tasks[0];
        assert!(q
            .inputs
            .iter()
            .chain(&q.outputs)
            .any(|q| !q.hooks.is_empty()));
    }
}
