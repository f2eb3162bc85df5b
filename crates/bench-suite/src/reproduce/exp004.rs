//! `[Off-host]`: host time per SEND_MESSAGE (its Table 1) and host interrupts per 64 KiB message
//! (its §4), in-host against off-host, with `bench offload`'s measurements.

use std::fmt::Write as _;
use std::path::PathBuf;

use indicatif::ProgressBar;
use offhost_bench::report::Row;

use super::md::{ratio, Finding, Table};
use super::seeds;
use super::verdict::{all_of, Measured};
use crate::error::Result;
use crate::offload;

/// Sizes measured: the paper's one byte and 64 KiB.
pub const SIZES: [usize; 2] = [1, 65536];

/// Runs `bench offload`'s table at the paper's sizes.
pub fn measure(exe: PathBuf, quick: bool, bar: &ProgressBar) -> Result<(Vec<Row>, Option<String>)> {
    let o = offload::Options {
        exe,
        sizes: SIZES.to_vec(),
        modes: vec![offload::Mode::InHost, offload::Mode::OffHost],
        network: None,
        netem: None,
        plain_tcp: false,
        engine_args: Vec::new(),
        rounds: if quick { 1 } else { 3 },
        round_trips: if quick { 100 } else { 1000 },
        stream_seconds: if quick { 0.2 } else { 2.0 },
        experiment: offload::Experiment::Table,
    };
    let progress = ProgressBar::hidden();
    let r = offload::table(&o, &progress);
    bar.inc(4);
    r
}

fn find<'a>(rows: &'a [Row], mode: &str, size: usize) -> Option<&'a Row> {
    rows.iter().find(|r| r.mode == mode && r.size == size)
}

fn us(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.1}"))
}

