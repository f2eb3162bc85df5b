//! `[DS-link]` rerun: Comms1 and Comms2 over offhost-link channels in packets of 8 B to 4 KiB
//! (Figures 6-8), t0 and n_1/2 with and without concurrent computation (Table 2), and CPU
//! load against packet size for long messages (Table 3).

use std::fmt::Write as _;
use std::path::Path;

use super::seeds;
use indicatif::ProgressBar;
use offhost_bench::affinity;
use offhost_bench::cpu::{Counter, LoadProbe};
use offhost_bench::fit;
use offhost_bench::plot::{self, Series, Spec};
use offhost_bench::report::Row;
use offhost_bench::run::{self, Pattern, Plan, Role};
use offhost_bench::sizes::format_size;

use super::md::{pct, ratio, Finding, Table};
use super::verdict::{clearly_higher, majority, Measured, INCONCLUSIVE};
use super::Settings;
use crate::channel::ChannelRun;
use crate::error::{Context as _, Result};
use crate::process::PeerProcess;
use crate::ring::RingRun;
use offhost_bench::transport::Transport;

/// Message lengths of the figures.
pub fn lengths(quick: bool) -> Vec<usize> {
    if quick {
        vec![1, 256, 65536]
    } else {
        vec![1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144]
    }
}

/// Packet sizes drawn in the figures (the seed drew 8, 1024 and 4096).
pub fn figure_packets(quick: bool) -> Vec<usize> {
    if quick {
        vec![8, 4096]
    } else {
        vec![8, 1024, 4096]
    }
}

/// Packet sizes of the CPU-load table.
pub fn load_packets(quick: bool) -> Vec<usize> {
    if quick {
        vec![8, 512, 1024, 2048, 4096]
    } else {
        seeds::PACKETS_002.to_vec()
    }
}

/// Packet sizes of the minimal-latency check.
pub fn latency_packets(quick: bool) -> Vec<usize> {
    if quick {
        vec![8, 512, 4096]
    } else {
        seeds::PACKETS_002.to_vec()
    }
}

/// Message length of the CPU-load table (the seed used 0.5 to 1 MB).
pub fn long_message(quick: bool) -> usize {
    if quick {
        64 << 10
    } else {
        512 << 10
    }
}

/// Points the section will measure (for the progress bar).
pub fn points(quick: bool) -> usize {
    let l = lengths(quick).len();
    2 * figure_packets(quick).len() * l
        + 2 * l
        + 2 * l
        + 2 * load_packets(quick).len()
        + seeds::PACKETS_002.len()
}

fn one(
    transport: Transport,
    packet: usize,
    pattern: Pattern,
    size: usize,
    plan: &Plan,
    probe: Option<&LoadProbe>,
) -> Result<run::Measured> {
    let mut r = ChannelRun::start(transport, packet, Role::Echo, size)?;
    run::measure(r.conn(), pattern, size, plan, probe, None)
        .with_context(|| format!("{transport} packet {packet} at {size} B"))
}

fn bench_of(p: Pattern) -> &'static str {
    if p == Pattern::Exchange {
        "comms2"
    } else {
        "comms1"
    }
}

/// Everything measured for `[DS-link]`.
pub struct Data002 {
    /// Figure rows (comms1/comms2 per packet size, plus the shm reference).
    pub figures: Vec<Row>,
    /// Comms2 at packet 4096 under thread load and under process load.
    pub loaded: Vec<Row>,
    /// Long-message rows with CPU load per packet size.
    pub load_rows: Vec<Row>,
    /// Comms1 latency of a 1-byte message per packet size.
    pub min_latency: Vec<Row>,
}

/// Busy processes pinned one per core, killed on drop.
struct BusyProcesses {
    _kids: Vec<PeerProcess>,
}

impl BusyProcesses {
    fn start() -> Result<BusyProcesses> {
        let (h, e) = affinity::host_engine_cores();
        let mut kids = Vec::new();
        for core in if h == e { vec![h] } else { vec![h, e] } {
            let mut cmd = std::process::Command::new("sh");
            cmd.args(["-c", "while :; do :; done"]);
            let p = PeerProcess::spawn("busy sh process for the process-load run", &mut cmd)?;
            let _ = affinity::pin_process(p.id(), core);
            kids.push(p);
        }
        Ok(BusyProcesses { _kids: kids })
    }
}

