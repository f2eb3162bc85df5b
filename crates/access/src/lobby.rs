//! Where accepted connections wait, without a thread, until their peer has said something.
//!
//! An honest client speaks at once: a TLS ClientHello, a shared-memory hello, NBD's flags and
//! first option after the greeting. A peer that connects and says nothing, or trickles a byte
//! now and then, costs a server here one descriptor and one entry of a `poll(2)` set on one
//! thread, never a handshake thread: [`Lobby::admit`] hands the connection to the lobby's
//! thread, which calls `ready` with it once [`LobbyLimits::ready_bytes`] bytes wait unread on
//! its socket (or the peer closed it, so that the handshake sees why), and closes it when it
//! has waited past [`LobbyLimits::deadline`]. The lobby holds at most `max_per_source`
//! connections of one source and `max_total` in all (and at most half of the descriptors the
//! process may open, less a reserve): past them, the oldest waiting one of that source (or of
//! the source holding the most) is closed to make room. A newcomer is never the one pushed
//! out, and an honest client leaves the lobby within moments, so a crowd has to push
//! `max_per_source` connections through before its first bytes arrive to push it out.
//!
//! What leaves the lobby goes on to its handshake under the [`Unproven`](crate::Unproven)
//! budget.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};

use crate::unproven::{Source, SETTLE};

/// Default [`LobbyLimits::max_total`].
pub const DEFAULT_LOBBY: usize = 1024;
/// Default [`LobbyLimits::max_per_source`].
pub const DEFAULT_LOBBY_PER_SOURCE: usize = 256;

/// Descriptors the lobby leaves to the rest of the process.
const FD_RESERVE: u64 = 256;

/// The lobby's budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LobbyLimits {
    /// Connections waiting, all sources together.
    pub max_total: usize,
    /// Connections waiting from one source.
    pub max_per_source: usize,
    /// How long one may wait.
    pub deadline: Duration,
    /// Unread bytes that make a connection ready (at least 1).
    pub ready_bytes: u64,
}

/// Connections that may wait in a lobby per handshake that may run in front of it (per
/// source: four times that, so that one source may fill half of it): 1024 and 512 for the
/// default 64 handshakes, 8 per source.
pub const LOBBY_PER_HANDSHAKE: usize = 16;

impl LobbyLimits {
    /// The lobby in front of `max_handshakes` handshakes (`per_source` from one source) that
    /// each have `deadline`: [`LOBBY_PER_HANDSHAKE`] waiting per handshake, four times that
    /// per source; a connection is ready once `ready_bytes` wait unread.
    pub fn in_front_of(
        max_handshakes: usize,
        per_source: usize,
        deadline: Duration,
        ready_bytes: u64,
    ) -> LobbyLimits {
        LobbyLimits {
            max_total: max_handshakes.saturating_mul(LOBBY_PER_HANDSHAKE),
            max_per_source: per_source.saturating_mul(LOBBY_PER_HANDSHAKE * 4),
            deadline,
            ready_bytes,
        }
    }
}

/// One waiting connection.
struct Guest<T> {
    source: Source,
    since: Instant,
    fd: OwnedFd,
    item: T,
    /// Some bytes wait, fewer than make it ready: not polled for input (which would report
    /// them at once, for ever), but looked at again on every round.
    trickled: bool,
}

