//! The one row type of every `offhost bench` latency and throughput measurement (one
//! transport, mode and message size), and its renderings: JSON, CSV, the suite's aligned table,
//! pingpong's and rate's tables, with fits.
//!
//! The keys `bench`, `transport`, `mode`, `size`, `one_way_ns_median`, `one_way_ns_p99` and
//! `mb_per_s` are a contract that scripts depend on; the optional keys appear only where a
//! bench measured them (keys are added over time, never renamed).

use serde::Serialize;
use std::fmt::Write as _;

use crate::fit;
use crate::floors::Floors;
use crate::stats::Summary;

/// One measured point: a bench, a transport and mode, and a message size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Which benchmark: `pingpong`, `exchange`, `stream`, `rate`, ...
    pub bench: String,
    /// What carried the bytes ([`crate::transport::Transport`]'s names), or for the seed
    /// reproductions the transfer discipline.
    pub transport: String,
    /// Doorbell or I/O mode (`poll`, `block`, `adaptive`, or `-` when it has none).
    pub mode: String,
    /// Message size in bytes.
    pub size: usize,
    /// Where the echo or sink peer ran: `thread`, `process` or `remote`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// How records travelled: `inline` or `loan` on the raw ring, `copy` or `loan` elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Whether the echo engine read buffer records (false: reflected descriptors only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub touch: Option<bool>,
    /// Timed round trips (pingpong) or messages (rate) behind the row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iters: Option<usize>,
    /// Median one-way time per message (ns).
    pub one_way_ns_median: f64,
    /// 99th percentile one-way time per message (ns).
    pub one_way_ns_p99: f64,
    /// Throughput at the median, in 10^6 bytes per second.
    pub mb_per_s: f64,
    /// Messages per second at the median, where the bench counts messages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub msgs_per_s: Option<f64>,
    /// With rounds or interleaved blocks: the median one-way time of each, in order (the
    /// median above is over the pooled samples). Rows of different transports of one round
    /// were measured back to back, so their per-round ratios share the machine's state.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub round_medians_ns: Vec<f64>,
    /// A channel's one-way time over its raw peer's
    /// ([`crate::transport::Transport::raw_peer`]): the median of the per-round (or
    /// per-block) ratios, when both were measured in the same rounds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_raw: Option<f64>,
    /// An offhost shared-memory row's (`shm`, `shm-chan`) one-way time over iceoryx2's of the
    /// same size and mode in the same run (1 = as fast; below 1 = offhost is faster): the
    /// median of the per-round (or per-block) ratios when both have several, else the ratio
    /// of their medians.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_iceoryx2: Option<f64>,
    /// A TLS row's throughput over its unencrypted counterpart's in the same run
    /// ([`crate::transport::Transport::unencrypted`]: `tls` over `tcp`, `tls-raw` over
    /// `tcp-raw`; 1 = as fast): the median of the per-round (or per-block, per-run) ratios
    /// when both have several, else the ratio of their medians.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_vs_tcp: Option<f64>,
    /// CPU use of the idle echo engine, percent of one core: absent where the bench does not
    /// measure it, null where it could not be measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_idle_pct: Option<Option<f64>>,
    /// The median over the floors' cache-line one-way time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_cacheline: Option<f64>,
    /// The median over the floors' futex one-way time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_futex: Option<f64>,
    /// The throughput over the floors' memcpy bandwidth.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_memcpy: Option<f64>,
    /// Fraction (0..1) of the host core taken by communication, by the counting-task method.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_load_host: Option<f64>,
    /// Fraction (0..1) of the engine core taken by communication, by the counting-task method.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_load_engine: Option<f64>,
    /// Voluntary context switches (sleeps, hence wake-ups) per message, both sides together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wakeups_per_msg: Option<f64>,
    /// The doorbell's event limit in records (`--event-limit`), on rows of shared memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_limit: Option<usize>,
    /// The host process's CPU time (user + system, all its threads) per message, us (`bench
    /// offload`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_cpu_us_per_msg: Option<f64>,
    /// The host process's voluntary context switches per message, all its threads (`bench
    /// offload`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_wakeups_per_msg: Option<f64>,
    /// The median one-way time in us (`bench offload`: half the round trip host to host).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_us_median: Option<f64>,
    /// Timed samples behind the statistics (warm-ups excluded).
    pub samples: usize,
    /// Fastest sample, one-way ns.
    pub one_way_ns_min: f64,
    /// Slowest sample, one-way ns.
    pub one_way_ns_max: f64,
    /// Samples slower than three times the median (kept in the statistics).
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
            peer: None,
            path: None,
            touch: None,
            iters: None,
            one_way_ns_median: s.median,
            one_way_ns_p99: s.p99,
            mb_per_s: per_s * size as f64 / 1e6,
            msgs_per_s: Some(per_s),
            round_medians_ns: Vec::new(),
            vs_raw: None,
            vs_iceoryx2: None,
            throughput_vs_tcp: None,
            cpu_idle_pct: None,
            vs_cacheline: None,
            vs_futex: None,
            vs_memcpy: None,
            cpu_load_host: None,
            cpu_load_engine: None,
            wakeups_per_msg: None,
            event_limit: None,
            host_cpu_us_per_msg: None,
            host_wakeups_per_msg: None,
            latency_us_median: None,
            samples: s.samples,
            one_way_ns_min: s.min,
            one_way_ns_max: s.max,
            outliers: s.outliers,
        }
    }

    /// Sets the ratios against the machine's floors.
    pub fn against(&mut self, f: &Floors) {
        self.vs_cacheline = Some(self.one_way_ns_median / f.cacheline_ns);
        self.vs_futex = Some(self.one_way_ns_median / f.futex_ns);
        self.vs_memcpy = Some(self.mb_per_s / (f.memcpy_gb_per_s * 1e3));
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

/// Fills every TLS row's [`Row::throughput_vs_tcp`] from the row of its unencrypted
/// counterpart with the same bench, mode and size, where `rows` has one.
pub fn throughput_vs_tcp(rows: &mut [Row]) {
    for i in 0..rows.len() {
        let plain = rows[i]
            .transport
            .parse()
            .ok()
            .and_then(crate::transport::Transport::unencrypted);
        let Some(plain) = plain else { continue };
        let me = &rows[i];
        let other = rows.iter().find(|r| {
            r.transport == plain.name()
                && r.bench == me.bench
                && r.size == me.size
                && r.mode == me.mode
        });
        let Some(other) = other else { continue };
        let (a, b) = (&me.round_medians_ns, &other.round_medians_ns);
        // Throughput is inverse to the time per message: theirs over ours.
        let ratio = if a.len() >= 2 && a.len() == b.len() {
            let per_round: Vec<f64> = a.iter().zip(b).map(|(t, p)| p / t).collect();
            crate::stats::median(&per_round)
        } else if me.one_way_ns_median > 0.0 {
            Some(other.one_way_ns_median / me.one_way_ns_median)
        } else {
            None
        };
        rows[i].throughput_vs_tcp = ratio;
    }
}

/// Rows as a pretty JSON array.
pub fn to_json(rows: &[Row]) -> String {
    serde_json::to_string_pretty(rows).unwrap_or_else(|_| "[]".into())
}

const HEADER: [&str; 16] = [
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
    "event_limit",
    "samples",
    "one_way_ns_min",
    "one_way_ns_max",
    "outliers",
];

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}")).unwrap_or_default()
}