/// Runs the `[DS-link]` measurements over link transport `transport`.
pub fn measure(s: &Settings, probe: &LoadProbe, bar: &ProgressBar) -> Result<Data002> {
    let t = s.transport;
    let lens = lengths(s.quick);
    let mut figures = Vec::new();
    for p in [Pattern::PingPong, Pattern::Exchange] {
        for &pk in &figure_packets(s.quick) {
            for &n in &lens {
                bar.set_message(format!(
                    "[DS-link]: {} {t} packet {pk} {}",
                    bench_of(p),
                    format_size(n)
                ));
                let m = one(t, pk, p, n, &s.plan, None)?;
                figures.extend(m.row(bench_of(p), t.name(), &format!("pkt{pk}"), n));
                bar.inc(1);
            }
        }
        for &n in &lens {
            bar.set_message(format!(
                "[DS-link]: {} shm poll {}",
                bench_of(p),
                format_size(n)
            ));
            let mut r = RingRun::start(offhost_shm::Mode::Poll, Role::Echo, n)?;
            let m = run::measure(r.conn(), p, n, &s.plan, None, None)?;
            figures.extend(m.row(bench_of(p), "shm", "poll", n));
            bar.inc(1);
        }
    }
    let mut loaded = Vec::new();
    let (h, e) = affinity::host_engine_cores();
    for (label, threads) in [("thread-load", true), ("process-load", false)] {
        for &n in &lens {
            bar.set_message(format!("[DS-link]: comms2 {label} {}", format_size(n)));
            let (c1, c2, busy) = if threads {
                (
                    Some(Counter::start(h)?),
                    if e != h {
                        Some(Counter::start(e)?)
                    } else {
                        None
                    },
                    None,
                )
            } else {
                (None, None, Some(BusyProcesses::start()?))
            };
            let m = one(t, 4096, Pattern::Exchange, n, &s.plan, None);
            for c in [c1, c2].into_iter().flatten() {
                c.stop()?;
            }
            drop(busy);
            loaded.extend(m?.row("comms2", t.name(), label, n));
            bar.inc(1);
        }
    }
    let mut load_rows = Vec::new();
    let long = long_message(s.quick);
    let mut lplan = s.plan;
    lplan.cpu_time = Some(s.cpu_time);
    lplan.reps = lplan.reps.min(5);
    for p in [Pattern::PingPong, Pattern::Exchange] {
        for &pk in &load_packets(s.quick) {
            bar.set_message(format!("[DS-link]: {} load packet {pk}", bench_of(p)));
            let m = one(t, pk, p, long, &lplan, Some(probe))?;
            load_rows.extend(m.row(bench_of(p), t.name(), &format!("pkt{pk}"), long));
            bar.inc(1);
        }
    }
    let mut min_latency = Vec::new();
    for &pk in &latency_packets(s.quick) {
        bar.set_message(format!("[DS-link]: 1-byte latency packet {pk}"));
        let m = one(t, pk, Pattern::PingPong, 1, &s.plan, None)?;
        min_latency.extend(m.row("comms1", t.name(), &format!("pkt{pk}"), 1));
        bar.inc(1);
    }
    Ok(Data002 {
        figures,
        loaded,
        load_rows,
        min_latency,
    })
}

fn series(rows: &[Row], bench: &str, value: impl Fn(&Row) -> f64) -> Vec<Series> {
    plot::series_of(
        &rows
            .iter()
            .filter(|r| r.bench == bench)
            .cloned()
            .collect::<Vec<_>>(),
        value,
    )
}

fn fit_of(rows: &[Row], bench: &str, transport: &str, mode: &str) -> Option<fit::Fit> {
    fit::fit_linear(&fit::points(rows, bench, transport, mode)).ok()
}

fn find<'a>(rows: &'a [Row], bench: &str, mode: &str) -> Option<&'a Row> {
    rows.iter().find(|r| r.bench == bench && r.mode == mode)
}

