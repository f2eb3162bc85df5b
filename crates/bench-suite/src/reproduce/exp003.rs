//! `[ION]` rerun: the engine's characteristic times beside ION's (Table 1, from
//! `bench engine --rpc`); transfer rate and command overhead against request size from the
//! NBD server's own trace (Figures 6 and 7); and a memory pseudo-disk against this machine's
//! disk and against a modelled 1990 drive (Table 2).
//!
//! The NBD parts serve two exports from an `offhost-nbd` server on a thread of this process
//! (a Unix socket in a temporary folder, traced) and drive them with fio's `nbd` engine
//! (libnbd, a real client) one request at a time; without fio they are skipped and the
//! report says so. The "real disk" is a file on the disk holding the report folder, read
//! and written with `direct=1` (the page cache would make it a memory disk too).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use indicatif::ProgressBar;
use offhost_nbd::report::{self as trace_report, Report as TraceReport};
use offhost_nbd::{Export, ListenAddr, Server, Tracer};

use super::md::{ratio, Finding, Table};
use super::seeds;
use super::verdict::{all_of, Measured};
use crate::error::{Context as _, Error, Result};
use crate::nbd::FioJob;
use crate::rpc;

/// Request sizes of the sweep, in 512-byte sectors (the paper's abscissa).
pub const SECTORS: [u32; 8] = [1, 2, 4, 8, 16, 32, 64, 128];

/// The modelled drive: a 3600 rpm disk of about 1990 (16 ms average seek, 1.5 MB/s media
/// rate, 35 sectors a track, 9 heads) with a read-ahead cache.
pub const DRIVE_1990: &str = "rpm=3600,seek=16ms,rate=1500K,spt=35,tpc=9,cache=read-ahead";

/// Points this experiment adds to the progress bar.
pub const POINTS: usize = 3;

/// One row of the Table 2 rerun.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DiskRow {
    /// "random" or "copy".
    pub operation: &'static str,
    /// "real disk", "pseudo-disk" or "modelled 1990 drive".
    pub disk: &'static str,
    /// Requests (random) or bytes copied (copy).
    pub amount: u64,
    /// Seconds the client spent in its requests.
    pub seconds: f64,
}

/// What was measured (written to `seed003.json`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Data {
    /// Table 1.
    pub rpc: rpc::Report,
    /// Figures 6 and 7 (`None`: no fio).
    pub trace: Option<TraceReport>,
    /// Table 2 (empty without fio).
    pub disks: Vec<DiskRow>,
    /// Why the NBD parts did not run, if they did not.
    pub skipped: Option<String>,
}

/// Runs the three parts; `exe` serves the remote call of Table 1.
pub fn measure(exe: Option<PathBuf>, quick: bool, out: &Path, bar: &ProgressBar) -> Result<Data> {
    let o = rpc::Options {
        turns: if quick { 20_000 } else { 200_000 },
        calls: if quick { 300 } else { 3000 },
        exe,
    };
    let r = rpc::run(&o, &ProgressBar::hidden())?;
    bar.inc(1);
    let fio_ok = Command::new("fio")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !fio_ok {
        bar.inc(2);
        return Ok(Data {
            rpc: r,
            trace: None,
            disks: Vec::new(),
            skipped: Some("fio was not found: Figures 6-7 and Table 2 were not run".into()),
        });
    }
    let dir = tempfile::tempdir()?;
    let served = Served::start(dir.path())?;
    let trace = sweep(&served, if quick { 100 } else { 1000 })?;
    bar.inc(1);
    let disks = pseudo_disk(&served, quick, out)?;
    bar.inc(1);
    Ok(Data {
        rpc: r,
        trace: Some(trace),
        disks,
        skipped: None,
    })
}

/// The traced server on its thread.
struct Served {
    server: Arc<Server>,
    socket: PathBuf,
    trace: PathBuf,
}

