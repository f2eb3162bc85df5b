//! Queue hooks named in pipeline text (`queue[put=NAME,get=NAME]`, the paper's §3.4).
//!
//! A *put* hook runs after a buffer lands on an empty queue (the "kick" that restarts an idle
//! device no task maintains); a *get* hook runs before a dequeue from an empty queue, and a
//! buffer it returns is dequeued instead (the "status queue" that tells a task how the
//! application stands at that moment). The registry holds hooks by name, as it holds tasks;
//! each queue that names one gets its own hook from the registered factory, which sees the
//! queue's name and the pipeline's statistics ([`HookSite`]).
//!
//! Built in: put `log` (a log line each time the queue wakes from empty) and get `status`
//! (one line of JSON with the pipeline's statistics, [`Stats`]).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use crate::buffer::Buffer;
use crate::engine::Stats;
use crate::lang::HookKind;
use crate::queue::{GetHook, PutHook};

/// Makes a queue's put hook.
pub type PutHookFactory = Arc<dyn Fn(&HookSite) -> PutHook + Send + Sync>;
/// Makes a queue's get hook.
pub type GetHookFactory = Arc<dyn Fn(&HookSite) -> GetHook + Send + Sync>;

/// A registered hook's name, kind and one-line description (`offhost tasks` lists them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookInfo {
    /// Name as written after `put=` or `get=`.
    pub name: String,
    /// When it runs.
    pub kind: HookKind,
    /// What it does.
    pub doc: String,
}

impl HookInfo {
    pub(crate) fn new(name: &str, kind: HookKind, doc: &str) -> HookInfo {
        HookInfo {
            name: name.to_owned(),
            kind,
            doc: doc.to_owned(),
        }
    }
}

/// Where a hook is attached, as its factory sees it.
pub struct HookSite {
    pub(crate) queue: String,
    pub(crate) status: StatusSource,
}

impl HookSite {
    /// The queue's name.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The statistics of the pipeline the queue belongs to, readable once it runs.
    pub fn status(&self) -> StatusSource {
        self.status.clone()
    }
}

type StatsFn = dyn Fn() -> Stats + Send + Sync;

/// The statistics of a pipeline, for a hook made before the pipeline starts: empty until it
/// starts, and again once it has been dropped.
#[derive(Clone, Default)]
pub struct StatusSource(Arc<OnceLock<Weak<StatsFn>>>);

impl StatusSource {
    /// The pipeline's statistics now (as [`Running::counters`](crate::Running::counters)
    /// gives them), or `None` before it starts and after it is gone.
    pub fn stats(&self) -> Option<Stats> {
        self.0.get().and_then(Weak::upgrade).map(|f| f())
    }

    /// Connects the source to a started pipeline; the pipeline keeps `f` alive.
    pub(crate) fn connect(&self, f: &Arc<StatsFn>) {
        let _ = self.0.set(Arc::downgrade(f));
    }
}

impl fmt::Debug for StatusSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "StatusSource(connected)"
        } else {
            "StatusSource(waiting)"
        })
    }
}

/// The built-in put hook `log`: an info line naming the queue each time a buffer lands on it
/// while it was empty, with how many times that happened so far.
pub(crate) fn log_hook(site: &HookSite) -> PutHook {
    let queue = site.queue().to_owned();
    let kicks = AtomicU64::new(0);
    Arc::new(move || {
        let n = kicks.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::info!(queue = %queue, kicks = n, "a buffer on the empty queue");
    })
}

/// The built-in get hook `status`: one line of JSON, the pipeline's [`Stats`] at the moment
/// of the dequeue; nothing once the pipeline is gone.
pub(crate) fn status_hook(site: &HookSite) -> GetHook {
    let status = site.status();
    Arc::new(move || {
        let stats = status.stats()?;
        let mut line = serde_json::to_vec(&stats).ok()?;
        line.push(b'\n');
        Some(Buffer::from_vec(line))
    })
}
