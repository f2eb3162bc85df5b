//! A task that asks to be woken at a time (`Context::wake_at`) is run then, with no buffer
//! to wake it.

use std::time::{Duration, Instant};

use offhost_engine::{
    Buffer, Context, EngineConfig, Pipeline, Registry, Status, Task, TaskError, TaskInfo,
};

/// Puts three buffers, each `GAP` after the one before, and sleeps nowhere: between them it
/// is blocked with no input, so only its alarm runs it again.
struct Ticker {
    next: Option<Instant>,
    sent: u8,
}

const GAP: Duration = Duration::from_millis(40);

impl Task for Ticker {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        let now = Instant::now();
        if self.next.is_none_or(|t| t <= now) {
            if self.sent == 3 {
                return Ok(Status::Done);
            }
            cx.put(0, Buffer::from_vec(vec![self.sent]));
            self.sent += 1;
            self.next = Some(now + GAP);
        }
        if let Some(t) = self.next {
            cx.wake_at(t);
        }
        Ok(Status::Blocked)
    }
}

#[test]
fn a_blocked_task_with_no_input_is_run_at_the_time_it_asked_for() {
    let mut r = Registry::with_builtins();
    r.register(
        TaskInfo::new("ticker", "three buffers, a gap apart")
            .inputs(0, 0)
            .outputs(1, 1),
        |_, _| {
            Ok(Box::new(Ticker {
                next: None,
                sent: 0,
            }))
        },
    );
    let cfg = EngineConfig {
        workers: 2,
        pin: false,
        batch: 16,
    };
    let mut run = Pipeline::parse("ticker >a\nhost-out name=out <a\n")
        .unwrap()
        .start(&r, &cfg)
        .unwrap();
    let out = run.host_output("out").unwrap();
    let mut at = Vec::new();
    for i in 0..3u8 {
        let b = out
            .recv_timeout(Duration::from_secs(20))
            .unwrap()
            .unwrap_or_else(|| panic!("buffer {i} never came: the task was not woken"));
        assert_eq!(&b[..], &[i]);
        at.push(Instant::now());
    }
    assert!(out.recv_timeout(Duration::from_secs(20)).unwrap().is_none());
    run.wait().unwrap();
    for w in at.windows(2) {
        // Not before its time (a late wake-up on a loaded machine is no error).
        assert!(
            w[1] - w[0] >= GAP - Duration::from_millis(5),
            "{:?}",
            w[1] - w[0]
        );
    }
}
