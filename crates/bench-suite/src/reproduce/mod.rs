//! `reproduce`: the papers' experiments rerun on this machine, written as a report
//! folder (report.md, SVG plots, results.json) with each published figure beside today's and
//! each of the papers' findings checked.
//!
//! - `fifo.rs`, `copies.rs`: `[SUN-T]`'s transfer disciplines and copies into shared memory;
//! - `seeds.rs`: the papers' published numbers;
//! - `exp000.rs`, `exp002_links.rs` (`[DS-link]`'s Part 1, `bench mux`), `exp002.rs` (its
//!   DSNIC part), `exp003.rs`, `exp004.rs`: each seed's measurements, report section and
//!   findings (004 runs `bench offload`'s engines and hosts, so it needs the
//!   binary; 003's remote call needs it too, and its NBD parts need fio);
//! - `md.rs`: markdown tables and findings.

pub mod copies;
mod exp000;
mod exp002;
mod exp002_links;
mod exp003;
mod exp004;
pub mod fifo;
mod md;
pub mod seeds;
mod verdict;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use offhost_bench::cpu::LoadProbe;
use offhost_bench::run::Plan;
use offhost_bench::transport::{Kind, Transport};
use offhost_bench::{affinity, report};

use crate::error::{require, Context as _, Result};

/// What to rerun, and where the report goes.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Folder for report.md, results.json and the plots (created if missing).
    #[arg(long, default_value = "offhost-report")]
    pub out: PathBuf,
    /// A shorter run (under a minute): fewer sizes, packet sizes and repetitions.
    #[arg(long)]
    pub quick: bool,
    /// FIFO size of the buffered and interrupt-driven transfers, bytes (the paper's was 1024).
    #[arg(long, default_value_t = 1024)]
    pub fifo: usize,
    /// Channel transport for Comms1/Comms2: tcp, unix, mem or shm-chan.
    #[arg(long, default_value = "tcp")]
    pub transport: Transport,
    /// The `offhost` binary, for `[Off-host]`'s engines and hosts (`None`: `[Off-host]` is skipped).
    #[arg(skip)]
    pub exe: Option<PathBuf>,
}

/// What a reproduction wrote.
#[derive(Debug)]
pub struct Report {
    /// The report's markdown file.
    pub path: PathBuf,
    /// How long the run took.
    pub elapsed: Duration,
    /// The sections that could not run here, each with why ("`[ION]` Figures 6-7 and Table
    /// 2: fio was not found ..."): said in the report's summary and to whoever ran it.
    pub not_run: Vec<String>,
}

/// The report summary's line for the sections that could not run, if any.
fn not_run_line(not_run: &[String]) -> String {
    match not_run {
        [] => String::new(),
        l => format!("- not run here: {}\n", l.join("; ")),
    }
}

/// What every experiment needs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Quick run.
    pub quick: bool,
    /// FIFO size.
    pub fifo: usize,
    /// Channel transport.
    pub transport: Transport,
    /// Repetitions.
    pub plan: Plan,
    /// Length of each CPU-load pass.
    pub cpu_time: Duration,
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    format!("{cpu}, {} cores usable, Linux {kernel}", affinity::cores())
}