/// The report section for `[DS-link]`, its plots, and its findings.
pub fn section(d: &Data002, s: &Settings, dir: &Path) -> Result<(String, Vec<Finding>)> {
    let t = s.transport.name();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## [DS-link], Figures 6-8: Comms1 and Comms2\n\n\
         offhost-link channels over `{t}` (engine in a thread on the other core), messages \
         split into packets of the given size by the protocol. Comms1: one message bounces, \
         one-way time = half the round trip. Comms2: both directions at once, recorded time = \
         a quarter of a two-step exchange, throughput = both directions together. `shm/poll` \
         (the raw rings) is drawn as the reference, as the seed drew the T9000. Seed: Comms1 \
         peaks at {} MB/s, Comms2 at {} MB/s, minimal latency {} us.\n",
        seeds::COMMS1_MAX_MB_S,
        seeds::COMMS2_MAX_MB_S,
        seeds::COMMS1_MIN_LATENCY_US
    );
    for (bench, fig, what, value, unit) in [
        ("comms1", "6", "throughput", 0, "MB/s"),
        ("comms2", "7", "throughput", 0, "MB/s"),
        ("comms1", "8", "latency", 1, "us"),
    ] {
        let val = move |r: &Row| {
            if value == 0 {
                r.mb_per_s
            } else {
                r.one_way_ns_median / 1e3
            }
        };
        let file = format!("002-fig{fig}-{bench}-{what}.svg");
        plot::plot_xy(
            &dir.join(&file),
            &Spec {
                title: format!("[DS-link] Figure {fig}: {bench} {what} vs message length"),
                x_label: "message length (bytes)".into(),
                y_label: unit.into(),
                log_y: true,
            },
            &series(&d.figures, bench, val),
        )?;
        let mut head = vec!["length".to_string()];
        let modes: Vec<String> = {
            let mut m: Vec<String> = d
                .figures
                .iter()
                .filter(|r| r.bench == bench)
                .map(|r| r.series())
                .collect();
            m.dedup();
            m.sort();
            m.dedup();
            m
        };
        head.extend(modes.iter().map(|m| format!("{m} {unit}")));
        let mut tab = Table::new(&head.iter().map(String::as_str).collect::<Vec<_>>());
        for &n in &lengths(s.quick) {
            let mut row = vec![format_size(n)];
            for m in &modes {
                let v = d
                    .figures
                    .iter()
                    .find(|r| r.bench == bench && &r.series() == m && r.size == n)
                    .map_or("-".into(), |r| format!("{:.2}", val(r)));
                row.push(v);
            }
            tab.row(row);
        }
        let _ = writeln!(
            md,
            "### Figure {fig}: {bench} {what}\n\n{}\n![{bench}]({file})\n",
            tab.render()
        );
    }
    let mut ft = Table::new(&[
        "bench",
        "series",
        "t0 (us)",
        "r_inf (MB/s)",
        "n_1/2 (B)",
        "rms residual %",
    ]);
    let mut keys: Vec<(String, String, String)> = d
        .figures
        .iter()
        .map(|r| (r.bench.clone(), r.transport.clone(), r.mode.clone()))
        .collect();
    keys.sort();
    keys.dedup();
    for (b, tr, m) in &keys {
        if let Some(f) = fit_of(&d.figures, b, tr, m) {
            ft.row(vec![
                b.clone(),
                format!("{tr}/{m}"),
                format!("{:.2}", f.t0_ns / 1e3),
                format!("{:.1}", f.r_inf_mb_per_s),
                format!("{:.0}", f.n_half_bytes),
                format!("{:.1}", 100.0 * f.rms_rel_residual),
            ]);
        }
    }
    let _ = writeln!(md, "### Fits of t(n) = t0 + n / r_inf\n\n{}", ft.render());

    // Table 2.
    let mut all = d.loaded.clone();
    all.extend(
        d.figures
            .iter()
            .filter(|r| r.bench == "comms2" && r.mode == "pkt4096")
            .cloned(),
    );
    let f_none = fit_of(&all, "comms2", t, "pkt4096");
    let f_thr = fit_of(&all, "comms2", t, "thread-load");
    let f_proc = fit_of(&all, "comms2", t, "process-load");
    let mut t2 = Table::new(&[
        "situation",
        "seed n_1/2 (B)",
        "seed t0 (us)",
        "today n_1/2 (B)",
        "today t0 (us)",
    ]);
    for (i, f) in [f_none, f_thr, f_proc].iter().enumerate() {
        let (name, n, t0) = seeds::T2_002[i];
        t2.row(vec![
            name.into(),
            n.to_string(),
            format!("{t0}"),
            f.map_or("-".into(), |f| format!("{:.0}", f.n_half_bytes)),
            f.map_or("-".into(), |f| format!("{:.2}", f.t0_ns / 1e3)),
        ]);
    }
    let (name, n, t0) = seeds::T2_002[3];
    t2.row(vec![
        name.into(),
        n.to_string(),
        format!("{t0}"),
        "-".into(),
        "-".into(),
    ]);
    let _ = writeln!(
        md,
        "## [DS-link], Table 2: t0 and n_1/2 under concurrent computation (Comms2, packet 4096)\n\n\
         Thread load: a counting thread pinned on each core in this process. Process load: a \
         busy `sh` process pinned on each core. Linux's fair scheduler gives the busy task and \
         the communication equal shares either way (the seed gave its communication process a \
         real-time priority).\n\n{}",
        t2.render()
    );

    // Table 3.
    let long = long_message(s.quick);
    let mut t3 = Table::new(&[
        "packet",
        "seed Comms1 %",
        "seed Comms2 %",
        "today Comms1 host %",
        "today Comms1 engine %",
        "today Comms2 host %",
        "today Comms2 engine %",
        "today Comms1 MB/s",
    ]);
    for &pk in &load_packets(s.quick) {
        let i = seeds::PACKETS_002
            .iter()
            .position(|&p| p == pk)
            .unwrap_or(0);
        let c1 = find(&d.load_rows, "comms1", &format!("pkt{pk}"));
        let c2 = find(&d.load_rows, "comms2", &format!("pkt{pk}"));
        t3.row(vec![
            pk.to_string(),
            format!("{}", seeds::T3_002[i][0]),
            format!("{}", seeds::T3_002[i][1]),
            pct(c1.and_then(|r| r.cpu_load_host)),
            pct(c1.and_then(|r| r.cpu_load_engine)),
            pct(c2.and_then(|r| r.cpu_load_host)),
            pct(c2.and_then(|r| r.cpu_load_engine)),
            c1.map_or("-".into(), |r| format!("{:.1}", r.mb_per_s)),
        ]);
    }
    let _ = writeln!(
        md,
        "## [DS-link], Table 3: CPU load for long messages ({} messages)\n\n\
         Load = 1 - (count of a task pinned on the core during the run) / (its count alone). A \
         busy-waiting side shows about 50 % here: Linux shares the core equally between it and \
         the counting task.\n\n{}",
        format_size(long),
        t3.render()
    );
    let load_series = |bench: &str| Series {
        label: format!("today {bench} host"),
        points: d
            .load_rows
            .iter()
            .filter(|r| r.bench == bench)
            .filter_map(|r| {
                let pk: f64 = r.mode.trim_start_matches("pkt").parse().ok()?;
                Some((pk, 100.0 * r.cpu_load_host?))
            })
            .collect(),
    };
    let seed_series = |j: usize, label: &str| Series {
        label: label.into(),
        points: (0..10)
            .map(|i| (seeds::PACKETS_002[i] as f64, seeds::T3_002[i][j]))
            .collect(),
    };
    plot::plot_xy(
        &dir.join("002-table3-cpu-load.svg"),
        &Spec {
            title: "[DS-link] Table 3: CPU load vs packet size, long messages".into(),
            x_label: "packet size (bytes)".into(),
            y_label: "CPU load %".into(),
            log_y: false,
        },
        &[
            load_series("comms1"),
            load_series("comms2"),
            seed_series(0, "seed Comms1"),
            seed_series(1, "seed Comms2"),
        ],
    )?;
    md.push_str("\n![cpu load](002-table3-cpu-load.svg)\n\n");
    let mut lt = Table::new(&[
        "packet",
        "1-byte Comms1 latency, fastest rep (us)",
        "median (us)",
    ]);
    for r in &d.min_latency {
        lt.row(vec![
            r.mode.trim_start_matches("pkt").into(),
            format!("{:.2}", r.one_way_ns_min / 1e3),
            format!("{:.2}", r.one_way_ns_median / 1e3),
        ]);
    }
    let _ = writeln!(
        md,
        "### Minimal latency per packet size ([DS-link] section 8.2)\n\n{}",
        lt.render()
    );
    Ok((md, findings_002(d, s, f_none, f_thr, f_proc)))
}

