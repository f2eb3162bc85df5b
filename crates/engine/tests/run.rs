//! Running pipelines: host channels, end of stream, stop, failures, hooks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use offhost_engine::{Buffer, EngineConfig, HostError, Pipeline, Registry, RunError};

fn cfg(workers: usize) -> EngineConfig {
    EngineConfig {
        workers,
        pin: false,
        batch: 16,
    }
}

#[test]
fn host_bytes_round_trip_through_a_chain() {
    let text = "host-in name=in >a:p(4,1000)\ncount <a >b\ndup <b >c >d\ncrc32c <c >e\nnull <d\nhost-out name=out <e\n";
    for workers in [1, 3] {
        let mut run = Pipeline::parse(text)
            .unwrap()
            .start(&Registry::with_builtins(), &cfg(workers))
            .unwrap();
        let mut input = run.host_input("in").unwrap();
        let output = run.host_output("out").unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let sender = std::thread::spawn(move || {
            for chunk in data.chunks(3333) {
                input.send(chunk.to_vec()).unwrap();
            }
            input.close();
            data
        });
        let mut got = Vec::new();
        loop {
            match output.recv_timeout(Duration::from_secs(20)) {
                Ok(Some(b)) => {
                    assert!(b.len() <= 1000);
                    got.extend_from_slice(&b);
                }
                Ok(None) => break,
                Err(e) => panic!("no output: {e}"),
            }
        }
        let data = sender.join().unwrap();
        assert_eq!(got, data);
        let stats = run.wait().unwrap();
        let crc = stats.tasks.iter().find(|t| t.name == "crc32c").unwrap();
        assert_eq!(
            crc.report.as_deref(),
            Some(&*format!(
                "crc32c=0x{:08x} over 200000 bytes",
                crc32c::crc32c(&got)
            ))
        );
        // The pool never grew: every buffer is back.
        assert!(
            stats.pools.iter().all(|p| p.free == p.count),
            "{:?}",
            stats.pools
        );
    }
}

#[test]
fn stop_ends_an_endless_source_and_tears_down() {
    let text = "tone >a:p(8,4096)\nmix <a >b:q(8,4096)\ncount <b\n";
    let run = Pipeline::parse(text)
        .unwrap()
        .start(&Registry::with_builtins(), &cfg(2))
        .unwrap();
    // Let it run until some data has flowed, bounded in time.
    for _ in 0..200 {
        if run.stats().tasks[2].buffers_in > 10 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!run.is_finished());
    run.stop();
    let stats = run.wait().unwrap();
    assert!(stats.finished);
    assert!(stats.tasks.iter().all(|t| t.done));
    assert!(stats.tasks[2].buffers_in > 10);
    assert!(stats.pools.iter().all(|p| p.free == p.count));
}

#[test]
fn head_ends_the_stream_and_upstream_stops() {
    // An endless source; head's end abandons its input and the source finishes.
    let text = "tone >a:p(4,4000)\nhead bytes=10001 <a >b\ncount <b\n";
    let run = Pipeline::parse(text)
        .unwrap()
        .start(&Registry::with_builtins(), &cfg(2))
        .unwrap();
    assert!(
        run.wait_timeout(Duration::from_secs(30)),
        "pipeline did not finish"
    );
    let stats = run.wait().unwrap();
    assert_eq!(
        stats.tasks[2].report.as_deref(),
        Some("3 buffers, 10001 bytes")
    );
}

#[test]
fn missing_file_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.raw");
    let text = format!(
        "tone seconds=5 >a\nfile path={} <a\nwav path=/nonexistent/in.wav >b\nnull <b\n",
        out.display()
    );
    let run = Pipeline::parse(&text)
        .unwrap()
        .start(&Registry::with_builtins(), &cfg(2))
        .unwrap();
    assert!(
        run.wait_timeout(Duration::from_secs(30)),
        "pipeline did not stop"
    );
    match run.wait() {
        Err(RunError::TaskFailed {
            task,
            line,
            message,
            stats,
        }) => {
            assert_eq!((task.as_str(), line), ("wav", 3));
            assert!(message.contains("/nonexistent/in.wav"), "{message}");
            assert!(stats.tasks.iter().all(|t| t.done));
            // The healthy branch was stopped, flushed and closed: whole frames only.
            let written = std::fs::metadata(&out).unwrap().len();
            assert_eq!(written % 4, 0);
            assert!(written < 5 * 44100 * 4);
        }
        other => panic!("expected a task failure, got {other:?}"),
    }
}

