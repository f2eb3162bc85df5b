//! Starting, watching and stopping pipelines.

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::budget::Budget;
use crate::error::PipelineError;
use crate::graph::{self, Graph};
use crate::host::{HostInput, HostOutput};
use crate::lang::{self, Spec};
use crate::pool::{Pool, PoolStats};
use crate::ports::HostPorts;
use crate::queue::{GetHook, PutHook, Queue, QueueStats};
use crate::registry::Registry;
use crate::sandbox::Files;
use crate::sched::{Shared, TaskSlot, TaskStats};

/// How a pipeline is run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfig {
    /// Worker threads (at least one, and at most one per task of normal or background
    /// class: see [`Built::try_start`]).
    pub workers: usize,
    /// Pin worker `i` to core `i` (modulo the number of cores).
    pub pin: bool,
    /// Most `get`s and `alloc`s a task may do in one turn.
    pub batch: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            workers: std::thread::available_parallelism().map_or(2, |n| n.get().min(4)),
            pin: false,
            batch: 64,
        }
    }
}

/// A pipeline description, parsed but not yet checked against a registry.
#[derive(Debug, Clone)]
pub struct Pipeline {
    spec: Spec,
}

impl Pipeline {
    /// Parses pipeline text (see [`crate::lang`] for the syntax).
    pub fn parse(text: &str) -> Result<Pipeline, PipelineError> {
        Ok(Pipeline {
            spec: lang::parse(text)?,
        })
    }

    /// The parsed lines.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// Checks the graph against `registry` (tasks, arguments, queues, free lists, cycles)
    /// and the default [`Budget`], and creates the tasks; nothing runs yet. The tasks see
    /// files as this process does ([`Files::Ambient`]): for the user's own pipelines only.
    pub fn build(&self, registry: &Registry) -> Result<Built, PipelineError> {
        self.build_within(registry, &Files::Ambient, &Budget::default())
    }

    /// Like [`build`](Self::build), with the tasks' file access limited to `files` (a
    /// pipeline from outside: [`Files::Denied`], or [`Files::beneath`] a directory). A path
    /// the access refuses is an error naming the task, its line and the path.
    pub fn build_with(&self, registry: &Registry, files: &Files) -> Result<Built, PipelineError> {
        self.build_within(registry, files, &Budget::default())
    }

    /// The one way a pipeline is built: its tasks see files through `files` (as in
    /// [`build_with`](Self::build_with)), and a pipeline that asks for more than `budget`
    /// (tasks, free-list bytes or buffers) is [`PipelineError::OverBudget`], found before
    /// anything is allocated or any file opened.
    pub fn build_within(
        &self,
        registry: &Registry,
        files: &Files,
        budget: &Budget,
    ) -> Result<Built, PipelineError> {
        self.build_with_blobs(registry, files, budget, &crate::Blobs::new())
    }

    /// As [`build_within`](Self::build_within), with `blobs` that came with the pipeline for
    /// its tasks to ask for by name ([`Build::blob`](crate::Build::blob)).
    pub fn build_with_blobs(
        &self,
        registry: &Registry,
        files: &Files,
        budget: &Budget,
        blobs: &crate::Blobs,
    ) -> Result<Built, PipelineError> {
        Ok(Built {
            graph: graph::build(&self.spec, registry, files, budget, blobs)?,
            put_hooks: HashMap::new(),
            get_hooks: HashMap::new(),
            budget: *budget,
        })
    }

    /// Builds and starts in one step (within the default [`Budget`]).
    pub fn start(
        &self,
        registry: &Registry,
        config: &EngineConfig,
    ) -> Result<Running, PipelineError> {
        self.build(registry)?.try_start(config)
    }
}

/// A checked pipeline, ready to start.
pub struct Built {
    graph: Graph,
    put_hooks: HashMap<String, PutHook>,
    get_hooks: HashMap<String, GetHook>,
    budget: Budget,
}

/// A hook named a queue the pipeline does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no queue named '{0}'")]
pub struct NoSuchQueue(pub String);

impl Built {
    /// Names of the `host-in` channels.
    pub fn host_inputs(&self) -> Vec<String> {
        self.graph.host.hosts(self.graph.host.inputs.keys())
    }