impl Served {
    fn start(dir: &Path) -> Result<Served> {
        let socket = dir.join("nbd.sock");
        let trace = dir.join("trace.txt");
        let exports = vec![
            Export::from_spec("pseudo=mem:64M").map_err(|e| Error::Invalid(e.to_string()))?,
            Export::from_spec(&format!("drive=mem:64M,{DRIVE_1990}"))
                .map_err(|e| Error::Invalid(e.to_string()))?,
        ];
        let tracer = Tracer::create(&trace).context("creating the NBD trace")?;
        let server = Server::bind(&ListenAddr::Unix(socket.clone()), exports, Some(tracer))
            .map_err(|e| Error::Peer(format!("NBD server: {e}")))?;
        let server = Arc::new(server);
        let s = Arc::clone(&server);
        // The thread ends with the process: a reproduction is one command.
        std::thread::Builder::new()
            .name("offhost-nbd-serve".into())
            .spawn(move || s.serve())?;
        Ok(Served {
            server,
            socket,
            trace,
        })
    }

    fn uri(&self, export: &str) -> String {
        format!("nbd+unix:///{export}?socket={}", self.socket.display())
    }
}

/// Runs fio with `global` then `jobs` (each a list of job options after its `--name`), one
/// after another; returns each job's JSON object.
fn fio(global: &[String], jobs: &[Vec<String>]) -> Result<Vec<FioJob>> {
    let mut cmd = Command::new("fio");
    cmd.arg("--output-format=json").args(global);
    for j in jobs {
        cmd.args(j).arg("--stonewall");
    }
    let out = cmd.output().context("running fio")?;
    if !out.status.success() {
        return Err(Error::Peer(format!(
            "fio failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(crate::nbd::fio_json(&out.stdout)?.jobs)
}

fn job(name: &str, opts: &[&str]) -> Vec<String> {
    std::iter::once(format!("--name={name}"))
        .chain(opts.iter().map(|o| o.to_string()))
        .collect()
}

/// Figures 6-7: reads and writes of 1 to 128 sectors, one at a time, `count` of each size;
/// the server's trace gives the transfer rate and the command overhead.
fn sweep(s: &Served, count: u32) -> Result<TraceReport> {
    let global = vec![
        "--ioengine=nbd".to_string(),
        format!("--uri={}", s.uri("pseudo")),
        "--iodepth=1".into(),
        format!("--number_ios={count}"),
        "--size=16M".into(),
    ];
    let mut jobs = Vec::new();
    for rw in ["read", "write"] {
        for n in SECTORS {
            jobs.push(job(
                &format!("{rw}-{n}"),
                &[&format!("--rw={rw}"), &format!("--bs={}", n * 512)],
            ));
        }
    }
    fio(&global, &jobs)?;
    s.server.flush_trace();
    let recs = trace_report::load(&s.trace).map_err(|e| Error::Check(e.to_string()))?;
    let recs: Vec<_> = recs.into_iter().filter(|r| r.export == "pseudo").collect();
    Ok(trace_report::analyse(&recs))
}

/// Seconds a job spent in its requests: mean latency times count, for reads, writes and the
/// final flush (fio's run time is whole milliseconds).
fn runtime_s(job: &FioJob) -> f64 {
    [&job.read, &job.write, &job.sync]
        .iter()
        .map(|d| d.lat_ns.mean * d.total_ios)
        .sum::<f64>()
        / 1e9
}

/// Table 2: random single-sector reads over 32768 sectors and a 2 MB copy, on each disk.
fn pseudo_disk(s: &Served, quick: bool, out: &Path) -> Result<Vec<DiskRow>> {
    let disk_dir = tempfile::tempdir_in(out).context("a folder for the real-disk file")?;
    let file = disk_dir.path().join("disk.img");
    let real = vec![
        "--ioengine=psync".to_string(),
        "--direct=1".into(),
        format!("--filename={}", file.display()),
        "--size=16M".into(),
    ];
    let nbd = |export: &str| {
        vec![
            "--ioengine=nbd".to_string(),
            format!("--uri={}", s.uri(export)),
            "--size=16M".into(),
        ]
    };
    let mut rows = Vec::new();
    // The real disk's file and the memory export are written whole first: fio lays a file
    // out with fallocate, and reading unwritten extents (or a sparse memory disk's holes)
    // touches no medium. The modelled drive is not (16 MB at its rate takes 11 s); its
    // mechanism is timed whatever the data.
    for (disk, global, reads, fill) in [
        ("real disk", real, 4000u64, true),
        ("pseudo-disk", nbd("pseudo"), 4000, true),
        (
            "modelled 1990 drive",
            nbd("drive"),
            if quick { 40 } else { 400 },
            false,
        ),
    ] {
        let mut jobs = Vec::new();
        if fill {
            jobs.push(job(
                "fill",
                &["--rw=write", "--bs=1M", "--io_size=16M", "--end_fsync=1"],
            ));
        }
        jobs.push(job(
            "random",
            &[
                "--rw=randread",
                "--bs=512",
                "--iodepth=1",
                "--randrepeat=1",
                &format!("--number_ios={reads}"),
            ],
        ));
        jobs.push(job(
            "copy-read",
            &["--rw=read", "--bs=64k", "--io_size=2M", "--offset=0"],
        ));
        jobs.push(job(
            "copy-write",
            &[
                "--rw=write",
                "--bs=64k",
                "--io_size=2M",
                "--offset=8M",
                "--end_fsync=1",
            ],
        ));
        let done = fio(&global, &jobs)?;
        let named = |n: &str| {
            done.iter()
                .find(|j| j.jobname == n)
                .map(runtime_s)
                .ok_or_else(|| Error::Peer(format!("fio ran no {n} job on the {disk}")))
        };
        rows.push(DiskRow {
            operation: "random",
            disk,
            amount: reads,
            seconds: named("random")?,
        });
        rows.push(DiskRow {
            operation: "copy",
            disk,
            amount: 2 << 20,
            seconds: named("copy-read")? + named("copy-write")?,
        });
    }
    Ok(rows)
}

fn find<'a>(rows: &'a [DiskRow], op: &str, disk: &str) -> Option<&'a DiskRow> {
    rows.iter().find(|r| r.operation == op && r.disk == disk)
}

/// Seconds for the paper's amount (4000 reads; the copy as measured).
fn scaled(r: &DiskRow) -> f64 {
    if r.operation == "random" {
        r.seconds * 4000.0 / r.amount.max(1) as f64
    } else {
        r.seconds
    }
}

/// The report section and the findings checked.
pub fn section(d: &Data, out: &Path) -> Result<(String, Vec<Finding>)> {
    let mut md = String::new();
    let mut f = Vec::new();
    let r = &d.rpc;
    let _ = writeln!(
        md,
        "## [ION], Table 1: the tasking system's characteristic times\n\n\
         ION's tasks on a 68030 against the engine's on this machine (`offhost bench engine \
         --rpc`; how each is measured is in its documentation). The same-processor call is a `call` \
         task's to a service of its own pipeline; the remote call is a `call` task's to a \
         pipeline in another engine process over TLS on loopback.\n"
    );
    let ours: [Option<String>; 8] = [
        Some(format!("{:.3}", r.null_subroutine_ns / 1e3)),
        None,
        None,
        Some(format!("{:.3}", r.task_switch_ns / 1e3)),
        Some(format!("{:.3}", r.event_sync_ns / 1e3)),
        Some(format!("{:.3}", r.system_call_ns / 1e3)),
        Some(format!("{:.1}", r.own_call_us)),
        r.task_call_us.map(|v| format!("{v:.1}")),
    ];
    let mut t = Table::new(&["characteristic", "[ION] us", "this machine us"]);
    for ((name, seed), here) in seeds::T1_003.iter().zip(ours) {
        t.row(vec![
            name.to_string(),
            seed.to_string(),
            here.unwrap_or_else(|| "- (no interrupts: doorbells, see [SUN-T])".into()),
        ]);
    }
    t.row(vec![
        "a buffer's round trip between two tasks of one engine".into(),
        "-".into(),
        format!("{:.3}", r.local_call_ns / 1e3),
    ]);
    t.row(vec![
        "null call, host into its own engine".into(),
        "-".into(),
        format!("{:.1}", r.host_call_us),
    ]);
    if let Some(remote) = r.remote_call_us {
        t.row(vec![
            "null call, a link client to another engine".into(),
            "-".into(),
            format!("{remote:.1}"),
        ]);
    }
    let _ = writeln!(md, "{}", t.render());
    let switch_over_sys = r.task_switch_ns / r.system_call_ns.max(1e-3);
    f.push(Finding {
        source: "[ION] §4, Table 1",
        claim: "a task switch costs a few simple system calls (3:1), so asking a task for a service costs about what asking the kernel does".into(),
        seed: "25 us switch, 8 us system call (3.1:1); 25:1 against a null subroutine".into(),
        here: format!(
            "{:.0} ns switch, {:.0} ns system call ({}:1); {:.0}:1 against a null subroutine",
            r.task_switch_ns,
            r.system_call_ns,
            ratio(switch_over_sys),
            r.switch_over_subroutine
        ),
        holds: Measured::point(switch_over_sys).below(3.5),
    });
    if let Some(remote) = r.task_call_us {
        // The seed's same-processor call is a client/server call through its tasking
        // system: here a call task to a service of its own pipeline.
        let over = remote / r.own_call_us.max(1e-3);
        f.push(Finding {
            source: "[ION] §4, Table 1",
            claim: "a remote null call costs only about 30% more than a local one, so a service need not sit near its clients".into(),
            seed: "140 us remote, 105 us same processor (1.33x)".into(),
            here: format!(
                "{remote:.1} us from a task to another engine over TLS, {:.1} us from a task to its own pipeline's service ({}x); {:.2} us for a buffer's round trip between two tasks; {:.1} us from the host into its own engine",
                r.own_call_us,
                ratio(over),
                r.local_call_ns / 1e3,
                r.host_call_us
            ),
            holds: Measured::point(over).below(1.5),
        });
    }
    match (&d.trace, &d.skipped) {
        (Some(tr), _) => {
            let (sec, more) = figures_6_7(tr, out)?;
            md.push_str(&sec);
            f.extend(more);
            let (sec, more) = table_2(&d.disks);
            md.push_str(&sec);
            f.extend(more);
        }
        (None, why) => {
            let _ = writeln!(
                md,
                "## [ION], Figures 6-7 and Table 2\n\nNot run: {}.\n",
                why.as_deref().unwrap_or("no NBD client")
            );
        }
    }
    Ok((md, f))
}

fn row<'a>(tr: &'a TraceReport, cmd: &str, sectors: u32) -> Option<&'a trace_report::Row> {
    tr.rows
        .iter()
        .find(|r| r.command == cmd && r.bytes == sectors * 512)
}

