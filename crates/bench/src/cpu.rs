//! CPU load, measured the way `[DS-link]` (section 8.4) did it, plus the process's own account.
//!
//! - **Counting task.** A thread pinned on a core increments a counter as fast as it can. Run
//!   alone it gives the core's full rate; run beside the communication it counts what the
//!   communication left over. The load on that core is `1 - counted / alone`.
//! - **Own account.** The CPU time (`/proc/<pid>/task/<tid>/schedstat`, in ns) and the voluntary
//!   context switches (`voluntary_ctxt_switches`, one per sleep, so one per wake-up) of every
//!   thread of a process, counting threads excluded.
//!
//! Linux gives the counting task an equal share of a core with a busy-polling thread, so a
//! poller pinned beside the counter shows a load near 50 %: that is the scheduler's fair share,
//! not the poller's need. The report says so where it matters.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::affinity::{host_engine_cores, pin_current_thread, PinError};

/// Errors of the CPU measurements.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CpuError {
    /// Pinning a counting thread to its core failed.
    #[error(transparent)]
    Pin(#[from] PinError),
    /// The counting thread could not be started.
    #[error("cannot start a counting thread: {0}")]
    Spawn(std::io::Error),
    /// A `/proc` file could not be read or parsed.
    #[error("cannot read {path}: {reason}")]
    Proc {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The counting thread died.
    #[error("counting thread panicked")]
    CounterDied,
}

/// A counting task running on one core.
pub struct Counter {
    stop: Arc<AtomicBool>,
    count: Arc<AtomicU64>,
    tid: Arc<Mutex<Option<i32>>>,
    started: Instant,
    handle: JoinHandle<()>,
}

impl Counter {
    /// Starts a counting thread pinned on `core`.
    pub fn start(core: usize) -> Result<Counter, CpuError> {
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicU64::new(0));
        let tid = Arc::new(Mutex::new(None));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (s, c, t) = (stop.clone(), count.clone(), tid.clone());
        let handle = std::thread::Builder::new()
            .name(format!("count{core}"))
            .spawn(move || {
                let pinned = pin_current_thread(core);
                if let Ok(mut g) = t.lock() {
                    *g = Some(rustix::thread::gettid().as_raw_nonzero().get());
                }
                let failed = pinned.is_err();
                let _ = ready_tx.send(pinned);
                if failed {
                    return;
                }
                let mut n: u64 = 0;
                // Relaxed: the flag only ends the loop; the count is published by the
                // store below and read after join(), which synchronises.
                while !s.load(Ordering::Relaxed) {
                    for _ in 0..4096 {
                        n = black_box(n + 1);
                    }
                }
                c.store(n, Ordering::Relaxed);
            })
            .map_err(CpuError::Spawn)?;
        ready_rx.recv().map_err(|_| CpuError::CounterDied)??;
        Ok(Counter {
            stop,
            count,
            tid,
            started: Instant::now(),
            handle,
        })
    }

    /// The counting thread's id (to leave it out of a process's own account).
    pub fn tid(&self) -> Option<i32> {
        self.tid.lock().ok().and_then(|g| *g)
    }

    /// Stops the task; returns iterations per second over its run.
    pub fn stop(self) -> Result<f64, CpuError> {
        self.stop.store(true, Ordering::Relaxed);
        let elapsed = self.started.elapsed();
        self.handle.join().map_err(|_| CpuError::CounterDied)?;
        let n = self.count.load(Ordering::Relaxed);
        Ok(n as f64 / elapsed.as_secs_f64().max(1e-9))
    }
}

/// Counts on `core` alone for `time`; returns iterations per second.
pub fn rate_alone(core: usize, time: Duration) -> Result<f64, CpuError> {
    let c = Counter::start(core)?;
    std::thread::sleep(time);
    c.stop()
}

/// Counting tasks on the host and engine cores with their rates alone, measured once.
#[derive(Debug, Clone, Copy)]
pub struct LoadProbe {
    /// Host core.
    pub host_core: usize,
    /// Engine core.
    pub engine_core: usize,
    /// Host core's counting rate alone.
    pub host_alone: f64,
    /// Engine core's counting rate alone.
    pub engine_alone: f64,
}

/// Loads measured over one run, fractions 0..1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Loads {
    /// Load on the host core.
    pub host: f64,
    /// Load on the engine core.
    pub engine: f64,
}

