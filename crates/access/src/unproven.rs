//! Connections that have not yet proved who they are: their own small budget, so that nothing
//! unauthenticated holds what authenticated peers need.
//!
//! A server admits every accepted connection here ([`Unproven::admit`]) before its handshake
//! (a TLS handshake with a client certificate, a shared-memory hello, NBD's option haggling up
//! to `NBD_OPT_STARTTLS` and TLS) and lets go of it once the peer has proved itself
//! ([`Ticket::proven`], or by dropping the ticket when the handshake fails). Only then does the
//! connection count against the server's own limits (sessions, connections).
//!
//! The budget is [`UnprovenLimits`]: at most `max_per_source` connections from one source (an
//! IP address, or a uid on a Unix socket) and `max_total` in all, each within `deadline`.
//! Admission never waits and never fails: when a budget is full, the **oldest** unproven
//! connection of that source (or, when the total is full, of the source holding the most)
//! makes way. A connection younger than [`SETTLE`] is not pushed out (the budget may then
//! run over, up to [`OVERFLOW`] times), so that an honest client has time to send its first
//! message before it is judged. Connections whose peer has shown some progress ([`Ticket::progressed`]: a whole
//! TLS ClientHello, say; or [`SHOWN_PROGRESS`] bytes waiting unread) are evicted only after
//! every silent one. Evicting shuts the socket
//! down (`shutdown(2)` on a duplicate of its descriptor), so the thread running its handshake
//! sees the end of the stream at once and ends. A proven peer is never counted here, so it is
//! never evicted.
//!
//! Why oldest first: a peer that holds a connection open without finishing its handshake gets
//! the deadline at most, and less whenever anyone else connects; a client that connects now
//! is the last to be pushed out, and an honest handshake takes milliseconds. Why silent
//! first: a silent connection costs an attacker nothing, a progressing one costs it a
//! handshake's work, and an honest client sends its first message at once.

use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Default [`UnprovenLimits::max_total`].
pub const DEFAULT_MAX_UNPROVEN: usize = 64;
/// Default [`UnprovenLimits::max_per_source`].
pub const DEFAULT_MAX_UNPROVEN_PER_SOURCE: usize = 8;
/// Default [`UnprovenLimits::deadline`]: five seconds.
pub const DEFAULT_UNPROVEN_DEADLINE: Duration = Duration::from_secs(5);

/// Bytes waiting unread on a connection that count as its peer's progress: more than a
/// trickle sends within a deadline, less than any first message of a TLS handshake.
pub const SHOWN_PROGRESS: u64 = 32;

/// How long a new connection has to show progress before it may be pushed out: until then
/// it may hold a place over the budget (up to [`OVERFLOW`] times it).
pub const SETTLE: Duration = Duration::from_millis(100);

/// How far over the budget connections younger than [`SETTLE`] may take it.
pub const OVERFLOW: usize = 2;

/// The budget of connections that have not proved who they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnprovenLimits {
    /// Unproven connections at once, all sources together (at least 1).
    pub max_total: usize,
    /// Unproven connections at once from one source (at least 1).
    pub max_per_source: usize,
    /// How long a connection may stay unproven; [`Unproven::expire`] shuts down those past it.
    pub deadline: Duration,
}

impl Default for UnprovenLimits {
    fn default() -> Self {
        UnprovenLimits {
            max_total: DEFAULT_MAX_UNPROVEN,
            max_per_source: DEFAULT_MAX_UNPROVEN_PER_SOURCE,
            deadline: DEFAULT_UNPROVEN_DEADLINE,
        }
    }
}

/// Where an unproven connection comes from, for the per-source budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// A TCP peer's IP address (IPv4-mapped IPv6 addresses count as their IPv4 address).
    Ip(IpAddr),
    /// A Unix-socket peer's uid.
    Uid(u32),
}

impl Source {
    /// Unread bytes that show progress: [`SHOWN_PROGRESS`] from a TCP peer, any from a
    /// local one (whose first message, a shared-memory hello, is a few bytes and a
    /// descriptor).
    fn shown_progress(&self) -> u64 {
        match self {
            Source::Ip(_) => SHOWN_PROGRESS,
            Source::Uid(_) => 1,
        }
    }

