//! The need-wake-up protocol of a doorbell, kept apart from the futex calls so that loom can
//! model-check it (`RUSTFLAGS="--cfg loom" cargo test -p offhost-shm --release --lib loom`).
//!
//! A doorbell is one 32-bit word with one meaningful bit, [`WAITING`], set only by the single
//! waiter of the doorbell and cleared by the notifier (or by the waiter when it changes its mind):
//!
//! ```text
//! waiter                                notifier
//! ------                                --------
//! if ready() { return }                 publish data (Release store)
//! announce(): fetch_or(WAITING)         notify(): prev = fetch_and(!WAITING)
//! if ready() { retract(); return }      if prev had WAITING { futex_wake }
//! futex_wait(word, WAITING)
//! ```
//!
//! Both sides use read-modify-write operations on the same word, and RMWs on one location are
//! totally ordered. Either the notifier's RMW comes after the waiter's (it sees `WAITING` and
//! wakes; if the waiter has not slept yet, the word no longer equals `WAITING` and its futex wait
//! returns at once), or it comes before: then the waiter's RMW reads the notifier's value
//! (acquire/release), so its second `ready()` sees the published data. No wake-up is lost, and
//! no fence stronger than acquire/release is needed, which is what makes the model exact in loom.
//! While the waiter is awake the notifier makes no system call: one uncontended RMW on a line
//! only it touches.
//!
//! **Event limit.** A waiter of a data doorbell may ask to sleep until enough has been published
//! (io_uring's `min_complete`, `[Off-host]`'s interrupt coalescing): the bits above [`WAITING`] hold
//! how many [`WANT_UNIT`]s of ring bytes past its head it wants. [`notify_when`] then wakes it
//! only once the producer's count of unconsumed bytes reaches that, and leaves the word as it
//! is otherwise. Its first step is still an RMW on the word (`fetch_or(0)`), so the argument
//! above holds unchanged; the byte count it compares against includes everything it published,
//! and the consumer's head it reads can only be stale-low, so it may wake early (the waiter
//! looks and sleeps again) but never stays silent once the limit is reached. A waiter that asks
//! for more than will ever come sleeps until its timeout or liveness slice, never for ever.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::AtomicU32 as LoomU32;
use std::sync::atomic::Ordering;

/// The bit that says the waiter may sleep and needs a wake-up.
pub(crate) const WAITING: u32 = 1;
/// Ring bytes per unit of a waiter's event limit (records are 16-byte aligned).
pub(crate) const WANT_UNIT: u64 = 16;
/// The largest event limit a doorbell word holds, in [`WANT_UNIT`]s.
pub(crate) const WANT_MAX: u32 = u32::MAX >> 1;
/// Attempts [`notify_when`] makes to clear the word before it rings regardless.
const CAS_TRIES: u32 = 4;

/// An atomic 32-bit word that can carry a doorbell (the real one, or loom's in models).
pub(crate) trait Word {
    /// `fetch_or`.
    fn or(&self, v: u32, o: Ordering) -> u32;
    /// `fetch_and`.
    fn and(&self, v: u32, o: Ordering) -> u32;
    /// `swap`.
    fn put(&self, v: u32, o: Ordering) -> u32;
    /// `compare_exchange`.
    fn cas(&self, old: u32, new: u32, o: Ordering) -> Result<u32, u32>;
}

macro_rules! word {
    ($t:ty) => {
        impl Word for $t {
            fn or(&self, v: u32, o: Ordering) -> u32 {
                self.fetch_or(v, o)
            }
            fn and(&self, v: u32, o: Ordering) -> u32 {
                self.fetch_and(v, o)
            }
            fn put(&self, v: u32, o: Ordering) -> u32 {
                self.swap(v, o)
            }
            fn cas(&self, old: u32, new: u32, o: Ordering) -> Result<u32, u32> {
                // Ordering: the failure ordering of the CAS in `notify_when`: Acquire, so the word
                // it returns (a new announcement) is read as `announce`'s AcqRel swap published it,
                // like a successful RMW would; the value is only used to retry.
                self.compare_exchange(old, new, o, Ordering::Acquire)
            }
        }
    };
}
word!(std::sync::atomic::AtomicU32);
#[cfg(loom)]
word!(LoomU32);

/// Waiter: says it is about to sleep, to be woken once `want` [`WANT_UNIT`]s past its head are
/// published (0: at the next publication; capped at [`WANT_MAX`]). Returns the word it wrote,
/// which is the value its futex wait expects. The caller must recheck its condition afterwards.
pub(crate) fn announce<W: Word>(bell: &W, want: u32) -> u32 {
    let word = (want.min(WANT_MAX) << 1) | WAITING;
    // Ordering: AcqRel: the acquire half pairs with the release half of `notify`'s RMW, so a notify
    // that came first makes its published data visible to the recheck that follows. A swap, not an
    // or: the limit of an earlier wait must not linger.
    bell.put(word, Ordering::AcqRel);
    word
}

/// Waiter: withdraws the announcement after its recheck found the condition true.
pub(crate) fn retract<W: Word>(bell: &W) {
    // Relaxed: clearing only saves the notifier a needless wake-up; correctness never depends
    // on it (a stale WAITING costs one spurious futex_wake).
    bell.and(!WAITING, Ordering::Relaxed);
}

/// Notifier: after publishing, returns true when the waiter may be asleep and must be woken.
pub(crate) fn notify<W: Word>(bell: &W) -> bool {
    // Ordering: AcqRel: the release half publishes the data stored before it to a waiter whose
    // `announce` reads this value; the RMW is ordered with `announce`'s on the same word.
    bell.and(!WAITING, Ordering::AcqRel) & WAITING != 0
}

