//! The pingpong / exchange / stream / rate subcommands: every target at every size, one row
//! each, then the table, CSV or JSON, the fit and the plots.

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use offhost_bench::cpu::{self, LoadProbe};
use offhost_bench::fit::{self, Fit, TwoSegmentFit};
use offhost_bench::report::{self, Row};
use offhost_bench::run::{self, Pattern};
use offhost_bench::{plot, sizes};
use serde::Serialize;
use std::time::Duration;

use super::args::SuiteArgs;
use super::targets::{self, Target};

/// The fit of one bench, transport and mode.
#[derive(Debug, Serialize)]
pub struct FitRow {
    /// Bench name.
    pub bench: String,
    /// Transport.
    pub transport: String,
    /// Mode.
    pub mode: String,
    /// Zero-byte time, ns.
    pub t0_ns: f64,
    /// Asymptotic bandwidth, MB/s.
    pub r_inf_mb_per_s: f64,
    /// Half-performance length, bytes.
    pub n_half_bytes: f64,
    /// RMS relative residual of the fit.
    pub rms_rel_residual: f64,
    /// Two-segment fit, when there are at least six sizes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub two_segment: Option<TwoSegmentFit>,
    /// Why no fit, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Fits every (bench, transport, mode) series of `rows`.
pub fn fits(rows: &[Row]) -> Vec<FitRow> {
    let mut keys: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| (r.bench.clone(), r.transport.clone(), r.mode.clone()))
        .collect();
    keys.dedup();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|(bench, transport, mode)| {
            let pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.bench == bench && r.transport == transport && r.mode == mode)
                .map(|r| (r.size as f64, r.one_way_ns_median))
                .collect();
            let one = fit::fit_linear(&pts);
            let two = (pts.len() >= 6)
                .then(|| fit::fit_two_segments(&pts).ok())
                .flatten();
            let (f, error) = match one {
                Ok(f) => (f, None),
                Err(e) => (
                    Fit {
                        t0_ns: f64::NAN,
                        r_inf_mb_per_s: f64::NAN,
                        n_half_bytes: f64::NAN,
                        rms_rel_residual: f64::NAN,
                        points: pts.len(),
                    },
                    Some(e.to_string()),
                ),
            };
            FitRow {
                bench,
                transport,
                mode,
                t0_ns: f.t0_ns,
                r_inf_mb_per_s: f.r_inf_mb_per_s,
                n_half_bytes: f.n_half_bytes,
                rms_rel_residual: f.rms_rel_residual,
                two_segment: two,
                error,
            }
        })
        .collect()
}

/// The pattern of a bench name, with the window from the flags.
pub fn pattern(bench: &str, window: Option<usize>) -> anyhow::Result<Pattern> {
    Ok(match bench {
        "pingpong" => Pattern::PingPong,
        "exchange" => Pattern::Exchange,
        "stream" => Pattern::Stream {
            window: window.unwrap_or(64).max(1),
        },
        other => anyhow::bail!("unknown bench {other:?}"),
    })
}

/// A progress bar on stderr (hidden when stderr is not a terminal).
pub fn progress(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{elapsed:>4} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

/// Measures `bench` over `targets` and `sizes`; one row per point.
pub fn measure_all(
    bench: &str,
    pattern: Pattern,
    targets: &[Target],
    sizes: &[usize],
    plan: &run::Plan,
    bar: &ProgressBar,
) -> anyhow::Result<Vec<Row>> {
    let (host_core, _) = cpu::host_engine_cores();
    let _ = cpu::pin_current_thread(host_core);
    let probe = match plan.cpu_time {
        Some(_) => Some(LoadProbe::calibrate(Duration::from_millis(200))?),
        None => None,
    };
    let mut rows = Vec::new();
    for t in targets {
        for &size in sizes {
            bar.set_message(format!(
                "{bench} {} {} {}",
                t.transport(),
                t.mode(),
                sizes::format_size(size)
            ));
            let mut running = t.start(pattern.role(), size)?;
            let pid = running.engine_pid();
            let m = run::measure(running.endpoint(), pattern, size, plan, probe.as_ref(), pid)
                .with_context(|| format!("{bench} over {} at {size} B", t.transport()))?;
            drop(running);
            rows.extend(m.row(bench, t.transport(), t.mode(), size));
            bar.inc(1);
        }
    }
    Ok(rows)
}

/// Prints rows (and fits) as the flags ask, and writes plots.
pub fn emit(rows: &[Row], args: &SuiteArgs) -> anyhow::Result<()> {
    let fit_rows = args.fit.then(|| fits(rows));
    if args.json {
        let text = match &fit_rows {
            Some(f) => serde_json::to_string_pretty(&serde_json::json!({"rows": rows, "fit": f}))?,
            None => report::to_json(rows),
        };
        println!("{text}");
    } else {
        if args.csv {
            print!("{}", report::to_csv(rows));
        } else {
            print!("{}", report::to_table(rows));
        }
        if let Some(f) = &fit_rows {
            print_fits(f);
        }
    }
    if let Some(dir) = &args.plot {
        write_plots(dir, rows)?;
    }
    Ok(())
}

/// Prints one line per fit after a blank line.
pub fn print_fits(fits: &[FitRow]) {
    println!();
    for r in fits {
        match &r.error {
            Some(e) => println!("fit {} {} {}: {e}", r.bench, r.transport, r.mode),
            None => println!(
                "fit {} {} {}: t0 {:.0} ns, r_inf {:.1} MB/s, n_1/2 {:.0} B (rms residual {:.1} %)",
                r.bench,
                r.transport,
                r.mode,
                r.t0_ns,
                r.r_inf_mb_per_s,
                r.n_half_bytes,
                100.0 * r.rms_rel_residual
            ),
        }
    }
}

/// Writes the throughput and latency plots of `rows` into `dir`, naming each file on stderr.
pub fn write_plots(dir: &std::path::Path, rows: &[Row]) -> anyhow::Result<()> {
    let files = plot::plot_rows(dir, rows).with_context(|| format!("--plot {}", dir.display()))?;
    for f in files {
        eprintln!("wrote {}", f.display());
    }
    Ok(())
}

/// Runs one suite subcommand.
pub fn run(bench: &str, args: &SuiteArgs) -> anyhow::Result<()> {
    let pattern = pattern(bench, args.window)?;
    let sizes = args.sizes_or("4..1M")?;
    let plan = args.plan()?;
    let targets = targets::select(&args.transport, &args.mode)?;
    let bar = progress((targets.len() * sizes.len()) as u64);
    let rows = measure_all(bench, pattern, &targets, &sizes, &plan, &bar)?;
    bar.finish_and_clear();
    emit(&rows, args)
}