    /// The source of a TCP peer at `addr`.
    pub fn ip(addr: IpAddr) -> Source {
        match addr {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Source::Ip(IpAddr::V4(v4)),
                None => Source::Ip(addr),
            },
            v4 => Source::Ip(v4),
        }
    }
}

/// One unproven connection in the table.
#[derive(Debug)]
struct Entry {
    source: Source,
    since: Instant,
    /// A duplicate of the connection's socket, to shut it down with.
    kick: OwnedFd,
    flags: Arc<Flags>,
}

/// What the connection's handshake and the table tell each other.
#[derive(Debug, Default)]
struct Flags {
    progressed: AtomicBool,
    evicted: AtomicBool,
}

#[derive(Debug, Default)]
struct Table {
    next: u64,
    entries: HashMap<u64, Entry>,
    per_source: HashMap<Source, usize>,
    evicted: u64,
    expired: u64,
}

impl Table {
    fn remove(&mut self, id: u64) -> Option<Entry> {
        let e = self.entries.remove(&id)?;
        if let Some(n) = self.per_source.get_mut(&e.source) {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&e.source);
            }
        }
        Some(e)
    }

    /// The connection to push out among those `pick` accepts: the oldest silent one, else
    /// the oldest. A connection has progressed when its handshake said so, or when its peer
    /// has sent [`SHOWN_PROGRESS`] bytes that its handshake has not read yet (an honest
    /// client's first message, waiting for a thread that has not run yet). With `settled`,
    /// only connections older than [`SETTLE`] are considered (they had time to show
    /// progress).
    fn victim(&self, now: Instant, settled: bool, pick: impl Fn(&Entry) -> bool) -> Option<u64> {
        let mut candidates: Vec<(Instant, u64, &Entry)> = self
            .entries
            .iter()
            .filter(|(_, e)| {
                pick(e) && (!settled || now.saturating_duration_since(e.since) >= SETTLE)
            })
            .map(|(id, e)| (e.since, *id, e))
            .collect();
        candidates.sort_by_key(|(since, id, _)| (*since, *id));
        let silent = candidates.iter().find(|(_, _, e)| {
            !e.flags.progressed.load(Ordering::Relaxed)
                && rustix::io::ioctl_fionread(&e.kick).unwrap_or(0) < e.source.shown_progress()
        });
        silent.or(candidates.first()).map(|(_, id, _)| *id)
    }

    /// Pushes out connections until `source` and the total are within their budgets, taking
    /// only settled connections, and any once past the hard budgets (the overflow allowed
    /// to connections that have not had time to show progress).
    fn trim(&mut self, now: Instant, source: Option<Source>, limits: &UnprovenLimits) {
        let hard_source = limits.max_per_source.saturating_mul(OVERFLOW);
        let hard_total = limits.max_total.saturating_mul(OVERFLOW);
        // Bounded: each round removes one entry, or stops.
        for _ in 0..self.entries.len() {
            let count = |t: &Table, s| t.per_source.get(&s).copied().unwrap_or(0);
            let id = match source {
                Some(s) if count(self, s) > limits.max_per_source => {
                    let hard = count(self, s) > hard_source;
                    self.victim(now, !hard, |e| e.source == s)
                }
                _ if self.entries.len() > limits.max_total => {
                    let hard = self.entries.len() > hard_total;
                    let largest = self
                        .per_source
                        .iter()
                        .max_by_key(|(_, n)| **n)
                        .map(|(s, _)| *s);
                    largest.and_then(|l| self.victim(now, !hard, |e| e.source == l))
                }
                _ => None,
            };
            let Some(id) = id else { break };
            self.kick(id);
            self.evicted += 1;
        }
    }

    fn kick(&mut self, id: u64) {
        if let Some(e) = self.remove(id) {
            // Ordering: Release pairs with the Acquire load in `evicted`: the flag is set before
            // the socket is shut down, so a handshake that fails on the shutdown sees it.
            e.flags.evicted.store(true, Ordering::Release);
            // The peer may be gone already: nothing to do about a failure.
            let _ = rustix::net::shutdown(&e.kick, rustix::net::Shutdown::Both);
        }
    }
}

