//! The machine's floors: what a cross-core cache-line hand-off, a futex wake-up and a memory
//! copy cost on this machine, measured the same way the links are measured.

use crossbeam_utils::CachePadded;
use rustix::thread::futex;
use serde::Serialize;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::affinity;
use crate::stats::Summary;

/// How many round trips (or copies) to time, after how many warm-up ones.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Untimed iterations first.
    pub warmup: usize,
    /// Timed samples.
    pub samples: usize,
}

/// The three floors measured in one run.
#[derive(Debug, Clone, Serialize)]
pub struct Floors {
    /// One-way cache-line hand-off between two cores, median, ns.
    pub cacheline_ns: f64,
    /// Its 99th percentile, ns.
    pub cacheline_ns_p99: f64,
    /// One-way futex wake-up ping-pong, median, ns.
    pub futex_ns: f64,
    /// Its 99th percentile, ns.
    pub futex_ns_p99: f64,
    /// Copy bandwidth of 1 MiB buffers, median, GB/s (10^9 bytes per second).
    pub memcpy_gb_per_s: f64,
    /// Bandwidth of reading 1 MiB that another core has just written, median, GB/s: what
    /// moving data (not a descriptor) from one core to the other costs.
    pub cross_core_read_gb_per_s: f64,
    /// CPUs the two ping-pong ends were pinned to, if pinning was possible.
    pub cpus: Option<(usize, usize)>,
}

/// Measures all three floors. The calling thread is pinned while it measures and may run on
/// all its CPUs again afterwards.
pub fn measure(plan: Plan, progress: &mut dyn FnMut(&str)) -> Floors {
    let allowed = affinity::allowed_cpus();
    let cpus = affinity::cpu_pair();
    progress("cache-line ping-pong");
    let c = cacheline_one_way_ns(plan, cpus);
    progress("futex ping-pong");
    let f = futex_one_way_ns(
        Plan {
            warmup: plan.warmup / 10 + 1,
            samples: plan.samples / 10 + 1,
        },
        cpus,
    );
    progress("memcpy 1 MiB");
    let m = memcpy_gb_per_s(
        1 << 20,
        Plan {
            warmup: 20,
            samples: 200,
        },
    );
    progress("cross-core read 1 MiB");
    let x = cross_core_read_gb_per_s(
        1 << 20,
        Plan {
            warmup: 5,
            samples: 50,
        },
        cpus,
    );
    affinity::unpin_current_thread(&allowed);
    Floors {
        cacheline_ns: c.median,
        cacheline_ns_p99: c.p99,
        futex_ns: f.median,
        futex_ns_p99: f.p99,
        memcpy_gb_per_s: m.median,
        cross_core_read_gb_per_s: x.median,
        cpus,
    }
}

impl Floors {
    /// The floors as a short text table.
    pub fn table(&self) -> String {
        let cpus = self
            .cpus
            .map_or("unpinned".to_owned(), |(a, b)| format!("CPUs {a} and {b}"));
        format!(
            "floor                     median        p99\n\
             cache-line one way   {:>10.0} ns {:>10.0} ns\n\
             futex one way        {:>10.1} us {:>10.1} us\n\
             memcpy 1 MiB         {:>10.2} GB/s\n\
             cross-core read 1 MiB{:>10.2} GB/s\n\
             ({cpus})\n",
            self.cacheline_ns,
            self.cacheline_ns_p99,
            self.futex_ns / 1e3,
            self.futex_ns_p99 / 1e3,
            self.memcpy_gb_per_s,
            self.cross_core_read_gb_per_s
        )
    }
}

