//! `[SUN-T]` rerun: Tables 1 to 3 (unbuffered, buffered FIFO full and half, interrupt-driven
//! transfers against an echo) and Tables 4 to 5 (word-by-word and block copies into a buffer
//! of an `offhost-shm` segment).

use std::fmt::Write as _;
use std::path::Path;

use super::copies::{self, Direction, Style};
use super::fifo::{self, Discipline};
use super::seeds;
use indicatif::ProgressBar;
use offhost_bench::cpu::LoadProbe;
use offhost_bench::plot::{self, Series, Spec};
use offhost_bench::report::Row;
use offhost_bench::run::{self, Pattern, Plan, Role};
use offhost_bench::sizes::format_size;

use super::md::{bps, findings, pct, ratio, Finding, Table};
use super::verdict::{Measured, INCONCLUSIVE};
use super::Settings;
use crate::error::{Context as _, Result};

/// Sizes of the transfer tables.
pub fn transfer_sizes(quick: bool) -> Vec<usize> {
    if quick {
        vec![4, 1024, 4096, 65536]
    } else {
        seeds::SIZES_000.to_vec()
    }
}

/// Measures every discipline at every size (pingpong against an echo, as the paper's `nrate`).
pub fn transfers(s: &Settings, probe: &LoadProbe, bar: &ProgressBar) -> Result<Vec<Row>> {
    let mut plan: Plan = s.plan;
    plan.cpu_time = Some(s.cpu_time);
    let mut rows = Vec::new();
    for d in Discipline::ALL {
        for &size in &transfer_sizes(s.quick) {
            bar.set_message(format!("[SUN-T]: {} {}", d.name(), format_size(size)));
            let mut r = fifo::start(d, s.fifo, Role::Echo, size)?;
            let m = run::measure(r.conn(), Pattern::PingPong, size, &plan, Some(probe), None)
                .with_context(|| format!("{} at {size} B", d.name()))?;
            r.finish();
            rows.extend(m.row("t000", d.name(), &format!("fifo{}", s.fifo), size));
            bar.inc(1);
        }
    }
    Ok(rows)
}

fn rate(rows: &[Row], d: Discipline, size: usize) -> f64 {
    rates(rows, d, size).mid
}

/// The throughput of discipline `d` at `size` over its repetitions, B/s.
fn rates(rows: &[Row], d: Discipline, size: usize) -> Measured {
    rows.iter()
        .find(|r| r.transport == d.name() && r.size == size)
        .map_or(Measured::point(f64::NAN), Measured::rate)
}

fn load(rows: &[Row], d: Discipline, size: usize) -> Option<f64> {
    rows.iter()
        .find(|r| r.transport == d.name() && r.size == size)
        .and_then(|r| r.cpu_load_host)
}

/// (size, block to shared, block from shared, words to shared, words from shared), B/s.
pub type CopyRates = (usize, Measured, Measured, Measured, Measured);

/// Today's copy rates: Table 4 (the four styles over the whole region) and Table 5 (block
/// and word copies per size).
pub struct Copies {
    /// Rate per style, bytes/s.
    pub styles: Vec<(Style, Measured)>,
    /// Per size, bytes/s.
    pub sizes: Vec<CopyRates>,
}

/// Measures the copies into a 256 KiB buffer of an `offhost-shm` segment.
pub fn copies(s: &Settings, bar: &ProgressBar) -> Result<Copies> {
    let region = 256 << 10;
    let config = offhost_shm::Config {
        pool_buffers: 1,
        buffer_size: region as u32,
        ..offhost_shm::Config::default()
    };
    let (mut host, _engine) = offhost_shm::pair(&config).context("shared segment")?;
    let mut buf = host
        .sender()
        .alloc(Some(std::time::Duration::from_secs(1)))
        .context("shared buffer")?;
    let shared = buf.whole_mut();
    let mut local: Vec<u8> = (0..shared.len()).map(|i| i as u8).collect();
    let (reps, t) = (s.plan.reps.min(7), s.plan.rep_time);
    bar.set_message("[SUN-T]: copies");
    let styles = Style::ALL
        .iter()
        .map(|&st| {
            (
                st,
                copies::word_rate(st, shared, &mut local, region, reps, t),
            )
        })
        .collect();
    let mut sizes = Vec::new();
    for &n in &seeds::SIZES_T5 {
        sizes.push((
            n,
            copies::block_rate(Direction::ToShared, shared, &mut local, n, reps, t),
            copies::block_rate(Direction::FromShared, shared, &mut local, n, reps, t),
            copies::word_rate(Style::CopyToShared, shared, &mut local, n, reps, t),
            copies::word_rate(Style::CopyFromShared, shared, &mut local, n, reps, t),
        ));
        bar.inc(1);
    }
    Ok(Copies { styles, sizes })
}

