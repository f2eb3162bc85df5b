//! Every class of pipeline error is reported before anything runs, with line and column.

use offhost_engine::{Pipeline, PipelineError, Registry};

fn check(text: &str) -> PipelineError {
    let reg = Registry::with_builtins();
    match Pipeline::parse(text).and_then(|p| p.build(&reg).map(|_| ())) {
        Ok(()) => panic!("pipeline was accepted:\n{text}"),
        Err(e) => e,
    }
}

#[test]
fn unknown_task_lists_known_ones() {
    let e = check("tone >a\nmixx <a >b\nnull <b\n");
    assert_eq!(e.position(), (2, 1));
    let msg = e.to_string();
    assert!(msg.contains("unknown task 'mixx'"), "{msg}");
    assert!(msg.contains("mix, mulaw"), "{msg}");
}

#[test]
fn queue_without_reader() {
    let e = check("tone >a\nmix <a >b\n");
    assert!(
        matches!(e, PipelineError::NoReader { ref queue, .. } if queue == "b"),
        "{e}"
    );
    assert_eq!(e.position(), (2, 9));
}

#[test]
fn queue_without_writer() {
    let e = check("tone >a\nmix <a >b\nnull <b <c\n");
    assert!(
        matches!(e, PipelineError::NoWriter { ref queue, .. } if queue == "c"),
        "{e}"
    );
    assert_eq!(e.position(), (3, 10));
}

#[test]
fn queue_with_two_readers() {
    let e = check("tone >a\nnull <a\nnull <a\n");
    assert!(
        matches!(e, PipelineError::TwoReaders { first: 2, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("use 'dup'"), "{e}");
}

#[test]
fn pool_with_too_few_buffers() {
    // mix reads buffers of 'p' and allocates from 'p': with one buffer it would wait forever.
    let e = check("tone >a:p(1,4096)\nmix <a >b:p\nnull <b\n");
    assert!(
        matches!(e, PipelineError::PoolTooSmall { ref pool, .. } if pool == "p"),
        "{e}"
    );
    assert_eq!(e.position(), (1, 9));
    assert!(e.to_string().contains("'mix' (line 2)"), "{e}");
    // Two buffers suffice.
    let reg = Registry::with_builtins();
    Pipeline::parse("tone >a:p(2,4096)\nmix <a >b:p\nnull <b\n")
        .unwrap()
        .build(&reg)
        .unwrap();
}

#[test]
fn pool_with_too_small_buffers() {
    let e = check("tone >a:p(8,8)\nnull <a\n");
    assert!(matches!(e, PipelineError::PoolTooSmall { .. }), "{e}");
    assert!(e.to_string().contains("needs at least 16"), "{e}");
}

#[test]
fn pool_declarations_must_agree() {
    let e = check("tone >a:p(8,4096)\nmix <a >b:p(4,4096)\nnull <b\n");
    assert!(matches!(e, PipelineError::PoolDeclaration { .. }), "{e}");
    assert_eq!(e.position(), (2, 11));
    let e = check("tone >a:p\nnull <a\n");
    assert!(e.to_string().contains("never given a size"), "{e}");
}

#[test]
fn cycle_is_reported() {
    let e = check("count <c >b\ndup <b >c >d\nnull <d\n");
    let PipelineError::Cycle { path, .. } = &e else {
        panic!("not a cycle error: {e}");
    };
    assert!(
        path.contains("count(line 1)") && path.contains("dup(line 2)"),
        "{path}"
    );
}

#[test]
fn bad_arguments_point_at_the_argument() {
    let e = check("tone freq=abc >a\nnull <a\n");
    assert_eq!(e.position(), (1, 6));
    assert!(e.to_string().contains("freq=abc"), "{e}");
    let e = check("tone frq=440 >a\nnull <a\n");
    assert!(
        e.to_string()
            .contains("unknown argument 'frq'; it takes: rate, channels, freq"),
        "{e}"
    );
    let e = check("wav >a\nnull <a\n");
    assert!(e.to_string().contains("missing argument path"), "{e}");
    let e = check("tone priority=urgent >a\nnull <a\n");
    assert!(
        e.to_string().contains("interrupt, normal or background"),
        "{e}"
    );
}

#[test]
fn wrong_number_of_ports() {
    let e = check("tone <x >a\nnull <a\ntone >x\n");
    assert!(matches!(e, PipelineError::Ports { .. }), "{e}");
    assert!(e.to_string().contains("takes 0 input"), "{e}");
}