    /// Names of the `host-out` channels.
    pub fn host_outputs(&self) -> Vec<String> {
        self.graph.host.hosts(self.graph.host.outputs.keys())
    }

    /// Bytes the pipeline's free lists allocate when it starts, and the memory its tasks
    /// reserved beyond them (a WebAssembly instance's cap, `Build::reserve_memory`).
    pub fn pool_bytes(&self) -> u64 {
        self.graph
            .pools
            .iter()
            .map(|p| crate::pool::pool_bytes(p).unwrap_or(u64::MAX))
            .fold(self.graph.task_memory, u64::saturating_add)
    }

    fn has_queue(&self, q: &str) -> Result<(), NoSuchQueue> {
        if self.graph.queues.iter().any(|n| n.name == q) {
            Ok(())
        } else {
            Err(NoSuchQueue(q.into()))
        }
    }

    /// Calls `hook` each time a buffer is placed on queue `q` while it was empty (the
    /// seed's "kick" of an idle device).
    pub fn set_put_hook(
        &mut self,
        q: &str,
        hook: impl Fn() + Send + Sync + 'static,
    ) -> Result<(), NoSuchQueue> {
        self.has_queue(q)?;
        self.put_hooks.insert(q.into(), Arc::new(hook));
        Ok(())
    }

    /// Calls `hook` before a dequeue from queue `q` while it is empty; a buffer it returns is
    /// dequeued (the paper's "status queue").
    pub fn set_get_hook(
        &mut self,
        q: &str,
        hook: impl Fn() -> Option<crate::Buffer> + Send + Sync + 'static,
    ) -> Result<(), NoSuchQueue> {
        self.has_queue(q)?;
        self.get_hooks.insert(q.into(), Arc::new(hook));
        Ok(())
    }

