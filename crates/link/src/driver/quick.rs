//! The quick receive: the common case of receiving on a channel of a session whose input is
//! looked at under the lock (shm, mem), without the general wait loop of [`Driver::wait`].
//!
//! On shared memory the wait itself offers the next ring record to the protocol, under the
//! session lock taken only then (`Receiver::wait_take_inline`): a record that is one data frame
//! holding the whole message the receiver would take next (`Connection::take_whole_message`)
//! is copied out of the ring and consumed, with no second look at the ring.
//!
//! Between two such receives on one channel the reading half is *parked* in a [`Handoff`]
//! slot instead of going home into the session state: the next quick receive on that channel
//! takes it back with one atomic swap, without the session lock and without looking at the
//! channel again. That is sound because nothing can change what that look would see while the
//! reading half is parked: only its holder feeds input, so the channel's store stays empty
//! (it was when the half was parked), no loan can be held for it, and everything else that
//! would end the receive (the link failing or closing) first brings the half home
//! ([`Driver::unpark`]). Any other waiter brings it home too, so a parked half never keeps
//! input from anyone: a thread that needs it while a quick receiver has it out sleeps until
//! that receiver brings it home, as for any reader.
//!
//! [`Handoff`]: offhost_shm::Handoff

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::driver::{copy_into, Deadline, Driver, Fed, ReadHalf, State, TICK};
use crate::wire::is_idle;

impl Driver {
    /// Receives a byte message of channel `id` into `buf` (replacing its contents, at
    /// `buf[front..]`, see `Connection::recv_into_at`) if one arrives now, or within one wait
    /// of at most a tick (and not past `deadline`). False when it did not happen: nothing
    /// came, something waits in the channel's store (a message, a loan, the end), the session
    /// failed, or another thread holds the reading half; the caller then receives the general
    /// way, which sees whatever is there.
    pub(crate) fn receive_quick(
        &self,
        id: u32,
        buf: &mut Vec<u8>,
        front: usize,
        deadline: Deadline,
    ) -> bool {
        let slice = match deadline {
            Deadline::Now => return false,
            Deadline::Never => TICK,
            Deadline::At(t) => t.saturating_duration_since(Instant::now()).min(TICK),
        };
        // The reading half this channel's last quick receive parked, if nobody took it since
        // (acquire on the slot's swap makes the channel written before the put visible).
        let mut wire = match self.parked.take() {
            Some(wire) if self.parked_for.load(Ordering::Relaxed) == id => wire,
            parked => {
                let mut st = self.lock();
                match parked {
                    // Parked by another channel's receive: home with it; this one looks at its
                    // own channel first.
                    Some(wire) => self.bring_home(&mut st, wire),
                    None => self.unpark(&mut st),
                }
                if !st.cheap_poll
                    || st.dead.is_some()
                    || st.shutdown
                    || !st.held.is_empty()
                    || st.conn.readable(id)
                {
                    return false;
                }
                let Some(wire) = st.reader.take() else {
                    return false;
                };
                wire
            }
        };
        // The state, locked by the wait's offer of a record.
        let mut locked = None;
        let r = match wire.shm_receiver() {
            Some(rx) => rx
                .wait_take_inline(Some(slice), |record| {
                    let mut st = self.lock();
                    let m = st.conn.take_whole_message(record, id);
                    if let Some(m) = m {
                        copy_into(buf, front)(m);
                    }
                    locked = Some(st);
                    m.is_some()
                })
                .map_err(crate::shm::to_io),
            None => wire.wait(Some(slice)).map(|()| false),
        };
        let mut st = locked.unwrap_or_else(|| self.lock());
        let took = match r {
            Ok(true) => {
                st.fed = st.fed.wrapping_add(1);
                self.park_or_bring_home(&mut st, id, wire);
                true
            }
            // Input is there, but not a whole message of this channel on its own.
            Ok(false) => {
                self.bring_home(&mut st, wire);
                self.feed_taking(&mut st, id, &mut copy_into(buf, front)) == Fed::Took
            }
            Err(e) => {
                self.bring_home(&mut st, wire);
                if !is_idle(&e) {
                    self.kill(&mut st, &e);
                }
                false
            }
        };
        // A data wait ended: a passive waiter leaves the transport alone a while longer.
        st.active_gen += 1;
        drop(self.flush(st));
        took
    }

    /// After a quick receive on channel `id` took its message, under the lock: parks the
    /// reading half for the next one, unless others wait for it or the link is failing.
    fn park_or_bring_home(&self, st: &mut State, id: u32, wire: ReadHalf) {
        // The take left the channel's store empty, as the next quick receive relies on.
        if st.sleepers > 0 || st.dead.is_some() || st.shutdown || !st.held.is_empty() {
            self.bring_home(st, wire);
            return;
        }
        self.parked_for.store(id, Ordering::Relaxed);
        self.parked.put(wire);
        st.parked = true;
    }

    /// Puts the reading half back into the state and tells whoever waits for it.
    pub(crate) fn bring_home(&self, st: &mut State, wire: ReadHalf) {
        debug_assert!(st.reader.is_none(), "two reading halves");
        st.reader = Some(wire);
        st.parked = false;
        if st.sleepers > 0 || st.passive_sleepers > 0 {
            self.wake(st);
        }
    }

    /// Brings a parked reading half home, if it is in its slot (a quick receiver that took it
    /// out brings it home itself). Cheap when nothing is parked.
    #[inline]
    pub(crate) fn unpark(&self, st: &mut State) {
        if st.parked {
            if let Some(wire) = self.parked.take() {
                self.bring_home(st, wire);
            }
        }
    }
}
