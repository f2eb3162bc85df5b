//! Rate and burst: a token bucket per channel (XTP's RATE and BURST).

use std::time::{Duration, Instant};

/// A channel's rate limit: `rate` bytes per second on average, at most `burst` bytes at once
/// after idling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Bytes per second (at least 1).
    pub bytes_per_sec: u64,
    /// Bytes the bucket holds (at least 1).
    pub burst: u64,
}

/// Tokens are bytes. The bucket fills at the rate up to the burst; a message may go when the
/// bucket is not in debt, and takes its length from it (so a message larger than the burst
/// goes out whole and leaves the bucket in debt until the rate has paid for it). Over any
/// interval the bytes sent are at most `burst + rate * interval` plus one message.
#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    rate: Rate,
    /// Tokens at `at`, in bytes; negative while in debt.
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket.
    pub(crate) fn new(rate: Rate, now: Instant) -> Bucket {
        Bucket {
            rate,
            tokens: rate.burst as f64,
            at: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        self.tokens =
            (self.tokens + dt * self.rate.bytes_per_sec as f64).min(self.rate.burst as f64);
    }

    /// How long until a message may go (zero: now).
    pub(crate) fn wait(&mut self, now: Instant) -> Duration {
        self.refill(now);
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate.bytes_per_sec as f64)
                .max(Duration::from_micros(1))
        }
    }

    /// Takes `len` bytes' worth of tokens (call when [`wait`](Self::wait) said zero).
    pub(crate) fn take(&mut self, len: usize, now: Instant) {
        self.refill(now);
        self.tokens -= len as f64;
    }

    /// Gives back what [`take`](Self::take) took for a message that did not go after all.
    pub(crate) fn take_back(&mut self, len: usize) {
        self.tokens = (self.tokens + len as f64).min(self.rate.burst as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_the_rate_in_simulated_time() {
        let t0 = Instant::now();
        let rate = Rate {
            bytes_per_sec: 1_000_000,
            burst: 10_000,
        };
        let mut b = Bucket::new(rate, t0);
        let mut now = t0;
        let mut sent = 0u64;
        // A sender that always has 4 KiB messages ready, for 10 simulated seconds.
        while now < t0 + Duration::from_secs(10) {
            let w = b.wait(now);
            if w.is_zero() {
                b.take(4096, now);
                sent += 4096;
            } else {
                now += w;
            }
        }
        let expected = 10_000_000 + 10_000;
        assert!(sent >= expected - 4096 && sent <= expected + 4096, "{sent}");
    }

    #[test]
    fn a_message_larger_than_the_burst_goes_whole_and_leaves_debt() {
        let t0 = Instant::now();
        let mut b = Bucket::new(
            Rate {
                bytes_per_sec: 1000,
                burst: 100,
            },
            t0,
        );
        assert!(b.wait(t0).is_zero());
        b.take(1100, t0);
        let w = b.wait(t0);
        assert!(
            w >= Duration::from_millis(999) && w <= Duration::from_millis(1001),
            "{w:?}"
        );
        assert!(b.wait(t0 + Duration::from_secs(1)).is_zero());
        // Idle for long: the bucket holds no more than the burst.
        let later = t0 + Duration::from_secs(100);
        b.wait(later);
        b.take(100, later);
        assert!(b.wait(later).is_zero());
        b.take(1, later);
        assert!(!b.wait(later).is_zero());
    }
}
