//! Turns a device-side trace into transfer rate and command overhead against request size
//! (the paper's figures 6 and 7), plus a short characterisation of the client: request sizes,
//! sequential fraction, connections and the most requests it kept in flight.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;
use serde::Serialize;

use crate::trace::Record;

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// The trace file could not be read.
    #[error("cannot read trace: {0}")]
    Io(#[from] std::io::Error),
    /// A line of the trace is malformed.
    #[error("trace line {line}: {why}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        #[source]
        why: crate::trace::TraceError,
    },
    /// The plot could not be drawn.
    #[error("cannot draw plot: {0}")]
    Plot(String),
}

/// Figures for one command and request size.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    /// Command name.
    pub command: String,
    /// Request length in bytes.
    pub bytes: u32,
    /// Requests seen.
    pub count: u64,
    /// Payload transfer rate, MB/s (10^6 bytes): bytes moved / time moving them.
    pub transfer_mb_per_s: f64,
    /// Mean command time (header in to reply out), microseconds.
    pub command_us: f64,
    /// Mean command overhead (command time less payload transfer time), microseconds.
    pub overhead_us: f64,
    /// Mean backend service time, microseconds.
    pub service_us: f64,
}

/// The whole report.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    /// Requests in the trace.
    pub requests: u64,
    /// Requests answered with an error.
    pub errors: u64,
    /// Distinct connections.
    pub connections: u64,
    /// Bytes read and written.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Fraction of reads and writes that start where the previous one on the same connection
    /// ended.
    pub sequential_fraction: f64,
    /// Most requests in flight at once on one connection (arrived, not yet answered).
    pub max_in_flight: u64,
    /// Time from the first arrival to the last reply, seconds.
    pub span_s: f64,
    /// Per command and size.
    pub rows: Vec<Row>,
}

/// Reads a trace file.
pub fn load(path: &Path) -> Result<Vec<Record>, ReportError> {
    let text = std::fs::read_to_string(path)?;
    let mut v = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        v.push(Record::parse(line).map_err(|why| ReportError::Parse { line: i + 1, why })?);
    }
    Ok(v)
}

#[derive(Default)]
struct Acc {
    count: u64,
    bytes: u64,
    data_ns: u64,
    cmd_ns: u64,
    over_ns: u64,
    service_ns: u64,
}

/// Computes the report.
pub fn analyse(recs: &[Record]) -> Report {
    let mut groups: BTreeMap<(String, u32), Acc> = BTreeMap::new();
    let mut conns: BTreeMap<u32, Vec<&Record>> = BTreeMap::new();
    let (mut errors, mut br, mut bw) = (0, 0, 0);
    for r in recs {
        conns.entry(r.conn).or_default().push(r);
        if r.error != 0 {
            errors += 1;
            continue;
        }
        match r.command.as_str() {
            "read" => br += u64::from(r.length),
            "write" => bw += u64::from(r.length),
            _ => {}
        }
        let a = groups.entry((r.command.clone(), r.length)).or_default();
        let cmd = r.reply_ns.saturating_sub(r.arrival_ns);
        a.count += 1;
        a.bytes += u64::from(r.length);
        a.data_ns += r.data_ns;
        a.cmd_ns += cmd;
        a.over_ns += cmd.saturating_sub(r.data_ns);
        a.service_ns += r.service_ns;
    }
    let (mut seq, mut rw, mut max_in_flight) = (0u64, 0u64, 0u64);
    for list in conns.values_mut() {
        list.sort_by_key(|r| r.arrival_ns);
        let mut next: Option<u64> = None;
        for r in list.iter() {
            if r.command == "read" || r.command == "write" {
                rw += 1;
                if next == Some(r.offset) {
                    seq += 1;
                }
                next = Some(r.offset + u64::from(r.length));
            }
        }
        // Sweep arrivals (+1) and replies (-1); a reply at the same instant goes first.
        let mut ev: Vec<(u64, i64)> = list
            .iter()
            .flat_map(|r| [(r.arrival_ns, 1), (r.reply_ns, -1)])
            .collect();
        ev.sort();
        let mut cur = 0i64;
        for (_, d) in ev {
            cur += d;
            max_in_flight = max_in_flight.max(cur.max(0) as u64);
        }
    }
    let first = recs.iter().map(|r| r.arrival_ns).min().unwrap_or(0);
    let last = recs.iter().map(|r| r.reply_ns).max().unwrap_or(0);
    let us = |ns: u64, n: u64| ns as f64 / n.max(1) as f64 / 1e3;
    let rows = groups
        .into_iter()
        .map(|((command, bytes), a)| Row {
            transfer_mb_per_s: if a.data_ns > 0 {
                a.bytes as f64 / (a.data_ns as f64 / 1e9) / 1e6
            } else {
                0.0
            },
            command_us: us(a.cmd_ns, a.count),
            overhead_us: us(a.over_ns, a.count),
            service_us: us(a.service_ns, a.count),
            command,
            bytes,
            count: a.count,
        })
        .collect();
    Report {
        requests: recs.len() as u64,
        errors,
        connections: conns.len() as u64,
        bytes_read: br,
        bytes_written: bw,
        sequential_fraction: if rw > 0 { seq as f64 / rw as f64 } else { 0.0 },
        max_in_flight,
        span_s: last.saturating_sub(first) as f64 / 1e9,
        rows,
    }
}

