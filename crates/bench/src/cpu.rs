//! CPU time consumed by a process or thread, read from `/proc` (nanosecond `schedstat`).

use std::time::Duration;

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

fn read_schedstat(path: &str) -> Option<Duration> {
    let text = std::fs::read_to_string(path).ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// The calling thread's id, for [`thread_cpu_time`].
pub fn current_tid() -> u32 {
    rustix::thread::gettid().as_raw_nonzero().get() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
