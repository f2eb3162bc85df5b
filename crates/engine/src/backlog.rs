//! The bytes a host has queued for a `host-in` task and the task has not yet taken: counted
//! by the memory the messages hold (their buffers' capacity), bounded by the host's side, so
//! that a peer sending large messages through the daemon cannot make it hold more than the
//! bound (the queue's count of messages alone let 64 messages of up to 16 MiB pile up).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::host_error::HostError;

/// How long a host waiting for room sleeps before it looks again (a safety net: the task
/// wakes it when it takes a message).
const RECHECK: Duration = Duration::from_millis(50);

/// Bytes queued to a `host-in` task, and a host waiting for them to drop.
#[derive(Default)]
pub(crate) struct Backlog {
    /// Bytes of the message buffers in the queue.
    bytes: AtomicUsize,
    /// A host waits for room (the task then wakes it when it takes a message).
    waiting: AtomicBool,
    /// The task has ended: nothing will be taken any more.
    closed: AtomicBool,
    lock: Mutex<()>,
    room: Condvar,
}

impl Backlog {
    /// Counts `n` more bytes once they fit under `limit` (one message always fits an empty
    /// queue, whatever its size); `nudge` runs before each wait (it wakes the task, which may
    /// sleep on messages sent without waking it), and `live` after each: once it says false
    /// the host gives up. [`HostError::Closed`] when the task has ended.
    pub(crate) fn reserve(
        &self,
        n: usize,
        limit: usize,
        nudge: impl Fn(),
        live: &dyn Fn() -> bool,
    ) -> Result<(), HostError> {
        loop {
            // Ordering: SeqCst throughout this type: `reserve` stores `waiting` then loads
            // `bytes`/`closed`, while `release`/`close` change `bytes`/`closed` then load `waiting`
            // (a store-then-load on two words each side, which only a total order makes safe: one
            // of the two sees the other). Here: Acquire would do for the loads alone, the CAS only
            // needs atomicity.
            if self.closed.load(SeqCst) {
                return Err(HostError::Closed);
            }
            // Ordering: SeqCst, see above (a first look; Acquire would do).
            let q = self.bytes.load(SeqCst);
            if q == 0 || q.saturating_add(n) <= limit {
                // Ordering: SeqCst CAS, see above (only its atomicity is needed: no count is lost).
                if self
                    .bytes
                    .compare_exchange(q, q.saturating_add(n), SeqCst, SeqCst)
                    .is_ok()
                {
                    return Ok(());
                }
                continue;
            }
            if !live() {
                return Err(HostError::GaveUp);
            }
            nudge();
            let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            // Ordering: SeqCst: this store is ordered before the loads just below (the
            // store-then-load against `release`/`close` described at the top of `reserve`).
            self.waiting.store(true, SeqCst);
            // Ordering: SeqCst loads after the store of `waiting` (see the top of `reserve`). Taken
            // since we looked (or ended): look again. Otherwise the task sees `waiting` when it
            // next takes a message, and needs the lock we hold until we sleep.
            if self.bytes.load(SeqCst) != q || self.closed.load(SeqCst) {
                continue;
            }
            drop(self.room.wait_timeout(guard, RECHECK));
        }
    }

    /// The task took a message of `n` bytes off the queue: a waiting host may go on.
    pub(crate) fn release(&self, n: usize) {
        // Ordering: SeqCst, the other side of `reserve`'s store-then-load: this decrement is
        // ordered before the load of `waiting` in `wake_host`.
        self.bytes.fetch_sub(n, SeqCst);
        self.wake_host();
    }

    /// The task has ended: a waiting host stops waiting.
    pub(crate) fn close(&self) {
        // Ordering: SeqCst, as in `release`: ordered before the load of `waiting` in `wake_host`.
        self.closed.store(true, SeqCst);
        self.wake_host();
    }

    fn wake_host(&self) {
        // Ordering: SeqCst: the load after `release`/`close`'s change (see `reserve`); the store
        // below is under the lock, SeqCst only for uniformity (stronger than needed).
        if self.waiting.load(SeqCst) {
            let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.waiting.store(false, SeqCst);
            self.room.notify_all();
        }
    }

    /// Bytes queued now.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.bytes.load(SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn a_host_waits_for_room_and_goes_on_when_the_task_takes_a_message() {
        let b = Arc::new(Backlog::default());
        // Over the limit, but the queue is empty: one message always goes.
        assert!(b.reserve(5000, 1000, || {}, &|| true).is_ok());
        let taker = {
            let b = b.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                b.release(5000);
            })
        };
        let nudges = AtomicUsize::new(0);
        let t = Instant::now();
        assert!(b
            .reserve(
                600,
                1000,
                || {
                    nudges.fetch_add(1, SeqCst);
                },
                &|| true
            )
            .is_ok());
        let waited = t.elapsed();
        taker.join().unwrap();
        assert!(waited >= Duration::from_millis(150), "{waited:?}");
        // The task was woken before the host slept (and again each time it looked).
        assert!(nudges.load(SeqCst) >= 1);
        assert_eq!(b.queued(), 600);
        // Room enough: no wait.
        assert!(b
            .reserve(300, 1000, || panic!("no wait needed"), &|| true)
            .is_ok());
        assert_eq!(b.queued(), 900);
    }

    #[test]
    fn an_empty_queue_takes_one_message_of_any_size_and_then_waits() {
        let b = Backlog::default();
        assert!(b.reserve(1 << 30, 10, || {}, &|| true).is_ok());
        let closer = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                b.close();
            });
            // Waits until the task ends, then says so.
            b.reserve(1, 10, || {}, &|| true)
        });
        assert_eq!(closer, Err(HostError::Closed));
        assert_eq!(b.queued(), 1 << 30);
        // A host that stops waiting gives up, counting nothing.
        let b = Backlog::default();
        assert!(b.reserve(100, 10, || {}, &|| true).is_ok());
        assert_eq!(b.reserve(1, 10, || {}, &|| false), Err(HostError::GaveUp));
        assert_eq!(b.queued(), 100);
    }
}
