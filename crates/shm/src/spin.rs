//! When [`Mode::Adaptive`](crate::Mode::Adaptive) spins: while spinning is free or pays off.
//!
//! A spin that ends in sleep anyway has used its budget of CPU for nothing. On an idle core
//! that costs nobody anything, and it keeps the core awake for the wake-up that follows (on a
//! virtual machine, waking an idle vCPU costs tens of microseconds). On a machine with no
//! idle core that CPU is taken from the threads that would have made the wait end (the
//! peer, a link's reader). The wait sees that in two ways: the spinning thread was off the
//! CPU for a while (it yields after 20 us, and another thread ran), or, when the spin ends,
//! more threads are runnable than the process has CPUs ([`cpus_wanted`]; a spinner the
//! scheduler favours is never off the CPU, yet it keeps the others waiting). So each spin
//! that ends in sleep on a contended machine doubles the number of waits that go straight to sleep after
//! it (1, 3, 7, ... up to [`MAX_SKIP`]), and so does a spin that saw its condition only after
//! it had been off the CPU (a sleeping wait would have ended as well). A spin that sees its
//! condition come true without having been off the CPU brings the count back to zero. A side whose peer answers within the budget (a stream) spins every
//! time. A side that waits longer than the budget on a busy machine (a round trip under load)
//! spins once in `MAX_SKIP + 1` waits, which is also how it notices when things change.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

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
    /// Of those, the ones whose spin ended without the condition while other threads wanted
    /// the CPU (they slept after it, and made later waits sleep at once).
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

/// Whether more threads are runnable right now than this process has CPUs (the running
/// count of `/proc/loadavg`, which includes the caller). Read only when a spin ended without
/// its condition, so at most once per spin budget; `false` where it cannot be read.
pub(crate) fn cpus_wanted() -> bool {
    static LOADAVG: OnceLock<Option<(File, usize)>> = OnceLock::new();
    let Some((file, cpus)) = LOADAVG.get_or_init(|| {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        File::open("/proc/loadavg").ok().map(|f| (f, cpus))
    }) else {
        return false;
    };
    let mut buf = [0u8; 128];
    let Ok(n) = file.read_at(&mut buf, 0) else {
        return false;
    };
    runnable(&buf[..n]).is_some_and(|r| r > *cpus)
}

/// The running count of a `/proc/loadavg` line ("0.52 0.58 0.59 3/467 12345": 3).
fn runnable(line: &[u8]) -> Option<usize> {
    let field = line.split(|&b| b == b' ').nth(3)?;
    let running = field.split(|&b| b == b'/').next()?;
    std::str::from_utf8(running).ok()?.parse().ok()
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

    #[test]
    fn the_running_count_is_read_from_a_loadavg_line() {
        assert_eq!(runnable(b"0.52 0.58 0.59 3/467 12345\n"), Some(3));
        assert_eq!(runnable(b"0.52 0.58 0.59 x/467 12345\n"), None);
        assert_eq!(runnable(b"0.52"), None);
        // The caller itself is running when it reads the line.
        assert!(runnable(&std::fs::read("/proc/loadavg").unwrap()).unwrap() >= 1);
    }
}