#[test]
fn host_that_goes_away_does_not_hang_the_pipeline() {
    let text = "tone >a:p(4,4096)\nhost-out name=out <a\n";
    let mut run = Pipeline::parse(text)
        .unwrap()
        .start(&Registry::with_builtins(), &cfg(2))
        .unwrap();
    let out = run.host_output("out").unwrap();
    let first = out.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
    assert_eq!(first.len(), 4096);
    drop(first);
    drop(out);
    assert!(
        run.wait_timeout(Duration::from_secs(30)),
        "pipeline did not end after the host left"
    );
    run.wait().unwrap();
}

#[test]
fn host_input_after_end_reports_closed() {
    let text = "host-in name=in >a\nhead bytes=10 <a >b\nnull <b\n";
    let mut run = Pipeline::parse(text)
        .unwrap()
        .start(&Registry::with_builtins(), &cfg(1))
        .unwrap();
    let input = run.host_input("in").unwrap();
    input.send(vec![1u8; 100]).unwrap();
    assert!(run.wait_timeout(Duration::from_secs(30)));
    // host-in ended because head abandoned it; sends now fail instead of blocking.
    let mut closed = false;
    for _ in 0..(offhost_engine::HOST_IN_DEPTH + 2) {
        if input.send(vec![0u8; 1]) == Err(HostError::Closed) {
            closed = true;
            break;
        }
    }
    assert!(closed);
    run.wait().unwrap();
}

