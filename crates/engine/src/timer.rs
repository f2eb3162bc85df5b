//! Wake-ups at a time, for tasks: a task never sleeps on a worker, so one that must act by a
//! deadline (a call to its own pipeline's service with `timeout=`) sets an [`Alarm`] and is
//! woken then, as if a buffer had come.
//!
//! One thread per process (`offhost-timer`, started by the first alarm) keeps the alarms in
//! time order and wakes each task when its time comes. A task has one alarm, which holds at
//! most one entry: setting it again for a later time keeps the earlier entry (the task, woken
//! then, sets it again), and dropping it removes its entry. So the entries are never more
//! than the alarms alive, whatever the deadlines.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Instant;

use crate::runq::Waker;

/// An entry's key: when, and a number that tells entries of the same instant apart.
type Key = (Instant, u64);

/// The alarms of the process, in time order.
struct Timers {
    entries: Mutex<BTreeMap<Key, Waker>>,
    changed: Condvar,
    next: AtomicU64,
}

/// The process's timers; their thread starts on first use.
fn timers() -> Option<&'static Timers> {
    static TIMERS: OnceLock<Option<&'static Timers>> = OnceLock::new();
    *TIMERS.get_or_init(|| {
        let t: &'static Timers = Box::leak(Box::new(Timers {
            entries: Mutex::new(BTreeMap::new()),
            changed: Condvar::new(),
            next: AtomicU64::new(0),
        }));
        let spawned = std::thread::Builder::new()
            .name("offhost-timer".into())
            .spawn(move || t.run());
        match spawned {
            Ok(_) => Some(t),
            Err(e) => {
                tracing::warn!("no timer thread ({e}): deadlines of tasks are not kept");
                None
            }
        }
    })
}

impl Timers {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Key, Waker>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes each entry's task when its time comes, for ever.
    fn run(&self) {
        let mut entries = self.lock();
        loop {
            let now = Instant::now();
            let due: Vec<Waker> = match entries.keys().next() {
                Some(&(when, _)) if when <= now => {
                    let later = entries.split_off(&(now, u64::MAX));
                    std::mem::replace(&mut *entries, later)
                        .into_values()
                        .collect()
                }
                Some(&(when, _)) => {
                    entries = self
                        .changed
                        .wait_timeout(entries, when - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    continue;
                }
                None => {
                    entries = self
                        .changed
                        .wait(entries)
                        .unwrap_or_else(|e| e.into_inner());
                    continue;
                }
            };
            drop(entries);
            for w in due {
                w.wake();
            }
            entries = self.lock();
        }
    }
}

/// One task's wake-up at a time (see the module's text).
#[derive(Default)]
pub(crate) struct Alarm {
    /// The entry this alarm set, which may have rung already.
    set: Option<Key>,
}

impl Alarm {
    /// Makes sure `waker`'s task is woken at `when` or earlier (then it sets the alarm
    /// again if it still waits).
    pub(crate) fn ring_at(&mut self, when: Instant, waker: &Waker) {
        if let Some((at, _)) = self.set {
            // An entry still to ring, no later than asked: it wakes the task in time.
            if at <= when && at > Instant::now() {
                return;
            }
        }
        let Some(t) = timers() else { return };
        let key = (when, t.next.fetch_add(1, Ordering::Relaxed));
        let mut entries = t.lock();
        if let Some(old) = self.set.take() {
            entries.remove(&old);
        }
        let first = entries.keys().next().is_none_or(|k| key < *k);
        entries.insert(key, waker.clone());
        drop(entries);
        self.set = Some(key);
        if first {
            t.changed.notify_one();
        }
    }

    /// Takes back the entry, if it has not rung.
    pub(crate) fn clear(&mut self) {
        if let (Some(key), Some(t)) = (self.set.take(), timers()) {
            t.lock().remove(&key);
        }
    }
}

impl Drop for Alarm {
    fn drop(&mut self) {
        if self.set.is_some() {
            self.clear();
        }
    }
}

/// Whether an entry is still to ring (for tests).
#[cfg(test)]
fn waits(key: Key) -> bool {
    timers().is_some_and(|t| t.lock().contains_key(&key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_alarm_keeps_one_entry_and_takes_it_back_when_dropped() {
        let w = Waker::detached(0);
        let far = Instant::now() + Duration::from_secs(3600);
        let mut a = Alarm::default();
        a.ring_at(far, &w);
        let first = a.set.unwrap();
        // Later deadlines keep the entry that rings first.
        for s in 1..100 {
            a.ring_at(far + Duration::from_secs(s), &w);
        }
        assert_eq!(a.set, Some(first));
        // An earlier one replaces it.
        a.ring_at(far - Duration::from_secs(60), &w);
        let second = a.set.unwrap();
        assert!(second.0 < first.0 && !waits(first) && waits(second));
        drop(a);
        assert!(!waits(second), "a dropped alarm's entry stays");
    }

    #[test]
    fn an_entry_rings_and_leaves() {
        let mut a = Alarm::default();
        a.ring_at(
            Instant::now() + Duration::from_millis(5),
            &Waker::detached(1),
        );
        let key = a.set.unwrap();
        let t0 = Instant::now();
        while waits(key) {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the entry never rang"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        // Rung: asking again sets a new entry.
        a.ring_at(
            Instant::now() + Duration::from_secs(3600),
            &Waker::detached(1),
        );
        assert!(a.set != Some(key) && waits(a.set.unwrap()));
    }
}
