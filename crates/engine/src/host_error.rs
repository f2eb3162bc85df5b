//! Errors on a host port: the one type a host's end and its backlog share.

/// Errors on a host port.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// Nothing arrived within the timeout.
    #[error("timed out")]
    Timeout,
    /// The pipeline's task for this port has finished; nothing more can be sent.
    #[error("the pipeline no longer reads this channel")]
    Closed,
    /// The sender gave up waiting for room ([`HostInput::send_while`](crate::HostInput::send_while)): the message was not
    /// sent.
    #[error("gave up waiting for the pipeline to take more")]
    GaveUp,
}