/// The lobby of one listener; dropping it closes every waiting connection.
pub struct Lobby<T: Send + 'static> {
    tx: Sender<Guest<T>>,
    waker: UnixStream,
    stop: Arc<AtomicBool>,
    closed: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl<T: Send + 'static> std::fmt::Debug for Lobby<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lobby").finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Lobby<T> {
    /// Starts the lobby's thread (named `name`), which calls `ready` with each connection that
    /// has spoken.
    pub fn start(
        name: &str,
        limits: LobbyLimits,
        ready: impl FnMut(T) + Send + 'static,
    ) -> std::io::Result<Lobby<T>> {
        // Each waiting connection holds two descriptors (its socket and the lobby's
        // duplicate): the lobby never takes more than half of what the process may open,
        // less a reserve for everything else, so that accepting never fails for want of one.
        let nofile = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .unwrap_or(u64::MAX);
        let room = usize::try_from(nofile.saturating_sub(FD_RESERVE) / 2).unwrap_or(usize::MAX);
        let limits = LobbyLimits {
            max_total: limits.max_total.min(room.max(16)),
            ..limits
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let (waker, wake_rx) = UnixStream::pair()?;
        wake_rx.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let closed = Arc::new(AtomicU64::new(0));
        let (s, c) = (Arc::clone(&stop), Arc::clone(&closed));
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                Room {
                    limits,
                    guests: Vec::new(),
                    closed: c,
                }
                .run(&rx, &wake_rx, &s, ready)
            })?;
        Ok(Lobby {
            tx,
            waker,
            stop,
            closed,
            thread: Some(thread),
        })
    }

    /// Lets the connection on `socket` (from `source`) wait; `item` (which owns it) goes to
    /// `ready`, or is dropped if it waits too long or makes way.
    pub fn admit(&self, source: Source, socket: impl AsFd, item: T) -> std::io::Result<()> {
        let fd = socket.as_fd().try_clone_to_owned()?;
        let guest = Guest {
            source,
            since: Instant::now(),
            fd,
            item,
            trickled: false,
        };
        self.tx
            .send(guest)
            .map_err(|_| std::io::Error::other("the lobby's thread has ended"))?;
        // A full waker already has a wake-up pending.
        let _ = rustix::net::send(
            &self.waker,
            &[1],
            rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL,
        );
        Ok(())
    }

    /// Connections the lobby closed (pushed out, or past the deadline).
    pub fn closed(&self) -> u64 {
        self.closed.load(Ordering::Relaxed)
    }
}

