//! Closing a socket so that the last frames reach the peer.
//!
//! A socket closed with unread input makes the kernel reset the connection, and the reset
//! discards what was still queued for the peer: a refusal or an `error` frame naming the limit
//! the peer went past would be lost exactly when the peer keeps sending. So a socket whose
//! session ends is shut down for writing (the peer reads the frames, then end of file) and
//! handed to one background thread per process that reads and discards what the peer still
//! sends until it closes too, or [`LINGER`] passes. At most [`MAX_LINGERING`] sockets wait;
//! past that a socket is closed at once.

use std::os::fd::OwnedFd;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rustix::net::RecvFlags;

/// Longest a closed session's socket waits for the peer to close.
pub(crate) const LINGER: Duration = Duration::from_secs(2);
/// Most sockets lingering at once.
pub(crate) const MAX_LINGERING: usize = 1024;
/// Most bytes read and discarded from one lingering socket: a peer that keeps sending past
/// it is reset.
pub(crate) const MAX_DRAIN: usize = 1 << 20;

struct Lingering {
    sockets: Vec<(OwnedFd, Instant, usize)>,
    thread: bool,
}

static LINGERING: Mutex<Lingering> = Mutex::new(Lingering {
    sockets: Vec::new(),
    thread: false,
});

/// Shuts `fd` down for writing and closes it once the peer has closed its side, or after
/// [`LINGER`].
pub(crate) fn close(fd: OwnedFd) {
    let _ = rustix::net::shutdown(&fd, rustix::net::Shutdown::Write);
    let mut budget = MAX_DRAIN;
    if drain(&fd, &mut budget) {
        return;
    }
    let mut l = LINGERING.lock().unwrap_or_else(|e| e.into_inner());
    if l.sockets.len() >= MAX_LINGERING {
        return; // closed now
    }
    l.sockets.push((fd, Instant::now() + LINGER, budget));
    if !l.thread {
        let started = std::thread::Builder::new()
            .name("offhost-linger".into())
            .spawn(run)
            .is_ok();
        l.thread = started;
        if !started {
            l.sockets.clear();
        }
    }
}

/// Reads and discards what is there, within `budget` bytes; true when the peer has closed, the
/// socket failed or the budget is spent.
fn drain(fd: &OwnedFd, budget: &mut usize) -> bool {
    let mut sink = [0u8; 16 * 1024];
    loop {
        match rustix::net::recv(fd, &mut sink, RecvFlags::DONTWAIT) {
            Ok((0, _)) => return true,
            Ok((n, _)) => match budget.checked_sub(n) {
                Some(left) => *budget = left,
                None => return true,
            },
            Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => return false,
            Err(_) => return true,
        }
    }
}

fn run() {
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let mut l = LINGERING.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        l.sockets
            .retain_mut(|(fd, until, budget)| now < *until && !drain(fd, budget));
        if l.sockets.is_empty() {
            l.thread = false;
            return;
        }
    }
}