/// The unproven connections of one server (cloning gives another handle to the same table).
#[derive(Debug, Clone)]
pub struct Unproven {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    limits: UnprovenLimits,
    table: Mutex<Table>,
}

/// Counts of what an [`Unproven`] table did, for logs and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnprovenStats {
    /// Unproven connections now.
    pub held: usize,
    /// Connections pushed out to make way for newer ones.
    pub evicted: u64,
    /// Connections shut down past their deadline.
    pub expired: u64,
}

impl Unproven {
    /// An empty table under `limits`.
    pub fn new(limits: UnprovenLimits) -> Unproven {
        Unproven {
            shared: Arc::new(Shared {
                limits: UnprovenLimits {
                    max_total: limits.max_total.max(1),
                    max_per_source: limits.max_per_source.max(1),
                    deadline: limits.deadline,
                },
                table: Mutex::new(Table::default()),
            }),
        }
    }

    /// The budget.
    pub fn limits(&self) -> UnprovenLimits {
        self.shared.limits
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.shared.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits the connection on `socket` from `source`, pushing out the oldest unproven
    /// connection of the same source when that source is at its budget, or else the oldest
    /// of the source holding the most when the total is. Also shuts down those past their
    /// deadline. Fails only when the socket cannot be duplicated (out of descriptors): the
    /// caller then closes the connection.
    pub fn admit(&self, source: Source, socket: impl AsFd) -> std::io::Result<Ticket> {
        let kick = socket.as_fd().try_clone_to_owned()?;
        let now = Instant::now();
        let mut t = self.lock();
        expire_locked(&mut t, now, self.shared.limits.deadline);
        let id = t.next;
        t.next += 1;
        let flags = Arc::new(Flags::default());
        t.entries.insert(
            id,
            Entry {
                source,
                since: now,
                kick,
                flags: Arc::clone(&flags),
            },
        );
        *t.per_source.entry(source).or_insert(0) += 1;
        t.trim(now, Some(source), &self.shared.limits);
        Ok(Ticket {
            shared: Arc::clone(&self.shared),
            id,
            deadline: now + self.shared.limits.deadline,
            flags,
        })
    }

    /// Shuts down every connection past its deadline (a server's accept loop calls this now
    /// and then; [`admit`](Self::admit) does too). Returns how many.
    pub fn expire(&self) -> usize {
        let now = Instant::now();
        let mut t = self.lock();
        let n = expire_locked(&mut t, now, self.shared.limits.deadline);
        let sources: Vec<Source> = t
            .per_source
            .iter()
            .filter(|(_, n)| **n > self.shared.limits.max_per_source)
            .map(|(s, _)| *s)
            .collect();
        for s in sources {
            t.trim(now, Some(s), &self.shared.limits);
        }
        t.trim(now, None, &self.shared.limits);
        n
    }

    /// What the table holds and has done.
    pub fn stats(&self) -> UnprovenStats {
        let t = self.lock();
        UnprovenStats {
            held: t.entries.len(),
            evicted: t.evicted,
            expired: t.expired,
        }
    }
}

fn expire_locked(t: &mut Table, now: Instant, deadline: Duration) -> usize {
    let late: Vec<u64> = t
        .entries
        .iter()
        .filter(|(_, e)| now.saturating_duration_since(e.since) >= deadline)
        .map(|(id, _)| *id)
        .collect();
    for id in &late {
        t.kick(*id);
    }
    t.expired += late.len() as u64;
    late.len()
}

/// An unproven connection's place in the table; dropping it (or [`proven`](Self::proven))
/// gives the place back.
#[derive(Debug)]
pub struct Ticket {
    shared: Arc<Shared>,
    id: u64,
    deadline: Instant,
    flags: Arc<Flags>,
}

impl Ticket {
    /// When the connection must have proved itself.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Marks that the peer has shown progress (a whole first message of its handshake):
    /// such connections make way only after every silent one.
    pub fn progressed(&self) {
        self.flags.progressed.store(true, Ordering::Relaxed);
    }

    /// Whether the connection was pushed out (or expired): its socket is shut down.
    pub fn evicted(&self) -> bool {
        // Ordering: Acquire pairs with the Release store in `kick`.
        self.flags.evicted.load(Ordering::Acquire)
    }

