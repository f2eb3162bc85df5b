//! The scheduler: a few worker threads run many tasks.
//!
//! Each task has a small state machine (idle, scheduled, running, running-and-notified,
//! done). Waking a task that is idle puts it on the run queue of its priority class; waking
//! one that is running marks it notified so it runs again after its turn; waking one that is
//! already scheduled costs one atomic load. Workers take tasks from the highest class first
//! and sleep on a condition variable when there is nothing to run.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use crossbeam_queue::SegQueue;

pub(crate) use crate::slot::{TaskSlot, TaskStats};
use crate::task::{Context, Handoff, Status, Task, TaskError, OUT_COUNTS};
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

/// Wakes one task of a running pipeline; held by pools for tasks waiting on a buffer, and by
/// whatever wakes a task from outside its pipeline ([`OutsideWaker`]). It holds nothing of the
/// pipeline: waking a task of a pipeline that has ended does nothing.
#[derive(Clone)]
pub struct Waker {
    shared: Weak<Shared>,
    id: usize,
}

impl Waker {
    /// Whether `other` wakes the same task of the same pipeline.
    pub fn same_task(&self, other: &Waker) -> bool {
        self.id == other.id && Weak::ptr_eq(&self.shared, &other.shared)
    }

    /// Makes the task runnable (again): it runs its next turn soon, on a worker or a
    /// [`Helper`].
    pub fn wake(&self) {
        if let Some(s) = self.shared.upgrade() {
            s.wake(self.id);
        }
    }

    /// A [`Helper`] of this task's pipeline, if it still runs.
    pub fn helper(&self) -> Option<Helper> {
        self.shared.upgrade().map(Helper::new)
    }

    /// A waker of task `id` of no pipeline (waking it does nothing), for tests.
    #[cfg(test)]
    pub(crate) fn detached(id: usize) -> Waker {
        Waker {
            shared: Weak::new(),
            id,
        }
    }
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
    runq: [SegQueue<usize>; 3],
    sleepers: AtomicUsize,
    /// Threads outside the workers running tasks now ([`Helper`]).
    helpers: AtomicUsize,
    idle_lock: Mutex<()>,
    idle_cv: Condvar,
    live: AtomicUsize,
    finished: AtomicBool,
    /// Set once every task has finished; shared with those who wait for that without
    /// holding the pipeline ([`Done`]).
    done: Arc<Done>,
    stop: AtomicBool,
    /// Why the pipeline was ended by force ([`Shared::abort`]), once it was.
    aborted: std::sync::OnceLock<String>,
    pub(crate) failure: Mutex<Option<Failure>>,
    batch: usize,
    /// Rounds an idle worker spins before it sleeps ([`spin_rounds`]).
    spin: u32,
}

/// Rounds an idle worker spins looking for work before it sleeps, when another CPU can make
/// work appear meanwhile: a task woken within those few microseconds costs no sleep and no
/// wake-up.
const SPIN_ROUNDS: u32 = 200;

/// The CPUs this process may run on now.
pub(crate) fn cpus() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// How long idle workers spin for a process that may run on `cpus` CPUs: not at all on one,
/// where whatever would bring work (the other workers, the threads feeding the pipeline)
/// cannot run while a worker spins, so spinning only delays it (an engine held to one core,
/// as each of `bench engines`' two is).
pub(crate) fn spin_rounds(cpus: usize) -> u32 {
    if cpus > 1 {
        SPIN_ROUNDS
    } else {
        0
    }
}

impl Shared {
    pub(crate) fn new(tasks: Vec<TaskSlot>, batch: usize) -> Arc<Shared> {
        let n = tasks.len();
        let s = Arc::new(Shared {
            tasks,
            runq: [SegQueue::new(), SegQueue::new(), SegQueue::new()],
            sleepers: AtomicUsize::new(0),
            helpers: AtomicUsize::new(0),
            idle_lock: Mutex::new(()),
            idle_cv: Condvar::new(),
            live: AtomicUsize::new(n),
            finished: AtomicBool::new(n == 0),
            done: Arc::new(Done {
                finished: Mutex::new(n == 0),
                cv: Condvar::new(),
            }),
            stop: AtomicBool::new(false),
            aborted: std::sync::OnceLock::new(),
            failure: Mutex::new(None),
            batch: batch.max(1),
            spin: spin_rounds(cpus()),
        });
        for (id, t) in s.tasks.iter().enumerate() {
            s.runq[t.prio as usize].push(id);
        }
        s
    }

    pub(crate) fn waker(self: &Arc<Self>, id: usize) -> Waker {
        Waker {
            shared: Arc::downgrade(self),
            id,
        }
    }

