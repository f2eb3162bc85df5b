//! `exchange` and `stream`: a pattern of [`offhost_bench::run`] over every target at every
//! size, one [`Row`] each (with CPU load when asked).

use std::time::Duration;

use indicatif::ProgressBar;
use offhost_bench::affinity;
use offhost_bench::cpu::LoadProbe;
use offhost_bench::report::Row;
use offhost_bench::run::{self, Pattern, Plan};
use offhost_bench::sizes;
use offhost_bench::transport::Transport;
use offhost_shm::Mode;

use crate::error::{Context as _, Error, Result};
use crate::targets::{self, Target};

/// What to measure.
#[derive(Debug, Clone)]
pub struct Options {
    /// The bench: `exchange` or `stream`.
    pub bench: String,
    /// Transports (empty: all).
    pub transports: Vec<Transport>,
    /// Doorbell modes of the raw rings (empty: all three).
    pub modes: Vec<Mode>,
    /// Message sizes.
    pub sizes: Vec<usize>,
    /// Repetitions, with the CPU pass when `cpu_time` is set.
    pub plan: Plan,
    /// Messages in flight per acknowledgement (`stream`; default 64).
    pub window: Option<usize>,
}

/// The pattern of a bench name, with the window.
pub fn pattern(bench: &str, window: Option<usize>) -> Result<Pattern> {
    Ok(match bench {
        "pingpong" => Pattern::PingPong,
        "exchange" => Pattern::Exchange,
        "stream" => Pattern::Stream {
            window: window.unwrap_or(64).max(1),
        },
        other => return Err(Error::Invalid(format!("unknown bench {other:?}"))),
    })
}

/// The repetition plan of preset `reps` (`small`, `quick`, `normal`, `long`), with a CPU-load
/// pass ten repetitions long when `cpu`.
pub fn plan(reps: &str, cpu: bool) -> Result<Plan> {
    let mut p = Plan::preset(reps).ok_or_else(|| {
        Error::Invalid(format!(
            "--reps {reps:?}: expected small, quick, normal or long"
        ))
    })?;
    if cpu {
        p.cpu_time = Some(p.rep_time * 10);
    }
    Ok(p)
}

/// Measures `o.bench` over its targets and sizes, one row per point; `bar` counts points.
pub fn run(o: &Options, bar: &ProgressBar) -> Result<Vec<Row>> {
    let pattern = pattern(&o.bench, o.window)?;
    let targets = targets::select(&o.transports, &o.modes);
    bar.set_length((targets.len() * o.sizes.len()) as u64);
    measure_all(&o.bench, pattern, &targets, &o.sizes, &o.plan, bar)
}

/// Measures `bench` over `targets` and `sizes`; one row per point.
pub fn measure_all(
    bench: &str,
    pattern: Pattern,
    targets: &[Target],
    sizes: &[usize],
    plan: &Plan,
    bar: &ProgressBar,
) -> Result<Vec<Row>> {
    let (host_core, _) = affinity::host_engine_cores();
    let _ = affinity::pin_current_thread(host_core);
    let probe = match plan.cpu_time {
        Some(_) => Some(LoadProbe::calibrate(Duration::from_millis(200))?),
        None => None,
    };
    let mut rows = Vec::new();
    for t in targets {
        for &size in sizes {
            let name = t.transport().name();
            bar.set_message(format!(
                "{bench} {name} {} {}",
                t.mode(),
                sizes::format_size(size)
            ));
            let mut running = t.start(pattern.role(), size)?;
            let m = run::measure(running.conn(), pattern, size, plan, probe.as_ref(), None)
                .with_context(|| format!("{bench} over {name} at {size} B"))?;
            drop(running);
            rows.extend(m.row(bench, name, t.mode(), size).map(|mut r| {
                r.peer = Some(t.placement().name().into());
                r
            }));
            bar.inc(1);
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_over_a_channel_and_a_plain_transport_gives_a_row_each() {
        let o = Options {
            bench: "stream".into(),
            transports: vec![Transport::Mem, Transport::Crossbeam],
            modes: vec![],
            sizes: vec![64],
            plan: plan("small", false).unwrap(),
            window: Some(8),
        };
        let rows = run(&o, &ProgressBar::hidden()).unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r.transport.as_str()).collect();
        assert_eq!(names, ["mem", "crossbeam"]);
        assert!(rows
            .iter()
            .all(|r| r.bench == "stream" && r.peer.as_deref() == Some("thread")));
    }

    #[test]
    fn bad_names_say_what_is_wrong() {
        assert!(plan("forever", false)
            .unwrap_err()
            .to_string()
            .contains("--reps"));
        assert!(pattern("smoke", None).is_err());
        assert_eq!(
            pattern("stream", Some(0)).unwrap(),
            Pattern::Stream { window: 1 }
        );
        assert!(plan("small", true).unwrap().cpu_time.is_some());
    }
}
