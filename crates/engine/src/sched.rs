//! The scheduler: a few worker threads run many tasks. The run queues (`runq.rs`) say which
//! tasks are runnable; this runs their turns, counts what they did, and ends them.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::context::{Context, Handoff, OUT_COUNTS};
use crate::runq::{RunQueues, RunTask, Waker};
pub(crate) use crate::slot::{TaskSlot, TaskStats};
use crate::task::{Status, Task, TaskError};
use crate::task_state;

/// Turns a panic payload into a task error.
fn panicked(p: &(dyn std::any::Any + Send)) -> TaskError {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown payload".into());
    TaskError::Failed(format!("panicked: {msg}"))
}

/// The first task failure of a pipeline.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub(crate) task: String,
    pub(crate) line: usize,
    pub(crate) message: String,
}

pub(crate) struct Shared {
    pub(crate) tasks: Vec<TaskSlot>,
    /// Which tasks are runnable, and the workers' sleep.
    pub(crate) queues: Arc<RunQueues>,
    live: AtomicUsize,
    /// Set once every task has finished; shared with those who wait for that without
    /// holding the pipeline ([`Done`]).
    done: Arc<Done>,
    /// Why the pipeline was ended by force ([`Shared::abort`]), once it was.
    aborted: std::sync::OnceLock<String>,
    pub(crate) failure: Mutex<Option<Failure>>,
    /// Each failed task's error, by task (written as it finishes; read by statistics).
    errors: Mutex<Vec<(usize, String)>>,
    batch: usize,
}

impl Shared {
    pub(crate) fn new(tasks: Vec<TaskSlot>, batch: usize) -> Arc<Shared> {
        let n = tasks.len();
        let queues = Arc::new(RunQueues::new(tasks.iter().map(|t| t.prio as u8).collect()));
        let s = Arc::new(Shared {
            tasks,
            queues,
            live: AtomicUsize::new(n),
            done: Arc::new(Done {
                finished: Mutex::new(n == 0),
                cv: Condvar::new(),
            }),
            aborted: std::sync::OnceLock::new(),
            failure: Mutex::new(None),
            errors: Mutex::new(Vec::new()),
            batch: batch.max(1),
        });
        let runner: Weak<dyn RunTask> = Arc::downgrade(&s) as Weak<dyn RunTask>;
        s.queues.set_runner(runner);
        s
    }

    /// A waker of task `id`.
    pub(crate) fn waker(&self, id: usize) -> Waker {
        self.queues.waker(id)
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.queues.is_finished()
    }

    /// Makes task `id` runnable if it is not already.
    pub(crate) fn wake(&self, id: usize) {
        self.queues.wake(id);
    }

    /// Whether task `id` has finished.
    pub(crate) fn task_done(&self, id: usize) -> bool {
        task_state::is_done(self.queues.state(id))
    }

    /// A snapshot of every task's counters (with their reports while they run, when
    /// `live_report`: see `TaskSlot::stats`).
    pub(crate) fn task_stats(&self, live_report: bool) -> Vec<TaskStats> {
        let errors = self
            .errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let error = |id| errors.iter().find(|e| e.0 == id).map(|e| e.1.clone());
        (self.tasks.iter().enumerate())
            .map(|(id, t)| t.stats(self.task_done(id), live_report, error(id)))
            .collect()
    }

    /// Stops the sources: each ends its stream on its next turn, and end of stream flows
    /// down the graph.
    pub(crate) fn request_stop(&self) {
        self.queues.set_stop();
        for (id, t) in self.tasks.iter().enumerate() {
            if t.stops() {
                self.wake(id);
            }
        }
    }

    /// Ends the pipeline by force, for one that a stop does not end (a task waiting for
    /// something that never comes): every task fails on its next turn with "ended by force:
    /// `why`", which drops it, and each task is woken for that turn. A task cannot be
    /// interrupted within a turn; tasks end their turns when they would wait.
    pub(crate) fn abort(&self, why: &str) {
        let _ = self.aborted.set(why.to_string());
        self.request_stop();
        for id in 0..self.tasks.len() {
            self.wake(id);
        }
    }

    pub(crate) fn run_worker(&self) {
        loop {
            if let Some(id) = self.queues.pop() {
                self.run_task(id);
                continue;
            }
            if !self.queues.idle() {
                return;
            }
        }
    }

