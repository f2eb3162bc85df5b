//! The offhost engine as a network node: what an engine does beyond running pipelines in
//! its own process. It stands on the engine core ([`offhost_engine`]: tasks, scheduler,
//! pools, queues, the pipeline language, host ports) and on the link layer
//! ([`offhost_link`]), and adds:
//!
//! - [`daemon`]: the engine daemon (`offhost engine --listen URL`), which serves submitted
//!   pipelines over link sessions, and its [`daemon::Client`] (`offhost submit`);
//! - [`jobs`]: a pipeline file run here, submitted to one daemon or placed over several, as
//!   the commands run them;
//! - [`placement`]: one pipeline over several engines (`@NAME`), split into parts joined by
//!   engine-to-engine queues;
//! - [`remote`]: the tasks that reach other engines, `engine-out` (a queue's writer end) and
//!   `call url=… pipeline=…`; [`register`](remote::register) adds them to a
//!   [`Registry`](offhost_engine::Registry) — the core knows of them only as tasks;
//! - [`calls`]: calls between engines, the caller's side and the daemon's, and a doc of who
//!   owns what of the `call` feature;
//! - [`offload`]: the engine as protocol processor for the off-host transport;
//! - [`names`]: pipeline names, found wherever an id would do;
//! - [`DaemonLimits`]: what a daemon allows over all its pipelines.
#![forbid(unsafe_code)]

pub mod calls;
pub mod daemon;
mod engine_out;
pub mod jobs;
mod limits;
mod link_task;
pub mod names;
pub mod offload;
pub mod placement;
mod refusal;
pub mod remote;

pub use limits::{
    DaemonLimits, DEFAULT_ORPHAN_GRACE, DEFAULT_PIPELINES, DEFAULT_PIPELINE_BYTES,
    DEFAULT_PIPELINE_TIME, DEFAULT_TEXT_BYTES, DEFAULT_TOTAL_POOL_BYTES,
};
pub use refusal::Refusal;
