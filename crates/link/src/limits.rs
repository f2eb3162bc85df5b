//! Budgets of a link server: what its peers may make it hold, and the threads its services
//! start for them.
//!
//! [`Limits`] is the one options type for budgets at this layer: a [`Server`](crate::Server)
//! applies it to every session it accepts ([`Server::set_limits`](crate::Server::set_limits)),
//! and the services built on sessions (the echo, the engine daemon) start their per-session
//! and per-channel threads through the server's [`Threads`]. Going over a limit refuses the
//! one session, channel or request with an error that names the limit and the `offhost` flag
//! that raises it; every other peer is served. Sessions a host opens with
//! [`Session::connect`](crate::Session::connect) keep the receive limits' defaults and no
//! write limits (the host trusts the engine it chose).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::LinkError;

/// Default [`Limits::max_sessions`].
pub const DEFAULT_MAX_SESSIONS: usize = 64;
/// Default [`Limits::max_threads`].
pub const DEFAULT_MAX_THREADS: usize = 1024;
/// Default [`Limits::max_unsent`]: 256 MiB.
pub const DEFAULT_MAX_UNSENT: u64 = 256 << 20;
/// Default [`Limits::write_stall`]: a minute.
pub const DEFAULT_WRITE_STALL: Duration = Duration::from_secs(60);
/// Default [`Limits::handshake_timeout`] (`shm:` and `tls:`): five seconds.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Default [`Limits::peer_deadline`] and [`LinkOptions`](crate::LinkOptions)'s: ten seconds.
pub const DEFAULT_PEER_DEADLINE: Duration = Duration::from_secs(10);
/// Default [`Limits::max_handshakes`].
pub const DEFAULT_MAX_HANDSHAKES: usize = offhost_access::unproven::DEFAULT_MAX_UNPROVEN;
/// Default [`Limits::max_handshakes_per_source`].
pub const DEFAULT_MAX_HANDSHAKES_PER_SOURCE: usize =
    offhost_access::unproven::DEFAULT_MAX_UNPROVEN_PER_SOURCE;

/// Budgets of a link server and of each session it accepts.
///
/// The receive limits (`proto`) are enforced by the protocol state machine
/// ([`offhost_proto::Limits`]): channels a peer opens past them are refused. The rest are
/// enforced here: sessions past `max_sessions` are refused with a link error; threads past
/// `max_threads` refuse the channel or session that asked for one; a session holding more than
/// `max_unsent` bytes for a peer that reads nothing, or whose writes make no progress for
/// `write_stall`, is ended. A `shm:` or `tls:` connection is *unproven* until its handshake
/// ends (the client's certificate checked, the host's segment attached): it holds no session
/// slot meanwhile, only a place among at most `max_handshakes` unproven connections
/// (`max_handshakes_per_source` from one IP address or uid), for at most `handshake_timeout`;
/// when those are full the oldest silent one is shut down to make way for the newcomer
/// (`offhost_access::unproven`). Handshakes run on their own threads, off the accept loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Channels and receive windows per session (`--max-channels`, `--max-channel-window`,
    /// `--max-session-window`).
    pub proto: offhost_proto::Limits,
    /// Sessions open at once (`--max-sessions`).
    pub max_sessions: usize,
    /// Threads the server's services may run for peers at once, all sessions together
    /// (`--max-threads`).
    pub max_threads: usize,
    /// Bytes a session may hold for its peer before they are written (`--max-unsent`).
    pub max_unsent: u64,
    /// How long a write to the peer may make no progress before the session ends
    /// (`--write-stall`); `None`: for ever.
    pub write_stall: Option<Duration>,
    /// Deadline of a `shm:` or `tls:` handshake (`--handshake-timeout`).
    pub handshake_timeout: Duration,
    /// `shm:` and `tls:` connections whose handshake has not ended, all sources together
    /// (`--max-handshakes`); past it the oldest silent one makes way.
    pub max_handshakes: usize,
    /// The same from one source: a TCP peer's IP address, a local peer's uid
    /// (`--max-handshakes-per-source`).
    pub max_handshakes_per_source: usize,
    /// How long a peer may send nothing at all (no data, no heartbeat) before the session is
    /// declared dead (`--peer-deadline`); `None`: never. Each side sends a heartbeat well
    /// within it (see `driver/liveness.rs`), so a live peer is never silent that long.
    pub peer_deadline: Option<Duration>,
    /// Interrupt coalescing of the server's side of `shm:` sessions (`--event-limit`): each
    /// sleep waits for this many records or its delay ([`offhost_shm::EventLimit`]); `None`:
    /// a wake-up per publication. Other transports have no doorbell and ignore it.
    pub event_limit: Option<offhost_shm::EventLimit>,
}

/// A peer deadline as a command line gives it (`--peer-deadline`): 0 is never; otherwise at
/// least 0.5 s, so that a live peer's heartbeats (every 0.1 s at the most) fit in it several
/// times. The error says so.
pub fn peer_deadline_flag(d: Duration) -> Result<Option<Duration>, String> {
    if !d.is_zero() && d < Duration::from_millis(500) {
        return Err(format!(
            "--peer-deadline {} s: at least 0.5 s (or 0: never)",
            d.as_secs_f64()
        ));
    }
    Ok((!d.is_zero()).then_some(d))
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            proto: offhost_proto::Limits::default(),
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_threads: DEFAULT_MAX_THREADS,
            max_unsent: DEFAULT_MAX_UNSENT,
            write_stall: Some(DEFAULT_WRITE_STALL),
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            max_handshakes: DEFAULT_MAX_HANDSHAKES,
            max_handshakes_per_source: DEFAULT_MAX_HANDSHAKES_PER_SOURCE,
            peer_deadline: Some(DEFAULT_PEER_DEADLINE),
            event_limit: None,
        }
    }
}

