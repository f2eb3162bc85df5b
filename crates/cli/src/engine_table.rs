//! The final statistics table of a pipeline run.

use std::fmt::Write as _;

use offhost_engine::Stats;

/// Formats a byte count with a binary unit.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Renders tasks, queues and pools as aligned text tables.
pub fn render(stats: &Stats) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "elapsed {:.3} s", stats.elapsed_s);
    let _ = writeln!(
        s,
        "{:>4}  {:<10} {:<10} {:>9} {:>11} {:>9} {:>11} {:>9}  result",
        "line", "task", "class", "bufs in", "bytes in", "bufs out", "bytes out", "busy ms"
    );
    for t in &stats.tasks {
        let _ = writeln!(
            s,
            "{:>4}  {:<10} {:<10} {:>9} {:>11} {:>9} {:>11} {:>9.1}  {}",
            t.line,
            t.name,
            t.priority.to_string(),
            t.buffers_in,
            human_bytes(t.bytes_in),
            t.buffers_out,
            human_bytes(t.bytes_out),
            t.busy_ns as f64 / 1e6,
            t.report.as_deref().unwrap_or("")
        );
    }
    let _ = writeln!(
        s,
        "\n{:<16} {:>9} {:>11} {:>9}",
        "queue", "buffers", "bytes", "max depth"
    );
    for q in &stats.queues {
        let _ = writeln!(
            s,
            "{:<16} {:>9} {:>11} {:>9}",
            q.name,
            q.puts,
            human_bytes(q.bytes),
            q.max_depth
        );
    }
    let _ = writeln!(
        s,
        "\n{:<16} {:>14} {:>6} {:>8} {:>9} {:>7}",
        "free list", "buffers", "free", "min free", "allocs", "waits"
    );
    for p in &stats.pools {
        let _ = writeln!(
            s,
            "{:<16} {:>14} {:>6} {:>8} {:>9} {:>7}",
            p.name,
            format!("{} x {}", p.count, human_bytes(p.size as u64)),
            p.free,
            p.min_free,
            p.allocs,
            p.empty
        );
    }
    s
}
