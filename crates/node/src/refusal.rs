//! Why the engine daemon refuses a request (the `error` of a `{"ok":false,...}` reply) or a
//! channel (the reason its caller's channel is refused with). Each names what is wrong; a
//! limit names the `offhost engine` flag that raises it, the daemon's own configuration.

use offhost_engine::PipelineError;

use crate::names::NameError;

/// A refusal of the daemon.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The request is not one the daemon knows.
    #[error("bad request: {0}")]
    BadRequest(serde_json::Error),
    /// A pipeline name that is no name.
    #[error(transparent)]
    BadName(#[from] NameError),
    /// No pipeline holds this name.
    #[error("no pipeline named {0:?}")]
    NoPipelineNamed(String),
    /// No pipeline has this id (or it was forgotten).
    #[error("no pipeline {0}")]
    NoPipeline(u64),
    /// A call names a service the pipeline does not have.
    #[error(
        "no open host-in and host-out {0}, both whole=true, in the pipeline (a call takes both)"
    )]
    NoService(String),
    /// The pipeline has ended.
    #[error("the pipeline has ended")]
    Ended,
    /// The client that waited for the pipeline has gone.
    #[error("the client waiting for this pipeline has gone")]
    ClientGone,
    /// The pipeline's text is longer than the daemon takes.
    #[error("pipeline text of {bytes} bytes, over the limit of {limit} (raise it with --max-text-bytes)")]
    TextTooLarge {
        /// Bytes of the text.
        bytes: usize,
        /// `DaemonLimits::text_bytes`.
        limit: usize,
    },
    /// The pipeline does not parse, build or start.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// A running pipeline holds the name.
    #[error(
        "the name {name:?} is taken by running pipeline {by} (stop it, or choose another name)"
    )]
    NameTaken {
        /// The name.
        name: String,
        /// The pipeline holding it.
        by: u64,
    },
    /// The daemon runs as many pipelines as it may.
    #[error("the engine runs {running} pipelines, its limit (raise it with --max-pipelines)")]
    OverPipelines {
        /// Pipelines running (`DaemonLimits::pipelines`).
        running: usize,
    },
    /// The pipeline's free lists would take the daemon's past its limit.
    #[error("free lists of {asked} bytes would bring the engine's pipelines to {total}{}, over its limit of {limit} (raise it with --max-total-pool-bytes)", held_note(*.held))]
    OverPoolBytes {
        /// Bytes of the pipeline's free lists.
        asked: u64,
        /// Bytes all pipelines would hold with it.
        total: u64,
        /// Bytes of that held by ended pipelines whose buffers are still in use.
        held: u64,
        /// `DaemonLimits::pool_bytes`.
        limit: u64,
    },
}

fn held_note(held: u64) -> String {
    match held {
        0 => String::new(),
        n => format!(" ({n} bytes of it held by ended pipelines whose buffers are still in use, as by an output its host has not read)"),
    }
}