/// The counting tasks of a run in progress.
pub struct RunningProbe {
    probe: LoadProbe,
    host: Counter,
    engine: Option<Counter>,
}

/// `1 - during / alone`, clamped to 0..1 (noise can push a light load slightly below 0).
pub fn load(during: f64, alone: f64) -> f64 {
    if alone <= 0.0 {
        return 0.0;
    }
    (1.0 - during / alone).clamp(0.0, 1.0)
}

impl LoadProbe {
    /// Calibrates both cores' counting rates alone, `time` each.
    pub fn calibrate(time: Duration) -> Result<LoadProbe, CpuError> {
        let (host_core, engine_core) = host_engine_cores();
        let host_alone = rate_alone(host_core, time)?;
        let engine_alone = if engine_core == host_core {
            host_alone
        } else {
            rate_alone(engine_core, time)?
        };
        Ok(LoadProbe {
            host_core,
            engine_core,
            host_alone,
            engine_alone,
        })
    }

    /// Starts the counting tasks beside a run.
    pub fn start(&self) -> Result<RunningProbe, CpuError> {
        let host = Counter::start(self.host_core)?;
        let engine = if self.engine_core != self.host_core {
            Some(Counter::start(self.engine_core)?)
        } else {
            None
        };
        Ok(RunningProbe {
            probe: *self,
            host,
            engine,
        })
    }
}

impl RunningProbe {
    /// Thread ids of the counting tasks.
    pub fn tids(&self) -> Vec<i32> {
        [self.host.tid(), self.engine.as_ref().and_then(Counter::tid)]
            .into_iter()
            .flatten()
            .collect()
    }

    /// Stops the counting tasks and returns the loads.
    pub fn finish(self) -> Result<Loads, CpuError> {
        let host_rate = self.host.stop()?;
        let host = load(host_rate, self.probe.host_alone);
        let engine = match self.engine {
            Some(c) => load(c.stop()?, self.probe.engine_alone),
            None => host,
        };
        Ok(Loads { host, engine })
    }
}

/// A process's own account at one moment: CPU time and voluntary context switches summed over
/// its live threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Account {
    /// CPU time, ns.
    pub cpu_ns: u64,
    /// Voluntary context switches.
    pub voluntary_switches: u64,
}

fn read(path: &str) -> Result<String, CpuError> {
    std::fs::read_to_string(path).map_err(|e| CpuError::Proc {
        path: path.into(),
        reason: e.to_string(),
    })
}

fn bad(path: &str, reason: &str) -> CpuError {
    CpuError::Proc {
        path: path.into(),
        reason: reason.into(),
    }
}

/// Reads one thread's account from `/proc/<pid>/task/<tid>/`.
fn task_account(dir: &str) -> Result<Account, CpuError> {
    let sched = format!("{dir}/schedstat");
    let cpu_ns = read(&sched)?
        .split_whitespace()
        .next()
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| bad(&sched, "no run time field"))?;
    let status = format!("{dir}/status");
    let voluntary_switches = read(&status)?
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| bad(&status, "no voluntary_ctxt_switches line"))?;
    Ok(Account {
        cpu_ns,
        voluntary_switches,
    })
}

/// Sums the account over the live threads of `pid` (`None`: this process), leaving out the
/// threads in `exclude`. Threads that exit between listing and reading are skipped.
pub fn account(pid: Option<u32>, exclude: &[i32]) -> Result<Account, CpuError> {
    let base = match pid {
        Some(p) => format!("/proc/{p}/task"),
        None => "/proc/self/task".to_string(),
    };
    let entries = std::fs::read_dir(&base).map_err(|e| bad(&base, &e.to_string()))?;
    let mut total = Account::default();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(tid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if exclude.contains(&tid) {
            continue;
        }
        if let Ok(a) = task_account(&format!("{base}/{tid}")) {
            total.cpu_ns += a.cpu_ns;
            total.voluntary_switches += a.voluntary_switches;
        }
    }
    Ok(total)
}

impl Account {
    /// The difference `self - earlier` (saturating).
    pub fn since(&self, earlier: &Account) -> Account {
        Account {
            cpu_ns: self.cpu_ns.saturating_sub(earlier.cpu_ns),
            voluntary_switches: self
                .voluntary_switches
                .saturating_sub(earlier.voluntary_switches),
        }
    }
}