    /// Creates the pools and queues and starts the worker threads.
    ///
    /// # Panics
    ///
    /// When the pipeline cannot start (see [`try_start`](Self::try_start), which servers use).
    pub fn start(self, config: &EngineConfig) -> Running {
        self.try_start(config).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Creates the pools and queues and starts the worker threads; more workers than the
    /// budget allows is [`PipelineError::OverBudget`] (at 1:1), none that the system would
    /// start [`PipelineError::Start`] (a worker thread past the first that cannot start
    /// leaves the pipeline with fewer). It starts no more workers than the pipeline has tasks
    /// of normal or background class (at least one): interrupt-class tasks only pass buffers
    /// on.
    pub fn try_start(mut self, config: &EngineConfig) -> Result<Running, PipelineError> {
        let workers = config.workers.max(1);
        if workers > self.budget.workers {
            return Err(PipelineError::OverBudget {
                line: 1,
                col: 1,
                message: format!("the pipeline would start {workers} worker threads"),
                over: offhost_units::OverLimit::new(
                    offhost_units::Limit::MaxWorkers,
                    self.budget.workers,
                )
                .asked(workers),
            });
        }
        let mut g = self.graph;
        // No more workers than tasks of normal or background class: interrupt-class tasks
        // (host-in, host-out, engine-out) only pass buffers on and go first on any worker, so
        // the work that can run side by side is the others'. More workers than that only wake
        // each other for single buffers: a queue between two engines (fill -> engine-out,
        // host-in -> null) ran about 20% faster with one worker per part than with two on a
        // 2-vCPU machine (`offhost bench engines --engine-arg=--workers=1`).
        let working = g
            .tasks
            .iter()
            .filter(|t| t.prio != crate::task::Priority::Interrupt)
            .count();
        let workers = workers.min(working.max(1));
        let shape = Arc::new(shape_of(&g));
        let pools: Vec<Pool> = g
            .pools
            .iter()
            .cloned()
            .map(Pool::try_new)
            .collect::<Result<_, _>>()
            .map_err(|e| PipelineError::Start {
                message: e.to_string(),
            })?;
        // Hooks set from Rust replace those the text names.
        let queues: Vec<Arc<Queue>> = g
            .queues
            .iter_mut()
            .map(|q| {
                Arc::new(Queue::new(
                    q.name.clone(),
                    q.reader,
                    q.writers.clone(),
                    self.put_hooks.remove(&q.name).or(q.put_hook.take()),
                    self.get_hooks.remove(&q.name).or(q.get_hook.take()),
                ))
            })
            .collect();
        // Where a message goes in its buffer for host-in to take the buffer into its pool.
        let mut host = g.host;
        for port in host.inputs.values_mut() {
            let pool = g.tasks[port.task].pools.first().copied().flatten();
            if let Some(cfg) = pool.map(|i| pools[i].config()) {
                port.front = cfg.headroom.saturating_sub(usize::from(port.whole));
                port.storage = cfg.headroom + cfg.size + cfg.tailroom;
                port.size = cfg.size;
            }
        }
        // The host-in of a service its own calls take keeps serving when the sources stop.
        let serving: Vec<usize> = host
            .calls
            .iter()
            .filter_map(|(name, _, _)| host.inputs.get(name).map(|p| p.task))
            .collect();
        let mut slots: Vec<TaskSlot> = g
            .tasks
            .into_iter()
            .map(|t| {
                TaskSlot::new(
                    t.name,
                    t.line,
                    t.prio,
                    t.task,
                    t.inputs.iter().map(|&i| Arc::clone(&queues[i])).collect(),
                    t.outputs.iter().map(|&i| Arc::clone(&queues[i])).collect(),
                    t.pools
                        .iter()
                        .map(|p| p.map(|i| pools[i].clone()))
                        .collect(),
                )
            })
            .collect();
        for &t in &serving {
            slots[t].keeps_on_stop = true;
        }
        let shared = Shared::new(slots, config.batch);
        for port in host.inputs.values() {
            let _ = port.waker.set(shared.waker(port.task));
        }
        crate::ports::hand_to_calls(&mut host);
        for (waker, id) in &host.wakers {
            let _ = waker.set(shared.waker(*id));
        }
        // Connected before any worker runs: a get hook may read it on the first turn.
        let started = Instant::now();
        let status: Arc<StatsFn> = {
            let (shared, queues, pools) = (Arc::clone(&shared), queues.clone(), pools.clone());
            Arc::new(move || stats_of(started, &shared, &queues, &pools, false))
        };
        g.status.connect(&status);
        let cores = if config.pin {
            core_affinity::get_core_ids().unwrap_or_default()
        } else {
            Vec::new()
        };
        let mut threads = Vec::with_capacity(workers);
        for i in 0..workers {
            let s = Arc::clone(&shared);
            let core = (!cores.is_empty()).then(|| cores[i % cores.len()]);
            let spawned = std::thread::Builder::new()
                .name(format!("offhost-worker-{i}"))
                .spawn(move || {
                    if let Some(c) = core {
                        core_affinity::set_for_current(c);
                    }
                    s.run_worker();
                });
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) if threads.is_empty() => {
                    return Err(PipelineError::Start {
                        message: format!("cannot start a worker thread: {e}"),
                    })
                }
                Err(e) => {
                    tracing::warn!("worker thread {i} did not start ({e}); running with {i}");
                    break;
                }
            }
        }
        Ok(Running {
            shared,
            workers: threads,
            host,
            pools,
            queues,
            shape,
            started,
            _status: status,
        })
    }
}

/// The shape of checked graph `g`, for those who watch it run.
fn shape_of(g: &Graph) -> crate::Shape {
    crate::Shape {
        tasks: g
            .tasks
            .iter()
            .map(|t| crate::ShapeTask {
                name: t.name.clone(),
                line: t.line,
                engine: t.engine.clone(),
                priority: t.prio,
                inputs: t.inputs.clone(),
                outputs: t.outputs.clone(),
                pools: t.pools.clone(),
            })
            .collect(),
        queues: g
            .queues
            .iter()
            .map(|q| crate::ShapeQueue {
                name: q.name.clone(),
                reader: q.reader,
                writers: q.writers.clone(),
                capacity: None,
            })
            .collect(),
        pools: g
            .pools
            .iter()
            .map(|p| crate::ShapePool {
                name: p.name.clone(),
                count: p.count,
                size: p.size,
            })
            .collect(),
    }
    .with_capacities()
}