/// Notifier: after publishing, returns true when the waiter may be asleep and its event limit
/// is reached: `ready` yields the bytes published and not yet consumed (it is called only when
/// the waiter set a limit, and may overstate but must not understate).
pub(crate) fn notify_when<W: Word>(bell: &W, ready: impl Fn() -> u64) -> bool {
    // Ordering: AcqRel, an RMW: ordered with `announce`'s as in `notify`, and publishes our data to
    // it.
    let mut word = bell.or(0, Ordering::AcqRel);
    for _ in 0..CAS_TRIES {
        if word & WAITING == 0 {
            return false;
        }
        let want = u64::from(word >> 1) * WANT_UNIT;
        if want > 0 && ready() < want {
            return false;
        }
        // Clears WAITING only if the waiter has not retracted or announced anew meanwhile.
        // Ordering: AcqRel, like the `fetch_or` above: the release half publishes our data to the
        // waiter, the acquire half reads its announcement.
        match bell.cas(word, word & !WAITING, Ordering::AcqRel) {
            Ok(_) => return true,
            Err(now) => word = now,
        }
    }
    // The word lives in memory the peer writes: one that keeps changing under us (a peer
    // bent on holding this thread) gets a plain ring, a spare wake-up at worst.
    notify(bell)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A doorbell word a hostile peer rewrites between every two looks of ours.
    struct Restless(Cell<u32>);

    impl Word for Restless {
        fn or(&self, v: u32, _: Ordering) -> u32 {
            let w = self.0.get();
            self.0.set(w | v);
            w
        }
        fn and(&self, v: u32, _: Ordering) -> u32 {
            let w = self.0.get();
            self.0.set(w & v);
            w
        }
        fn put(&self, v: u32, _: Ordering) -> u32 {
            self.0.replace(v)
        }
        fn cas(&self, _: u32, _: u32, _: Ordering) -> Result<u32, u32> {
            // The peer announced anew just before: another limit, still waiting.
            let w = (self.0.get() + 2) | WAITING;
            self.0.set(w);
            Err(w)
        }
    }

    #[test]
    fn a_word_that_keeps_changing_gets_a_plain_ring_after_a_few_tries() {
        let bell = Restless(Cell::new(WAITING));
        assert!(notify_when(&bell, || 1 << 40), "the waiter is woken");
        assert_eq!(bell.0.get() & WAITING, 0, "and its WAITING bit is cleared");
    }

    #[test]
    fn a_limit_not_reached_rings_nothing_and_leaves_the_word() {
        let bell = std::sync::atomic::AtomicU32::new(0);
        let word = announce(&bell, 4);
        assert!(!notify_when(&bell, || 3 * WANT_UNIT));
        assert_eq!(bell.load(Ordering::Relaxed), word);
        assert!(notify_when(&bell, || 4 * WANT_UNIT));
        assert_eq!(bell.load(Ordering::Relaxed) & WAITING, 0);
        // Without a limit, any publication rings.
        announce(&bell, 0);
        assert!(notify_when(&bell, || 0));
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicU64;
    use loom::sync::{Arc, Condvar, Mutex};

    /// A futex modelled with a mutex and a condition variable: `wait` sleeps only while the word
    /// still holds `expected`, checked under the lock that `wake` takes.
    struct Futex {
        lock: Mutex<()>,
        cv: Condvar,
    }

    impl Futex {
        fn wait(&self, word: &LoomU32, expected: u32) {
            let g = self.lock.lock().unwrap();
            if word.load(Ordering::Relaxed) == expected {
                drop(self.cv.wait(g).unwrap());
            }
        }
        fn wake(&self) {
            let _g = self.lock.lock().unwrap();
            self.cv.notify_all();
        }
    }

    /// A producer publishes `items` one at a time; the waiter takes them, sleeping between.
    /// With `limit`, the waiter asks to be woken only once everything still to come is
    /// published, and the producer rings with `notify_when`, counting from the head the waiter
    /// publishes when it runs dry.
    fn run(items: u64, limit: bool) {
        loom::model(move || {
            let data = Arc::new(AtomicU64::new(0));
            let head = Arc::new(AtomicU64::new(0));
            let bell = Arc::new(LoomU32::new(0));
            let futex = Arc::new(Futex {
                lock: Mutex::new(()),
                cv: Condvar::new(),
            });
            let producer = {
                let (data, head) = (data.clone(), head.clone());
                let (bell, futex) = (bell.clone(), futex.clone());
                loom::thread::spawn(move || {
                    for i in 1..=items {
                        data.store(i, Ordering::Release);
                        let wake = if limit {
                            notify_when(&*bell, || (i - head.load(Ordering::Acquire)) * WANT_UNIT)
                        } else {
                            notify(&*bell)
                        };
                        if wake {
                            futex.wake();
                        }
                    }
                })
            };
            let mut seen = 0;
            while seen < items {
                let v = data.load(Ordering::Acquire);
                if v > seen {
                    seen = v;
                    continue;
                }
                head.store(seen, Ordering::Release);
                let want = if limit { (items - seen) as u32 } else { 0 };
                let word = announce(&*bell, want);
                if data.load(Ordering::Acquire) > seen {
                    retract(&*bell);
                    continue;
                }
                // A lost wake-up leaves this thread asleep for ever: loom reports a deadlock.
                futex.wait(&bell, word);
            }
            producer.join().unwrap();
        });
    }

    #[test]
    fn loom_no_lost_wakeup_one_item() {
        run(1, false);
    }

    #[test]
    fn loom_no_lost_wakeup_two_items() {
        run(2, false);
    }

    #[test]
    fn loom_event_limit_loses_no_wakeup_two_items() {
        run(2, true);
    }
}