    pub(crate) fn stopping(&self) -> bool {
        // Ordering: Acquire pairs with the Release store in `request_stop`; a flag that publishes
        // nothing else a task needs (stronger than needed).
        self.stop.load(Ordering::Acquire)
    }

    pub(crate) fn is_finished(&self) -> bool {
        // Ordering: Acquire pairs with the Release store of `finished` in `finish`, after the last
        // task's `live` decrement.
        self.finished.load(Ordering::Acquire)
    }

    /// Makes task `id` runnable if it is not already.
    pub(crate) fn wake(&self, id: usize) {
        if self.schedule(id) {
            self.notify();
        }
    }

    /// Like [`Shared::wake`] from a worker that is about to look for its next task: the task
    /// goes on the run queue without waking another worker for it.
    fn wake_here(&self, id: usize) {
        self.schedule(id);
    }

    /// Marks task `id` runnable; true if it went on the run queue (false: it was queued or
    /// running already, or is done).
    fn schedule(&self, id: usize) -> bool {
        // IDLE -> SCHEDULED (queue it), RUNNING -> NOTIFIED (it runs again): `task_state`.
        if task_state::wake(&self.tasks[id].state) {
            self.runq[self.tasks[id].prio as usize].push(id);
            return true;
        }
        false
    }

    fn push(&self, id: usize) {
        self.runq[self.tasks[id].prio as usize].push(id);
        self.notify();
    }

    /// Wakes a sleeping worker, if any, for work just queued, unless a [`Helper`] is there
    /// to run it.
    fn notify(&self) {
        // Ordering: SeqCst fence, paired with the SeqCst increment of `sleepers` in `run_worker`:
        // either the sleeper sees the task on its last look, or we see it counted and notify it.
        // Likewise with the decrement of `helpers` and the fence after it when a helper leaves:
        // either it sees the task queued, or we see it gone. (The worker side has no fence between
        // its increment and its look at the queues; see `run_worker`.)
        fence(Ordering::SeqCst);
        // On one CPU a worker could only take turns with the helpers. On more, it is woken
        // (and may take the task first): a helper busy with a long turn must not hold up
        // the pipeline's other tasks, nor serialise its parallel work.
        if self.spin == 0 && self.helpers.load(Ordering::Relaxed) > 0 {
            return;
        }
        if self.sleepers.load(Ordering::Relaxed) > 0 {
            // Taking and letting go of the lock first means a counted sleeper is already
            // waiting (or past its last look); notifying after letting go spares the woken
            // worker from blocking at once on the lock we would still hold.
            drop(self.idle_lock.lock().unwrap_or_else(|e| e.into_inner()));
            self.idle_cv.notify_one();
        }
    }

    fn pop(&self) -> Option<usize> {
        self.runq.iter().find_map(|q| q.pop())
    }

    fn has_work(&self) -> bool {
        self.runq.iter().any(|q| !q.is_empty())
    }