fn figures_6_7(tr: &TraceReport, out: &Path) -> Result<(String, Vec<Finding>)> {
    let plot = out.join("seed003_fig6_7.svg");
    trace_report::plot(tr, &plot).map_err(|e| Error::Check(e.to_string()))?;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## [ION], Figures 6 and 7: transfer rate and command overhead against request size\n\n\
         The seed timed SCSI phases inside ION for three workstations; here the NBD server \
         times each request of fio (libnbd, one request at a time, over a Unix socket) in its \
         own trace: the transfer rate is the payload's bytes over the time moving them, the \
         command overhead is the command's time less that. The seed's figures are plots \
         without tables, so only their shapes are compared. Plot: `{}`.\n",
        plot.file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned())
    );
    let mut t = Table::new(&[
        "sectors",
        "read MB/s",
        "read overhead us",
        "write MB/s",
        "write overhead us",
    ]);
    let cell = |r: Option<&trace_report::Row>, rate: bool| {
        r.map_or("-".into(), |r| {
            if rate {
                format!("{:.0}", r.transfer_mb_per_s)
            } else {
                format!("{:.1}", r.overhead_us)
            }
        })
    };
    for n in SECTORS {
        let (rd, wr) = (row(tr, "read", n), row(tr, "write", n));
        t.row(vec![
            n.to_string(),
            cell(rd, true),
            cell(rd, false),
            cell(wr, true),
            cell(wr, false),
        ]);
    }
    let _ = writeln!(md, "{}", t.render());
    let mut f = Vec::new();
    let (lo, hi) = (SECTORS[0], SECTORS[SECTORS.len() - 1]);
    for cmd in ["read", "write"] {
        if let (Some(a), Some(b)) = (row(tr, cmd, lo), row(tr, cmd, hi)) {
            f.push(Finding {
                source: "[ION] §6.1, Figure 6",
                claim: format!("the {cmd} transfer rate rises with the request size"),
                seed: "a slow rise to each system's maximum".into(),
                here: format!(
                    "{:.0} MB/s at {lo} sector, {:.0} MB/s at {hi}",
                    a.transfer_mb_per_s, b.transfer_mb_per_s
                ),
                holds: Measured::point(b.transfer_mb_per_s / a.transfer_mb_per_s).at_least(1.0),
            });
            let grow = b.overhead_us / a.overhead_us.max(1e-3);
            f.push(Finding {
                source: "[ION] §6.2, Figure 7",
                claim: format!("a {cmd}'s command overhead is almost constant across request sizes (ION and two of the three workstations)"),
                seed: "flat, except System B's FIFO between 2 and 16 sectors".into(),
                here: format!(
                    "{:.1} us at {lo} sector, {:.1} us at {hi} ({}x)",
                    a.overhead_us,
                    b.overhead_us,
                    ratio(grow)
                ),
                holds: all_of(&[
                    Measured::point(grow).at_least(0.5),
                    Measured::point(grow).below(2.0),
                ]),
            });
        }
    }
    Ok((md, f))
}

