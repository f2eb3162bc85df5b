//! The final statistics table of a pipeline run.

use std::fmt::Write as _;

use offhost_engine::Stats;

use crate::daemon::Status;

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

/// One line for a progress display: bytes in from the sources, tasks done, busy time.
pub fn progress_line(stats: &Stats) -> String {
    let busy: u64 = stats.tasks.iter().map(|t| t.busy_ns).sum();
    let done = stats.tasks.iter().filter(|t| t.done).count();
    format!(
        "sources {} | tasks done {}/{} | busy {:.2} s",
        human_bytes(stats.source_bytes()),
        done,
        stats.tasks.len(),
        busy as f64 / 1e9
    )
}

/// Renders tasks, queues and pools as aligned text tables.
pub fn render(stats: &Stats) -> String {
    render_with(&[(None, stats)], usize::MAX)
}

/// Renders the statistics of a pipeline's parts on several engines as one set of tables:
/// tasks in file order with an engine column (the tasks the split added, past the file's
/// `file_lines`, come last with `-` for a line), queues and free lists as `ENGINE:NAME`.
pub fn render_engines(parts: &[(String, Stats)], file_lines: usize) -> String {
    let v: Vec<(Option<&str>, &Stats)> = parts.iter().map(|(e, s)| (Some(e.as_str()), s)).collect();
    render_with(&v, file_lines)
}

fn render_with(parts: &[(Option<&str>, &Stats)], file_lines: usize) -> String {
    let mut s = String::new();
    let elapsed = parts.iter().map(|p| p.1.elapsed_s).fold(0.0, f64::max);
    let _ = writeln!(s, "elapsed {elapsed:.3} s");
    let many = parts.iter().any(|p| p.0.is_some());
    let engine_col = |e: Option<&str>| {
        if many {
            format!("{:<10} ", e.unwrap_or(""))
        } else {
            String::new()
        }
    };
    let named = |e: Option<&str>, n: &str| match e {
        Some(e) => format!("{e}:{n}"),
        None => n.to_owned(),
    };
    let _ = writeln!(
        s,
        "{:>4}  {}{:<10} {:<10} {:>9} {:>11} {:>9} {:>11} {:>9}  result",
        "line",
        if many {
            format!("{:<10} ", "engine")
        } else {
            String::new()
        },
        "task",
        "class",
        "bufs in",
        "bytes in",
        "bufs out",
        "bytes out",
        "busy ms"
    );
    let mut tasks: Vec<_> = parts
        .iter()
        .flat_map(|(e, st)| st.tasks.iter().map(move |t| (*e, t)))
        .collect();
    tasks.sort_by_key(|(_, t)| t.line);
    for (e, t) in tasks {
        let _ = writeln!(
            s,
            "{:>4}  {}{:<10} {:<10} {:>9} {:>11} {:>9} {:>11} {:>9.1}  {}",
            if t.line > file_lines {
                "-".to_string()
            } else {
                t.line.to_string()
            },
            engine_col(e),
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
    for (e, st) in parts {
        for q in &st.queues {
            let _ = writeln!(
                s,
                "{:<16} {:>9} {:>11} {:>9}",
                named(*e, &q.name),
                q.puts,
                human_bytes(q.bytes),
                q.max_depth
            );
        }
    }
    let _ = writeln!(
        s,
        "\n{:<16} {:>14} {:>6} {:>8} {:>9} {:>7} {:>7}",
        "free list", "buffers", "free", "min free", "allocs", "waits", "wakes"
    );
    for (e, st) in parts {
        for p in &st.pools {
            let _ = writeln!(
                s,
                "{:<16} {:>14} {:>6} {:>8} {:>9} {:>7} {:>7}",
                named(*e, &p.name),
                format!("{} x {}", p.count, human_bytes(p.size as u64)),
                p.free,
                p.min_free,
                p.allocs,
                p.empty,
                p.waiter_wakeups
            );
        }
    }
    s
}

/// A daemon pipeline's status as `offhost submit --status` prints it: `pipeline ID (NAME)
/// STATE`, then its statistics table.
pub fn render_status(s: &Status) -> String {
    let named = match &s.name {
        Some(n) => format!(" ({n})"),
        None => String::new(),
    };
    let mut out = format!("pipeline {}{named} {}\n", s.id, s.state);
    if let Some(k) = &s.keep {
        out.push_str(&keep_line(k));
    }
    if let Some(stats) = &s.stats {
        out.push_str(&render(stats));
    }
    out
}

/// A daemon's pipelines as `offhost submit --list` prints them: a line each, `ID NAME STATE`
/// and, while it runs, who keeps it.
pub fn render_list(l: &crate::daemon::Pipelines) -> String {
    let mut out = format!("{:>6}  {:<20} {:<9} kept\n", "id", "name", "state");
    for p in &l.pipelines {
        let name = p.name.as_deref().unwrap_or("-");
        let keep = p.keep.as_ref().map_or("\n".into(), keep_line);
        out.push_str(&format!(
            "{:>6}  {name:<20} {:<9} {keep}",
            p.id,
            p.state.as_str()
        ));
    }
    out
}

/// Who keeps a running pipeline and when the engine stops it, as `--status` says it.
pub fn keep_line(k: &crate::daemon::Keep) -> String {
    use crate::daemon::KeptBy;
    let who = match k.by {
        KeptBy::Submitter => "kept by its submitter (stopped when it goes)",
        KeptBy::Detached => "detached (runs on without its submitter)",
        KeptBy::Orphaned => "orphaned: its submitter has gone",
    };
    match k.stops_in_s {
        Some(s) => format!("{who}; the engine stops it in {s:.1} s\n"),
        None => format!("{who}\n"),
    }
}
