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

#[cfg(loom)]
pub(crate) use loom::sync::atomic::AtomicU32 as LoomU32;
use std::sync::atomic::Ordering;

/// The bit that says the waiter may sleep and needs a wake-up.
pub(crate) const WAITING: u32 = 1;

/// An atomic 32-bit word that can carry a doorbell (the real one, or loom's in models).
pub(crate) trait Word {
    /// `fetch_or`.
    fn or(&self, v: u32, o: Ordering) -> u32;
    /// `fetch_and`.
    fn and(&self, v: u32, o: Ordering) -> u32;
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
        }
    };
}
word!(std::sync::atomic::AtomicU32);
#[cfg(loom)]
word!(LoomU32);

/// Waiter: says it is about to sleep. The caller must recheck its condition afterwards.
pub(crate) fn announce<W: Word>(bell: &W) {
    // AcqRel: the acquire half pairs with the release half of `notify`'s RMW, so a notify that
    // came first makes its published data visible to the recheck that follows.
    bell.or(WAITING, Ordering::AcqRel);
}

/// Waiter: withdraws the announcement after its recheck found the condition true.
pub(crate) fn retract<W: Word>(bell: &W) {
    // Relaxed: clearing only saves the notifier a needless wake-up; correctness never depends
    // on it (a stale WAITING costs one spurious futex_wake).
    bell.and(!WAITING, Ordering::Relaxed);
}

/// Notifier: after publishing, returns true when the waiter may be asleep and must be woken.
pub(crate) fn notify<W: Word>(bell: &W) -> bool {
    // AcqRel: the release half publishes the data stored before it to a waiter whose `announce`
    // reads this value; the RMW is ordered with `announce`'s on the same word.
    bell.and(!WAITING, Ordering::AcqRel) & WAITING != 0
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

    fn run(items: u64) {
        loom::model(move || {
            let data = Arc::new(AtomicU64::new(0));
            let bell = Arc::new(LoomU32::new(0));
            let futex = Arc::new(Futex {
                lock: Mutex::new(()),
                cv: Condvar::new(),
            });
            let producer = {
                let (data, bell, futex) = (data.clone(), bell.clone(), futex.clone());
                loom::thread::spawn(move || {
                    for i in 1..=items {
                        data.store(i, Ordering::Release);
                        if notify(&*bell) {
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
                announce(&*bell);
                if data.load(Ordering::Acquire) > seen {
                    retract(&*bell);
                    continue;
                }
                // A lost wake-up leaves this thread asleep for ever: loom reports a deadlock.
                futex.wait(&bell, WAITING);
            }
            producer.join().unwrap();
        });
    }

    #[test]
    fn loom_no_lost_wakeup_one_item() {
        run(1);
    }

    #[test]
    fn loom_no_lost_wakeup_two_items() {
        run(2);
    }
}