/// The 1, 5 and 15 minute load averages: how busy the machine was (other users' work too).
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Runs the reproduction and writes its report; `bar` counts the points measured.
pub fn run(args: &Options, bar: &ProgressBar) -> Result<Report> {
    require(args.transport.kind() == Kind::Channel, || {
        format!(
            "--transport {}: expected a channel transport (shm-chan, tcp, unix or mem)",
            args.transport
        )
    })?;
    require(args.fifo >= 2, || {
        format!(
            "--fifo {}: a FIFO needs at least 2 bytes (two halves)",
            args.fifo
        )
    })?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let start = Instant::now();
    let load_before = loadavg();
    let plan = Plan {
        warmup: Duration::from_millis(if args.quick { 2 } else { 10 }),
        warmup_steps: 1,
        reps: if args.quick { 3 } else { 7 },
        rep_time: Duration::from_micros(if args.quick { 300 } else { 2000 }),
        max_steps: 1_000_000,
        cpu_time: None,
        budget: Some(Duration::from_millis(if args.quick { 300 } else { 3000 })),
    };
    let s = Settings {
        quick: args.quick,
        fifo: args.fifo,
        transport: args.transport,
        plan,
        cpu_time: Duration::from_millis(if args.quick { 30 } else { 200 }),
    };
    let (host_core, _) = affinity::host_engine_cores();
    let _ = affinity::pin_current_thread(host_core);
    let probe = LoadProbe::calibrate(Duration::from_millis(if args.quick { 50 } else { 300 }))?;
    let total = 4 * exp000::transfer_sizes(s.quick).len()
        + 9
        + exp002::points(s.quick)
        + exp002_links::POINTS
        + exp003::POINTS
        + 4;
    bar.set_length(total as u64);
    let transfers = exp000::transfers(&s, &probe, bar)?;
    let copies = exp000::copies(&s, bar)?;
    let d002 = exp002::measure(&s, &probe, bar)?;
    let links002 = exp002_links::measure(s.transport, s.quick, bar)?;
    let d003 = exp003::measure(args.exe.clone(), s.quick, &args.out, bar)?;
    let d004 = match &args.exe {
        Some(exe) => Some(exp004::measure(exe.clone(), s.quick, bar)?),
        None => None,
    };

    let (sec000, mut found) = exp000::section(&transfers, &copies, &s, &args.out)?;
    let (sec002, f002) = exp002::section(&d002, &s, &args.out)?;
    found.extend(f002);
    let (sec002_links, f) = exp002_links::section(&links002, &args.out)?;
    found.extend(f);
    let (sec003, f003) = exp003::section(&d003, &args.out)?;
    let json002 = args.out.join("seed002_links.json");
    std::fs::write(&json002, serde_json::to_string_pretty(&links002)?)
        .with_context(|| format!("writing {}", json002.display()))?;
    let json003 = args.out.join("seed003.json");
    std::fs::write(&json003, serde_json::to_string_pretty(&d003)?)
        .with_context(|| format!("writing {}", json003.display()))?;
    found.extend(f003);
    let sec004 = match &d004 {
        Some((rows, note)) => {
            let (sec, f) = exp004::section(rows, note.as_deref());
            found.extend(f);
            sec
        }
        None => "## [Off-host]\n\nNot run (no `offhost` binary given).\n".into(),
    };
    let mut not_run = Vec::new();
    if let Some(why) = &d003.skipped {
        not_run.push(format!("[ION] Figures 6-7 and Table 2: {why}"));
    }
    if d004.is_none() {
        not_run.push("[Off-host]: no `offhost` binary given".to_string());
    }
    let elapsed = start.elapsed();
    let mut report = String::new();
    let _ = writeln!(
        report,
        "# The papers' experiments on this machine\n\n\
         - command: `offhost bench reproduce --out {}{} --fifo {} --transport {}`\n\
         - machine: {}\n\
         - run time: {:.0} s; up to {} repetitions per point after warm-up, fewer where a \
         point ran past its time budget (median shown; sample counts, p99 and outliers in \
         results.json)\n\
         - load average (1/5/15 min) at start: {}; at end: {} (with {} cores: a load above \
         the core count means other work shared the cores, and busy-waiting transfers then \
         wait for whole scheduler time slices)\n\
         - figures are from one run on a machine that may be shared: treat them as noisy. \
         A finding holds (yes, no, partly) only when its figure's range over the repetitions, \
         widened by {:.0} % on each side, lies wholly within one verdict's band; otherwise it \
         is \"{}\" (a figure measured once has the margin alone).\n\
         {}\
         - [SUN-T]: SUN3/SUN4 hosts and a T800 transputer (1990s VME hardware); [DS-link]: \
         Pentium Pro PCs with DSNIC boards; [ION]: ION, 68030 boards on a VME backplane \
         serving workstations over SCSI; [Off-host]: a SPARC DTC-2 with an MVME-167 XTP \
         board on its VME bus. Their figures are quoted from the papers' tables.\n",
        args.out.display(),
        if args.quick { " --quick" } else { "" },
        args.fifo,
        args.transport,
        machine(),
        elapsed.as_secs_f64(),
        s.plan.reps,
        load_before,
        loadavg(),
        affinity::cores(),
        100.0 * verdict::MARGIN,
        verdict::INCONCLUSIVE,
        not_run_line(&not_run)
    );
    let _ = writeln!(
        report,
        "## Findings checked\n\n{}\n{}\n{}\n{}\n{}\n{}",
        exp000::render(&found),
        sec000,
        sec002_links,
        sec002,
        sec003,
        sec004
    );
    let report_path = args.out.join("report.md");
    std::fs::write(&report_path, report)
        .with_context(|| format!("writing {}", report_path.display()))?;
    let mut all = transfers;
    all.extend(d002.figures);
    all.extend(d002.loaded);
    all.extend(d002.load_rows);
    all.extend(d002.min_latency);
    if let Some((rows, _)) = d004 {
        all.extend(rows);
    }
    std::fs::write(args.out.join("results.json"), report::to_json(&all))
        .with_context(|| format!("writing {}", args.out.join("results.json").display()))?;
    Ok(Report {
        path: report_path,
        elapsed,
        not_run,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_each_section_not_run_and_why() {
        assert_eq!(not_run_line(&[]), "");
        let l = not_run_line(&[
            "[ION] Figures 6-7 and Table 2: fio was not found".into(),
            "[Off-host]: no `offhost` binary given".into(),
        ]);
        assert_eq!(
            l,
            "- not run here: [ION] Figures 6-7 and Table 2: fio was not found; [Off-host]: no `offhost` binary given\n"
        );
    }
}