fn cells(r: &Row) -> [String; 16] {
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
        r.event_limit.map(|n| n.to_string()).unwrap_or_default(),
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

/// Rows as the suite's aligned text table; columns that no row measured are left out.
pub fn to_table(rows: &[Row]) -> String {
    let all: Vec<[String; 16]> = rows.iter().map(cells).collect();
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

fn text(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("-")
}

/// Rows as pingpong's table: one line per row with the idle engine's CPU, then each channel's
/// ratio to its raw peer and the ratios to the floors, where measured.
pub fn latency_table(rows: &[Row]) -> String {
    let mut s = format!(
        "{:<9} {:<9} {:>8} {:<6} {:>12} {:>12} {:>10} {:>9}\n",
        "transport", "mode", "size", "path", "median ns", "p99 ns", "MB/s", "idle cpu"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:<9} {:<9} {:>8} {:<6} {:>12.0} {:>12.0} {:>10.1} {:>8}",
            r.transport,
            r.mode,
            r.size,
            text(&r.path),
            r.one_way_ns_median,
            r.one_way_ns_p99,
            r.mb_per_s,
            r.cpu_idle_pct
                .flatten()
                .map_or("-".to_owned(), |p| format!("{p:.2}%"))
        );
    }
    ratio_table(&mut s, rows, "x raw peer", |r| r.vs_raw);
    ratio_table(&mut s, rows, "x iceoryx2", |r| r.vs_iceoryx2);
    s.push_str(&tls_ratios(rows));
    if rows.iter().any(|r| r.vs_cacheline.is_some()) {
        let _ = write!(
            s,
            "\n{:>8} {:>14} {:>10} {:>10}\n",
            "size", "x cache-line", "x futex", "x memcpy"
        );
        for r in rows {
            let _ = writeln!(
                s,
                "{:>8} {:>14.2} {:>10.3} {:>10.3}",
                r.size,
                r.vs_cacheline.unwrap_or(f64::NAN),
                r.vs_futex.unwrap_or(f64::NAN),
                r.vs_memcpy.unwrap_or(f64::NAN)
            );
        }
    }
    s
}