/// The report section for `[SUN-T]`, its plots, and its findings.
pub fn section(
    rows: &[Row],
    c: &Copies,
    s: &Settings,
    dir: &Path,
) -> Result<(String, Vec<Finding>)> {
    let mut md = String::new();
    let sizes = transfer_sizes(s.quick);
    let _ = writeln!(
        md,
        "## [SUN-T], Tables 1-3: transfer disciplines\n\n\
         Two threads on two cores; the host sends a packet and an echo thread sends it back \
         (the paper's `nrate`). Throughput = packet / (round trip / 2), bytes/s. FIFO size \
         {} B (seed: 1024 B). Seed columns: SUN3/110 (best optimised) and SUN4/110. CPU load: \
         counting task on the host core (seed: not measured).\n",
        s.fifo
    );
    let mut t = Table::new(&[
        "size",
        "seed unbuf SUN3",
        "seed unbuf SUN4",
        "today unbuf",
        "seed full SUN3",
        "today full",
        "seed half SUN3",
        "seed SUN4",
        "today half",
        "seed intr SUN3",
        "seed intr SUN4",
        "today intr",
        "load half %",
        "load intr %",
    ]);
    for &n in &sizes {
        let i = seeds::SIZES_000.iter().position(|&x| x == n);
        let seed = |f: &dyn Fn(usize) -> u32| i.map_or("-".into(), |i| bps(f64::from(f(i))));
        t.row(vec![
            format_size(n),
            seed(&|i| seeds::T1_UNBUFFERED[i][2]),
            seed(&|i| seeds::T1_UNBUFFERED[i][3]),
            bps(rate(rows, Discipline::Unbuffered, n)),
            seed(&|i| seeds::T2_BUFFERED[i][0]),
            bps(rate(rows, Discipline::FullFifo, n)),
            seed(&|i| seeds::T2_BUFFERED[i][1]),
            seed(&|i| seeds::T2_BUFFERED[i][2]),
            bps(rate(rows, Discipline::HalfFifo, n)),
            seed(&|i| seeds::T3_INTERRUPT[i][0]),
            seed(&|i| seeds::T3_INTERRUPT[i][1]),
            bps(rate(rows, Discipline::Interrupt, n)),
            pct(load(rows, Discipline::HalfFifo, n)),
            pct(load(rows, Discipline::Interrupt, n)),
        ]);
    }
    md.push_str(&t.render());
    let mut series: Vec<Series> = Discipline::ALL
        .iter()
        .map(|&d| Series {
            label: format!("today {}", d.name()),
            points: sizes
                .iter()
                .map(|&n| (n as f64, rate(rows, d, n)))
                .collect(),
        })
        .collect();
    let seed_series = |label: &str, f: &dyn Fn(usize) -> u32| Series {
        label: label.into(),
        points: (0..10)
            .map(|i| (seeds::SIZES_000[i] as f64, f64::from(f(i))))
            .collect(),
    };
    series.push(seed_series("seed SUN3 unbuffered", &|i| {
        seeds::T1_UNBUFFERED[i][2]
    }));
    series.push(seed_series("seed SUN3 half FIFO", &|i| {
        seeds::T2_BUFFERED[i][1]
    }));
    series.push(seed_series("seed SUN3 interrupt", &|i| {
        seeds::T3_INTERRUPT[i][0]
    }));
    plot::plot_xy(
        &dir.join("000-transfers.svg"),
        &Spec {
            title: "[SUN-T] Tables 1-3: throughput vs packet size".into(),
            x_label: "packet size (bytes)".into(),
            y_label: "bytes/s".into(),
            log_y: true,
        },
        &series,
    )?;
    md.push_str("\n![transfers](000-transfers.svg)\n\n");

    md.push_str(
        "## [SUN-T], Tables 4-5: copies into shared memory\n\n\
         The shared region is a 256 KiB buffer of an `offhost-shm` segment (a memfd mapped \
         shared). Table 4: 32-bit words one at a time over the whole region. Seed columns: \
         SUN4 to/from shared VME RAM, SUN4 to/from dual-ported RAM, transputer to/from shared \
         VME RAM.\n\n",
    );
    let mut t4 = Table::new(&[
        "code style",
        "seed SUN4-VME",
        "seed SUN4-DPRAM",
        "seed T800-VME",
        "today",
    ]);
    for (i, (st, v)) in c.styles.iter().enumerate() {
        let row = seeds::T4_WORDS[i];
        t4.row(vec![
            format!("`{}`", st.code()),
            bps(f64::from(row[0])),
            bps(f64::from(row[1])),
            bps(f64::from(row[2])),
            bps(v.mid),
        ]);
    }
    md.push_str(&t4.render());
    md.push_str(
        "\nTable 5: one block copy (`copy_from_slice`, i.e. memcpy; the paper's `bcopy`) per \
         size, beside word-by-word loops of the same size. Seed: transputer bcopy, \
         dual-ported RAM to/from shared VME RAM.\n\n",
    );
    let mut t5 = Table::new(&[
        "size",
        "seed to shared",
        "seed from shared",
        "today block to",
        "today block from",
        "today words to",
        "today words from",
    ]);
    for (i, &(n, bt, bf, wt, wf)) in c.sizes.iter().enumerate() {
        t5.row(vec![
            format_size(n),
            bps(f64::from(seeds::T5_BCOPY[i][0])),
            bps(f64::from(seeds::T5_BCOPY[i][1])),
            bps(bt.mid),
            bps(bf.mid),
            bps(wt.mid),
            bps(wf.mid),
        ]);
    }
    md.push_str(&t5.render());
    let col = |label: &str, f: &dyn Fn(&CopyRates) -> f64| Series {
        label: label.into(),
        points: c.sizes.iter().map(|e| (e.0 as f64, f(e))).collect(),
    };
    let copy_series = vec![
        col("today block to shared", &|e| e.1.mid),
        col("today block from shared", &|e| e.2.mid),
        col("today words to shared", &|e| e.3.mid),
        col("today words from shared", &|e| e.4.mid),
        Series {
            label: "seed bcopy to shared".into(),
            points: (0..9)
                .map(|i| (seeds::SIZES_T5[i] as f64, f64::from(seeds::T5_BCOPY[i][0])))
                .collect(),
        },
    ];
    plot::plot_xy(
        &dir.join("000-copies.svg"),
        &Spec {
            title: "[SUN-T] Tables 4-5: copies into shared memory".into(),
            x_label: "block size (bytes)".into(),
            y_label: "bytes/s".into(),
            log_y: true,
        },
        &copy_series,
    )?;
    md.push_str("\n![copies](000-copies.svg)\n\n");
    Ok((md, findings_000(rows, c, &sizes)))
}

