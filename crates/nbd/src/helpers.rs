//! Helper threads of one connection: they run the requests that do not run on the worker
//! that read them (slow backends, large transfers), and stay for the next one.
//!
//! A thread started for every such request cost about 6 % of the server's CPU in 1 MiB
//! sequential reads (`clone3`, the stack's `mmap` and `munmap`, its first page faults); a
//! helper that finds no job waits [`IDLE`] for one before it ends, so a busy connection keeps
//! as many helpers as it has such requests in flight (at most the gate's count) and an idle
//! one keeps none.

use std::collections::VecDeque;
use std::io;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::Scope;
use std::time::Duration;

/// How long a helper waits for a job before it ends.
pub(crate) const IDLE: Duration = Duration::from_secs(2);

struct State<J> {
    jobs: VecDeque<J>,
    /// Helpers waiting for a job.
    idle: usize,
    /// Helpers alive.
    running: usize,
    /// The connection reads no more requests: helpers end once the queue is empty.
    closed: bool,
}

/// The helpers of one connection, running jobs of type `J`.
pub(crate) struct Helpers<J> {
    state: Mutex<State<J>>,
    cv: Condvar,
    name: String,
    idle: Duration,
}

impl<J: Send> Helpers<J> {
    /// No helpers yet; those started are named `name` and wait `idle` for a job ([`IDLE`]
    /// for a connection).
    pub(crate) fn new(name: String, idle: Duration) -> Self {
        Helpers {
            state: Mutex::new(State {
                jobs: VecDeque::new(),
                idle: 0,
                running: 0,
                closed: false,
            }),
            cv: Condvar::new(),
            name,
            idle,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<J>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands `job` to a waiting helper, or to a new one that runs jobs with `exec` (every
    /// call of one connection passes the same). The caller bounds the jobs in flight (and so
    /// the helpers). An error gives the job back: no helper could be started and none is
    /// alive to run it.
    pub(crate) fn run<'s, F>(
        &'s self,
        scope: &'s Scope<'s, '_>,
        job: J,
        exec: F,
    ) -> Result<(), (J, io::Error)>
    where
        F: Fn(J) + Send + 's,
        J: 's,
    {
        let mut st = self.lock();
        st.jobs.push_back(job);
        let start = st.idle < st.jobs.len();
        if start {
            st.running += 1;
        }
        drop(st);
        if !start {
            self.cv.notify_one();
            return Ok(());
        }
        let spawned = std::thread::Builder::new()
            .name(self.name.clone())
            .spawn_scoped(scope, move || self.serve(exec));
        let Err(e) = spawned else {
            return Ok(());
        };
        let mut st = self.lock();
        st.running -= 1;
        if st.running > 0 {
            // A live helper takes it.
            return Ok(());
        }
        // With no helper alive, nothing took it: it is the only job queued.
        st.jobs.pop_back().map_or(Ok(()), |job| Err((job, e)))
    }

    /// No more jobs will come unless a request already read is still being handed over:
    /// waiting helpers end, busy ones after the queue is empty.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.cv.notify_all();
    }

    /// One helper: runs jobs until none comes for its idle time or the connection is closed.
    fn serve(&self, exec: impl Fn(J)) {
        let mut st = self.lock();
        loop {
            if let Some(job) = st.jobs.pop_front() {
                drop(st);
                exec(job);
                st = self.lock();
                continue;
            }
            if st.closed {
                break;
            }
            st.idle += 1;
            let (g, waited) = self
                .cv
                .wait_timeout(st, self.idle)
                .unwrap_or_else(|e| e.into_inner());
            st = g;
            st.idle -= 1;
            if waited.timed_out() && st.jobs.is_empty() {
                break;
            }
        }
        st.running -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Barrier;

    #[test]
    fn jobs_run_on_helpers_that_are_reused_and_end_when_closed() {
        let done = AtomicUsize::new(0);
        let names = Mutex::new(std::collections::HashSet::new());
        let barrier = Barrier::new(3);
        // Waiting longer than the test takes, so that none ends before it is closed.
        let helpers = Helpers::new("nbd-io-test".into(), Duration::from_secs(600));
        let exec = |first: bool| {
            if first {
                barrier.wait();
            }
            let name = std::thread::current().name().map(str::to_owned);
            names.lock().unwrap().insert(name);
            // Relaxed: a count read after the scope joins every thread.
            done.fetch_add(1, Ordering::Relaxed);
        };
        std::thread::scope(|scope| {
            // Three that wait for each other need three helpers.
            for _ in 0..3 {
                helpers.run(scope, true, exec).unwrap();
            }
            // One after another, each once the last is done and every helper waits again:
            // a waiting helper takes it, no new thread starts. (A helper woken for a job
            // still counts as waiting until it runs, so jobs sent faster than that may
            // start more.)
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            for i in 0..20 {
                // Relaxed: only a count to wait for; the lock orders the rest.
                while done.load(Ordering::Relaxed) < 3 + i || helpers.lock().idle < 3 {
                    assert!(std::time::Instant::now() < deadline, "helpers never idle");
                    std::thread::yield_now();
                }
                helpers.run(scope, false, exec).unwrap();
                assert_eq!(helpers.lock().running, 3);
            }
            helpers.close();
        });
        // Relaxed: every thread has been joined.
        assert_eq!(done.load(Ordering::Relaxed), 23);
        assert_eq!(helpers.lock().running, 0);
        let names = names.into_inner().unwrap();
        assert_eq!(
            names.into_iter().collect::<Vec<_>>(),
            [Some("nbd-io-test".to_owned())]
        );
    }
}