fn spin_until(cond: impl Fn() -> bool) {
    let mut i = 0u32;
    while !cond() {
        i = i.wrapping_add(1);
        if i.is_multiple_of(4096) {
            // Only matters when both ends share one CPU.
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// One-way latency of handing one cache line back and forth between two pinned threads (half
/// of each timed round trip), in ns.
pub fn cacheline_one_way_ns(plan: Plan, cpus: Option<(usize, usize)>) -> Summary {
    let line = Arc::new(CachePadded::new(AtomicU64::new(0)));
    let total = (plan.warmup + plan.samples) as u64;
    let peer = {
        let line = line.clone();
        std::thread::spawn(move || {
            if let Some((_, b)) = cpus {
                let _ = affinity::pin_current_thread(b);
            }
            for k in 0..total {
                // Acquire/Release: the hand-off itself is what we time; orderings as a ring uses.
                spin_until(|| line.load(Ordering::Acquire) == 2 * k + 1);
                line.store(2 * k + 2, Ordering::Release);
            }
        })
    };
    if let Some((a, _)) = cpus {
        let _ = affinity::pin_current_thread(a);
    }
    let mut samples = Vec::with_capacity(plan.samples);
    for k in 0..total {
        let t0 = Instant::now();
        line.store(2 * k + 1, Ordering::Release);
        spin_until(|| line.load(Ordering::Acquire) == 2 * k + 2);
        if k as usize >= plan.warmup {
            samples.push(t0.elapsed().as_nanos() as f64 / 2.0);
        }
    }
    peer.join().expect("cache-line peer");
    Summary::of(&samples).expect("samples")
}

fn futex_wait_for(word: &AtomicU32, want: u32) {
    loop {
        let v = word.load(Ordering::Acquire);
        if v == want {
            return;
        }
        let _ = futex::wait(word, futex::Flags::empty(), v, None);
    }
}

/// One-way latency of a futex ping-pong between two pinned threads that sleep every time
/// (half of each timed round trip), in ns.
pub fn futex_one_way_ns(plan: Plan, cpus: Option<(usize, usize)>) -> Summary {
    let words = Arc::new([
        CachePadded::new(AtomicU32::new(0)),
        CachePadded::new(AtomicU32::new(0)),
    ]);
    let total = plan.warmup + plan.samples;
    let peer = {
        let words = words.clone();
        std::thread::spawn(move || {
            if let Some((_, b)) = cpus {
                let _ = affinity::pin_current_thread(b);
            }
            for k in 0..total {
                let v = (k % 2) as u32 ^ 1;
                futex_wait_for(&words[0], v);
                words[1].store(v, Ordering::Release);
                let _ = futex::wake(&words[1], futex::Flags::empty(), 1);
            }
        })
    };
    if let Some((a, _)) = cpus {
        let _ = affinity::pin_current_thread(a);
    }
    let mut samples = Vec::with_capacity(plan.samples);
    for k in 0..total {
        let v = (k % 2) as u32 ^ 1;
        let t0 = Instant::now();
        words[0].store(v, Ordering::Release);
        let _ = futex::wake(&words[0], futex::Flags::empty(), 1);
        futex_wait_for(&words[1], v);
        if k >= plan.warmup {
            samples.push(t0.elapsed().as_nanos() as f64 / 2.0);
        }
    }
    peer.join().expect("futex peer");
    Summary::of(&samples).expect("samples")
}

/// Bandwidth of copying `size` bytes between two private buffers, in GB/s (10^9 B/s).
pub fn memcpy_gb_per_s(size: usize, plan: Plan) -> Summary {
    let src = vec![0x5au8; size];
    let mut dst = vec![0u8; size];
    let mut samples = Vec::with_capacity(plan.samples);
    for k in 0..plan.warmup + plan.samples {
        let t0 = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
        let dt = t0.elapsed().as_nanos().max(1) as f64;
        if k >= plan.warmup {
            samples.push(size as f64 / dt);
        }
    }
    Summary::of(&samples).expect("samples")
}

/// Bandwidth of one thread reading `size` bytes that a thread on the other CPU has just
/// written (the lines move between the cores' caches), in GB/s.
pub fn cross_core_read_gb_per_s(size: usize, plan: Plan, cpus: Option<(usize, usize)>) -> Summary {
    let words = size / 8;
    let buf: Arc<Vec<AtomicU64>> = Arc::new((0..words).map(|_| AtomicU64::new(0)).collect());
    let turn = Arc::new(CachePadded::new(AtomicU64::new(0)));
    let total = (plan.warmup + plan.samples) as u64;
    let writer = {
        let (buf, turn) = (buf.clone(), turn.clone());
        std::thread::spawn(move || {
            if let Some((a, _)) = cpus {
                let _ = affinity::pin_current_thread(a);
            }
            for k in 0..total {
                spin_until(|| turn.load(Ordering::Acquire) == 2 * k);
                for w in buf.iter() {
                    w.store(k, Ordering::Relaxed);
                }
                // Release: the reader sees every word written above.
                turn.store(2 * k + 1, Ordering::Release);
            }
        })
    };
    if let Some((_, b)) = cpus {
        let _ = affinity::pin_current_thread(b);
    }
    let mut samples = Vec::with_capacity(plan.samples);
    for k in 0..total {
        spin_until(|| turn.load(Ordering::Acquire) == 2 * k + 1);
        let t0 = Instant::now();
        let sum = buf.iter().fold(0u64, |a, w| a ^ w.load(Ordering::Relaxed));
        let dt = t0.elapsed().as_nanos().max(1) as f64;
        std::hint::black_box(sum);
        turn.store(2 * k + 2, Ordering::Release);
        if k as usize >= plan.warmup {
            samples.push((words * 8) as f64 / dt);
        }
    }
    writer.join().expect("writer");
    Summary::of(&samples).expect("samples")
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: Plan = Plan {
        warmup: 10,
        samples: 200,
    };

    #[test]
    fn floors_complete_and_are_positive() {
        let cpus = affinity::cpu_pair();
        let c = cacheline_one_way_ns(TINY, cpus);
        let f = futex_one_way_ns(TINY, cpus);
        let m = memcpy_gb_per_s(1 << 16, TINY);
        assert_eq!((c.samples, f.samples, m.samples), (200, 200, 200));

        for s in [c, f, m] {
            assert!(s.min > 0.0 && s.median <= s.p99 && s.p99 <= s.max, "{s:?}");
        }
    }

    #[test]
    fn measuring_leaves_the_caller_unpinned() {
        let before = affinity::allowed_cpus();
        let mut phases = Vec::new();
        let f = measure(TINY, &mut |p| phases.push(p.to_owned()));
        assert_eq!(affinity::allowed_cpus(), before);
        assert_eq!(phases.len(), 4);
        assert!(f.cacheline_ns > 0.0 && f.futex_ns > 0.0 && f.memcpy_gb_per_s > 0.0);
        let t = f.table();
        assert_eq!(t.lines().count(), 6, "{t}");
        assert!(
            t.lines().nth(1).unwrap().starts_with("cache-line one way"),
            "{t}"
        );
    }
}
