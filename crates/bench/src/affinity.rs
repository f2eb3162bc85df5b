//! Pinning threads to CPUs, so that a ping-pong really crosses between two cores.

use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    match sched_getaffinity(None) {
        Ok(set) => (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
        Err(_) => Vec::new(),
    }
}

/// Two distinct CPUs to put the two ends of a ping-pong on, if the process has two.
pub fn cpu_pair() -> Option<(usize, usize)> {
    let cpus = allowed_cpus();
    (cpus.len() >= 2).then(|| (cpus[0], cpus[1]))
}

/// Pins the calling thread to `cpu`; false if the system refused.
pub fn pin_current_thread(cpu: usize) -> bool {
    let mut set = CpuSet::new();
    set.set(cpu);
    sched_setaffinity(None, &set).is_ok()
}