fn findings_002(
    d: &Data002,
    s: &Settings,
    f_none: Option<fit::Fit>,
    f_thr: Option<fit::Fit>,
    f_proc: Option<fit::Fit>,
) -> Vec<Finding> {
    let t = s.transport.name();
    let mut f = Vec::new();
    // The top throughput over all lengths (the seed read its maxima off the curves); a single
    // length is too exposed to a noisy repetition.
    // Its repetitions bound the ratio: the verdict holds over their whole range.
    let top = |b: &str, m: &str| {
        d.figures
            .iter()
            .filter(|r| r.bench == b && r.mode == m)
            .map(Measured::rate)
            .max_by(|a, b| a.mid.total_cmp(&b.mid))
            .unwrap_or(Measured::point(f64::NAN))
    };
    let (m1, m2) = (top("comms1", "pkt4096"), top("comms2", "pkt4096"));
    let (t1, t2) = (m1.mid / 1e6, m2.mid / 1e6);
    let two = m2.over(m1);
    f.push(Finding {
        source: "[DS-link] §8.1, Figures 6-7",
        claim: "Comms2 (both directions) reaches twice the Comms1 throughput".into(),
        seed: format!(
            "{}x ({} vs {} MB/s)",
            ratio(seeds::COMMS2_MAX_MB_S / seeds::COMMS1_MAX_MB_S),
            seeds::COMMS2_MAX_MB_S,
            seeds::COMMS1_MAX_MB_S
        ),
        here: format!(
            "{} ({t2:.0} vs {t1:.0} MB/s at best, packet 4096, {t})",
            two.text("x")
        ),
        holds: two.bands(&[(1.7, "yes"), (1.2, "partly")], "no"),
    });
    let c1: Vec<(usize, Measured)> = d
        .load_rows
        .iter()
        .filter(|r| r.bench == "comms1")
        .filter_map(|r| {
            let p = r.mode.trim_start_matches("pkt").parse().ok()?;
            Some((p, Measured::rate(r)))
        })
        .collect();
    let max = c1.iter().map(|p| p.1.mid / 1e6).fold(0.0, f64::max);
    let smallest = c1.iter().find(|p| p.1.mid >= 0.9 * max * 1e6).map(|p| p.0);
    // The smallest packet that reaches 90 % of the top in its best and in its worst
    // repetition: the verdict must hold for both.
    let reach =
        |x: fn(&Measured) -> f64| c1.iter().find(|p| x(&p.1) >= 0.9 * max * 1e6).map(|p| p.0);
    let (early, late) = (reach(|m| m.hi), reach(|m| m.lo));
    f.push(Finding {
        source: "[DS-link] §8.1",
        claim: "long-message Comms1 needs packets of at least 512 B to reach its top throughput"
            .into(),
        seed: format!("{} B", seeds::MIN_PACKET_FOR_MAX),
        here: smallest.map_or("-".into(), |p| {
            format!("{p} B reach 90 % of the top ({max:.1} MB/s)")
        }),
        holds: match (early, late) {
            (Some(a), Some(b)) => {
                let ok = |p: usize| (256..=1024).contains(&p);
                match (ok(a), ok(b)) {
                    (true, true) => "yes",
                    (false, false) => "no",
                    _ => INCONCLUSIVE,
                }
            }
            (Some(_), None) => INCONCLUSIVE,
            _ => "not measured",
        },
    });
    // Minimal latency, as the seed reports it: the fastest repetition at each packet size.
    let lat: Vec<f64> = d.min_latency.iter().map(|r| r.one_way_ns_min).collect();
    let (lo, hi) = (
        lat.iter().copied().fold(f64::INFINITY, f64::min),
        lat.iter().copied().fold(0.0, f64::max),
    );
    f.push(Finding {
        source: "[DS-link] §8.2, Figure 8",
        claim: "minimal latency is the same for every packet size up to 512 B and higher for larger packets (padding); a length in the header would remove the difference".into(),
        seed: format!("{} us for packets <= 512 B, higher above", seeds::COMMS1_MIN_LATENCY_US),
        here: format!("{:.2} to {:.2} us over packets 8 B to 4 KiB (offhost packets carry their length)", lo / 1e3, hi / 1e3),
        holds: match Measured::point(hi / lo).below(1.3) {
            "yes" => "yes (no padding, no rise)",
            other => other,
        },
    });
    if let (Some(n), Some(th), Some(pr)) = (f_none, f_thr, f_proc) {
        // Each t0 is bounded by its fit's relative residual: the ratios' ranges follow.
        let t0 = |f: &fit::Fit| {
            let e = f.rms_rel_residual.abs();
            Measured {
                mid: f.t0_ns,
                lo: f.t0_ns * (1.0 - e),
                hi: f.t0_ns * (1.0 + e),
            }
        };
        let (mt, mp) = (t0(&th).over(t0(&n)), t0(&pr).over(t0(&n)));
        f.push(Finding {
            source: "[DS-link] §8.4, Table 2",
            claim: "computation in a thread barely changes t0; computation in another process raises it a lot".into(),
            seed: format!("t0 x1.00 (thread), x{} (process)", ratio(783.0 / 187.0)),
            here: format!("t0 {} (thread), {} (process)", mt.text("x"), mp.text("x")),
            holds: match (mt.below(1.2), mp.at_least(1.5)) {
                ("yes", "yes") => "yes",
                ("no", _) | (_, "no") => match mp.over(mt).at_least(1.0) {
                    "yes" => "partly",
                    other => other,
                },
                _ => INCONCLUSIVE,
            },
        });
    }
    let loads: Vec<(usize, f64)> = d
        .load_rows
        .iter()
        .filter(|r| r.bench == "comms1")
        .filter_map(|r| {
            Some((
                r.mode.trim_start_matches("pkt").parse().ok()?,
                r.cpu_load_host?,
            ))
        })
        .collect();
    let halvings: Vec<String> = loads
        .windows(2)
        .filter(|w| w[0].0 >= 512 && w[1].0 == 2 * w[0].0)
        .map(|w| ratio(w[0].1 / w[1].1))
        .collect();
    // Each ratio clearly inside 1.6-2.5, clearly outside, or too close to an edge to say.
    let near_two: Vec<&str> = loads
        .windows(2)
        .filter(|w| w[0].0 >= 512 && w[1].0 == 2 * w[0].0)
        .map(|w| {
            let r = Measured::point(w[0].1 / w[1].1);
            match (r.at_least(1.6), r.below(2.5)) {
                ("yes", "yes") => "yes",
                ("no", _) | (_, "no") => "no",
                _ => INCONCLUSIVE,
            }
        })
        .collect();
    let all_near_two = if near_two.contains(&"no") {
        "no"
    } else if near_two.iter().all(|v| *v == "yes") {
        "yes"
    } else {
        INCONCLUSIVE
    };
    f.push(Finding {
        source: "[DS-link] §8.4, Table 3",
        claim: "for packets of 512 B and more, Comms1 CPU load halves when the packet size doubles"
            .into(),
        seed: format!(
            "load ratios {} / {} / {}",
            ratio(55.3 / 28.9),
            ratio(28.9 / 14.1),
            ratio(14.1 / 7.1)
        ),
        here: if halvings.is_empty() {
            "not enough packet sizes in this run".into()
        } else {
            format!("load ratios {}", halvings.join(" / "))
        },
        holds: if halvings.is_empty() {
            "not measured"
        } else if loads.iter().any(|l| l.0 >= 512 && l.1 < 0.01) {
            "not measurable here (loads near 0 are within the noise)"
        } else {
            all_near_two
        },
    });
    let pairs: Vec<(f64, f64)> = d
        .load_rows
        .iter()
        .filter(|r| r.bench == "comms1")
        .filter_map(|a| {
            let b = find(&d.load_rows, "comms2", &a.mode)?;
            Some((a.cpu_load_host?, b.cpu_load_host?))
        })
        .collect();
    // One load measurement per point: only clear differences (5 % and one percentage point)
    // count, and without a clear majority the finding is inconclusive.
    let (more, less) = clearly_higher(&pairs, 0.01);
    f.push(Finding {
        source: "[DS-link] §8.4, Table 3",
        claim: "Comms2 loads the CPU more than Comms1 at the same packet size".into(),
        seed: "higher for packets >= 512 B (e.g. 53.4 vs 28.9 % at 1 KiB)".into(),
        here: format!(
            "clearly higher at {more}, clearly lower at {less} of {} packet sizes",
            pairs.len()
        ),
        holds: majority((more, less), pairs.len()),
    });
    f
}
