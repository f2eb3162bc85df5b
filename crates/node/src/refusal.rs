//! Why the engine daemon refuses a request (the `error` of a `{"ok":false,...}` reply) or a
//! channel (the reason its caller's channel is refused with). Each names what is wrong.
//!
//! A refusal reaches its client as text, which the client cannot match by type: one over a
//! limit ([`Refusal::over_limit`]) names the limit by its id and adds the `offhost engine` flag
//! that raises it ([`OverLimit::for_peer`]), the daemon's own configuration, as the daemon is
//! what `offhost engine` serves.

use offhost_engine::PipelineError;
use offhost_units::{Limit, OverLimit};

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
    #[error("pipeline text of {bytes} bytes, {}", for_peer(self))]
    TextTooLarge {
        /// Bytes of the text.
        bytes: usize,
        /// `DaemonLimits::text_bytes`.
        limit: usize,
    },
    /// The pipeline does not parse, build or start.
    #[error("{}{}", .0, for_peer(self))]
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
    #[error("the engine runs {running} pipelines, {}", for_peer(self))]
    OverPipelines {
        /// Pipelines running (`DaemonLimits::pipelines`).
        running: usize,
    },
    /// A detached pipeline's lifetime is not a number of seconds above zero, or was given
    /// to a pipeline that is not detached.
    #[error("lifetime_s {0}: {1}")]
    BadLifetime(f64, &'static str),
    /// A detached pipeline's lifetime is longer than a pipeline may run here.
    #[error("a lifetime of {asked_s} s, {}", for_peer(self))]
    LifetimeTooLong {
        /// The lifetime asked for, in seconds.
        asked_s: f64,
        /// `DaemonLimits::pipeline_time`.
        limit: std::time::Duration,
    },
    /// A module sent with pipelines would bring its session's modules past the limit.
    #[error(
        "a module of {bytes} bytes would bring this session's modules to {total} bytes, {}",
        for_peer(self)
    )]
    ModuleTooLarge {
        /// Bytes of the module.
        bytes: u64,
        /// Bytes of the session's modules with it.
        total: u64,
        /// `DaemonLimits::module_bytes`.
        limit: u64,
    },
    /// A module channel that did not follow its protocol (a header `{"bytes": N}`, then N
    /// bytes).
    #[error("module {name}: {why}")]
    ModuleProtocol {
        /// The module's name.
        name: String,
        /// What was wrong.
        why: String,
    },
    /// The pipeline's free lists would take the daemon's past its limit.
    #[error("free lists of {asked} bytes would bring the engine's pipelines to {total}{}, {}", held_note(*.held), for_peer(self))]
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

impl Refusal {
    /// The limit this refusal went over, if it is one (the daemon's, or the pipeline's
    /// budget).
    pub fn over_limit(&self) -> Option<OverLimit> {
        match self {
            Refusal::TextTooLarge { bytes, limit } => {
                Some(OverLimit::new(Limit::MaxTextBytes, *limit).asked(*bytes))
            }
            Refusal::OverPipelines { running } => {
                Some(OverLimit::new(Limit::MaxPipelines, *running).asked(running.saturating_add(1)))
            }
            Refusal::ModuleTooLarge { total, limit, .. } => {
                Some(OverLimit::new(Limit::MaxModuleBytes, *limit).asked(*total))
            }
            Refusal::OverPoolBytes { total, limit, .. } => {
                Some(OverLimit::new(Limit::MaxTotalPoolBytes, *limit).asked(*total))
            }
            Refusal::Pipeline(e) => OverLimit::find(e).copied(),
            Refusal::LifetimeTooLong { asked_s, limit } => Some(
                OverLimit::new(Limit::MaxPipelineTime, limit.as_millis())
                    .asked((asked_s * 1000.0) as u64),
            ),
            _ => None,
        }
    }
}

/// The limit's words for the client: the limit gone over, and the `offhost engine` flag that
/// raises it (after a pipeline's error, which names its limit itself, only the flag).
fn for_peer(r: &Refusal) -> String {
    match (r, r.over_limit()) {
        (Refusal::Pipeline(_), Some(o)) => format!(" {}", o.for_peer()),
        (_, Some(o)) => format!("{o} {}", o.for_peer()),
        (_, None) => String::new(),
    }
}

fn held_note(held: u64) -> String {
    match held {
        0 => String::new(),
        n => format!(" ({n} bytes of it held by ended pipelines whose buffers are still in use, as by an output its host has not read)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_over_a_limit_carries_it_and_tells_the_client_the_engines_flag() {
        let r = Refusal::OverPipelines { running: 64 };
        assert_eq!(
            r.over_limit(),
            Some(OverLimit::new(Limit::MaxPipelines, 64u8).asked(65u8))
        );
        assert_eq!(
            r.to_string(),
            "the engine runs 64 pipelines, over the limit max_pipelines of 64 running pipelines (the engine raises it with offhost engine --max-pipelines)"
        );
        let r = Refusal::from(
            offhost_engine::Pipeline::parse("fill bytes=1k >a:p(100000,1)\nnull <a\n")
                .unwrap()
                .build(&offhost_engine::Registry::with_builtins())
                .map(drop)
                .unwrap_err(),
        );
        assert_eq!(r.over_limit().map(|o| o.limit), Some(Limit::MaxBuffers));
        assert!(
            r.to_string().ends_with(
                "over the limit max_buffers of 65536 buffers (the engine raises it with offhost engine --max-buffers)"
            ),
            "{r}"
        );
        assert_eq!(Refusal::Ended.over_limit(), None);
        assert_eq!(Refusal::Ended.to_string(), "the pipeline has ended");
    }
}
