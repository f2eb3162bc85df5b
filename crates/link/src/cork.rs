//! Corks: several messages of one session written to its transport together.
//!
//! A sender that has a batch of small messages at once (an engine taking a host's submission
//! records) corks the session while it sends them: each message's frames wait in the
//! connection instead of being written by a system call (and, over TLS, sealed in a record)
//! of their own, and releasing the cork writes them all with one write. A cork must be held
//! only while the holder does not wait for anything: what waits behind it is not written.

use std::sync::Arc;

use crate::channel::Channel;
use crate::session::Handle;

/// Holds a session's new frames back until it is dropped (see the module's docs). Several may
/// be held on one session (by different threads): new frames wait while any is, and dropping
/// any of them writes all that waits, so that holders taking turns never keep the session
/// from writing.
pub struct Cork {
    handle: Arc<Handle>,
}

impl std::fmt::Debug for Cork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cork")
            .field("transport", &self.handle.transport)
            .finish()
    }
}

impl Channel {
    /// Corks this channel's session: messages sent on any of its channels wait in the
    /// connection until the returned cork is dropped, then go in one write.
    pub fn cork(&self) -> Cork {
        self.handle.driver.cork();
        Cork {
            handle: self.handle.clone(),
        }
    }
}

impl Cork {
    /// Whether this cork holds `ch`'s session.
    pub fn holds(&self, ch: &Channel) -> bool {
        Arc::ptr_eq(&self.handle.driver, &ch.handle.driver)
    }
}

impl Drop for Cork {
    fn drop(&mut self) {
        self.handle.driver.uncork();
    }
}