/// Rows as rate's table: messages per second and time per message.
pub fn rate_table(rows: &[Row]) -> String {
    let mut s = format!(
        "{:<9} {:<9} {:>8} {:<5} {:>10} {:>14} {:>12} {:>12} {:>12} {:>6}\n",
        "transport",
        "mode",
        "size",
        "path",
        "messages",
        "msgs/s",
        "ns/msg",
        "MB/s",
        "wakeups/msg",
        "limit"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:<9} {:<9} {:>8} {:<5} {:>10} {:>14.0} {:>12.1} {:>12.1} {:>12} {:>6}",
            r.transport,
            r.mode,
            r.size,
            text(&r.path),
            r.iters.unwrap_or(r.samples),
            r.msgs_per_s.unwrap_or(f64::NAN),
            r.one_way_ns_median,
            r.mb_per_s,
            r.wakeups_per_msg.map_or("-".into(), |w| format!("{w:.3}")),
            r.event_limit.map_or("-".into(), |n| n.to_string())
        );
    }
    s.push_str(&tls_ratios(rows));
    ratio_table(&mut s, rows, "x iceoryx2", |r| r.vs_iceoryx2);
    s
}

/// Appends a table of one ratio per row (`title`: its column), for the rows that have it.
fn ratio_table(s: &mut String, rows: &[Row], title: &str, ratio: impl Fn(&Row) -> Option<f64>) {
    if !rows.iter().any(|r| ratio(r).is_some()) {
        return;
    }
    let _ = write!(
        s,
        "\n{:<9} {:<9} {:>8} {:>12}\n",
        "transport", "mode", "size", title
    );
    for r in rows {
        if let Some(v) = ratio(r) {
            let _ = writeln!(
                s,
                "{:<9} {:<9} {:>8} {:>12.2}",
                r.transport, r.mode, r.size, v
            );
        }
    }
}

/// The TLS rows' throughput over their unencrypted counterparts', under its heading (empty
/// when no row has one).
fn tls_ratios(rows: &[Row]) -> String {
    let mut s = String::new();
    if rows.iter().any(|r| r.throughput_vs_tcp.is_some()) {
        let _ = write!(
            s,
            "\n{:<9} {:<9} {:>8} {:<5} {:>18}\n",
            "transport", "mode", "size", "path", "throughput x tcp"
        );
        for r in rows {
            if let Some(v) = r.throughput_vs_tcp {
                let _ = writeln!(
                    s,
                    "{:<9} {:<9} {:>8} {:<5} {:>18.2}",
                    r.transport,
                    r.mode,
                    r.size,
                    text(&r.path),
                    v
                );
            }
        }
    }
    s
}

/// How a command prints its rows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Output {
    /// JSON: the rows' array, or with `fit` an object `{"rows": [...], "fit": [...]}`.
    pub json: bool,
    /// CSV with every column instead of the table.
    pub csv: bool,
    /// Fit t(n) = t0 + n / r_inf per bench, transport and mode.
    pub fit: bool,
}

