//! The CPU time of each thread of other processes over a stretch of time, for finding the
//! busiest thread of a pipeline that runs in several processes (which thread would set the
//! pace on a machine with a core for every busy thread).
//!
//! Threads come and go during a run (an engine starts a thread per link and per channel), and
//! an exited thread's time is no longer listed per thread. So a [`Sampler`] reads
//! `/proc/PID/task/TID/schedstat` (run time in nanoseconds) every `period` on a thread of its
//! own, keeps each thread's first and last reading, and reports the difference: a thread
//! alive at the start counts from its first reading, a thread born later from zero. What a
//! thread ran between its last reading and its exit is missed (at most `period` of it).
//!
//! The sampler runs on the machine it measures, beside the threads it samples, so a sweep is
//! kept cheap: each thread's `schedstat` is opened once and read again in place (`pread`),
//! and only the task directories are listed each time (for threads born since). Opening,
//! sizing, reading and closing each file at every sweep took four system calls a thread
//! where one does now, and half as much again of the sampler's CPU.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// One thread's CPU time over the sampled stretch.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadCpu {
    /// Its process.
    pub pid: u32,
    /// Its id.
    pub tid: u32,
    /// Its name (`comm`, at most 15 bytes).
    pub name: String,
    /// Seconds it ran.
    pub cpu_s: f64,
}

/// What the sampler keeps of one thread: its name, its `schedstat` (open while the thread
/// lives), and its run time (ns) to count from and at its last reading.
struct Thread {
    name: String,
    stat: Option<File>,
    first: u64,
    last: u64,
}

/// The threads seen, by (pid, tid).
type Seen = HashMap<(u32, u32), Thread>;

/// Samples the threads of some processes until [`stop`](Sampler::stop).
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Seen>,
}

impl Sampler {
    /// Starts sampling the threads of `pids` every `period` (one sweep at once, so that the
    /// threads already there count from now).
    pub fn start(pids: &[u32], period: Duration) -> std::io::Result<Sampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let (pids, flag) = (pids.to_vec(), Arc::clone(&stop));
        let mut seen = Seen::new();
        sweep(&pids, &mut seen, true);
        let handle = std::thread::Builder::new()
            .name("offhost-sampler".into())
            .spawn(move || {
                // Ordering: Acquire pairs with the Release store in `stop`; nothing else is
                // published through the flag, so Relaxed would do.
                while !flag.load(Ordering::Acquire) {
                    std::thread::sleep(period);
                    sweep(&pids, &mut seen, false);
                }
                sweep(&pids, &mut seen, false);
                seen
            })?;
        Ok(Sampler { stop, handle })
    }

    /// Ends sampling (with one last sweep); every thread seen, busiest first.
    pub fn stop(self) -> Vec<ThreadCpu> {
        // Ordering: Release pairs with the sampler's Acquire load of the flag (stronger than
        // needed: the thread is joined, which orders everything).
        self.stop.store(true, Ordering::Release);
        let seen = self.handle.join().unwrap_or_default();
        let mut out: Vec<ThreadCpu> = seen
            .into_iter()
            .map(|((pid, tid), t)| ThreadCpu {
                pid,
                tid,
                name: t.name,
                cpu_s: t.last.saturating_sub(t.first) as f64 * 1e-9,
            })
            .collect();
        out.sort_by(|a, b| b.cpu_s.total_cmp(&a.cpu_s).then(a.tid.cmp(&b.tid)));
        out
    }
}

/// Reads every thread of `pids` once. At the `first` sweep a thread's first reading is its run
/// time then; a thread first seen later started from zero.
fn sweep(pids: &[u32], seen: &mut Seen, first: bool) {
    // Threads already open are read in place; a thread that exited reads as nothing and its
    // file is closed (its last reading stays).
    for t in seen.values_mut() {
        if let Some(ns) = t.stat.as_ref().and_then(run_ns) {
            t.last = t.last.max(ns);
        } else {
            t.stat = None;
        }
    }
    for &pid in pids {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue; // the process is gone
        };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let std::collections::hash_map::Entry::Vacant(slot) = seen.entry((pid, tid)) else {
                continue;
            };
            // A thread may exit between listing and reading: skip it.
            let Ok(stat) = File::open(format!("/proc/{pid}/task/{tid}/schedstat")) else {
                continue;
            };
            let Some(ns) = run_ns(&stat) else {
                continue;
            };
            slot.insert(Thread {
                name: name(pid, tid),
                stat: Some(stat),
                first: if first { ns } else { 0 },
                last: ns,
            });
        }
    }
}

/// The run time (ns) in an open `schedstat` (its first field), read from its start; `None`
/// once the thread is gone.
fn run_ns(stat: &File) -> Option<u64> {
    let mut buf = [0u8; 128];
    let n = stat.read_at(&mut buf, 0).ok()?;
    crate::cpu::schedstat_ns(std::str::from_utf8(&buf[..n]).ok()?)
}

fn name(pid: u32, tid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
        .map(|s| s.trim_end().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_busy_thread_born_during_sampling_is_found_busiest_with_its_time() {
        let pid = std::process::id();
        let sampler = Sampler::start(&[pid], Duration::from_millis(5)).unwrap();
        let busy = std::thread::Builder::new()
            .name("busy-sampled".into())
            .spawn(|| {
                let t = Instant::now();
                let mut x = 0u64;
                while t.elapsed() < Duration::from_millis(300) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    std::hint::black_box(x);
                }
                // Stay alive past a sweep, so that the last reading holds the whole run.
                std::thread::sleep(Duration::from_millis(50));
                crate::cpu::thread_cpu_s()
            })
            .unwrap();
        let ran = busy.join().unwrap();
        let threads = sampler.stop();
        let t = threads
            .iter()
            .find(|t| t.name == "busy-sampled")
            .unwrap_or_else(|| panic!("not seen: {threads:?}"));
        assert_eq!(t.pid, pid);
        // Counted from zero (born after the first sweep), up to its last reading.
        assert!(
            t.cpu_s > 0.5 * ran && t.cpu_s <= ran + 0.01,
            "{} s sampled, {ran} s run",
            t.cpu_s
        );
        // Busiest first.
        assert!(threads.windows(2).all(|w| w[0].cpu_s >= w[1].cpu_s));
    }
}
