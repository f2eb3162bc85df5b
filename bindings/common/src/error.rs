//! Errors of the bindings and the kinds they map to.

use offhost_link::offload::{ErrorCode, QueueError};
use offhost_link::LinkError;
use offhost_node::daemon::DaemonError;

/// What kind of failure an [`Error`] is: each binding maps a kind to one exception class
/// (Python) or status code (C).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A deadline passed.
    Timeout,
    /// A non-blocking call could not complete now.
    WouldBlock,
    /// The peer went away.
    PeerGone,
    /// The session, channel or host channel was closed.
    Closed,
    /// A message exceeds the channel's maximum.
    TooLarge,
    /// A URL could not be parsed.
    BadUrl,
    /// Loans need the shm transport.
    NoLoans,
    /// The peer broke the protocol, or the shared memory is corrupt.
    Protocol,
    /// A system call failed.
    Io,
    /// An argument is out of range (channel options, select of channels of two sessions).
    InvalidArgument,
    /// Pipeline text does not parse or does not check against the tasks.
    Pipeline,
    /// A task of a running pipeline failed.
    TaskFailed,
    /// The engine daemon refused a request or answered out of protocol.
    Engine,
    /// The pipeline has no host channel of that name.
    NoChannel,
    /// A PET file or encoding is malformed.
    Format,
    /// A scanner geometry is invalid.
    Geometry,
    /// The Rust code panicked: a bug, caught at the binding's edge (Python: `offhost.Error`
    /// itself; C: `OFFHOST_STATUS_PANIC`).
    Panicked,
}

/// A failure of a binding call; its message is the one of the Rust layer that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A session or channel call failed.
    #[error("{0}")]
    Link(#[from] LinkError),
    /// Pipeline text does not parse or check.
    #[error("{0}")]
    Pipeline(#[from] offhost_engine::PipelineError),
    /// A task failed: `task 'NAME' (line N) failed: MESSAGE`, as the engine says it.
    #[error("{0}")]
    TaskFailed(String),
    /// The engine daemon refused a request.
    #[error("engine refused: {0}")]
    Refused(String),
    /// The engine daemon's reply was out of protocol.
    #[error("bad reply from engine: {0}")]
    EngineProtocol(String),
    /// The pipeline has no such host channel.
    #[error("the pipeline has no host-{dir} channel {name:?} (it has: {have})")]
    NoChannel {
        /// `in` or `out`.
        dir: &'static str,
        /// The name asked for.
        name: String,
        /// The names it has.
        have: String,
    },
    /// The host-in channel was closed by this side.
    #[error("host-in channel {0:?} is closed")]
    InputClosed(String),
    /// The pipeline no longer reads a host-in channel.
    #[error("the pipeline no longer reads host-in channel {0:?}")]
    NotRead(String),
    /// Nothing arrived in time.
    #[error("timed out")]
    Timeout,
    /// A PET file or encoding is malformed.
    #[error("{0}")]
    Format(#[from] offhost_pet::FormatError),
    /// A scanner geometry is invalid.
    #[error("{0}")]
    Geometry(#[from] offhost_pet::GeometryError),
    /// An argument is out of range.
    #[error("{0}")]
    Invalid(String),
    /// A call of a host's submission and completion queues failed.
    #[error("{0}")]
    Queue(#[from] QueueError),
    /// The Rust code panicked (a bug); caught before it reached the caller.
    #[error("offhost panicked: {0}")]
    Panicked(String),
}

/// Runs `f`, turning a panic into [`Error::Panicked`], so that no panic crosses a binding's
/// edge (into Python as a `BaseException`, or into C, where unwinding aborts).
pub fn guard<T>(f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|p| Err(Error::Panicked(panic_message(p.as_ref()))))
}

/// The message of a panic's payload.
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown".into())
}

impl From<DaemonError> for Error {
    fn from(e: DaemonError) -> Self {
        match e {
            DaemonError::Link(l) => Error::Link(l),
            DaemonError::Refused(m) => Error::Refused(m),
            DaemonError::Protocol(m) => Error::EngineProtocol(m),
            other => Error::EngineProtocol(other.to_string()),
        }
    }
}

impl Error {
    /// The kind of this failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Link(l) => link_kind(l),
            Error::Pipeline(_) => ErrorKind::Pipeline,
            Error::TaskFailed(_) => ErrorKind::TaskFailed,
            Error::Refused(_) | Error::EngineProtocol(_) => ErrorKind::Engine,
            Error::NoChannel { .. } => ErrorKind::NoChannel,
            Error::InputClosed(_) | Error::NotRead(_) => ErrorKind::Closed,
            Error::Timeout => ErrorKind::Timeout,
            Error::Format(_) => ErrorKind::Format,
            Error::Geometry(_) => ErrorKind::Geometry,
            Error::Invalid(_) => ErrorKind::InvalidArgument,
            Error::Queue(q) => queue_kind(q),
            Error::Panicked(_) => ErrorKind::Panicked,
        }
    }

    /// The limit this failure went over, where the layer that failed carries it (the budget
    /// of a pipeline on the embedded engine, a link's limits). A refusal an engine daemon or
    /// an off-host engine sends is text: it names the limit by its id, and the `offhost
    /// engine` flag that raises it there, in words only.
    ///
    /// No parameter of the bindings raises a limit: each binding says the limit's
    /// [`id`](offhost_units::Limit::id) (Python: the exception's `limit`; C:
    /// `offhost_last_limit()`), as the message does.
    pub fn over_limit(&self) -> Option<offhost_units::OverLimit> {
        match self {
            Error::Link(l) => l.over_limit(),
            _ => offhost_units::OverLimit::find(self).copied(),
        }
    }

    /// The setting that would have allowed what this failure refused (plain tcp, a
    /// `tls:` URL without certificates, a peer of another uid), by the same id as the
    /// bindings' parameter where they have one (`insecure`, `tls_certificates`); Python: the
    /// exception's `setting`.
    pub fn needs(&self) -> Option<offhost_units::Setting> {
        offhost_units::Needs::find(self).map(|n| n.setting)
    }
}