/// The text a command prints for `rows`: JSON, CSV or the table `table` draws, and with
/// `fit` the fits (in the JSON object, or one line each after the table or CSV).
pub fn render(rows: &[Row], out: Output, table: fn(&[Row]) -> String) -> String {
    let fits = out.fit.then(|| fit::series_fits(rows));
    if out.json {
        let text = match &fits {
            Some(f) => serde_json::to_string_pretty(&serde_json::json!({"rows": rows, "fit": f}))
                .unwrap_or_default(),
            None => to_json(rows),
        };
        return text + "\n";
    }
    let mut s = if out.csv { to_csv(rows) } else { table(rows) };
    if let Some(f) = &fits {
        s.push_str(&fit::fits_text(f));
    }
    s
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
        for k in ["cpu_load_engine", "cpu_idle_pct", "path", "peer", "vs_raw"] {
            assert!(o.get(k).is_none(), "{k} shown unmeasured");
        }
        assert_eq!(o["mb_per_s"], 1000.0); // 1000 B per 1000 ns = 1 GB/s
        assert_eq!(o["msgs_per_s"], 1e6);
    }

    /// The idle engine's CPU is null when it could not be measured, absent where no bench
    /// measures it.
    #[test]
    fn unmeasurable_idle_cpu_is_null() {
        let mut r = row();
        r.cpu_idle_pct = Some(None);
        let v: serde_json::Value = serde_json::from_str(&to_json(&[r])).unwrap();
        assert!(v[0]["cpu_idle_pct"].is_null());
        assert!(v[0].get("cpu_idle_pct").is_some());
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

    #[test]
    fn latency_table_lists_ratios_under_their_headings() {
        let mut a = row();
        a.transport = "unix".into();
        a.vs_raw = Some(1.25);
        a.path = Some("copy".into());
        let t = latency_table(&[row(), a]);
        let ratio = t.lines().skip_while(|l| !l.contains("x raw peer")).nth(1);
        assert_eq!(
            ratio.map(|l| l.split_whitespace().collect::<Vec<_>>()),
            Some(vec!["unix", "-", "1000", "1.25"])
        );
        assert!(t.starts_with("transport"), "{t}");
        assert!(!t.contains("x cache-line"), "{t}");
    }

    /// A TLS row gets its throughput over the plain row of the same size, from the rounds
    /// when both have several, and the tables show it.
    #[test]
    fn tls_rows_are_compared_with_their_unencrypted_counterpart() {
        let at = |t: &str, size: usize, ns: f64, rounds: Vec<f64>| {
            let mut r = Row::new("pingpong", t, "block", size, &Summary::of(&[ns]).unwrap());
            r.round_medians_ns = rounds;
            r
        };
        let mut rows = vec![
            at("tcp", 64, 100.0, vec![]),
            at("tls", 64, 125.0, vec![]),
            at("tcp-raw", 8, 10.0, vec![10.0, 20.0, 30.0]),
            at("tls-raw", 8, 20.0, vec![20.0, 25.0, 30.0]),
            at("tls", 4096, 1.0, vec![]), // no tcp row at this size
        ];
        throughput_vs_tcp(&mut rows);
        let got: Vec<Option<f64>> = rows.iter().map(|r| r.throughput_vs_tcp).collect();
        assert_eq!(got, [None, Some(0.8), None, Some(0.8), None]);
        for table in [latency_table(&rows), rate_table(&rows)] {
            let line = table
                .lines()
                .skip_while(|l| !l.contains("throughput x tcp"))
                .nth(1)
                .map(|l| l.split_whitespace().collect::<Vec<_>>());
            assert_eq!(
                line.as_deref(),
                Some(&["tls", "block", "64", "-", "0.80"][..])
            );
        }
        assert!(!latency_table(&rows[..1]).contains("throughput x tcp"));
    }

    #[test]
    fn render_json_with_fits_is_an_object() {
        let rows: Vec<Row> = [8usize, 64, 4096]
            .iter()
            .map(|&n| Row::new("b", "t", "-", n, &Summary::of(&[100.0 + n as f64]).unwrap()))
            .collect();
        let out = Output {
            json: true,
            fit: true,
            ..Output::default()
        };
        let v: serde_json::Value = serde_json::from_str(&render(&rows, out, to_table)).unwrap();
        assert_eq!(v["rows"].as_array().unwrap().len(), 3);
        assert_eq!(v["fit"][0]["transport"], "t");
        let out = Output {
            json: false,
            csv: true,
            fit: true,
        };
        let csv = render(&rows, out, to_table);
        assert!(
            csv.starts_with("bench,") && csv.contains("\nfit b t -: t0 "),
            "{csv}"
        );
    }
}