fn findings_000(rows: &[Row], c: &Copies, sizes: &[usize]) -> Vec<Finding> {
    let big = *sizes.last().unwrap_or(&65536);
    let mut f = Vec::new();
    let buf_vs_unbuf =
        rates(rows, Discipline::HalfFifo, big).over(rates(rows, Discipline::Unbuffered, big));
    f.push(Finding {
        source: "[SUN-T] §2.5, Tables 1-2",
        claim: "one readiness check per FIFO instead of per byte roughly doubles throughput".into(),
        seed: format!("{}x (SUN3, 64 KiB)", ratio(779536.0 / 435070.0)),
        here: format!("{} at {}", buf_vs_unbuf.text("x"), format_size(big)),
        holds: buf_vs_unbuf.at_least(1.5),
    });
    let half_vs_full =
        rates(rows, Discipline::HalfFifo, big).over(rates(rows, Discipline::FullFifo, big));
    f.push(Finding {
        source: "[SUN-T] §2.5, Table 2",
        claim: "passing half a FIFO at a time beats a full FIFO for large packets".into(),
        seed: format!("{}x (SUN3, 256 KiB)", ratio(782475.0 / 773817.0)),
        here: format!("{} at {}", half_vs_full.text("x"), format_size(big)),
        holds: half_vs_full.at_least(1.0),
    });
    let from4k: Vec<Measured> = sizes
        .iter()
        .filter(|&&n| n >= 4096)
        .map(|&n| rates(rows, Discipline::Interrupt, n).over(rates(rows, Discipline::HalfFifo, n)))
        .collect();
    let min4k = from4k
        .iter()
        .copied()
        .fold(Measured::point(f64::INFINITY), |a, b| Measured {
            mid: a.mid.min(b.mid),
            lo: a.lo.min(b.lo),
            hi: a.hi.min(b.hi),
        });
    let last4k = from4k.last().copied().unwrap_or(Measured::point(f64::NAN));
    f.push(Finding {
        source: "[SUN-T] §3.4, Tables 2-3",
        claim: "from 4 KiB packets the interrupt-driven transfer comes within 97 % of polling"
            .into(),
        seed: format!(
            "{} at 4 KiB (SUN4); {} (SUN3)",
            ratio(775244.0 / 779587.0),
            ratio(609601.0 / 708465.0)
        ),
        here: format!(
            "min {} over >= 4 KiB, {} at {}",
            min4k.text(""),
            last4k.text(""),
            format_size(big)
        ),
        holds: match (min4k.at_least(0.97), last4k.at_least(0.9)) {
            ("yes", _) => "yes",
            ("no", "yes") => "partly",
            ("no", "no") => "no",
            _ => INCONCLUSIVE,
        },
    });
    let small = sizes[0];
    let intr_small =
        rates(rows, Discipline::Interrupt, small).over(rates(rows, Discipline::HalfFifo, small));
    f.push(Finding {
        source: "[SUN-T] §3.4, Table 3",
        claim: "for small packets the interrupt-driven transfer is far slower (a sleep and wake-up per transfer)".into(),
        seed: format!("{} of polling at 4 B (SUN3)", ratio(2806.0 / 133333.0)),
        here: format!("{} of polling at {} B", intr_small.text(""), small),
        holds: intr_small.below(0.5),
    });
    let (lp, li) = (
        load(rows, Discipline::HalfFifo, big),
        load(rows, Discipline::Interrupt, big),
    );
    f.push(Finding {
        source: "[SUN-T] §5 (4)",
        claim: "the interrupt-driven transfer uses less host CPU than polling".into(),
        seed: "stated, not measured".into(),
        here: format!(
            "host-core load {} % (intr) vs {} % (poll) at {}",
            pct(li),
            pct(lp),
            format_size(big)
        ),
        // Each load is one measurement: decided on a margin of [`MARGIN`] and one percentage
        // point, as `verdict::clearly_higher` does.
        holds: match (li, lp) {
            (Some(i), Some(p)) => {
                super::verdict::majority(super::verdict::clearly_higher(&[(i, p)], 0.01), 1)
            }
            _ => "not measured",
        },
    });
    let style = |st: Style| {
        c.styles
            .iter()
            .find(|s| s.0 == st)
            .map_or(Measured::point(f64::NAN), |s| s.1)
    };
    let words_to = style(Style::CopyToShared);
    let best_link = [Discipline::HalfFifo, Discipline::FullFifo]
        .map(|d| rates(rows, d, big))
        .into_iter()
        .max_by(|a, b| a.mid.total_cmp(&b.mid))
        .unwrap_or(Measured::point(f64::NAN));
    let words_vs_link = words_to.over(best_link);
    f.push(Finding {
        source: "[SUN-T] §4.3, Table 4",
        claim: "32-bit word transfers through shared memory are about 4x the byte-wide link".into(),
        seed: format!(
            "{}x (SUN4 words vs buffered link)",
            ratio(3231000.0 / 888593.0)
        ),
        here: format!(
            "{} (words to shared vs best FIFO transfer)",
            words_vs_link.text("x")
        ),
        holds: words_vs_link.at_least(3.0),
    });
    let wr = style(Style::WriteConst).over(style(Style::ReadShared));
    f.push(Finding {
        source: "[SUN-T] §4.3, Table 4",
        claim: "writing shared memory is faster than reading it".into(),
        seed: format!("{}x (SUN4, VME RAM)", ratio(4474000.0 / 3907000.0)),
        here: wr.text("x"),
        holds: wr.at_least(1.0),
    });
    let (first, last) = (c.sizes.first(), c.sizes.last());
    if let (Some(a), Some(b)) = (first, last) {
        let tiny = a.1.over(a.3);
        f.push(Finding {
            source: "[SUN-T] §4.3, Table 5",
            claim: "a block copy call is slower than a word store for the smallest blocks".into(),
            seed: format!(
                "{}x (4 B bcopy vs word loop, transputer)",
                ratio(446000.0 / 520800.0)
            ),
            here: format!("{} at 4 B", tiny.text("x")),
            holds: tiny.below(1.0),
        });
        let large = b.1.over(b.3);
        f.push(Finding {
            source: "[SUN-T] §4.3, Table 5",
            claim: "for large blocks the block copy beats word-by-word copying".into(),
            seed: format!(
                "{}x (256 KiB bcopy vs SUN4 words)",
                ratio(3548000.0 / 3231000.0)
            ),
            here: format!("{} at {}", large.text("x"), format_size(b.0)),
            holds: large.at_least(1.0),
        });
    }
    f
}

/// Renders findings (re-exported for the report).
pub fn render(f: &[Finding]) -> String {
    findings(f)
}
