//! When [`Mode::Adaptive`](crate::Mode::Adaptive) spins: while spinning is free or pays off.
//!
//! A spin that ends in sleep anyway has used its budget of CPU for nothing. On an idle core
//! that costs nobody anything, and it keeps the core awake for the wake-up that follows (on a
//! virtual machine, waking an idle vCPU costs tens of microseconds). On a machine with no
//! idle core that CPU is taken from the threads that would have made the wait end (the
//! peer, a link's reader). The spin sees that: after 20 us it yields between its looks at
//! the condition, and when a thread that wants to run for a while is waiting for this CPU,
//! the yield hands the CPU to it and the spinner comes back 40 us or more later
//! (`OFF_CPU` in `shared.rs`). Another spinner, or a thread with a few microseconds of work,
//! gives the CPU back sooner, so spinners that only take turns with each other do not
//! count.
//!
//! Each spin that ends in sleep after such a gap doubles the number of waits that go
//! straight to sleep after it (1, 3, 7, ... up to [`MAX_SKIP`]), and so does a spin that saw
//! its condition only after such a gap (a sleeping wait would have ended as well). A spin
//! that sees its condition come true without such a gap brings the count back to zero. A
//! side whose peer answers within the budget (a stream) spins every time. A side that waits
//! longer than the budget on a busy machine (a round trip under load) spins once in
//! `MAX_SKIP + 1` waits, which is also how it notices when things change.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The most waits that sleep at once after failed spins before one spins again.
pub(crate) const MAX_SKIP: u32 = 63;

/// The spin decisions of the waits on one doorbell. Waits on one doorbell come from one
/// thread at a time in practice; with several, the counts are approximate, never unsafe.
#[derive(Debug, Default)]
pub(crate) struct SpinBackoff {
    /// Waits left that sleep without spinning.
    skip: AtomicU32,
    /// What `skip` is set to after the next failed spin.
    step: AtomicU32,
    /// Counters (for tests and diagnostics).
    spun: AtomicU64,
    failed: AtomicU64,
    skipped: AtomicU64,
}

/// What a side's waits on one doorbell did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpinStats {
    /// Waits that spun.
    pub spun: u64,
    /// Of those, the ones that were off the CPU for a while, another thread having wanted it
    /// (they made later waits sleep at once).
    pub failed: u64,
    /// Waits that slept at once because spins had been failing.
    pub skipped: u64,
}

impl SpinBackoff {
    /// Whether this wait spins (counts a skipped one).
    pub(crate) fn should_spin(&self) -> bool {
        let s = self.skip.load(Ordering::Relaxed);
        if s == 0 {
            self.spun.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        self.skip.store(s - 1, Ordering::Relaxed);
        self.skipped.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// The spin saw its condition come true; `contended`: it was off the CPU first (then it
    /// counts as failed: the CPU was wanted, and a sleeping wait would have ended as well).
    pub(crate) fn ended_with_condition(&self, contended: bool) {
        if contended {
            self.failed();
        } else {
            self.succeeded();
        }
    }

    fn succeeded(&self) {
        if self.step.load(Ordering::Relaxed) != 0 {
            self.step.store(0, Ordering::Relaxed);
        }
    }

    /// The spin used its budget and the wait sleeps; `contended`: the thread was off the CPU
    /// during the spin (only such a spin counts as failed).
    pub(crate) fn ended(&self, contended: bool) {
        if contended {
            self.failed();
        }
    }

    fn failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let step = (self.step.load(Ordering::Relaxed) * 2 + 1).min(MAX_SKIP);
        self.step.store(step, Ordering::Relaxed);
        self.skip.store(step, Ordering::Relaxed);
    }

    pub(crate) fn stats(&self) -> SpinStats {
        SpinStats {
            spun: self.spun.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            skipped: self.skipped.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(b: &SpinBackoff, outcomes: impl IntoIterator<Item = bool>) -> Vec<bool> {
        let mut spins = Vec::new();
        for ok in outcomes {
            let spin = b.should_spin();
            spins.push(spin);
            if spin {
                if ok {
                    b.ended_with_condition(false)
                } else {
                    b.ended(true)
                }
            }
        }
        spins
    }

    #[test]
    fn failed_spins_double_the_waits_that_sleep_at_once_up_to_the_limit() {
        let b = SpinBackoff::default();
        let spins = run(&b, std::iter::repeat_n(false, 200));
        let at: Vec<usize> = (0..200).filter(|&i| spins[i]).collect();
        // Spins at 0, then after 1, 3, 7, 15, 31, 63, 63 ... skipped waits.
        assert_eq!(&at[..8], &[0, 2, 6, 14, 30, 62, 126, 190]);
        let s = b.stats();
        assert_eq!((s.spun, s.failed, s.skipped), (8, 8, 192));
    }

    #[test]
    fn a_spin_that_succeeds_makes_every_wait_spin_again() {
        let b = SpinBackoff::default();
        run(&b, std::iter::repeat_n(false, 20));
        // Wait out the skips, then one success: from then on every wait spins.
        let spins = run(&b, std::iter::repeat_n(true, 40));
        let first = spins.iter().position(|&s| s).unwrap();
        assert!(spins[first..].iter().all(|&s| s), "{spins:?}");
        // And the next failure starts the doubling from one again.
        b.ended(true);
        assert!(!b.should_spin());
        assert!(b.should_spin());
    }

    #[test]
    fn a_spin_that_ends_on_a_free_cpu_does_not_stop_later_spins() {
        let b = SpinBackoff::default();
        for _ in 0..10 {
            assert!(b.should_spin());
            b.ended(false);
        }
        let s = b.stats();
        assert_eq!((s.spun, s.failed, s.skipped), (10, 0, 0));
    }
}