/// Formats the report as a text table.
pub fn table(r: &Report) -> String {
    let mut s = format!(
        "{} requests ({} errors) on {} connection(s) over {:.3} s; read {} B, written {} B; \
         sequential {:.0}%; at most {} in flight\n",
        r.requests,
        r.errors,
        r.connections,
        r.span_s,
        r.bytes_read,
        r.bytes_written,
        r.sequential_fraction * 100.0,
        r.max_in_flight
    );
    s.push_str(&format!(
        "{:<13} {:>10} {:>9} {:>12} {:>12} {:>12} {:>12}\n",
        "command", "bytes", "count", "xfer MB/s", "command us", "overhead us", "service us"
    ));
    for row in &r.rows {
        s.push_str(&format!(
            "{:<13} {:>10} {:>9} {:>12.1} {:>12.2} {:>12.2} {:>12.2}\n",
            row.command,
            row.bytes,
            row.count,
            row.transfer_mb_per_s,
            row.command_us,
            row.overhead_us,
            row.service_us
        ));
    }
    s
}

/// One plot panel: area, title, y label, the value plotted.
type Panel<'a, DB> = (
    &'a DrawingArea<DB, plotters::coord::Shift>,
    &'a str,
    &'a str,
    fn(&Row) -> f64,
);

/// Draws transfer rate (top) and command overhead (bottom) against request size, one series per
/// command that moves data, as an SVG file.
pub fn plot(r: &Report, path: &Path) -> Result<(), ReportError> {
    let pe = |e: &dyn std::fmt::Display| ReportError::Plot(e.to_string());
    let root = SVGBackend::new(path, (900, 800)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| pe(&e))?;
    let (top, bottom) = root.split_vertically(400);
    let series: Vec<&str> = ["read", "write"]
        .into_iter()
        .filter(|c| r.rows.iter().any(|row| row.command == *c))
        .collect();
    let sizes: Vec<f64> = r.rows.iter().map(|row| f64::from(row.bytes)).collect();
    let xmin = sizes.iter().cloned().fold(f64::INFINITY, f64::min).max(1.0);
    let xmax = sizes.iter().cloned().fold(0.0, f64::max).max(xmin * 2.0);
    let panels: [Panel<'_, _>; 2] = [
        (&top, "transfer rate (device side)", "MB/s", |row| {
            row.transfer_mb_per_s
        }),
        (
            &bottom,
            "command overhead (command time less transfer time)",
            "microseconds",
            |row| row.overhead_us,
        ),
    ];
    let colours = [BLUE, RED];
    for (area, title, ylabel, f) in panels {
        let ymax = r
            .rows
            .iter()
            .filter(|row| series.contains(&row.command.as_str()))
            .map(f)
            .fold(0.0, f64::max)
            .max(1e-3)
            * 1.1;
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d((xmin / 1.5..xmax * 1.5).log_scale(), 0.0..ymax)
            .map_err(|e| pe(&e))?;
        chart
            .configure_mesh()
            .x_desc("request size (bytes)")
            .y_desc(ylabel)
            .draw()
            .map_err(|e| pe(&e))?;
        for (i, cmd) in series.iter().enumerate() {
            let pts: Vec<(f64, f64)> = r
                .rows
                .iter()
                .filter(|row| row.command == *cmd)
                .map(|row| (f64::from(row.bytes), f(row)))
                .collect();
            let c = colours[i % colours.len()];
            chart
                .draw_series(LineSeries::new(pts.clone(), c))
                .map_err(|e| pe(&e))?
                .label(*cmd)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, c.filled())))
                .map_err(|e| pe(&e))?;
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .draw()
            .map_err(|e| pe(&e))?;
    }
    root.present().map_err(|e| pe(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(conn: u32, cmd: &str, off: u64, len: u32, arr: u64, data: u64, reply: u64) -> Record {
        Record {
            conn,
            export: "d".into(),
            command: cmd.into(),
            offset: off,
            length: len,
            arrival_ns: arr,
            data_ns: data,
            service_ns: 1_000,
            reply_ns: reply,
            error: 0,
        }
    }

    #[test]
    fn rates_overheads_and_client_shape() {
        let recs = vec![
            rec(0, "read", 0, 4096, 0, 4_096, 10_000),
            rec(0, "read", 4096, 4096, 1_000, 4_096, 12_000),
            rec(0, "read", 100_000, 4096, 20_000, 4_096, 30_000),
            rec(1, "write", 0, 1 << 20, 0, 1_000_000, 2_000_000),
        ];
        let r = analyse(&recs);
        assert_eq!(r.requests, 4);
        assert_eq!(r.connections, 2);
        assert_eq!(r.max_in_flight, 2);
        assert!((r.sequential_fraction - 0.25).abs() < 1e-9);
        let read = r.rows.iter().find(|x| x.command == "read").unwrap();
        assert_eq!(read.count, 3);
        // 4096 bytes in 4096 ns = 1000 MB/s.
        assert!((read.transfer_mb_per_s - 1000.0).abs() < 1e-6);
        let write = r.rows.iter().find(|x| x.command == "write").unwrap();
        assert!((write.overhead_us - 1000.0).abs() < 1e-6);
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("p.svg");
        plot(&r, &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("<svg") && text.contains("transfer rate"));
        assert!(table(&r).contains("write"));
    }
}
