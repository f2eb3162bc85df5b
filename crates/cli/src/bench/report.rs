//! The pingpong report: one row per record size, as an aligned table, JSON or CSV, with the
//! suite's fit and plots (through the suite's rows).

use anyhow::Result;
use offhost_bench::samples::Summary;
use serde::Serialize;
use std::path::Path;

/// One line of the report.
#[derive(Debug, Serialize)]
pub(crate) struct Row {
    pub(crate) bench: &'static str,
    pub(crate) transport: &'static str,
    pub(crate) mode: &'static str,
    pub(crate) size: usize,
    pub(crate) path: &'static str,
    /// Whether the echo engine read buffer records (false: reflected descriptors only).
    pub(crate) touch: bool,
    pub(crate) iters: usize,
    pub(crate) one_way_ns_median: f64,
    pub(crate) one_way_ns_p99: f64,
    pub(crate) mb_per_s: f64,
    /// With `--rounds`: the median one-way time of each round, in order (the median above is
    /// over the pooled samples). Rows of different transports of one round were measured
    /// back to back, so their per-round ratios share the machine's state.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) round_medians_ns: Vec<f64>,
    /// A channel transport's one-way time over its raw peer's (shm-chan: the raw ring, tcp:
    /// tcp-raw, unix: unix-raw): the median of the per-round (or per-block) ratios, when both
    /// were measured in the same rounds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) vs_raw: Option<f64>,
    /// CPU use of the idle echo engine, percent of one core (null when not measurable).
    pub(crate) cpu_idle_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) vs_cacheline: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) vs_futex: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) vs_memcpy: Option<f64>,
    /// The one-way times behind the row (not printed; feeds the suite's CSV, fit and plots).
    #[serde(skip)]
    pub(crate) summary: Summary,
}

impl Row {
    /// The suite's row for this point (the CSV columns, the fit's and the plots' input).
    fn suite_row(&self) -> offhost_bench::report::Row {
        offhost_bench::report::Row::new(
            self.bench,
            self.transport,
            self.mode,
            self.size,
            &self.summary,
        )
    }
}

/// How `offhost bench pingpong` prints its rows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Output<'a> {
    /// JSON: the rows' array, or with `fit` an object `{"rows": [...], "fit": [...]}`.
    pub(crate) json: bool,
    /// CSV with the suite's columns instead of the table.
    pub(crate) csv: bool,
    /// Fit t(n) = t0 + n / r_inf per transport and mode.
    pub(crate) fit: bool,
    /// Folder for the throughput and latency SVG plots.
    pub(crate) plot: Option<&'a Path>,
}

/// Prints the rows as `out` asks (with fits) and writes the plots.
pub(crate) fn emit(rows: &[Row], out: Output<'_>) -> Result<()> {
    let suite: Vec<offhost_bench::report::Row> = rows.iter().map(Row::suite_row).collect();
    let fits = out.fit.then(|| super::suite::fits(&suite));
    match (&fits, out.json) {
        (Some(f), true) => println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"rows": rows, "fit": f}))?
        ),
        (None, true) => print(rows, true)?,
        (_, false) => {
            if out.csv {
                print!("{}", offhost_bench::report::to_csv(&suite));
            } else {
                print(rows, false)?;
            }
            if let Some(f) = &fits {
                super::suite::print_fits(f);
            }
        }
    }
    if let Some(dir) = out.plot {
        super::suite::write_plots(dir, &suite)?;
    }
    Ok(())
}

/// Prints the rows as a JSON array or an aligned table (with floor ratios when measured).
fn print(rows: &[Row], json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(rows)?);
        return Ok(());
    }
    println!(
        "{:<9} {:<9} {:>8} {:<6} {:>12} {:>12} {:>10} {:>9}",
        "transport", "mode", "size", "path", "median ns", "p99 ns", "MB/s", "idle cpu"
    );
    for r in rows {
        println!(
            "{:<9} {:<9} {:>8} {:<6} {:>12.0} {:>12.0} {:>10.1} {:>8}",
            r.transport,
            r.mode,
            r.size,
            r.path,
            r.one_way_ns_median,
            r.one_way_ns_p99,
            r.mb_per_s,
            r.cpu_idle_pct
                .map_or("-".to_owned(), |p| format!("{p:.2}%"))
        );
    }
    if rows.iter().any(|r| r.vs_raw.is_some()) {
        println!();
        println!(
            "{:<9} {:<9} {:>8} {:>12}",
            "transport", "mode", "size", "x raw peer"
        );
        for r in rows {
            if let Some(v) = r.vs_raw {
                println!("{:<9} {:<9} {:>8} {:>12.2}", r.transport, r.mode, r.size, v);
            }
        }
    }
    if rows.iter().any(|r| r.vs_cacheline.is_some()) {
        println!();
        println!(
            "{:>8} {:>14} {:>10} {:>10}",
            "size", "x cache-line", "x futex", "x memcpy"
        );
        for r in rows {
            println!(
                "{:>8} {:>14.2} {:>10.3} {:>10.3}",
                r.size,
                r.vs_cacheline.unwrap_or(f64::NAN),
                r.vs_futex.unwrap_or(f64::NAN),
                r.vs_memcpy.unwrap_or(f64::NAN)
            );
        }
    }
    Ok(())
}
