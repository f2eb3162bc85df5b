//! Each end of the queue against the raw socket's thread that ran on the same CPUs (`sides`
//! in the report of `bench engines`): engine `a` and the raw writer send, engine `b` and the
//! raw reader receive.

use offhost_bench::threads::ThreadCpu;
use serde::Serialize;

/// Which end of the queue a [`Side`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SideRole {
    /// Engine `a`, against the raw writer.
    Sending,
    /// Engine `b`, against the raw reader.
    Receiving,
}

impl SideRole {
    /// `sending` or `receiving`.
    pub fn as_str(self) -> &'static str {
        match self {
            SideRole::Sending => "sending",
            SideRole::Receiving => "receiving",
        }
    }

    /// The raw socket's thread on this side: `writer` or `reader`.
    pub fn raw_thread(self) -> &'static str {
        match self {
            SideRole::Sending => "writer",
            SideRole::Receiving => "reader",
        }
    }
}

/// One end of the queue against the raw socket's thread on its side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    /// The engine (`a` or `b`).
    pub engine: String,
    /// `sending` (engine `a`, against the raw writer) or `receiving` (engine `b`, against the
    /// raw reader).
    pub role: SideRole,
    /// CPU seconds per GB of all the engine's threads (their own clocks, read while the jobs
    /// run): the long jobs' less the short jobs', over the bytes between them.
    pub cpu_s_per_gb: f64,
    /// CPU seconds per GB of the raw socket's thread on this side.
    pub raw_tls_cpu_s_per_gb: f64,
    /// `cpu_s_per_gb` / `raw_tls_cpu_s_per_gb`. With the `split` placement this is the load
    /// of this side's CPUs against the raw socket's on the same CPUs: where both sides keep
    /// their CPUs busy, the throughput ratio is about the inverse of the larger of the two
    /// sides'. `None` when either ran for no measurable time.
    pub vs_raw_tls: Option<f64>,
    /// The engine's busiest thread in the last round's long job (its name).
    pub busiest_thread: String,
    /// CPU seconds per GB of the engine's busiest thread (of each round's long job).
    pub busiest_cpu_s_per_gb: f64,
    /// `busiest_cpu_s_per_gb` / `raw_tls_cpu_s_per_gb`: what would set this side's pace with
    /// a core for every busy thread (the engine's tasks then off its link thread's core).
    pub busiest_vs_raw_tls: Option<f64>,
}

/// One side's sums over the rounds.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    cpu: f64,
    raw: f64,
    busiest: f64,
    busiest_name: String,
}

/// `a / b` where both were measured.
fn ratio(a: f64, b: f64) -> Option<f64> {
    (a > 0.0 && b > 0.0).then(|| a / b)
}

impl Tally {
    /// Adds a round: the threads of both jobs (busiest first, as the sampler gives them), of
    /// which engine `pid`'s count, and the CPU seconds of the raw socket's thread.
    pub(crate) fn add(&mut self, pid: u32, short: &[ThreadCpu], long: &[ThreadCpu], raw: f64) {
        let sum =
            |ts: &[ThreadCpu]| -> f64 { ts.iter().filter(|t| t.pid == pid).map(|t| t.cpu_s).sum() };
        self.cpu += (sum(long) - sum(short)).max(0.0);
        self.raw += raw;
        if let Some(t) = long.iter().find(|t| t.pid == pid) {
            self.busiest += t.cpu_s;
            self.busiest_name = t.name.clone();
        }
    }

    /// The figures: the engine's CPU over `streamed_gb` (the long jobs' bytes beyond the short
    /// ones'), the raw thread's and the busiest thread's over `gb` (every round's bytes).
    pub(crate) fn side(&self, engine: &str, role: SideRole, streamed_gb: f64, gb: f64) -> Side {
        let cpu = self.cpu / streamed_gb;
        let raw = self.raw / gb;
        let busiest = self.busiest / gb;
        Side {
            engine: engine.to_owned(),
            role,
            cpu_s_per_gb: cpu,
            raw_tls_cpu_s_per_gb: raw,
            vs_raw_tls: ratio(cpu, raw),
            busiest_thread: self.busiest_name.clone(),
            busiest_cpu_s_per_gb: busiest,
            busiest_vs_raw_tls: ratio(busiest, raw),
        }
    }
}

impl Side {
    /// The side as one line of text.
    pub fn text(&self) -> String {
        let r = |x: Option<f64>| x.map_or("not measurable".to_owned(), |r| format!("{r:.2}"));
        format!(
            "{} side (engine {}): CPU per GB {:.3} s; raw TLS {} {:.3} s; ratio {}; \
             busiest thread ({}) {:.3} s, ratio {}\n",
            self.role.as_str(),
            self.engine,
            self.cpu_s_per_gb,
            self.role.raw_thread(),
            self.raw_tls_cpu_s_per_gb,
            r(self.vs_raw_tls),
            self.busiest_thread,
            self.busiest_cpu_s_per_gb,
            r(self.busiest_vs_raw_tls),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(pid: u32, tid: u32, name: &str, cpu_s: f64) -> ThreadCpu {
        ThreadCpu {
            pid,
            tid,
            name: name.into(),
            cpu_s,
        }
    }

    #[test]
    fn a_side_counts_its_engines_threads_beyond_the_short_job_against_its_raw_thread() {
        let mut tally = Tally::default();
        // Two rounds; engine 10's threads (busiest first, as sampled), engine 20's beside.
        for _ in 0..2 {
            let short = [
                t(10, 1, "link", 0.1),
                t(20, 5, "recv", 0.2),
                t(10, 2, "worker", 0.05),
            ];
            let long = [
                t(20, 5, "recv", 1.3),
                t(10, 1, "link", 1.0),
                t(10, 2, "worker", 0.25),
            ];
            tally.add(10, &short, &long, 0.9);
        }
        let s = tally.side("a", SideRole::Sending, 2.0, 4.0);
        // (1.25 - 0.15) * 2 rounds over 2 GB streamed; the raw thread 1.8 s over 4 GB.
        assert!((s.cpu_s_per_gb - 1.1).abs() < 1e-9, "{s:?}");
        assert!((s.raw_tls_cpu_s_per_gb - 0.45).abs() < 1e-9, "{s:?}");
        assert!((s.vs_raw_tls.unwrap() - 1.1 / 0.45).abs() < 1e-9, "{s:?}");
        // The busiest of engine 10's, not engine 20's busier thread.
        assert_eq!(s.busiest_thread, "link");
        assert!((s.busiest_cpu_s_per_gb - 0.5).abs() < 1e-9, "{s:?}");
        assert!(
            (s.busiest_vs_raw_tls.unwrap() - 0.5 / 0.45).abs() < 1e-9,
            "{s:?}"
        );
        assert!(s
            .text()
            .starts_with("sending side (engine a): CPU per GB 1.100 s; raw TLS writer 0.450 s"));
    }

    #[test]
    fn an_unmeasured_raw_thread_gives_no_ratio() {
        let mut tally = Tally::default();
        tally.add(10, &[], &[t(10, 1, "link", 1.0)], 0.0);
        let s = tally.side("b", SideRole::Receiving, 1.0, 1.0);
        assert_eq!((s.vs_raw_tls, s.busiest_vs_raw_tls), (None, None));
        assert!(s
            .text()
            .contains("raw TLS reader 0.000 s; ratio not measurable"));
    }
}