#[test]
fn put_and_get_hooks_fire() {
    let text = "host-in name=in >a:p(4,64)\ncount <a >b\nhost-out name=out <b\n";
    let mut built = Pipeline::parse(text)
        .unwrap()
        .build(&Registry::with_builtins())
        .unwrap();
    let kicks = Arc::new(AtomicUsize::new(0));
    let k = Arc::clone(&kicks);
    built
        .set_put_hook("a", move || {
            k.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
    let status_sent = Arc::new(AtomicUsize::new(0));
    let s = Arc::clone(&status_sent);
    built
        .set_get_hook("b", move || {
            (s.fetch_add(1, Ordering::Relaxed) == 0).then(|| Buffer::from_vec(b"status".to_vec()))
        })
        .unwrap();
    assert!(built.set_put_hook("zz", || {}).is_err());
    let mut run = built.start(&cfg(1));
    let input = run.host_input("in").unwrap();
    let out = run.host_output("out").unwrap();
    input.send(b"hello".to_vec()).unwrap();
    let mut got = Vec::new();
    while got.len() < 2 {
        got.push(out.recv_timeout(Duration::from_secs(10)).unwrap().unwrap());
    }
    let texts: Vec<&[u8]> = got.iter().map(|b| &b[..]).collect();
    assert!(
        texts.contains(&&b"status"[..]) && texts.contains(&&b"hello"[..]),
        "{texts:?}"
    );
    assert!(kicks.load(Ordering::Relaxed) >= 1);
    drop(input);
    assert!(matches!(
        out.recv_timeout(Duration::from_secs(10)),
        Ok(None)
    ));
    run.wait().unwrap();
}

#[test]
fn dup_shares_buffers_by_reference() {
    let text = "host-in name=in >a:p(2,64)\ndup <a >b >c\nhost-out name=x <b\nhost-out name=y <c\n";
    let mut run = Pipeline::parse(text)
        .unwrap()
        .start(&Registry::with_builtins(), &cfg(1))
        .unwrap();
    let input = run.host_input("in").unwrap();
    let (x, y) = (run.host_output("x").unwrap(), run.host_output("y").unwrap());
    input.send(b"abc".to_vec()).unwrap();
    let bx = x.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
    let by = y.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
    assert_eq!(bx.ref_count(), 2, "the two outputs hold the same storage");
    assert_eq!(&bx[..], &by[..]);
    assert_eq!(bx.offset(), by.offset());
    drop(input);
    drop((bx, by));
    assert!(matches!(x.recv_timeout(Duration::from_secs(10)), Ok(None)));
    run.wait().unwrap();
}

#[test]
fn tone_is_an_exact_sine_on_each_channel() {
    let text = "tone rate=8000 channels=2 freq=1000 freq2=3000 amp=0.5 seconds=2 >a:p(4,1000)\nhost-out name=o <a\n";
    let mut run = Pipeline::parse(text)
        .unwrap()
        .start(&Registry::with_builtins(), &cfg(1))
        .unwrap();
    let out = run.host_output("o").unwrap();
    let mut bytes = Vec::new();
    while let Some(b) = out.recv_timeout(Duration::from_secs(10)).unwrap() {
        bytes.extend_from_slice(&b);
    }
    run.wait().unwrap();
    assert_eq!(bytes.len(), 2 * 8000 * 4);
    for (n, f) in bytes.chunks_exact(4).enumerate() {
        for (c, freq) in [(0, 1000.0), (1, 3000.0)] {
            let got = i16::from_le_bytes([f[2 * c], f[2 * c + 1]]) as f64;
            let want =
                0.5 * 32767.0 * (2.0 * std::f64::consts::PI * freq * n as f64 / 8000.0).sin();
            assert!(
                (got - want).abs() <= 1.0,
                "frame {n} channel {c}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn interrupt_class_runs_before_background_on_one_worker() {
    let text = "fill bytes=64k priority=interrupt >hi:p(4,1k)\ncount priority=interrupt <hi\n\
                fill bytes=64k priority=background >lo:q(4,1k)\ncount priority=background <lo\n";
    let mut built = Pipeline::parse(text)
        .unwrap()
        .build(&Registry::with_builtins())
        .unwrap();
    let hi_puts = Arc::new(AtomicUsize::new(0));
    let seen_at_first_lo = Arc::new(AtomicUsize::new(usize::MAX));
    let h = Arc::clone(&hi_puts);
    built
        .set_put_hook("hi", move || {
            h.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    let (h, s) = (Arc::clone(&hi_puts), Arc::clone(&seen_at_first_lo));
    built
        .set_put_hook("lo", move || {
            let _ = s.compare_exchange(
                usize::MAX,
                h.load(Ordering::SeqCst),
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
        })
        .unwrap();
    let stats = built.start(&cfg(1)).wait().unwrap();
    // The put hook fires when a buffer lands on an empty queue. With one worker the interrupt
    // chain is always runnable until it ends, so no 'hi' kick may come after the first 'lo'
    // put (with a single FIFO class the sources would alternate batch by batch).
    let hi_total = stats.queues.iter().find(|q| q.name == "hi").unwrap().puts;
    assert_eq!(hi_total, 64);
    let at_first_lo = seen_at_first_lo.load(Ordering::SeqCst);
    let hi_kicks = hi_puts.load(Ordering::SeqCst);
    assert_eq!(
        at_first_lo, hi_kicks,
        "a background buffer was put while interrupt work remained"
    );
}

#[test]
fn no_lost_wakeups_with_tight_pools_and_many_workers() {
    // Two-buffer pools force constant waiting on pools and inputs across four workers; a lost
    // wake-up would hang the run, which the bounded wait turns into a failure.
    let mut text = String::from("fill bytes=2M >q0:p(2,64)\n");
    for i in 0..8 {
        text.push_str(&format!("count <q{i} >q{}\n", i + 1));
    }
    text.push_str("count <q8\n");
    for round in 0..5 {
        let run = Pipeline::parse(&text)
            .unwrap()
            .start(
                &Registry::with_builtins(),
                &EngineConfig {
                    workers: 4,
                    pin: false,
                    batch: 3,
                },
            )
            .unwrap();
        assert!(
            run.wait_timeout(Duration::from_secs(120)),
            "round {round} hung"
        );
        let stats = run.wait().unwrap();
        assert_eq!(
            stats.tasks[9].report.as_deref(),
            Some("32768 buffers, 2097152 bytes")
        );
    }
}

/// A task registered from outside the crate: prepends a 4-byte length header in the
/// buffer's headroom, without copying the payload when it holds the only reference.
struct Tag {
    copies: u64,
}

impl offhost_engine::Task for Tag {
    fn run(
        &mut self,
        cx: &mut offhost_engine::Context<'_>,
    ) -> Result<offhost_engine::Status, offhost_engine::TaskError> {
        use offhost_engine::{Get, Status};
        loop {
            match cx.get(0) {
                Get::Buf(b) => {
                    let len = (b.len() as u32).to_be_bytes();
                    let before = b.offset();
                    let tagged = match b.try_into_mut() {
                        Ok(mut m) => {
                            m.prepend(&len)
                                .map_err(|e| offhost_engine::TaskError::Failed(e.to_string()))?;
                            assert_eq!(
                                m.headroom(),
                                before - 4,
                                "the header went into the headroom"
                            );
                            m.freeze()
                        }
                        Err(shared) => {
                            self.copies += 1;
                            let mut v = len.to_vec();
                            v.extend_from_slice(&shared);
                            Buffer::from_vec(v)
                        }
                    };
                    cx.put(0, tagged);
                }
                Get::Empty => return Ok(Status::Blocked),
                Get::Closed => return Ok(Status::Done),
            }
        }
    }

    fn report(&self) -> Option<String> {
        Some(format!("{} copies", self.copies))
    }
}

#[test]
fn registered_task_prepends_headers_in_place() {
    let mut reg = Registry::with_builtins();
    reg.register(
        offhost_engine::TaskInfo::new("tag", "prepends a 4-byte big-endian length"),
        |_: &offhost_engine::Args, _: &mut offhost_engine::Build<'_>| {
            Ok(Box::new(Tag { copies: 0 }))
        },
    );
    let text = "host-in name=in >a:p(4,100)\ntag <a >b\nhost-out name=out <b\n";
    let mut run = Pipeline::parse(text).unwrap().start(&reg, &cfg(2)).unwrap();
    let input = run.host_input("in").unwrap();
    let out = run.host_output("out").unwrap();
    input.send(b"hello".to_vec()).unwrap();
    let b = out.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
    assert_eq!(&b[..], b"\0\0\0\x05hello");
    assert_eq!(
        b.pool_name(),
        Some("p"),
        "still the pool's buffer: no copy was made"
    );
    drop((input, b));
    assert!(matches!(
        out.recv_timeout(Duration::from_secs(10)),
        Ok(None)
    ));
    let stats = run.wait().unwrap();
    assert_eq!(stats.tasks[1].report.as_deref(), Some("0 copies"));
}

struct Boom;

impl offhost_engine::Task for Boom {
    fn run(
        &mut self,
        cx: &mut offhost_engine::Context<'_>,
    ) -> Result<offhost_engine::Status, offhost_engine::TaskError> {
        match cx.get(0) {
            offhost_engine::Get::Buf(_) => panic!("boom on the first buffer"),
            offhost_engine::Get::Empty => Ok(offhost_engine::Status::Blocked),
            offhost_engine::Get::Closed => Ok(offhost_engine::Status::Done),
        }
    }
}

#[test]
fn a_panicking_task_fails_the_pipeline_instead_of_hanging_it() {
    let mut reg = Registry::with_builtins();
    reg.register(
        offhost_engine::TaskInfo::new("boom", "panics").outputs(0, 0),
        |_: &offhost_engine::Args, _: &mut offhost_engine::Build<'_>| Ok(Box::new(Boom)),
    );
    let run = Pipeline::parse("tone >a\nboom <a\n")
        .unwrap()
        .start(&reg, &cfg(2))
        .unwrap();
    assert!(
        run.wait_timeout(Duration::from_secs(30)),
        "pipeline hung after a panic"
    );
    match run.wait() {
        Err(RunError::TaskFailed { task, message, .. }) => {
            assert_eq!(task, "boom");
            assert!(
                message.contains("panicked: boom on the first buffer"),
                "{message}"
            );
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}

/// Runs `text` whole on one engine and returns the report of its `crc32c` task.
fn crc_report(text: &str) -> String {
    let run = Pipeline::parse(text)
        .unwrap()
        .start(&Registry::with_builtins(), &cfg(2))
        .unwrap();
    let stats = run.wait().unwrap();
    let crc = stats.tasks.iter().find(|t| t.name == "crc32c").unwrap();
    crc.report.clone().unwrap()
}

#[test]
fn placements_change_nothing_when_one_engine_runs_the_file() {
    let plain = "fill bytes=100000 >a:p(4,4096)\ncount <a >b\ncrc32c <b\n";
    let placed = "fill bytes=100000 @source >a:p(4,4096)\ncount @middle <a >b\ncrc32c <b @sink\n";
    let spec = offhost_engine::lang::parse(placed).unwrap();
    let on: Vec<_> = spec
        .tasks
        .iter()
        .map(|t| t.engine.as_ref().unwrap().name.as_str())
        .collect();
    assert_eq!(on, ["source", "middle", "sink"]);
    let (a, b) = (crc_report(plain), crc_report(placed));
    assert!(a.ends_with("over 100000 bytes"), "{a}");
    assert_eq!(a, b);
}

#[test]
fn a_pipeline_starts_no_more_workers_than_tasks_that_do_work() {
    let start = |text: &str, workers: usize| {
        let run = Pipeline::parse(text)
            .unwrap()
            .start(&Registry::with_builtins(), &cfg(workers))
            .unwrap();
        let n = run.workers();
        run.stop();
        run.wait().unwrap();
        n
    };
    // Two tasks of normal class: two workers at most.
    assert_eq!(start("fill bytes=1M >x\nnull <x\n", 4), 2);
    assert_eq!(start("fill bytes=1M >x\nnull <x\n", 1), 1);
    // Interrupt-class tasks only pass buffers on: one worker for the pair.
    assert_eq!(start("host-in name=a >x\nhost-out name=b <x\n", 4), 1);
    // A task given interrupt priority counts as one that passes buffers on.
    assert_eq!(
        start(
            "fill bytes=1M >x\ncount priority=interrupt <x >y\nnull <y\n",
            4
        ),
        2
    );
    // A long chain gets what was asked.
    let mut chain = String::from("fill bytes=1M >q0\n");
    for i in 0..5 {
        chain.push_str(&format!("count <q{i} >q{}\n", i + 1));
    }
    chain.push_str("null <q5\n");
    assert_eq!(start(&chain, 3), 3);
}
