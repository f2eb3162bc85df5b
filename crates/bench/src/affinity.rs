//! Pinning threads and processes to CPUs, so that a ping-pong really crosses between two
//! cores: the one pinning helper of every bench.
//!
//! The host (measuring) side runs on the first CPU this process may use and the engine (echo
//! or sink) side on the second. They are taken once, at the first call of any function here,
//! so pinning a thread later narrows what that thread may use, not what the bench thinks the
//! process has.

use std::sync::OnceLock;

use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};

/// Pinning a thread or process failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot pin to CPU {cpu}: {source}")]
pub struct PinError {
    /// The CPU asked for.
    pub cpu: usize,
    /// The system's answer.
    #[source]
    pub source: std::io::Error,
}

/// The CPUs the calling thread may run on now.
pub fn allowed_cpus() -> Vec<usize> {
    match sched_getaffinity(None) {
        Ok(set) => (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
        Err(_) => Vec::new(),
    }
}

/// The CPUs of this process as the first call saw them.
fn process_cpus() -> &'static [usize] {
    static CPUS: OnceLock<Vec<usize>> = OnceLock::new();
    CPUS.get_or_init(allowed_cpus)
}

/// Number of cores this process may run on (at least 1), as the first call saw them.
pub fn cores() -> usize {
    process_cpus().len().max(1)
}

/// Two distinct CPUs for the two ends of a ping-pong (host, engine), if the process has two.
pub fn cpu_pair() -> Option<(usize, usize)> {
    match process_cpus() {
        [a, b, ..] => Some((*a, *b)),
        _ => None,
    }
}

/// The (host, engine) cores: the first two this process may use, or one core twice.
pub fn host_engine_cores() -> (usize, usize) {
    match process_cpus() {
        [a, b, ..] => (*a, *b),
        [a] => (*a, *a),
        [] => (0, 0),
    }
}

/// Pins the calling thread (and the threads it starts later) to `cpu`.
pub fn pin_current_thread(cpu: usize) -> Result<(), PinError> {
    pin_current_thread_to(&[cpu])
}

/// Sets the CPUs the calling thread may run on; an error names the first of them.
fn set_thread_cpus(cpus: &[usize]) -> Result<(), PinError> {
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c);
    }
    sched_setaffinity(None, &set).map_err(|e| PinError {
        cpu: cpus.first().copied().unwrap_or(0),
        source: e.into(),
    })
}

/// Pins process `pid` (its main thread, and the threads it starts later) to `cpu`.
pub fn pin_process(pid: u32, cpu: usize) -> Result<(), PinError> {
    let p = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| PinError {
            cpu,
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "bad pid"),
        })?;
    let mut set = CpuSet::new();
    set.set(cpu);
    sched_setaffinity(Some(p), &set).map_err(|e| PinError {
        cpu,
        source: e.into(),
    })
}

/// Pins every thread of process `pid` to `cpu` (each task in `/proc/PID/task`; the threads
/// they start later inherit it); returns how many were pinned. A thread that ends meanwhile is
/// skipped.
pub fn pin_process_threads(pid: u32, cpu: usize) -> Result<usize, PinError> {
    let err = |source: std::io::Error| PinError { cpu, source };
    let mut pinned = 0;
    for entry in std::fs::read_dir(format!("/proc/{pid}/task")).map_err(err)? {
        let Some(tid) = entry
            .ok()
            .and_then(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        else {
            continue;
        };
        match pin_process(tid, cpu) {
            Ok(()) => pinned += 1,
            Err(e) if e.source.raw_os_error() == Some(rustix::io::Errno::SRCH.raw_os_error()) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(pinned)
}

/// Lets the calling thread (and the threads and processes it starts later) run on the CPUs in
/// `cpus` only; an error names the first of them.
pub fn pin_current_thread_to(cpus: &[usize]) -> Result<(), PinError> {
    let _ = process_cpus(); // remember the process's CPUs before narrowing this thread's
    set_thread_cpus(cpus)
}

/// The CPUs this process had at the first call, cut into two halves for two sides that
/// should not share a core (the first half the larger by one when their number is odd);
/// `None` with fewer than two.
pub fn halves() -> Option<(Vec<usize>, Vec<usize>)> {
    let cpus = process_cpus();
    (cpus.len() >= 2).then(|| {
        let (a, b) = cpus.split_at(cpus.len().div_ceil(2));
        (a.to_vec(), b.to_vec())
    })
}

/// Lets the calling thread run on every CPU in `cpus` again (after [`pin_current_thread`]).
pub fn unpin_current_thread(cpus: &[usize]) -> bool {
    !cpus.is_empty() && set_thread_cpus(cpus).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pinned thread runs on its CPU only, and the process keeps its CPUs.
    #[test]
    fn pinning_narrows_the_thread_not_the_process() {
        let before = cores();
        let (host, engine) = host_engine_cores();
        std::thread::spawn(move || {
            pin_current_thread(engine).unwrap();
            assert_eq!(allowed_cpus(), vec![engine]);
        })
        .join()
        .unwrap();
        assert_eq!(cores(), before);
        assert_eq!(host_engine_cores(), (host, engine));
        if before >= 2 {
            assert_eq!(cpu_pair(), Some((host, engine)));
            assert_ne!(host, engine);
        }
    }

    /// Every thread of another process is held to the CPU asked for.
    #[test]
    fn a_process_is_pinned_thread_by_thread() {
        let (_, engine) = host_engine_cores();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pinned = pin_process_threads(child.id(), engine);
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(pinned.unwrap(), 1);
        let cpus = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(str::trim);
        assert_eq!(cpus, Some(engine.to_string().as_str()));
    }

    /// The halves share no CPU and cover the process's CPUs; a thread pinned to one runs
    /// there only.
    #[test]
    fn halves_split_the_cpus_and_a_thread_can_be_held_to_one() {
        let all = process_cpus().to_vec();
        match halves() {
            None => assert!(all.len() < 2),
            Some((a, b)) => {
                assert!(!a.is_empty() && !b.is_empty());
                assert!(a.iter().all(|c| !b.contains(c)));
                let mut both = [a.clone(), b.clone()].concat();
                both.sort_unstable();
                assert_eq!(both, all);
                std::thread::spawn(move || {
                    pin_current_thread_to(&b).unwrap();
                    assert_eq!(allowed_cpus(), b);
                })
                .join()
                .unwrap();
            }
        }
    }

    #[test]
    fn a_cpu_or_process_that_does_not_exist_is_an_error() {
        let e = pin_current_thread(CpuSet::MAX_CPU - 1).unwrap_err();
        assert!(e.to_string().contains("cannot pin to CPU"), "{e}");
        assert!(pin_process(u32::MAX, 0).is_err());
    }
}