/// Statistics of a pipeline at one moment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stats {
    /// Seconds since start.
    pub elapsed_s: f64,
    /// Whether every task has finished.
    pub finished: bool,
    /// Per task, in pipeline order.
    pub tasks: Vec<TaskStats>,
    /// Per queue, by name.
    pub queues: Vec<QueueStats>,
    /// Per pool, by name.
    pub pools: Vec<PoolStats>,
}

impl Stats {
    /// Bytes that entered the pipeline: what its sources (tasks with no input) have put out.
    pub fn source_bytes(&self) -> u64 {
        self.tasks
            .iter()
            .filter(|t| t.buffers_in == 0)
            .map(|t| t.bytes_out)
            .fold(0, u64::saturating_add)
    }
}

/// Why a pipeline did not finish cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// A task failed; the rest of the pipeline was stopped and drained.
    #[error("task '{task}' (line {line}) failed: {message}")]
    TaskFailed {
        /// Command name.
        task: String,
        /// Line in the pipeline text.
        line: usize,
        /// The error.
        message: String,
        /// Statistics at the end.
        stats: Box<Stats>,
    },
}

/// Stops a running pipeline; clone it freely.
#[derive(Clone)]
pub struct Stopper {
    shared: Arc<Shared>,
}

impl Stopper {
    /// Stops the sources, as [`Running::stop`].
    pub fn stop(&self) {
        self.shared.request_stop();
    }

    /// Whether every task of the pipeline has finished, as [`Running::is_finished`].
    pub fn is_finished(&self) -> bool {
        self.shared.is_finished()
    }
}

/// Says when a running pipeline has finished, without holding it: a thread that waits on it
/// keeps none of the pipeline's memory (its free lists, see [`crate::PoolsHeld`]).
#[derive(Clone)]
pub struct FinishWatch {
    done: Arc<crate::sched::Done>,
}

impl FinishWatch {
    /// Waits at most `timeout` for every task to finish, returning as soon as they have:
    /// true if they have.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        self.done.wait(Some(timeout))
    }
}

/// A running pipeline.
pub struct Running {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    host: HostPorts,
    pools: Vec<Pool>,
    queues: Vec<Arc<Queue>>,
    shape: Arc<crate::Shape>,
    started: Instant,
    /// What the queues' hooks read as the pipeline's statistics ([`crate::StatusSource`]).
    _status: Arc<StatsFn>,
}

type StatsFn = dyn Fn() -> Stats + Send + Sync;

fn stats_of(
    started: Instant,
    shared: &Shared,
    queues: &[Arc<Queue>],
    pools: &[Pool],
    live_report: bool,
) -> Stats {
    Stats {
        elapsed_s: started.elapsed().as_secs_f64(),
        finished: shared.is_finished(),
        tasks: shared.task_stats(live_report),
        queues: queues.iter().map(|q| q.stats()).collect(),
        pools: pools.iter().map(Pool::stats).collect(),
    }
}

impl Running {
    /// The pipeline's tasks, queues and free lists and how they join.
    pub fn shape(&self) -> &Arc<crate::Shape> {
        &self.shape
    }

    /// What its tasks show to those who watch ([`crate::Board`]); the board outlives the
    /// pipeline for as long as somebody holds it.
    pub fn board(&self) -> &Arc<crate::Board> {
        &self.shared.queues.board
    }

    /// The host's end of `host-in name=NAME` (once; later calls return `None`).
    pub fn host_input(&mut self, name: &str) -> Option<HostInput> {
        self.host.inputs.remove(name).map(HostInput::new)
    }

    /// The host's end of `host-out name=NAME` (once; later calls return `None`).
    pub fn host_output(&mut self, name: &str) -> Option<HostOutput> {
        self.host.outputs.remove(name).map(HostOutput::from_port)
    }

    /// Whether `host-in name=NAME` is still open to take, and then whether it joins whole
    /// buffers (`whole=true`).
    pub fn peek_host_input(&self, name: &str) -> Option<bool> {
        self.host.inputs.get(name).map(|p| p.whole)
    }

    /// Whether `host-out name=NAME` is still open to take, and then whether its buffers
    /// cross a link whole (`whole=true`).
    pub fn peek_host_output(&self, name: &str) -> Option<bool> {
        self.host.outputs.get(name).map(|p| p.whole)
    }

