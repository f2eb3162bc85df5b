//! A task's slot in a running pipeline: its body, queues, pools, state word and counters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::pool::Pool;
use crate::queue::Queue;
use crate::task::{Priority, Task};
use crate::timer::Alarm;

#[derive(Default)]
pub(crate) struct TaskCounters {
    pub(crate) runs: AtomicU64,
    pub(crate) bufs_in: AtomicU64,
    pub(crate) bytes_in: AtomicU64,
    pub(crate) bufs_out: AtomicU64,
    pub(crate) bytes_out: AtomicU64,
    pub(crate) busy_ns: AtomicU64,
}

/// A snapshot of one task's counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStats {
    /// Command name.
    pub name: String,
    /// Line of the pipeline text that created it.
    pub line: usize,
    /// Scheduling class.
    pub priority: Priority,
    /// Turns run.
    pub runs: u64,
    /// Buffers taken from inputs.
    pub buffers_in: u64,
    /// Bytes taken from inputs.
    pub bytes_in: u64,
    /// Buffers put to outputs.
    pub buffers_out: u64,
    /// Bytes put to outputs.
    pub bytes_out: u64,
    /// Time spent running, in nanoseconds.
    pub busy_ns: u64,
    /// Whether the task has finished.
    pub done: bool,
    /// The task's own short result, if it gives one.
    pub report: Option<String>,
    /// Why it failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub(crate) struct TaskSlot {
    pub(crate) name: String,
    pub(crate) line: usize,
    pub(crate) prio: Priority,
    pub(crate) inputs: Vec<Arc<Queue>>,
    pub(crate) outputs: Vec<Arc<Queue>>,
    pub(crate) pools: Vec<Option<Pool>>,
    pub(crate) body: Mutex<Option<Box<dyn Task>>>,
    pub(crate) counters: TaskCounters,
    pub(crate) report: Mutex<Option<String>>,
    /// The time the task asked to be woken at ([`crate::Context::wake_at`]).
    pub(crate) alarm: Mutex<Alarm>,
    /// A source that goes on when the pipeline is stopped: the `host-in` of a service its
    /// own calls take, which ends once they have.
    pub(crate) keeps_on_stop: bool,
}

impl TaskSlot {
    pub(crate) fn new(
        name: String,
        line: usize,
        prio: Priority,
        task: Box<dyn Task>,
        inputs: Vec<Arc<Queue>>,
        outputs: Vec<Arc<Queue>>,
        pools: Vec<Option<Pool>>,
    ) -> TaskSlot {
        TaskSlot {
            name,
            line,
            prio,
            inputs,
            outputs,
            pools,
            body: Mutex::new(Some(task)),
            counters: TaskCounters::default(),
            report: Mutex::new(None),
            alarm: Mutex::new(Alarm::default()),
            keeps_on_stop: false,
        }
    }

    /// Whether a stop of the pipeline ends the task: a source, unless it keeps on.
    pub(crate) fn stops(&self) -> bool {
        self.inputs.is_empty() && !self.keeps_on_stop
    }

    /// What this task put out if it took no input so far (a source), else 0: from the
    /// counters alone, without its body's lock.
    pub(crate) fn source_bytes(&self) -> u64 {
        let c = &self.counters;
        match c.bufs_in.load(Ordering::Relaxed) {
            0 => c.bytes_out.load(Ordering::Relaxed),
            _ => 0,
        }
    }

    /// A snapshot of the task's counters; `done`: whether it has finished (its state word,
    /// kept by the run queues); `error`: why it failed, if it did (kept by the scheduler, not
    /// here: the slot's layout is the hot path's). With `live_report`, the report of a running task is asked
    /// of its body when no worker holds it (a `try_lock`); without, only a finished task's
    /// report is given, and nothing the workers take is touched.
    pub(crate) fn stats(&self, done: bool, live_report: bool, error: Option<String>) -> TaskStats {
        let c = &self.counters;
        let kept = || self.report.lock().ok().and_then(|r| r.clone());
        let report = match live_report.then(|| self.body.try_lock().ok()).flatten() {
            Some(b) => match b.as_ref() {
                Some(t) => t.report(),
                None => kept(),
            },
            None => kept(),
        };
        TaskStats {
            name: self.name.clone(),
            line: self.line,
            priority: self.prio,
            runs: c.runs.load(Ordering::Relaxed),
            buffers_in: c.bufs_in.load(Ordering::Relaxed),
            bytes_in: c.bytes_in.load(Ordering::Relaxed),
            buffers_out: c.bufs_out.load(Ordering::Relaxed),
            bytes_out: c.bytes_out.load(Ordering::Relaxed),
            busy_ns: c.busy_ns.load(Ordering::Relaxed),
            done,
            report,
            error,
        }
    }
}

impl TaskCounters {
    pub(crate) fn add_busy(&self, t0: Instant) {
        self.busy_ns
            .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}