    /// Stops the sources: each ends its stream on its next turn, and end of stream flows
    /// down the graph.
    pub(crate) fn request_stop(&self) {
        // Ordering: Release pairs with the Acquire load in `stopping`.
        self.stop.store(true, Ordering::Release);
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

    pub(crate) fn run_worker(self: &Arc<Self>) {
        loop {
            if let Some(id) = self.pop() {
                self.run_task(id);
                continue;
            }
            let mut spins = 0;
            while spins < self.spin && !self.has_work() && !self.is_finished() {
                std::hint::spin_loop();
                spins += 1;
            }
            if self.has_work() {
                continue;
            }
            if self.is_finished() {
                return;
            }
            let g = self.idle_lock.lock().unwrap_or_else(|e| e.into_inner());
            // Ordering: SeqCst increment, paired with the fence in `notify` (a store-then-load
            // against the waker's push-then-load). Formally the look at the run queues that follows
            // is not SeqCst and has no fence before it, so C11 alone does not forbid it seeing an
            // older queue; on x86 (and ARMv8's RCsc loads) the RMW orders it, and the 200 ms timed
            // wait bounds a miss. The decrement below only needs atomicity (stronger than needed).
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            if !self.has_work() && !self.is_finished() {
                let _ = self.idle_cv.wait_timeout(g, Duration::from_millis(200));
            }
            // Ordering: SeqCst decrement; only its atomicity matters (stronger than needed).
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn run_task(self: &Arc<Self>, id: usize) {
        let slot = &self.tasks[id];
        if !task_state::start(&slot.state) {
            return; // done meanwhile
        }
        let mut body = slot.body.lock().unwrap_or_else(|e| e.into_inner());
        let Some(task) = body.as_mut() else {
            return;
        };
        let t0 = Instant::now();
        let ends = (self.stopping() && slot.stops())
            || (!slot.outputs.is_empty() && slot.outputs.iter().all(|q| q.is_abandoned()));
        let result = if let Some(why) = self.aborted.get() {
            Err(TaskError::Failed(format!("ended by force: {why}")))
        } else if ends {
            Ok(Status::Done)
        } else {
            let mut cx = Context {
                shared: self,
                slot,
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
                    self.wake_here(reader);
                }
            }
            r
        };
        slot.counters.runs.fetch_add(1, Ordering::Relaxed);
        match result {
            Ok(Status::Progress) => {
                drop(body);
                slot.counters.add_busy(t0);
                task_state::requeue(&slot.state);
                self.push(id);
            }
            Ok(Status::Blocked) => {
                drop(body);
                slot.counters.add_busy(t0);
                if task_state::park(&slot.state) {
                    // NOTIFIED while running: run again.
                    self.push(id);
                }
            }
            Ok(Status::Done) => self.finish(id, body, None, t0),
            Err(e) => self.finish(id, body, Some(e), t0),
        }
    }

    fn finish(
        self: &Arc<Self>,
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
        task_state::finish(&slot.state);
        drop(body);
        slot.counters.add_busy(t0);
        if let Some(e) = err.or(fin.err()) {
            tracing::warn!(task = %slot.name, line = slot.line, error = %e, "task failed");
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
        // `is_finished`'s Acquire.
        if self.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.finished.store(true, Ordering::Release);
            {
                let _g = self.idle_lock.lock().unwrap_or_else(|e| e.into_inner());
                self.idle_cv.notify_all();
            }
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

/// A thread outside a pipeline's workers that runs its tasks while it waits for what they put
/// out: a daemon's thread that handed a service its request and waits for the answer, a
/// `call` task's thread that handed its task an answer. Waking a sleeping worker and waiting
/// for it costs two switches between threads, tens of microseconds on a virtual machine, and
/// on an engine held to one core the woken worker and the waiting thread only take turns on
/// it. So while a helper is there on one CPU, a task woken goes on the run queue without
/// waking a worker, and when it leaves, a worker is woken for whatever it left there. On more
/// CPUs workers are woken as usual, and whoever comes first runs the task.
pub struct Helper {
    shared: Arc<Shared>,
}

impl Helper {
    fn new(shared: Arc<Shared>) -> Helper {
        // Ordering: SeqCst, paired with the fence in `notify`: once counted here, a waker on one
        // CPU may leave its task queued for this helper.
        shared.helpers.fetch_add(1, Ordering::SeqCst);
        Helper { shared }
    }

    /// Runs runnable tasks of the pipeline, as a worker does, until `done()` says true or
    /// nothing is left to run. A task cannot be interrupted within its turn, so `done()` is
    /// asked between turns.
    pub fn run_until(&self, done: &mut dyn FnMut() -> bool) {
        while !done() {
            let Some(id) = self.shared.pop() else {
                return;
            };
            self.shared.run_task(id);
        }
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        // Ordering: SeqCst decrement, ordered before the fence below.
        self.shared.helpers.fetch_sub(1, Ordering::SeqCst);
        // Ordering: SeqCst fence, paired with the fence in `notify`: a task woken while this helper
        // was counted is seen queued here, and a worker woken for it.
        fence(Ordering::SeqCst);
        if self.shared.has_work() {
            self.shared.notify();
        }
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

/// The waker of a task woken from outside its pipeline (by a thread of its own, or a link),
/// set when the pipeline starts. A task gets one from [`Build::outside_waker`], which counts
/// it against the pipeline's [`Budget::links`](crate::Budget::links).
///
/// [`Build::outside_waker`]: crate::Build::outside_waker
#[derive(Clone, Default)]
pub struct OutsideWaker(pub(crate) Arc<OnceLock<Waker>>);

impl OutsideWaker {
    /// The task's waker, once its pipeline has started.
    pub fn get(&self) -> Option<&Waker> {
        self.0.get()
    }

    /// Wakes the task, if its pipeline has started.
    pub fn wake(&self) {
        if let Some(w) = self.0.get() {
            w.wake();
        }
    }
}

/// Whether the workers of a pipeline spin before they sleep on this machine: only where
/// another CPU can bring work meanwhile (see `spin_rounds`). A thread that waits for a
/// task's answer spins the same way, or looks once.
pub fn workers_spin() -> bool {
    static SPINS: OnceLock<bool> = OnceLock::new();
    *SPINS.get_or_init(|| spin_rounds(cpus()) > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_spin_only_where_another_cpu_can_bring_work() {
        assert_eq!(spin_rounds(1), 0);
        assert_eq!(spin_rounds(2), SPIN_ROUNDS);
        assert_eq!(spin_rounds(64), SPIN_ROUNDS);
    }
}