impl Limits {
    /// The budget of unproven connections these limits describe.
    pub fn unproven(&self) -> offhost_access::UnprovenLimits {
        offhost_access::UnprovenLimits {
            max_total: self.max_handshakes,
            max_per_source: self.max_handshakes_per_source,
            deadline: self.handshake_timeout,
        }
    }

    /// The lobby in front of that budget, for connections that are ready once `ready_bytes`
    /// have arrived ([`LobbyLimits::in_front_of`](offhost_access::LobbyLimits::in_front_of)).
    pub fn lobby(&self, ready_bytes: u64) -> offhost_access::LobbyLimits {
        offhost_access::LobbyLimits::in_front_of(
            self.max_handshakes,
            self.max_handshakes_per_source,
            self.handshake_timeout,
            ready_bytes,
        )
    }
}

/// The limits of one session that its driver enforces (the part of [`Limits`] about writing
/// to the peer, and the peer's deadline).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DriverLimits {
    pub(crate) max_unsent: u64,
    pub(crate) write_stall: Option<Duration>,
    pub(crate) peer_deadline: Option<Duration>,
}

impl DriverLimits {
    /// A host's own session: no write limits (it trusts the engine it chose), and the peer
    /// deadline of its [`LinkOptions`](crate::LinkOptions).
    pub(crate) fn host(peer_deadline: Option<Duration>) -> DriverLimits {
        DriverLimits {
            max_unsent: u64::MAX,
            write_stall: None,
            peer_deadline,
        }
    }
}

impl From<&Limits> for DriverLimits {
    fn from(l: &Limits) -> Self {
        DriverLimits {
            max_unsent: l.max_unsent,
            write_stall: l.write_stall,
            peer_deadline: l.peer_deadline,
        }
    }
}

/// A count of things held at once under a cap; a [`Held`] gives its unit back when dropped.
#[derive(Debug, Clone)]
pub(crate) struct Counter {
    held: Arc<AtomicUsize>,
}

impl Counter {
    pub(crate) fn new() -> Self {
        Counter {
            held: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Takes a unit if fewer than `max` are held.
    pub(crate) fn try_take(&self, max: usize) -> Option<Held> {
        self.held
            // Ordering: AcqRel/Acquire on a count of held units: only the RMW's atomicity matters
            // (at most `max` held), the orderings are stronger than needed.
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Held {
                held: Arc::clone(&self.held),
            })
    }

    /// Units held now.
    pub(crate) fn held(&self) -> usize {
        // Ordering: Acquire pairs with the AcqRel RMWs of `try_take` and `Held::drop`; a count for
        // reporting, so stronger than needed.
        self.held.load(Ordering::Acquire)
    }
}

/// One unit of a [`Counter`], given back on drop.
#[derive(Debug)]
pub(crate) struct Held {
    held: Arc<AtomicUsize>,
}

impl Drop for Held {
    fn drop(&mut self) {
        // Ordering: AcqRel: the unit's release; a count, stronger than needed (it pairs with
        // `try_take`'s RMW).
        self.held.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The threads a server's services run for its peers, under [`Limits::max_threads`]. Cloning
/// gives another handle to the same budget.
#[derive(Debug, Clone)]
pub struct Threads {
    count: Counter,
    max: usize,
}

impl Threads {
    /// A budget of `max` threads at once.
    pub fn new(max: usize) -> Threads {
        Threads {
            count: Counter::new(),
            max,
        }
    }

    /// Threads running now.
    pub fn running(&self) -> usize {
        self.count.held()
    }

    /// Starts `f` on a thread named `name` if the budget has room and the system gives one;
    /// otherwise the error says which (the caller refuses its peer's request with it).
    pub fn spawn(
        &self,
        name: &str,
        f: impl FnOnce() + Send + 'static,
    ) -> Result<JoinHandle<()>, LinkError> {
        let held = self.count.try_take(self.max).ok_or(LinkError::Limit(
            offhost_units::OverLimit::new(offhost_units::Limit::MaxThreads, self.max as u64),
        ))?;
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let _held = held;
                f();
            })
            .map_err(|e| LinkError::io(format!("start a thread for {name}"), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_past_the_budget_are_an_error_naming_the_flag() {
        let t = Threads::new(2);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let rx = Arc::new(std::sync::Mutex::new(rx));
        let hs: Vec<_> = (0..2)
            .map(|i| {
                let rx = Arc::clone(&rx);
                t.spawn(&format!("t{i}"), move || {
                    let _ = rx.lock().unwrap().recv();
                })
                .unwrap()
            })
            .collect();
        let e = t.spawn("t2", || {}).unwrap_err();
        let over = e.over_limit().expect("a limit error");
        assert_eq!(over.limit, offhost_units::Limit::MaxThreads);
        drop(tx);
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(t.running(), 0);
        t.spawn("t3", || {}).unwrap().join().unwrap();
    }
}