impl<T: Send + 'static> Drop for Lobby<T> {
    fn drop(&mut self) {
        // Ordering: Release pairs with the Acquire load of the lobby's thread, which the
        // byte sent next wakes from its poll.
        self.stop.store(true, Ordering::Release);
        // NOSIGNAL: the lobby's thread may have ended and closed the other end; a C program
        // (which does not ignore SIGPIPE, as Rust's runtime does) must not die of it.
        let _ = rustix::net::send(
            &self.waker,
            &[1],
            rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL,
        );
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Room<T> {
    limits: LobbyLimits,
    guests: Vec<Guest<T>>,
    closed: Arc<AtomicU64>,
}

impl<T> Room<T> {
    fn run(
        mut self,
        rx: &Receiver<Guest<T>>,
        wake: &UnixStream,
        stop: &AtomicBool,
        mut ready: impl FnMut(T),
    ) {
        let mut drain = [0u8; 256];
        // Ordering: Acquire pairs with the Release store in `Lobby::drop`.
        while !stop.load(Ordering::Acquire) {
            while let Ok(g) = rx.try_recv() {
                self.make_room(g.source);
                self.guests.push(g);
            }
            self.expire();
            // Trickled guests are looked at again by time: soon after they came (an honest
            // client's first words may arrive in two pieces, NBD's flags and then its
            // option), then now and then.
            let now = Instant::now();
            let timeout = self
                .guests
                .iter()
                .filter(|g| g.trickled)
                .map(|g| match now.saturating_duration_since(g.since) < SETTLE {
                    true => Duration::from_millis(1),
                    false => Duration::from_millis(20),
                })
                .min()
                .unwrap_or(Duration::from_millis(100));
            let ts = rustix::time::Timespec {
                tv_sec: 0,
                tv_nsec: timeout.as_nanos() as i64,
            };
            let mut speaking = Vec::new();
            {
                let mut fds = Vec::with_capacity(self.guests.len() + 1);
                fds.push(PollFd::new(wake, PollFlags::IN));
                fds.extend(self.guests.iter().map(|g| {
                    let events = if g.trickled {
                        PollFlags::empty()
                    } else {
                        PollFlags::IN
                    };
                    PollFd::new(&g.fd, events)
                }));
                if rustix::event::poll(&mut fds, Some(&ts)).unwrap_or(0) > 0 {
                    for (i, p) in fds.iter().enumerate().skip(1) {
                        if !p.revents().is_empty() {
                            speaking.push(i - 1);
                        }
                    }
                }
                let mut marked = vec![false; self.guests.len()];
                for &i in &speaking {
                    marked[i] = true;
                }
                for (i, g) in self.guests.iter().enumerate() {
                    if g.trickled && !marked[i] {
                        speaking.push(i);
                    }
                }
            }
            // Bounded: a wake-up byte per admission; a full read means more may wait.
            for _ in 0..64 {
                match rustix::net::recv(wake, &mut drain, rustix::net::RecvFlags::DONTWAIT) {
                    Ok((_, n)) if n == drain.len() => {}
                    _ => break,
                }
            }
            let mut leaving = Vec::new();
            for i in speaking {
                let g = &mut self.guests[i];
                let unread = rustix::io::ioctl_fionread(&g.fd).unwrap_or(0);
                // Readable with nothing to read: the end (the handshake sees it).
                let hung_up = unread == 0 && !g.trickled;
                if hung_up || unread >= self.limits.ready_bytes.max(1) {
                    leaving.push(i);
                } else if unread > 0 {
                    g.trickled = true;
                }
            }
            leaving.sort_unstable();
            for i in leaving.into_iter().rev() {
                let g = self.guests.swap_remove(i);
                ready(g.item);
            }
        }
    }

    /// Closes the oldest of `source` while it holds its budget, then the oldest of the
    /// largest source while the lobby is full (before a newcomer of `source` comes in).
    fn make_room(&mut self, source: Source) {
        let of = |gs: &[Guest<T>], s: Source| gs.iter().filter(|g| g.source == s).count();
        if of(&self.guests, source) >= self.limits.max_per_source.max(1) {
            self.close_oldest(source);
        }
        if self.guests.len() >= self.limits.max_total.max(1) {
            let mut counts: std::collections::HashMap<Source, usize> = Default::default();
            for g in &self.guests {
                *counts.entry(g.source).or_insert(0) += 1;
            }
            if let Some((s, _)) = counts.into_iter().max_by_key(|(_, n)| *n) {
                self.close_oldest(s);
            }
        }
    }

    fn close_oldest(&mut self, source: Source) {
        let oldest = self
            .guests
            .iter()
            .enumerate()
            .filter(|(_, g)| g.source == source)
            .min_by_key(|(_, g)| g.since)
            .map(|(i, _)| i);
        if let Some(i) = oldest {
            self.close(i);
        }
    }

    fn close(&mut self, i: usize) {
        let g = self.guests.swap_remove(i);
        let _ = rustix::net::shutdown(&g.fd, rustix::net::Shutdown::Both);
        self.closed.fetch_add(1, Ordering::Relaxed);
    }

    fn expire(&mut self) {
        let now = Instant::now();
        let deadline = self.limits.deadline;
        // Bounded by the number of guests.
        for i in (0..self.guests.len()).rev() {
            if now.saturating_duration_since(self.guests[i].since) >= deadline {
                self.close(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn limits(per: usize) -> LobbyLimits {
        LobbyLimits {
            max_total: 100,
            max_per_source: per,
            deadline: Duration::from_secs(60),
            ready_bytes: 4,
        }
    }

    #[test]
    fn a_connection_leaves_once_it_has_spoken_and_silent_ones_make_way() {
        let (tx, rx) = std::sync::mpsc::channel();
        let lobby = Lobby::start("lobby-test", limits(2), move |s: UnixStream| {
            tx.send(s).unwrap();
        })
        .unwrap();
        let src = Source::Uid(1);
        let mut peers = Vec::new();
        for _ in 0..3 {
            let (ours, theirs) = UnixStream::pair().unwrap();
            lobby.admit(src, &ours, ours.try_clone().unwrap()).unwrap();
            drop(ours);
            peers.push(theirs);
        }
        // The first (oldest) made way for the third: its peer reads the end.
        peers[0]
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        assert_eq!(peers[0].read(&mut [0u8; 1]).unwrap(), 0);
        // A trickle of fewer bytes than ready_bytes stays; four bytes leave.
        peers[1].write_all(b"ab").unwrap();
        peers[2].write_all(b"abcd").unwrap();
        let mut out = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let mut b = [0u8; 4];
        out.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"abcd");
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
        assert_eq!(lobby.closed(), 1);
    }
}