/// The kind of a queue failure: a spent budget is "not now" (reap completions first), a
/// submission the engine failed takes the kind of its error code.
pub fn queue_kind(e: &QueueError) -> ErrorKind {
    match e {
        QueueError::Shm(_) | QueueError::Corrupt(_) => ErrorKind::Protocol,
        QueueError::Refused(_) => ErrorKind::Engine,
        QueueError::EngineGone => ErrorKind::PeerGone,
        QueueError::Full(_) => ErrorKind::WouldBlock,
        QueueError::BadChannel(_) => ErrorKind::Closed,
        QueueError::TooLarge { .. } => ErrorKind::TooLarge,
        QueueError::Timeout => ErrorKind::Timeout,
        QueueError::BadAddress(_) => ErrorKind::BadUrl,
        QueueError::Setup(_) => ErrorKind::InvalidArgument,
        QueueError::Failed(f) => code_kind(f.code),
        _ => ErrorKind::Engine,
    }
}

/// The kind of a submission's error code.
pub fn code_kind(code: ErrorCode) -> ErrorKind {
    match code {
        ErrorCode::TooLarge => ErrorKind::TooLarge,
        ErrorCode::EngineGone => ErrorKind::PeerGone,
        ErrorCode::Closed | ErrorCode::BadHandle => ErrorKind::Closed,
        ErrorCode::BadAddress => ErrorKind::BadUrl,
        ErrorCode::Budget => ErrorKind::WouldBlock,
        _ => ErrorKind::Engine,
    }
}

/// The kind of a link failure.
pub fn link_kind(e: &LinkError) -> ErrorKind {
    match e {
        LinkError::BadUrl { .. } => ErrorKind::BadUrl,
        LinkError::Io { .. } | LinkError::NoListener(_) => ErrorKind::Io,
        LinkError::Timeout => ErrorKind::Timeout,
        LinkError::WouldBlock => ErrorKind::WouldBlock,
        LinkError::PeerGone => ErrorKind::PeerGone,
        LinkError::SessionClosed | LinkError::Closed | LinkError::Reset { .. } => ErrorKind::Closed,
        LinkError::TooLarge { .. } => ErrorKind::TooLarge,
        LinkError::BadOptions(_) | LinkError::BadSelect => ErrorKind::InvalidArgument,
        LinkError::NoLoans => ErrorKind::NoLoans,
        LinkError::Protocol(_) | LinkError::Shm(_) => ErrorKind::Protocol,
        _ => ErrorKind::Io,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_the_link_error() {
        let e = Error::from(LinkError::TooLarge { len: 9, max: 8 });
        assert_eq!(e.kind(), ErrorKind::TooLarge);
        assert_eq!(
            e.to_string(),
            "message of 9 bytes exceeds the channel maximum of 8"
        );
        assert_eq!(Error::from(LinkError::Timeout).kind(), ErrorKind::Timeout);
        assert_eq!(
            Error::from(DaemonError::Refused("no pipeline 7".into())).kind(),
            ErrorKind::Engine
        );
    }

    #[test]
    fn a_panic_becomes_an_error_of_its_own_kind() {
        let e = guard::<()>(|| panic!("boom {}", 7)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Panicked);
        assert_eq!(e.to_string(), "offhost panicked: boom 7");
        assert_eq!(guard(|| Ok(3)).unwrap(), 3);
    }

    #[test]
    fn queue_kinds_follow_the_queue_error_and_the_code() {
        let e = Error::from(QueueError::TooLarge { len: 9, max: 8 });
        assert_eq!(e.kind(), ErrorKind::TooLarge);
        assert_eq!(e.to_string(), "message of 9 bytes exceeds the limit of 8");
        assert_eq!(
            Error::from(QueueError::Full("outstanding submissions")).kind(),
            ErrorKind::WouldBlock
        );
        assert_eq!(
            Error::from(QueueError::EngineGone).kind(),
            ErrorKind::PeerGone
        );
        assert_eq!(code_kind(ErrorCode::Unreachable), ErrorKind::Engine);
        assert_eq!(code_kind(ErrorCode::Closed), ErrorKind::Closed);
    }
}