/// The report section and the findings checked.
pub fn section(rows: &[Row], note: Option<&str>) -> (String, Vec<Finding>) {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## [Off-host], Table 1 and §4: the host's cost of a message, in-host and off-host\n\n\
         The seed profiled a host (SPARC, SunOS) sending through an XTP protocol processor on \
         its VME bus (off-host) and counted host interrupts against a kernel XTP (in-host). \
         Here: a host sends to a host on another engine over TLS (two network namespaces \
         joined by a veth pair where they can be made{}), either running the TLS link itself \
         (in-host) or handing submission records to its local engine over shared memory \
         (off-host). Host CPU = the sending process's user + system time over a stream of \
         messages, all its threads; wake-ups = its voluntary context switches; one way = half \
         a host-to-host round trip. The seed's table is time on one host per operation, \
         including the wait for completion (which takes no host CPU); ours is CPU per message \
         in a stream, where waits overlap.\n",
        note.map_or(String::new(), |n| format!("; this run: {n}"))
    );
    let mut t = Table::new(&[
        "[Off-host] Table 1 (a) 1 byte",
        "us/call",
        "calls",
        "total us",
    ]);
    for (op, per, calls, total) in seeds::T1A_004 {
        let per = if per == 0 {
            "-".into()
        } else {
            per.to_string()
        };
        let calls = if calls == 0 {
            "-".into()
        } else {
            calls.to_string()
        };
        t.row(vec![op.into(), per, calls, total.to_string()]);
    }
    t.row(vec![
        "**total**".into(),
        String::new(),
        String::new(),
        seeds::T1A_004_TOTAL.to_string(),
    ]);
    let _ = writeln!(md, "{}", t.render());
    let mut t = Table::new(&[
        "[Off-host] Table 1 (b) 64 KiB, rows that differ",
        "us/call",
        "calls",
        "total us",
    ]);
    for (op, per, calls, total) in seeds::T1B_004 {
        t.row(vec![
            op.into(),
            per.to_string(),
            calls.to_string(),
            total.to_string(),
        ]);
    }
    let (other, total) = seeds::T1B_004_OTHER_TOTAL;
    t.row(vec![
        "other".into(),
        "-".into(),
        "-".into(),
        other.to_string(),
    ]);
    t.row(vec![
        "**total**".into(),
        String::new(),
        String::new(),
        total.to_string(),
    ]);
    let _ = writeln!(md, "{}", t.render());
    let seed_host_1 = seeds::T1A_004_TOTAL - seeds::T1A_004[0].3;
    let seed_host_64k = seeds::T1B_004_OTHER_TOTAL.1 - seeds::T1B_004[0].3;
    let mut t = Table::new(&[
        "message",
        "seed: host time besides the wait, us",
        "seed: total with the wait, us",
        "in-host CPU us/msg",
        "off-host CPU us/msg",
        "in-host wake-ups/msg",
        "off-host wake-ups/msg",
        "in-host one way us",
        "off-host one way us",
    ]);
    for (size, seed_host, seed_total) in [
        (1usize, seed_host_1, seeds::T1A_004_TOTAL),
        (65536, seed_host_64k, seeds::T1B_004_OTHER_TOTAL.1),
    ] {
        let i = find(rows, "in-host", size);
        let o = find(rows, "off-host", size);
        t.row(vec![
            if size == 1 {
                "1 B".into()
            } else {
                "64 KiB".into()
            },
            seed_host.to_string(),
            seed_total.to_string(),
            us(i.and_then(|r| r.host_cpu_us_per_msg)),
            us(o.and_then(|r| r.host_cpu_us_per_msg)),
            i.and_then(|r| r.host_wakeups_per_msg)
                .map_or("-".into(), |w| format!("{w:.3}")),
            o.and_then(|r| r.host_wakeups_per_msg)
                .map_or("-".into(), |w| format!("{w:.3}")),
            us(i.and_then(|r| r.latency_us_median)),
            us(o.and_then(|r| r.latency_us_median)),
        ]);
    }
    let _ = writeln!(md, "{}", t.render());
    let mut f = Vec::new();
    let (seed_in, seed_off) = seeds::INTERRUPTS_004;
    let w = |mode| find(rows, mode, 65536).and_then(|r| r.host_wakeups_per_msg);
    if let (Some(wi), Some(wo)) = (w("in-host"), w("off-host")) {
        // "A fraction" is at most half: in-host, the link already coalesces its wake-ups, and
        // their count per message moved 0.28-0.86 between two quiet runs (a single figure
        // each), so the seed's 26:1 cannot be the bar; off-host stayed at 0.08.
        f.push(Finding {
            source: "[Off-host] §4",
            claim: "off-host cuts the host's interrupts (here: wake-ups) per 64 KiB message to at most one, a fraction (at most half) of in-host's".into(),
            seed: format!("{seed_in} in-host, {seed_off} off-host ({}% fewer)", 100 - 100 * seed_off / seed_in),
            here: format!("{wi:.2} in-host, {wo:.2} off-host ({}x)", ratio(wo / wi)),
            holds: all_of(&[
                Measured::point(wo).below(1.0),
                Measured::point(wo / wi).below(0.5),
            ]),
        });
    }
    let c = |mode, size| find(rows, mode, size).and_then(|r| r.host_cpu_us_per_msg);
    if let (Some(ci), Some(co)) = (c("in-host", 65536), c("off-host", 65536)) {
        f.push(Finding {
            source: "[Off-host] §1, §4",
            claim: "running the protocol off the host reduces the host's load per message (64 KiB)"
                .into(),
            seed: "qualitative (reduced host load; their data copy over VME cost 18 ms)".into(),
            here: format!(
                "{ci:.1} us in-host, {co:.1} us off-host ({}x)",
                ratio(co / ci)
            ),
            holds: Measured::point(co / ci).below(1.0),
        });
    }
    if let (Some(c1), Some(c64)) = (c("off-host", 1), c("off-host", 65536)) {
        f.push(Finding {
            source: "[Off-host] Table 1, §4",
            claim: "off-host, a long message's host cost is mostly moving its bytes to the processor (copyin), not commanding it".into(),
            seed: format!("copyin {} of {} us host time at 64 KiB", seeds::T1B_004[1].3, seed_host_64k),
            here: format!("{c1:.2} us at 1 B, {c64:.2} us at 64 KiB off-host (the difference is the copy into the ring or a pool buffer)"),
            holds: Measured::point(c64 / c1).at_least(2.0),
        });
    }
    (md, f)
}
