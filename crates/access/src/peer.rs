//! Who may connect to a Unix socket: the peer's uid (`SO_PEERCRED`) must be ours or one of an
//! allow list. Socket files are also made owner-only (0600) by the listeners, but a socket in
//! the abstract namespace has no file mode at all, and a directory may be shared: the uid check
//! is what holds.

use std::os::fd::AsFd;

use crate::error::AccessError;

/// The uid this process runs as.
pub fn own_uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// The uids admitted besides our own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowUids {
    /// Extra uids (`--allow-uid`).
    pub extra: Vec<u32>,
}

impl AllowUids {
    /// Our own uid only.
    pub fn own() -> AllowUids {
        AllowUids::default()
    }

    /// Our own uid and `extra`.
    pub fn with(extra: impl IntoIterator<Item = u32>) -> AllowUids {
        AllowUids {
            extra: extra.into_iter().collect(),
        }
    }

    /// Whether `uid` is admitted.
    pub fn admits(&self, uid: u32) -> bool {
        uid == own_uid() || self.extra.contains(&uid)
    }

    /// Checks the peer of a connected Unix socket.
    pub fn check(&self, sock: impl AsFd) -> Result<(), AccessError> {
        let theirs = peer_uid(sock)?;
        if self.admits(theirs) {
            Ok(())
        } else {
            Err(AccessError::PeerUid {
                needs: offhost_units::Needs::new(offhost_units::Setting::AllowUid),
                ours: rustix::process::getuid().as_raw(),
                theirs,
            })
        }
    }
}

/// The uid of the process at the other end of a connected Unix socket.
pub fn peer_uid(sock: impl AsFd) -> Result<u32, AccessError> {
    rustix::net::sockopt::socket_peercred(sock)
        .map(|c| c.uid.as_raw())
        .map_err(|e| AccessError::PeerCred(e.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_uid_is_admitted_and_others_only_when_listed() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        AllowUids::own().check(&a).unwrap();
        let me = rustix::process::getuid().as_raw();
        let other = me.wrapping_add(1);
        assert!(!AllowUids::own().admits(other));
        assert!(AllowUids::with([other]).admits(other));
    }
}