/// CPU time consumed so far by the live threads of process `pid` (summed over its tasks).
pub fn process_cpu_time(pid: u32) -> Option<Duration> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = Duration::ZERO;
    for t in tasks.flatten() {
        let path = t.path().join("schedstat");
        // A thread may exit between listing and reading: skip it.
        if let Some(d) = read_schedstat(path.to_str()?) {
            total += d;
        }
    }
    Some(total)
}

/// CPU time consumed so far by thread `tid` of this process.
pub fn thread_cpu_time(tid: u32) -> Option<Duration> {
    read_schedstat(&format!("/proc/self/task/{tid}/schedstat"))
}

/// The run time in a `schedstat` file of `/proc` (its first field, nanoseconds).
pub(crate) fn read_schedstat(path: &str) -> Option<Duration> {
    let text = std::fs::read_to_string(path).ok()?;
    schedstat_ns(&text).map(Duration::from_nanos)
}

/// The run time, nanoseconds, in the text of a `schedstat` file (its first field).
pub(crate) fn schedstat_ns(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// The calling thread's id, for [`thread_cpu_time`].
pub fn current_tid() -> u32 {
    rustix::thread::gettid().as_raw_nonzero().get() as u32
}

/// CPU time (user + system) process `pid` (`None`: this process) has used so far, in seconds,
/// exited threads included, from `/proc/<pid>/stat` (clock ticks of 1/100 s). `None` when the
/// process is gone.
pub fn process_cpu_s(pid: Option<u32>) -> Option<f64> {
    let path = pid.map_or("/proc/self/stat".to_owned(), |p| format!("/proc/{p}/stat"));
    let stat = std::fs::read_to_string(path).ok()?;
    // The fields after the command name (in parentheses, and it may hold spaces): utime is the
    // 12th of them and stime the 13th.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// CPU time the calling thread has used so far, in seconds (on a shared machine wall time
/// includes other people's work; thread CPU time does not).
pub fn thread_cpu_s() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_formula() {
        assert_eq!(load(50.0, 100.0), 0.5);
        assert_eq!(load(120.0, 100.0), 0.0);
        assert_eq!(load(0.0, 100.0), 1.0);
        assert_eq!(load(1.0, 0.0), 0.0);
    }

    #[test]
    fn counter_counts_and_can_be_excluded() {
        let c = Counter::start(0).unwrap();
        let tid = c.tid().unwrap();
        std::thread::sleep(Duration::from_millis(30));
        let with = account(None, &[]).unwrap();
        let without = account(None, &[tid]).unwrap();
        assert!(with.cpu_ns > without.cpu_ns);
        assert!(c.stop().unwrap() > 0.0);
    }

    /// A thread that sleeps 20 times makes at least 20 voluntary switches.
    #[test]
    fn sleeps_are_counted_as_voluntary_switches() {
        let h = std::thread::spawn(|| {
            let me = rustix::thread::gettid().as_raw_nonzero().get();
            let dir = format!("/proc/self/task/{me}");
            let a = task_account(&dir).unwrap();
            for _ in 0..20 {
                std::thread::sleep(Duration::from_millis(1));
            }
            task_account(&dir).unwrap().since(&a)
        });
        let d = h.join().unwrap();
        assert!(d.voluntary_switches >= 20, "{d:?}");
    }

    #[test]
    fn missing_process_is_a_clear_error() {
        let e = account(Some(u32::MAX - 7), &[]).unwrap_err();
        assert!(e.to_string().contains("/proc/"), "{e}");
    }

    #[test]
    fn busy_thread_accumulates_cpu_time() {
        let tid = current_tid();
        let before = thread_cpu_time(tid).expect("schedstat readable");
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let after = thread_cpu_time(tid).unwrap();
        assert!(after > before, "{before:?} -> {after:?}");
        assert!(process_cpu_time(std::process::id()).unwrap() >= after);
    }

    #[test]
    fn process_and_thread_cpu_seconds_grow_with_work() {
        let (p0, t0) = (process_cpu_s(None).unwrap(), thread_cpu_s());
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(thread_cpu_s() > t0);
        assert!(process_cpu_s(None).unwrap() >= p0);
        assert!(process_cpu_s(Some(std::process::id())).is_some());
        assert!(process_cpu_s(Some(u32::MAX - 7)).is_none());
    }
}