    /// The peer proved who it is: the connection leaves the table (and is no longer
    /// evicted). Returns false when it had been pushed out already, whose socket is shut
    /// down.
    pub fn proven(self) -> bool {
        !self.evicted()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.shared
            .table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    fn limits(total: usize, per: usize) -> UnprovenLimits {
        UnprovenLimits {
            max_total: total,
            max_per_source: per,
            deadline: Duration::from_secs(60),
        }
    }

    /// A connected pair: the server's end (admitted) and the peer's.
    fn conn() -> (UnixStream, UnixStream) {
        UnixStream::pair().unwrap()
    }

    fn shut(peer: &mut UnixStream) -> bool {
        peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        matches!(peer.read(&mut [0u8; 1]), Ok(0))
    }

    #[test]
    fn a_source_at_its_budget_pushes_out_its_oldest_silent_connection() {
        let u = Unproven::new(limits(100, 2));
        let s = Source::Uid(7);
        let (a, mut pa) = conn();
        let (b, _pb) = conn();
        let (c, _pc) = conn();
        let ta = u.admit(s, &a).unwrap();
        let tb = u.admit(s, &b).unwrap();
        tb.progressed();
        std::thread::sleep(SETTLE);
        let tc = u.admit(s, &c).unwrap();
        assert!(ta.evicted() && !tb.evicted() && !tc.evicted());
        assert!(shut(&mut pa), "the evicted socket is shut down");
        assert_eq!(u.stats().held, 2);
        // Another source is not touched by this one's budget.
        let (d, _pd) = conn();
        let td = u.admit(Source::Uid(8), &d).unwrap();
        assert!(!tb.evicted() && !tc.evicted() && !td.evicted());
        assert!(tc.proven());
        assert_eq!(u.stats().held, 2);
        drop((tb, td));
        assert_eq!(u.stats().held, 0);
        assert_eq!(u.stats().evicted, 1);
    }

    #[test]
    fn a_full_table_pushes_out_the_oldest_of_the_largest_source() {
        let u = Unproven::new(limits(3, 3));
        let socks: Vec<_> = (0..4).map(|_| conn()).collect();
        let t0 = u.admit(Source::Uid(1), &socks[0].0).unwrap();
        let t1 = u.admit(Source::Uid(2), &socks[1].0).unwrap();
        let t2 = u.admit(Source::Uid(2), &socks[2].0).unwrap();
        std::thread::sleep(SETTLE);
        let t3 = u.admit(Source::Uid(3), &socks[3].0).unwrap();
        assert!(!t0.evicted(), "the lone source keeps its connection");
        assert!(t1.evicted() && !t2.evicted() && !t3.evicted());
        assert_eq!(u.stats().held, 3);
    }

    #[test]
    fn a_young_connection_is_not_pushed_out_until_the_hard_budget() {
        let u = Unproven::new(limits(100, 1));
        let s = Source::Uid(9);
        let socks: Vec<_> = (0..4).map(|_| conn()).collect();
        let t: Vec<_> = socks.iter().map(|c| u.admit(s, &c.0).unwrap()).collect();
        // Two may stand (the budget of one, overflowing twice); past that the oldest goes.
        assert!(t[0].evicted() && t[1].evicted());
        assert!(!t[2].evicted() && !t[3].evicted());
        std::thread::sleep(SETTLE);
        assert_eq!(u.expire(), 0);
        assert!(t[2].evicted() && !t[3].evicted());
    }

    #[test]
    fn connections_past_their_deadline_are_shut_down() {
        let u = Unproven::new(UnprovenLimits {
            deadline: Duration::ZERO,
            ..limits(10, 10)
        });
        let (a, mut pa) = conn();
        let t = u.admit(Source::Uid(1), &a).unwrap();
        assert_eq!(u.expire(), 1);
        assert!(t.evicted() && !t.proven());
        assert!(shut(&mut pa));
        assert_eq!(u.stats().expired, 1);
    }

    #[test]
    fn mapped_ipv6_addresses_are_their_ipv4_source() {
        let v4: IpAddr = "127.0.0.2".parse().unwrap();
        let mapped: IpAddr = "::ffff:127.0.0.2".parse().unwrap();
        assert_eq!(Source::ip(mapped), Source::ip(v4));
    }
}
