//! The suite's error: what went wrong, with what the experiment was doing.

use offhost_bench::affinity::PinError;
use offhost_bench::cpu::CpuError;
use offhost_bench::plot::PlotError;

/// Why an experiment stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An option out of range, or naming something the experiment does not measure.
    #[error("{0}")]
    Invalid(String),
    /// The run contradicts itself: echoed bytes differ, a peer ended early or sent too much.
    #[error("{0}")]
    Check(String),
    /// A peer process did not come up or misbehaved.
    #[error("{0}")]
    Peer(String),
    /// An operating-system call failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The shared-memory rings failed.
    #[error(transparent)]
    Shm(#[from] offhost_shm::ShmError),
    /// Certificates could not be made or loaded.
    #[error(transparent)]
    Access(#[from] offhost_access::AccessError),
    /// A link session or channel failed.
    #[error(transparent)]
    Link(#[from] offhost_link::LinkError),
    /// A CPU-load measurement failed.
    #[error(transparent)]
    Cpu(#[from] CpuError),
    /// A thread could not be pinned.
    #[error(transparent)]
    Pin(#[from] PinError),
    /// A plot could not be drawn.
    #[error(transparent)]
    Plot(#[from] PlotError),
    /// A pipeline's text or graph is wrong.
    #[error(transparent)]
    Pipeline(#[from] offhost_engine::PipelineError),
    /// A pipeline failed while it ran.
    #[error(transparent)]
    Run(#[from] Box<offhost_engine::RunError>),
    /// A scanner or sinogram geometry is wrong.
    #[error(transparent)]
    Geometry(#[from] offhost_pet::GeometryError),
    /// A PET file could not be written or read.
    #[error(transparent)]
    Format(#[from] offhost_pet::FormatError),
    /// The network between the engines could not be made.
    #[error(transparent)]
    Net(#[from] crate::offload::net::NetError),
    /// JSON could not be written or read.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// What the experiment was doing when `source` happened.
    #[error("{what}")]
    Context {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: Box<Error>,
    },
}

impl From<offhost_engine::RunError> for Error {
    fn from(e: offhost_engine::RunError) -> Error {
        Error::Run(Box::new(e))
    }
}

/// The suite's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Says what was being done when an error happened, like `anyhow::Context`.
pub trait Context<T> {
    /// Wraps an error with `what`.
    fn context(self, what: impl Into<String>) -> Result<T>;
    /// Wraps an error with the text `what` builds (only on error).
    fn with_context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl Into<String>) -> Result<T> {
        self.map_err(|e| Error::Context {
            what: what.into(),
            source: Box::new(e.into()),
        })
    }

    fn with_context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T> {
        self.map_err(|e| Error::Context {
            what: what().into(),
            source: Box::new(e.into()),
        })
    }
}

/// Fails with [`Error::Check`] saying `what` unless `ok`.
pub(crate) fn check(ok: bool, what: impl FnOnce() -> String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::Check(what()))
    }
}

/// Fails with [`Error::Invalid`] saying `what` unless `ok`.
pub(crate) fn require(ok: bool, what: impl FnOnce() -> String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(what()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn context_keeps_the_cause_as_source() {
        let r: Result<()> = Err(std::io::Error::other("boom")).context("connect to echo engine");
        let e = r.unwrap_err();
        assert_eq!(e.to_string(), "connect to echo engine");
        assert_eq!(e.source().unwrap().to_string(), "boom");
        assert!(check(false, || "differ".into()).is_err());
        assert!(require(true, || unreachable!()).is_ok());
    }
}
