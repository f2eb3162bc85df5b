//! Errors of sessions and channels.

use offhost_proto::{CallError, ProtoError};

/// A session or channel call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    /// The URL is not one of `tls:HOST:PORT`, `tcp:HOST:PORT`, `unix:PATH`, `mem:NAME`,
    /// `shm:ADDR`.
    #[error("bad url {url:?}: {why}")]
    BadUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A system call on the transport failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A server was asked to listen on plain TCP without opting in.
    #[error("refusing to listen on {0}: plain tcp has no authentication or encryption; use tls:HOST:PORT with a certificate directory (the setting tls_certificates), or allow plain tcp ({1})")]
    Insecure(String, #[source] offhost_units::Needs),
    /// A `tls:` URL without a certificate directory.
    #[error("{0} needs a certificate directory ({1}; `offhost certs DIR` makes one)")]
    NoCertificates(String, #[source] offhost_units::Needs),
    /// Certificates, the TLS handshake or a peer check failed.
    #[error("{0}")]
    Access(#[from] offhost_access::AccessError),
    /// No listener answers at a `mem:` name.
    #[error("no in-process listener named {0:?}")]
    NoListener(String),
    /// The deadline passed before the call could complete.
    #[error("timed out")]
    Timeout,
    /// A non-blocking call could not complete now.
    #[error("would block")]
    WouldBlock,
    /// The peer went away (closed the link, exited or died).
    #[error("peer is gone")]
    PeerGone,
    /// The peer sent nothing, not even a heartbeat, for its deadline (`peer_deadline` of
    /// [`LinkOptions`](crate::LinkOptions) or [`Limits`](crate::Limits)): it is stopped,
    /// frozen, or cut off by the network. The session is dead.
    #[error("the peer sent nothing for {:.1} s, its deadline: it is stopped, frozen or cut off", .0.as_secs_f64())]
    PeerSilent(std::time::Duration),
    /// This session was closed.
    #[error("session is closed")]
    SessionClosed,
    /// The sending direction of the channel was closed by this side.
    #[error("channel is closed for sending")]
    Closed,
    /// The message is larger than the channel's maximum message size.
    #[error("message of {len} bytes exceeds the channel maximum of {max}")]
    TooLarge {
        /// Length of the message.
        len: usize,
        /// Channel maximum.
        max: u64,
    },
    /// The peer refused or reset the channel.
    #[error("channel reset by peer (code {code}): {reason}")]
    Reset {
        /// Code sent by the peer.
        code: u32,
        /// Reason sent by the peer.
        reason: String,
    },
    /// Channel options are out of range.
    #[error("invalid channel options: {0}")]
    BadOptions(&'static str),
    /// The peer broke the protocol; the link was closed.
    #[error("protocol error: {0}")]
    Protocol(#[from] ProtoError),
    /// The shared-memory layer failed.
    #[error("shared memory: {0}")]
    Shm(#[from] offhost_shm::ShmError),
    /// Zero-copy loans need the `shm` transport.
    #[error("loans need the shm transport")]
    NoLoans,
    /// A budget of this side has no room for what was asked: the limit, its value and what
    /// asked for more.
    #[error("{0}")]
    Limit(#[source] offhost_units::OverLimit),
    /// `select` was given no channels, or channels of more sessions than it waits on at once
    /// ([`MAX_SELECT_SESSIONS`](crate::MAX_SELECT_SESSIONS)).
    #[error("select needs one or more channels, of at most 64 sessions")]
    BadSelect,
}

impl LinkError {
    /// This error as a server tells its peer (a refused session or channel): its message,
    /// and for one over a limit, how the server's operator raises it
    /// ([`OverLimit::for_peer`](offhost_units::OverLimit::for_peer)).
    pub fn for_peer(&self) -> String {
        match self.over_limit() {
            Some(o) => format!("{self} {}", o.for_peer()),
            None => self.to_string(),
        }
    }

    /// The limit this error went over, if it is one.
    pub fn over_limit(&self) -> Option<offhost_units::OverLimit> {
        match self {
            LinkError::Limit(over) => Some(*over),
            _ => None,
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        LinkError::Io {
            context: context.into(),
            source,
        }
    }
}

impl From<CallError> for LinkError {
    fn from(e: CallError) -> Self {
        match e {
            CallError::Blocked => LinkError::WouldBlock,
            CallError::TooLarge { len, max } => LinkError::TooLarge { len, max },
            CallError::Closed => LinkError::Closed,
            CallError::Reset { code, reason } => LinkError::Reset { code, reason },
            CallError::BadOptions(why) => LinkError::BadOptions(why),
            // An id we handed out is always known to the connection unless the link is gone.
            CallError::NoChannel(_) | CallError::LinkClosed => LinkError::SessionClosed,
            _ => LinkError::SessionClosed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use offhost_units::{Limit, OverLimit};

    #[test]
    fn a_limit_is_found_in_the_error() {
        let e = LinkError::Limit(OverLimit::new(Limit::MaxThreads, 4u8));
        assert_eq!(e.to_string(), "over the limit max_threads of 4 threads");
        assert_eq!(OverLimit::find(&e), e.over_limit().as_ref());
        assert_eq!(LinkError::Timeout.over_limit(), None);
    }
}
