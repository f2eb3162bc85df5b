//! How long a send, receive or loan waits: one parameter of the [`Channel`](crate::Channel)
//! calls instead of a method per way of waiting.

use std::time::Duration;

use crate::driver::Deadline;

/// How long a channel call waits for credit, a message, a rendezvous or a free loan. The
/// peer's deadline (`LinkOptions::peer_deadline`) ends every wait, whichever this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wait {
    /// Until it can be done, the peer ends the stream or the session fails.
    #[default]
    Forever,
    /// Not at all: done now, or [`LinkError::WouldBlock`](crate::LinkError::WouldBlock).
    /// A send that goes out now does not wait for a synchronous channel's rendezvous either.
    Never,
    /// At most this long, then [`LinkError::Timeout`](crate::LinkError::Timeout).
    For(Duration),
}

impl From<Duration> for Wait {
    fn from(d: Duration) -> Wait {
        Wait::For(d)
    }
}

impl From<Option<Duration>> for Wait {
    /// `None`: for ever; `Some(d)`: at most `d`.
    fn from(d: Option<Duration>) -> Wait {
        d.map_or(Wait::Forever, Wait::For)
    }
}

impl Wait {
    /// The instant the wait ends, from now.
    pub(crate) fn deadline(self) -> Deadline {
        match self {
            Wait::Forever => Deadline::Never,
            Wait::Never => Deadline::Now,
            Wait::For(d) => Deadline::after(Some(d)),
        }
    }
}