    fn run_task(&self, id: usize) {
        let slot = &self.tasks[id];
        let state = self.queues.state(id);
        if !task_state::start(state) {
            return; // done meanwhile
        }
        let mut body = slot.body.lock().unwrap_or_else(|e| e.into_inner());
        let Some(task) = body.as_mut() else {
            return;
        };
        let t0 = Instant::now();
        let ends = (self.queues.stopping() && slot.stops())
            || (!slot.outputs.is_empty() && slot.outputs.iter().all(|q| q.is_abandoned()));
        let result = if let Some(why) = self.aborted.get() {
            Err(TaskError::Failed(format!("ended by force: {why}")))
        } else if ends {
            Ok(Status::Done)
        } else {
            let mut cx = Context {
                queues: &self.queues,
                name: &slot.name,
                inputs: &slot.inputs,
                outputs: &slot.outputs,
                pools: &slot.pools,
                alarm: &slot.alarm,
                id,
                budget: self.batch,
                yielded: false,
                bufs_in: 0,
                bytes_in: 0,
                bufs_out: 0,
                bytes_out: 0,
                out_counts: [(0, 0); OUT_COUNTS],
                handoff: Handoff::None,
            };
            // A panicking task fails like one returning an error: the pipeline drains and
            // ends instead of hanging with a dead worker.
            let r = std::panic::catch_unwind(AssertUnwindSafe(|| task.run(&mut cx)))
                .unwrap_or_else(|p| Err(panicked(p.as_ref())));
            for (q, &(puts, bytes)) in slot.outputs.iter().zip(&cx.out_counts) {
                if puts > 0 {
                    q.add_counts(puts, bytes);
                }
            }
            let c = &slot.counters;
            c.bufs_in.fetch_add(cx.bufs_in, Ordering::Relaxed);
            c.bytes_in.fetch_add(cx.bytes_in, Ordering::Relaxed);
            c.bufs_out.fetch_add(cx.bufs_out, Ordering::Relaxed);
            c.bytes_out.fetch_add(cx.bytes_out, Ordering::Relaxed);
            let r = match r {
                Ok(Status::Blocked) if cx.yielded => Ok(Status::Progress),
                r => r,
            };
            if let Handoff::Pending(reader) = cx.handoff {
                if matches!(r, Ok(Status::Progress)) {
                    // This worker goes on with the writer: another runs the reader.
                    self.wake(reader);
                } else {
                    self.queues.wake_here(reader);
                }
            }
            r
        };
        slot.counters.runs.fetch_add(1, Ordering::Relaxed);
        match result {
            Ok(Status::Progress) => {
                drop(body);
                slot.counters.add_busy(t0);
                task_state::requeue(state);
                self.queues.push(id);
            }
            Ok(Status::Blocked) => {
                drop(body);
                slot.counters.add_busy(t0);
                if task_state::park(state) {
                    // NOTIFIED while running: run again.
                    self.queues.push(id);
                }
            }
            Ok(Status::Done) => self.finish(id, body, None, t0),
            Err(e) => self.finish(id, body, Some(e), t0),
        }
    }

    fn finish(
        &self,
        id: usize,
        mut body: std::sync::MutexGuard<'_, Option<Box<dyn Task>>>,
        err: Option<TaskError>,
        t0: Instant,
    ) {
        let slot = &self.tasks[id];
        let mut task = body.take().expect("a running task has a body");
        let fin = std::panic::catch_unwind(AssertUnwindSafe(|| task.finish()))
            .unwrap_or_else(|p| Err(panicked(p.as_ref())));
        *slot.report.lock().unwrap_or_else(|e| e.into_inner()) = task.report();
        drop(task);
        task_state::finish(self.queues.state(id));
        drop(body);
        slot.counters.add_busy(t0);
        if let Some(e) = err.or(fin.err()) {
            tracing::warn!(task = %slot.name, line = slot.line, error = %e, "task failed");
            (self.errors.lock().unwrap_or_else(|e| e.into_inner())).push((id, e.to_string()));
            let mut f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
            if f.is_none() {
                *f = Some(Failure {
                    task: slot.name.clone(),
                    line: slot.line,
                    message: e.to_string(),
                });
            }
            drop(f);
            self.request_stop();
        }
        for q in &slot.outputs {
            if q.close_writer() {
                self.wake(q.reader);
            }
        }
        for q in &slot.inputs {
            q.abandon();
            for &w in &q.writers {
                self.wake(w);
            }
        }
        // Ordering: AcqRel: the last task's decrement acquires every other task's finish (their
        // Release halves); the Release store of `finished` then publishes all of it to
        // `RunQueues::is_finished`'s Acquire.
        if self.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.queues.set_finished();
            let mut d = self.done.finished.lock().unwrap_or_else(|e| e.into_inner());
            *d = true;
            self.done.cv.notify_all();
        }
    }

    /// Waits until every task has finished, or `timeout` passes; returns whether finished.
    pub(crate) fn wait_finished(&self, timeout: Option<Duration>) -> bool {
        self.done.wait(timeout)
    }

    /// What says when every task has finished, without holding the pipeline.
    pub(crate) fn done(&self) -> Arc<Done> {
        Arc::clone(&self.done)
    }
}

/// Whether every task of a pipeline has finished. It holds nothing of the pipeline, so that
/// a thread waiting for it does not keep the pipeline's memory.
pub(crate) struct Done {
    finished: Mutex<bool>,
    cv: Condvar,
}

impl Done {
    /// Waits until every task has finished, or `timeout` passes; returns whether finished.
    pub(crate) fn wait(&self, timeout: Option<Duration>) -> bool {
        let mut d = self.finished.lock().unwrap_or_else(|e| e.into_inner());
        let deadline = timeout.map(|t| Instant::now() + t);
        while !*d {
            match deadline {
                None => d = self.cv.wait(d).unwrap_or_else(|e| e.into_inner()),
                Some(dl) => {
                    let now = Instant::now();
                    if now >= dl {
                        return false;
                    }
                    d = self
                        .cv
                        .wait_timeout(d, dl - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
        true
    }
}

impl RunTask for Shared {
    fn run_task(&self, id: usize) {
        Shared::run_task(self, id);
    }
}