fn table_2(rows: &[DiskRow]) -> (String, Vec<Finding>) {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## [ION], Table 2: a zero-latency pseudo-disk against a real disk\n\n\
         The seed built ION, copied a 2 MB file and made 4000 single-sector reads spread \
         over 32768 sectors on a workstation's disk and on ION's memory pseudo-disk. Here \
         fio does the copy (2 MB read, 2 MB written elsewhere, then flushed) and the reads, \
         one request at a time, on a file of this machine's disk (`direct=1`), on the NBD \
         memory export and on the same export with a modelled drive of about 1990 (`{DRIVE_1990}`; \
         its random reads are fewer and scaled to 4000). Building a program is not rerun. \
         Times are the client's (each request's latency as fio saw it, summed), seconds.\n"
    );
    let mut t = Table::new(&[
        "operation",
        "disk",
        "seed real s",
        "this machine s",
        "requests or bytes",
        "improvement over the real disk (seed)",
    ]);
    let seed_for = |op: &str, disk: &str| {
        let name = if op == "random" {
            "4000 random 1-sector reads"
        } else {
            "copy a 2 MB file"
        };
        seeds::T2_003
            .iter()
            .find(|r| r.0 == name && r.1 == disk)
            .map(|r| r.2)
    };
    for r in rows {
        let base = find(rows, r.operation, "real disk").map(scaled);
        let seed = seed_for(r.operation, r.disk);
        let seed_imp = match (seed_for(r.operation, "real disk"), seed) {
            (Some(a), Some(b)) if r.disk == "pseudo-disk" => format!(" ({:.1})", a / b),
            _ => String::new(),
        };
        t.row(vec![
            if r.operation == "random" {
                "4000 random 1-sector reads".into()
            } else {
                "copy a 2 MB file".into()
            },
            r.disk.into(),
            seed.map_or("-".into(), |s| format!("{s:.1}")),
            format!("{:.3}", scaled(r)),
            r.amount.to_string(),
            base.map_or("-".into(), |b| {
                format!("{}{seed_imp}", ratio(b / scaled(r).max(1e-6)))
            }),
        ]);
    }
    let _ = writeln!(md, "{}", t.render());
    let mut f = Vec::new();
    let imp = |op| {
        Some(
            scaled(find(rows, op, "real disk")?) / scaled(find(rows, op, "pseudo-disk")?).max(1e-6),
        )
    };
    if let (Some(ir), Some(ic)) = (imp("random"), imp("copy")) {
        f.push(Finding {
            source: "[ION] §7.1, Table 2",
            claim: "a memory pseudo-disk helps scattered reads most, a sequential copy less".into(),
            seed: "8.4x for random reads, 1.6x for the copy".into(),
            here: format!(
                "{}x for random reads, {}x for the copy",
                ratio(ir),
                ratio(ic)
            ),
            holds: all_of(&[
                Measured::point(ir).at_least(1.0),
                Measured::point(ir / ic).at_least(1.0),
            ]),
        });
    }
    (md, f)
}
