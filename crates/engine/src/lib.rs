//! The offhost engine: filter tasks joined by queues, closed-loop buffer pools, the
//! pipeline description language and the built-in tasks (the ION data engine of the seed
//! papers, built for today).
//!
//! # Model
//!
//! - A [`Task`] is a filter with numbered input and output queues. Each turn it takes
//!   buffers from its inputs ([`Context::get`]), allocates buffers from the pools of its
//!   outputs ([`Context::alloc`]) and puts buffers on its outputs ([`Context::put`]). It
//!   returns [`Status::Progress`], [`Status::Blocked`] (no input or no buffer: it is woken
//!   when one arrives) or [`Status::Done`].
//! - Putting never blocks. A task waits only on an empty input or an empty pool.
//! - Buffers come from [`Pool`]s of preallocated buffers (the paper's free lists). A
//!   [`Buffer`] goes back to its pool when its last reference drops; [`Buffer::clone`]
//!   duplicates by reference. Buffers keep headroom and tailroom ([`BufMut::prepend`]) and
//!   are offset/length views ([`Buffer::slice`]). Memory is flat however long a pipeline runs.
//! - A few worker threads ([`EngineConfig::workers`], optionally pinned) run all tasks, in
//!   three [`Priority`] classes; each turn is limited to [`EngineConfig::batch`] gets and
//!   allocs so no task starves the others.
//! - End of stream: when a task finishes its output queues close once all their writers are
//!   done; readers see [`Get::Closed`] after draining. When a reader finishes early its input
//!   queues are *abandoned*: puts drop the buffer, and a task whose outputs are all
//!   abandoned is finished too, so the graph tears down in order both ways.
//!   [`Running::stop`] stops the sources; a failing task stops the sources as well and its
//!   error is returned by [`Running::wait`].
//!
//! # Pipelines
//!
//! ```
//! use offhost_engine::{EngineConfig, Pipeline, Registry};
//! let text = "
//!     ## a stereo tone, mixed to mono and mu-law encoded, to the host
//!     tone seconds=0.1 >stereo:audio(8,4096)
//!     mix <stereo >mono:pcm(8,4096)
//!     mulaw <mono >ulaw:law(8,2048)
//!     host-out name=speech <ulaw
//! ";
//! let registry = Registry::with_builtins();
//! let mut run = Pipeline::parse(text)?.start(&registry, &EngineConfig::default())?;
//! let out = run.host_output("speech").unwrap();
//! let mut bytes = 0;
//! while let Some(buf) = out.recv() {
//!     bytes += buf.len();
//! }
//! let stats = run.wait()?;
//! assert_eq!(bytes, 4410); // 0.1 s at 44.1 kHz, one byte per sample
//! assert!(stats.finished);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! See [`lang`] for the syntax and [`Registry::with_builtins`] / `offhost tasks` for the
//! built-in tasks. Other crates add tasks with [`Registry::register`] (a [`TaskInfo`] with
//! argument docs and port counts, and a factory); [`tasks::convert::converter`] turns a
//! byte-stream conversion into a task.
//!
//! # Hosts
//!
//! In process, [`Running::host_input`] and [`Running::host_output`] connect to the
//! pipeline's `host-in` / `host-out` tasks by channel name. Across processes,
//! `offhost_node::daemon::Daemon` serves pipelines over a link session (`offhost engine --listen URL`)
//! and `offhost_node::daemon::Client` submits them and opens their channels (`offhost submit`).
#![forbid(unsafe_code)]

mod backlog;
mod blobs;
mod board;
mod budget;
mod buffer;
pub mod call;
mod context;
mod engine;
mod error;
mod graph;
mod graph_checks;
mod hooks;
mod host;
mod host_error;
pub mod lang;
mod own_service;
mod pool;
mod ports;
mod queue;
mod registry;
mod runq;
pub mod sandbox;
mod sched;
mod shape;
mod slot;
mod task;
mod task_doc;
mod task_state;
pub mod tasks;
mod timer;
pub mod watch;

pub use blobs::Blobs;
pub use board::{
    Board, Item, Meter, Picture, ShowError, Shown, Watching, MAX_METERS, MAX_PICTURE_PIXELS,
    MAX_SHOWN_PER_TASK,
};
pub use budget::{
    Budget, DEFAULT_BUFFERS, DEFAULT_LINKS, DEFAULT_POOL_BYTES, DEFAULT_TASKS, DEFAULT_WORKERS,
};
pub use buffer::{BufMut, Buffer, BufferError};
pub use engine::{
    Built, EngineConfig, FinishWatch, NoSuchQueue, Pipeline, RunError, Running, Stats, Stopper,
};
pub use error::PipelineError;
pub use hooks::{GetHookFactory, HookInfo, HookSite, PutHookFactory, StatusSource};
pub use host::{HostError, HostInput, HostOutput, HOST_IN_DEPTH, HOST_IN_MIN_BUFFER, LAST, MORE};
pub use pool::{
    pool_bytes, release_together, Pool, PoolConfig, PoolSizeError, PoolStats, PoolsHeld,
    DEFAULT_HEADROOM, DEFAULT_TAILROOM,
};
pub use queue::{Get, GetHook, PutHook, QueueStats};
pub use registry::{ArgDoc, ArgError, Args, Build, Factory, Registry, TaskInfo};
pub use runq::{workers_spin, Helper, OutsideWaker, Waker};
pub use sandbox::{FileError, Files, ReadFile, WriteFile};
pub use shape::{Shape, ShapePool, ShapeQueue, ShapeTask};
pub use slot::TaskStats;
pub use task::{Context, Priority, Status, Task, TaskError};
pub use task_doc::SYNTAX;
