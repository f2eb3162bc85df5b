//! Liveness: heartbeats, and the peer's deadline.
//!
//! A peer that is stopped (`SIGSTOP`), frozen, or cut off by the network looks alive to its
//! socket: its kernel still acknowledges, or nothing says otherwise, and keepalive probes
//! cannot tell. So each side says something at least every [`Beat::every`]: the flusher
//! thread, which wakes at least every [`TICK`], sends a ping frame (the peer's connection
//! answers it with a pong as soon as it reads it). When nothing was read for that long, the
//! same thread looks at the transport itself (a non-blocking feed, as any waiter would do),
//! so a session whose threads all do something else still hears its peer and answers it.
//!
//! Input is counted (`State::fed`, one increment per feed), and the count is compared here,
//! once per wake-up: the data path pays one increment, never a clock read. A peer from which
//! nothing at all came for the deadline is declared dead ([`Dead::Silent`]): every wait on the
//! session ends with [`LinkError::PeerSilent`](crate::LinkError::PeerSilent), naming the
//! deadline. Heartbeats go out whether or not this side has a deadline, so a peer with one
//! never takes an idle session of ours for a dead one.

use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use crate::driver::{Dead, Driver, State, TICK};

/// Heartbeats go out at least this often (more often under a short deadline).
pub(crate) const EVERY: Duration = Duration::from_secs(1);

/// Heartbeats within a deadline: the peer's are heard a few times before it passes, even
/// when a heartbeat is read a period late (the peer's reader was busy).
const BEATS_PER_DEADLINE: u32 = 5;

/// Bytes the connection may have to say behind a waiting write before the heartbeat stops
/// reading for it (a continuous stream is read by its waiters, not by the heartbeat).
const BACKLOG: usize = 64 << 10;

/// The flusher's view of the peer's liveness.
pub(crate) struct Beat {
    /// Silence past this declares the peer dead; `None`: never.
    deadline: Option<Duration>,
    /// How often a heartbeat goes out, and how long input may rest before the transport is
    /// looked at.
    every: Duration,
    /// `State::fed` when last looked at, and when it last moved.
    fed: u64,
    heard: Instant,
    /// When the last heartbeat went out, and its token.
    pinged: Instant,
    token: u64,
}

impl Beat {
    /// The liveness of a session whose peer may be silent for `deadline` at most.
    pub(crate) fn new(deadline: Option<Duration>) -> Beat {
        let every = deadline
            .map_or(EVERY, |d| d / BEATS_PER_DEADLINE)
            .clamp(TICK, EVERY);
        let now = Instant::now();
        Beat {
            deadline,
            every,
            fed: 0,
            heard: now,
            // The first heartbeat goes out at once.
            pinged: now.checked_sub(every).unwrap_or(now),
            token: 0,
        }
    }
}

impl Driver {
    /// One look at the peer's liveness (the flusher's, at every wake-up): notes input that
    /// came since the last look, reads the transport if nobody did for a heartbeat period,
    /// declares the peer dead past its deadline, and sends a heartbeat when one is due.
    pub(crate) fn beat<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        b: &mut Beat,
    ) -> MutexGuard<'a, State> {
        if st.dead.is_some() || st.shutdown {
            return st;
        }
        let now = Instant::now();
        // Not while what the connection has to say piles up behind a write that waits: a
        // peer that reads nothing (and floods us with pings) must not have us answer it
        // without end. It is heard of no more then, and past its deadline the session ends.
        let backed_up = st.stuck && st.conn.transmit_len() > BACKLOG;
        if !backed_up && st.fed == b.fed && now.saturating_duration_since(b.heard) >= b.every {
            // Nobody read for a while: look, as a waiter would (a reading half parked by a
            // quick receiver comes home for it; one out with a reader is being read).
            self.unpark(&mut st);
            if st.reader.is_some() {
                self.poll_in_place(&mut st);
            }
        }
        if st.fed != b.fed {
            b.fed = st.fed;
            b.heard = now;
        } else if let Some(d) = b.deadline {
            if now.saturating_duration_since(b.heard) > d {
                self.silent(&mut st, d);
                return st;
            }
        }
        if now.saturating_duration_since(b.pinged) >= b.every {
            b.pinged = now;
            b.token = b.token.wrapping_add(1);
            // A connection that is closing sends no ping; the close ends the session anyway.
            let _ = st.conn.ping(b.token);
        }
        // The heartbeat, and the answers to the peer's that the look above fed.
        self.flush(st)
    }

    /// The peer said nothing for `deadline`: the session is dead, and every waiter hears it.
    #[cold]
    fn silent(&self, st: &mut State, deadline: Duration) {
        tracing::info!(
            "closing link: the peer sent nothing for {:.1} s",
            deadline.as_secs_f64()
        );
        self.unpark(st);
        st.dead = Some(Dead::Silent(deadline));
        self.cond.notify_all();
        self.accept_cond.notify_all();
        self.writer_cond.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeats_are_several_per_deadline_within_bounds() {
        assert_eq!(Beat::new(None).every, EVERY);
        assert_eq!(Beat::new(Some(Duration::from_secs(10))).every, EVERY);
        assert_eq!(
            Beat::new(Some(Duration::from_secs(2))).every,
            Duration::from_millis(400)
        );
        assert_eq!(Beat::new(Some(Duration::from_millis(100))).every, TICK);
    }
}
