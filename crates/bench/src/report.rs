//! Result rows of every `offhost bench` subcommand and their renderings: JSON, CSV and an
//! aligned text table.
//!
//! The keys `bench`, `transport`, `mode`, `size`, `one_way_ns_median`, `one_way_ns_p99` and
//! `mb_per_s` are a contract that scripts depend on; the optional columns appear only where
//! they were measured.

use serde::Serialize;
use std::fmt::Write as _;

use crate::samples::Summary;

/// One measured point: a bench, a transport and mode, and a message size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Which benchmark: `pingpong`, `exchange`, `stream`, `rate`, ...
    pub bench: String,
    /// Transport or peer: `shm`, `tcp`, `unix`, `mem`, `tcp-raw`, `pipe-raw`, `crossbeam`, ...
    pub transport: String,
    /// Doorbell or I/O mode (`poll`, `block`, `adaptive`, or `-` when it has none).
    pub mode: String,
    /// Message size in bytes.
    pub size: usize,
    /// Median one-way time per message (ns).
    pub one_way_ns_median: f64,
    /// 99th percentile one-way time per message (ns).
    pub one_way_ns_p99: f64,
    /// Throughput at the median, in 10^6 bytes per second.
    pub mb_per_s: f64,
    /// Messages per second at the median, where the bench counts messages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub msgs_per_s: Option<f64>,
    /// Fraction (0..1) of the host core taken by communication, by the counting-task method.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_load_host: Option<f64>,
    /// Fraction (0..1) of the engine core taken by communication, by the counting-task method.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_load_engine: Option<f64>,
    /// Voluntary context switches (sleeps, hence wake-ups) per message, both sides together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wakeups_per_msg: Option<f64>,
    /// Timed repetitions behind the statistics (warm-ups excluded).
    pub samples: usize,
    /// Fastest repetition, one-way ns.
    pub one_way_ns_min: f64,
    /// Slowest repetition, one-way ns.
    pub one_way_ns_max: f64,
    /// Repetitions slower than three times the median (kept in the statistics).
    pub outliers: usize,
}

impl Row {
    /// Builds a row from one-way timings summarised in `s`; `mb_per_s` and `msgs_per_s`
    /// follow from the median.
    pub fn new(bench: &str, transport: &str, mode: &str, size: usize, s: &Summary) -> Row {
        let per_s = if s.median > 0.0 { 1e9 / s.median } else { 0.0 };
        Row {
            bench: bench.into(),
            transport: transport.into(),
            mode: mode.into(),
            size,
            one_way_ns_median: s.median,
            one_way_ns_p99: s.p99,
            mb_per_s: per_s * size as f64 / 1e6,
            msgs_per_s: Some(per_s),
            cpu_load_host: None,
            cpu_load_engine: None,
            wakeups_per_msg: None,
            samples: s.samples,
            one_way_ns_min: s.min,
            one_way_ns_max: s.max,
            outliers: s.outliers,
        }
    }

    /// The series this row belongs to in plots and fits: `transport/mode` (or `transport`).
    pub fn series(&self) -> String {
        if self.mode.is_empty() || self.mode == "-" {
            self.transport.clone()
        } else {
            format!("{}/{}", self.transport, self.mode)
        }
    }
}

/// Rows as a pretty JSON array.
pub fn to_json(rows: &[Row]) -> String {
    serde_json::to_string_pretty(rows).unwrap_or_else(|_| "[]".into())
}

const HEADER: [&str; 15] = [
    "bench",
    "transport",
    "mode",
    "size",
    "one_way_ns_median",
    "one_way_ns_p99",
    "mb_per_s",
    "msgs_per_s",
    "cpu_load_host",
    "cpu_load_engine",
    "wakeups_per_msg",
    "samples",
    "one_way_ns_min",
    "one_way_ns_max",
    "outliers",
];

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}")).unwrap_or_default()
}

fn cells(r: &Row) -> [String; 15] {
    [
        r.bench.clone(),
        r.transport.clone(),
        r.mode.clone(),
        r.size.to_string(),
        format!("{:.1}", r.one_way_ns_median),
        format!("{:.1}", r.one_way_ns_p99),
        format!("{:.2}", r.mb_per_s),
        opt(r.msgs_per_s, 0),
        opt(r.cpu_load_host, 3),
        opt(r.cpu_load_engine, 3),
        opt(r.wakeups_per_msg, 3),
        r.samples.to_string(),
        format!("{:.1}", r.one_way_ns_min),
        format!("{:.1}", r.one_way_ns_max),
        r.outliers.to_string(),
    ]
}

/// Rows as CSV with a header line (every column, empty where not measured).
pub fn to_csv(rows: &[Row]) -> String {
    let mut out = HEADER.join(",");
    out.push('\n');
    for r in rows {
        // No field can hold a comma or quote: names are fixed identifiers.
        out.push_str(&cells(r).join(","));
        out.push('\n');
    }
    out
}

/// Rows as an aligned text table; columns that no row measured are left out.
pub fn to_table(rows: &[Row]) -> String {
    let all: Vec<[String; 15]> = rows.iter().map(cells).collect();
    let keep: Vec<usize> = (0..HEADER.len())
        .filter(|&c| all.iter().any(|r| !r[c].is_empty()))
        .collect();
    let width: Vec<usize> = keep
        .iter()
        .map(|&c| {
            all.iter()
                .map(|r| r[c].len())
                .chain([HEADER[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let line = |out: &mut String, get: &dyn Fn(usize) -> String| {
        for (i, &c) in keep.iter().enumerate() {
            let text = get(c);
            if c < 3 {
                let _ = write!(out, "{text:<w$}", w = width[i]);
            } else {
                let _ = write!(out, "{text:>w$}", w = width[i]);
            }
            out.push_str(if i + 1 == keep.len() { "\n" } else { "  " });
        }
    };
    line(&mut out, &|c| HEADER[c].to_string());
    for r in &all {
        line(&mut out, &|c| r[c].clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> Row {
        let s = Summary::of(&[1000.0, 1000.0, 2000.0]).unwrap();
        Row::new("pingpong", "tcp-raw", "-", 1000, &s)
    }

    #[test]
    fn json_has_contract_keys_and_hides_unmeasured() {
        let mut r = row();
        r.cpu_load_host = Some(0.5);
        let v: serde_json::Value = serde_json::from_str(&to_json(&[r])).unwrap();
        let o = &v[0];
        for k in [
            "bench",
            "transport",
            "mode",
            "size",
            "one_way_ns_median",
            "one_way_ns_p99",
            "mb_per_s",
            "msgs_per_s",
            "cpu_load_host",
        ] {
            assert!(o.get(k).is_some(), "missing {k}");
        }
        assert!(o.get("cpu_load_engine").is_none());
        assert_eq!(o["mb_per_s"], 1000.0); // 1000 B per 1000 ns = 1 GB/s
        assert_eq!(o["msgs_per_s"], 1e6);
    }

    #[test]
    fn csv_and_table_line_up() {
        let rows = [row(), row()];
        let csv = to_csv(&rows);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[0].split(',').count(),
            lines[1].split(',').count(),
            "{csv}"
        );
        let table = to_table(&rows);
        let widths: Vec<usize> = table.lines().map(str::len).collect();
        assert!(widths.windows(2).all(|w| w[0] == w[1]), "{table}");
        assert!(!table.contains("cpu_load_host"));
        assert_eq!(rows[0].series(), "tcp-raw");
    }
}
