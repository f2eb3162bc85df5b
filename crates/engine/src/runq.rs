//! The run queues of a running pipeline: which of its tasks are runnable, waking them, and
//! the workers' sleep. Below the scheduler (`sched.rs`, which runs the tasks) and below
//! everything that wakes a task: pools, queues' writers, host ports, timers and calls hold a
//! [`Waker`], which reaches only these queues, never the tasks' bodies.
//!
//! Each task has a small state machine (`task_state.rs`: idle, scheduled, running,
//! running-and-notified, done). Waking a task that is idle puts it on the run queue of its
//! priority class; waking one that is running marks it notified so it runs again after its
//! turn; waking one that is already scheduled costs one atomic load. Workers take tasks from
//! the highest class first and sleep on a condition variable when there is nothing to run.

use std::sync::atomic::{fence, AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::Duration;

use crossbeam_queue::SegQueue;

use crate::task_state;

/// Runs one task's turn: what the scheduler gives the run queues so that a [`Helper`] can run
/// tasks without the queues knowing what a task is.
pub(crate) trait RunTask: Send + Sync {
    /// Runs task `id`'s turn (it was popped off a run queue).
    fn run_task(&self, id: usize);
}

/// One task's state word (`task_state`) and priority class (the index of its run queue), on
/// a cache line pair of its own: workers change the words of different tasks at once, and
/// words side by side would make each change evict the line from the other workers' caches.
#[repr(align(128))]
struct TaskWord {
    state: AtomicU8,
    class: u8,
}

/// The run queues, task states and sleeping workers of one pipeline.
pub(crate) struct RunQueues {
    /// Each task's state and class, by task id.
    tasks: Box<[TaskWord]>,
    queues: [SegQueue<usize>; 3],
    sleepers: AtomicUsize,
    /// Threads outside the workers running tasks now ([`Helper`]).
    helpers: AtomicUsize,
    idle_lock: Mutex<()>,
    idle_cv: Condvar,
    finished: AtomicBool,
    stop: AtomicBool,
    /// Rounds an idle worker spins before it sleeps ([`spin_rounds`]).
    spin: u32,
    /// What runs a task for a [`Helper`]: the scheduler, set once it exists.
    runner: OnceLock<Weak<dyn RunTask>>,
    /// What the tasks show to those who watch (a task reaches it through its `Context`,
    /// which holds the run queues already).
    pub(crate) board: Arc<crate::board::Board>,
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

/// Whether the workers of a pipeline spin before they sleep on this machine: only where
/// another CPU can bring work meanwhile (see `spin_rounds`). A thread that waits for a
/// task's answer spins the same way, or looks once.
pub fn workers_spin() -> bool {
    static SPINS: OnceLock<bool> = OnceLock::new();
    *SPINS.get_or_init(|| spin_rounds(cpus()) > 0)
}

impl RunQueues {
    /// Queues for tasks of the given priority classes (0 first), each SCHEDULED and queued.
    pub(crate) fn new(classes: Vec<u8>) -> RunQueues {
        let n = classes.len();
        let q = RunQueues {
            tasks: (classes.into_iter())
                .map(|class| TaskWord {
                    state: AtomicU8::new(task_state::SCHEDULED),
                    class,
                })
                .collect(),
            queues: [SegQueue::new(), SegQueue::new(), SegQueue::new()],
            sleepers: AtomicUsize::new(0),
            helpers: AtomicUsize::new(0),
            idle_lock: Mutex::new(()),
            idle_cv: Condvar::new(),
            finished: AtomicBool::new(n == 0),
            stop: AtomicBool::new(false),
            spin: spin_rounds(cpus()),
            runner: OnceLock::new(),
            board: Arc::default(),
        };
        for (id, t) in q.tasks.iter().enumerate() {
            q.queues[usize::from(t.class)].push(id);
        }
        q
    }

    /// Gives the queues what runs a task for a [`Helper`] (once).
    pub(crate) fn set_runner(&self, runner: Weak<dyn RunTask>) {
        let _ = self.runner.set(runner);
    }

    /// Task `id`'s state word.
    #[inline]
    pub(crate) fn state(&self, id: usize) -> &AtomicU8 {
        &self.tasks[id].state
    }

    /// A waker of task `id`.
    pub(crate) fn waker(self: &Arc<Self>, id: usize) -> Waker {
        Waker {
            queues: Arc::downgrade(self),
            id,
        }
    }

    /// Makes task `id` runnable if it is not already.
    #[inline]
    pub(crate) fn wake(&self, id: usize) {
        if self.schedule(id) {
            self.notify();
        }
    }

    /// Like [`RunQueues::wake`] from a worker that is about to look for its next task: the
    /// task goes on the run queue without waking another worker for it.
    pub(crate) fn wake_here(&self, id: usize) {
        self.schedule(id);
    }

    /// Marks task `id` runnable; true if it went on the run queue (false: it was queued or
    /// running already, or is done).
    #[inline]
    fn schedule(&self, id: usize) -> bool {
        // IDLE -> SCHEDULED (queue it), RUNNING -> NOTIFIED (it runs again): `task_state`.
        let t = &self.tasks[id];
        if task_state::wake(&t.state) {
            self.queues[usize::from(t.class)].push(id);
            return true;
        }
        false
    }

    /// Queues task `id`, which the caller moved to SCHEDULED, and wakes a worker for it.
    pub(crate) fn push(&self, id: usize) {
        self.queues[usize::from(self.tasks[id].class)].push(id);
        self.notify();
    }

    /// Wakes a sleeping worker, if any, for work just queued, unless a [`Helper`] is there
    /// to run it.
    fn notify(&self) {
        // Ordering: SeqCst fence, paired with the SeqCst increment of `sleepers` in `sleep`:
        // either the sleeper sees the task on its last look, or we see it counted and notify it.
        // Likewise with the decrement of `helpers` and the fence after it when a helper leaves:
        // either it sees the task queued, or we see it gone. (The worker side has no fence between
        // its increment and its look at the queues; see `sleep`.)
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

    /// The next runnable task, highest class first.
    pub(crate) fn pop(&self) -> Option<usize> {
        self.queues.iter().find_map(|q| q.pop())
    }

    fn has_work(&self) -> bool {
        self.queues.iter().any(|q| !q.is_empty())
    }

    /// Whether every task has finished.
    pub(crate) fn is_finished(&self) -> bool {
        // Ordering: Acquire pairs with the Release store of `finished` in `set_finished`, after
        // the last task's `live` decrement.
        self.finished.load(Ordering::Acquire)
    }

    /// Every task has finished: the workers leave.
    pub(crate) fn set_finished(&self) {
        // Ordering: Release, paired with the Acquire in `is_finished`: what the tasks did is
        // visible to whoever sees the pipeline finished.
        self.finished.store(true, Ordering::Release);
        let _g = self.idle_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.idle_cv.notify_all();
    }

    /// Whether the pipeline is stopping: sources end their stream.
    pub(crate) fn stopping(&self) -> bool {
        // Ordering: Acquire pairs with the Release store in `set_stop`; a flag that publishes
        // nothing else a task needs (stronger than needed).
        self.stop.load(Ordering::Acquire)
    }

    /// Marks the pipeline stopping (the caller wakes the tasks that must see it).
    pub(crate) fn set_stop(&self) {
        // Ordering: Release pairs with the Acquire load in `stopping`.
        self.stop.store(true, Ordering::Release);
    }

    /// A worker with nothing to run: spins a little where that pays (`spin_rounds`), then
    /// sleeps until work is queued or at most 200 ms. Returns false once the pipeline has
    /// finished.
    pub(crate) fn idle(&self) -> bool {
        let mut spins = 0;
        while spins < self.spin && !self.has_work() && !self.is_finished() {
            std::hint::spin_loop();
            spins += 1;
        }
        if self.has_work() {
            return true;
        }
        if self.is_finished() {
            return false;
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
        true
    }
}

/// Wakes one task of a running pipeline; held by pools for tasks waiting on a buffer, and by
/// whatever wakes a task from outside its pipeline ([`OutsideWaker`]). It holds nothing of the
/// pipeline: waking a task of a pipeline that has ended does nothing.
#[derive(Clone)]
pub struct Waker {
    queues: Weak<RunQueues>,
    id: usize,
}

impl Waker {
    /// Whether `other` wakes the same task of the same pipeline.
    pub fn same_task(&self, other: &Waker) -> bool {
        self.id == other.id && Weak::ptr_eq(&self.queues, &other.queues)
    }

    /// Makes the task runnable (again): it runs its next turn soon, on a worker or a
    /// [`Helper`].
    pub fn wake(&self) {
        if let Some(q) = self.queues.upgrade() {
            q.wake(self.id);
        }
    }

    /// A [`Helper`] of this task's pipeline, if it still runs.
    pub fn helper(&self) -> Option<Helper> {
        let queues = self.queues.upgrade()?;
        let runner = queues.runner.get()?.upgrade()?;
        Some(Helper::new(queues, runner))
    }

    /// A waker of task `id` of no pipeline (waking it does nothing), for tests.
    #[cfg(test)]
    pub(crate) fn detached(id: usize) -> Waker {
        Waker {
            queues: Weak::new(),
            id,
        }
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
    queues: Arc<RunQueues>,
    runner: Arc<dyn RunTask>,
}

impl Helper {
    fn new(queues: Arc<RunQueues>, runner: Arc<dyn RunTask>) -> Helper {
        // Ordering: SeqCst, paired with the fence in `notify`: once counted here, a waker on one
        // CPU may leave its task queued for this helper.
        queues.helpers.fetch_add(1, Ordering::SeqCst);
        Helper { queues, runner }
    }

    /// Runs runnable tasks of the pipeline, as a worker does, until `done()` says true or
    /// nothing is left to run. A task cannot be interrupted within its turn, so `done()` is
    /// asked between turns.
    pub fn run_until(&self, done: &mut dyn FnMut() -> bool) {
        while !done() {
            let Some(id) = self.queues.pop() else {
                return;
            };
            self.runner.run_task(id);
        }
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let q = &self.queues;
        // Ordering: SeqCst decrement, ordered before the fence below.
        q.helpers.fetch_sub(1, Ordering::SeqCst);
        // Ordering: SeqCst fence, paired with the fence in `notify`: a task woken while this helper
        // was counted is seen queued here, and a worker woken for it.
        fence(Ordering::SeqCst);
        if q.has_work() {
            q.notify();
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_spin_only_where_another_cpu_can_bring_work() {
        assert_eq!(spin_rounds(1), 0);
        assert_eq!(spin_rounds(2), SPIN_ROUNDS);
        assert_eq!(spin_rounds(64), SPIN_ROUNDS);
    }

    #[test]
    fn a_waker_of_an_ended_pipeline_wakes_nothing_and_helps_nothing() {
        let q = Arc::new(RunQueues::new(vec![1, 1]));
        assert_eq!(q.pop(), Some(0));
        assert_eq!(q.pop(), Some(1));
        let w = q.waker(1);
        assert!(w.same_task(&q.waker(1)));
        assert!(!w.same_task(&q.waker(0)));
        assert!(w.helper().is_none(), "no runner set: no helper");
        drop(q);
        w.wake();
        assert!(w.helper().is_none());
    }

    #[test]
    fn a_wake_queues_an_idle_task_once_in_its_class() {
        let q = Arc::new(RunQueues::new(vec![2, 0]));
        assert_eq!(q.pop(), Some(1), "the higher class first");
        assert_eq!(q.pop(), Some(0));
        assert!(task_state::start(q.state(0)));
        assert!(
            !task_state::park(q.state(0)),
            "not woken during its turn: idle"
        );
        let w = q.waker(0);
        w.wake();
        w.wake();
        assert_eq!(q.pop(), Some(0));
        assert_eq!(
            q.pop(),
            None,
            "a second wake of a scheduled task queues nothing"
        );
    }
}