    /// Names of the host-in channels not yet taken.
    pub fn open_host_inputs(&self) -> Vec<String> {
        let mut v: Vec<_> = self.host.inputs.keys().cloned().collect();
        v.sort();
        v
    }

    /// Names of the host-out channels not yet taken.
    pub fn open_host_outputs(&self) -> Vec<String> {
        let mut v: Vec<_> = self.host.outputs.keys().cloned().collect();
        v.sort();
        v
    }

    /// Closes the host channels nobody took: inputs end their stream, outputs discard.
    fn close_untaken(&mut self) {
        for (_, port) in self.host.inputs.drain() {
            drop(port.tx);
            if let Some(w) = port.waker.get() {
                w.wake();
            }
        }
        self.host.outputs.clear();
    }

    /// Bytes the pipeline's free lists hold (allocated when it started).
    pub fn pool_bytes(&self) -> u64 {
        self.pools
            .iter()
            .map(Pool::bytes)
            .fold(0, u64::saturating_add)
    }

    /// What says when this pipeline has finished, without holding it.
    pub fn watch_finish(&self) -> FinishWatch {
        FinishWatch {
            done: self.shared.done(),
        }
    }

    /// A handle on the memory of this pipeline's free lists that does not keep it, to see
    /// what its buffers still hold once it has ended (see [`crate::PoolsHeld`]).
    pub fn pools_held(&self) -> crate::PoolsHeld {
        crate::PoolsHeld::new(self.pools.iter().map(Pool::held).collect())
    }

    /// Worker threads running this pipeline (see [`Built::try_start`] for how many).
    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// Current statistics, with the reports of running tasks that no worker is running
    /// this moment (see [`counters`](Self::counters) for a look that touches nothing the
    /// workers take).
    pub fn stats(&self) -> Stats {
        self.stats_with(true)
    }

    /// Current statistics from the counters alone: a running task's report is left out (a
    /// finished task's is given), so that no lock a worker takes is touched. What a live
    /// view and a progress line read, often.
    pub fn counters(&self) -> Stats {
        self.stats_with(false)
    }

    fn stats_with(&self, live_report: bool) -> Stats {
        stats_of(
            self.started,
            &self.shared,
            &self.queues,
            &self.pools,
            live_report,
        )
    }

    /// Bytes that entered the pipeline so far, as [`Stats::source_bytes`] counts them, read
    /// from the tasks' counters alone: no task is locked and nothing allocated, so a watcher
    /// may ask often.
    pub fn source_bytes(&self) -> u64 {
        self.shared
            .tasks
            .iter()
            .map(TaskSlot::source_bytes)
            .fold(0, u64::saturating_add)
    }

    /// A handle that can stop this pipeline from another thread (a signal handler, say).
    pub fn stopper(&self) -> Stopper {
        Stopper {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Stops the sources; end of stream flows through the graph and it finishes in order.
    pub fn stop(&self) {
        self.shared.request_stop();
    }

    /// Ends the pipeline by force, for one that [`stop`](Self::stop) does not end (a task
    /// waiting for an answer that never comes): every task fails on its next turn with
    /// "ended by force: `why`" and is dropped, which also ends the threads of its links.
    /// The pipeline then fails with that error.
    pub fn abort(&self, why: &str) {
        self.shared.abort(why);
    }

    /// Whether every task has finished.
    pub fn is_finished(&self) -> bool {
        self.shared.is_finished()
    }

    /// Waits up to `timeout` for the pipeline to finish; returns whether it did.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        self.shared.wait_finished(Some(timeout))
    }

    /// Waits for the pipeline to finish and returns the final statistics, or the first task
    /// failure.
    pub fn wait(mut self) -> Result<Stats, RunError> {
        self.close_untaken();
        self.shared.wait_finished(None);
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        let stats = self.stats();
        let failure = self
            .shared
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match failure {
            None => Ok(stats),
            Some(f) => Err(RunError::TaskFailed {
                task: f.task,
                line: f.line,
                message: f.message,
                stats: Box::new(stats),
            }),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.workers.is_empty() {
            self.close_untaken();
            self.shared.request_stop();
            self.shared.wait_finished(Some(Duration::from_secs(5)));
            if self.shared.is_finished() {
                for w in self.workers.drain(..) {
                    let _ = w.join();
                }
            }
        }
    }
}
