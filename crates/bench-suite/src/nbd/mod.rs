//! `nbd`: this NBD server (`offhost nbd`) against nbdkit's `memory` plugin, same fio jobs
//! (fio's `nbd` ioengine, i.e. libnbd), same run, both over Unix sockets.
//!
//! With [`Options::tls`], both servers also run with `--tls=require --tls-certificates DIR
//! --tls-verify-peer` on one throw-away certificate directory ([`Pki`]), and fio reaches them
//! with `nbds://` (libnbd presents the directory's client certificate; `nbd/servers.rs` says
//! how fio is given it): every round then measures offhost and nbdkit, plain and over TLS, all
//! four on TCP loopback, in turn; the TLS rows say how they compare with their plain selves
//! ([`Figure::ratio_vs_plain`]) and offhost's with nbdkit's over TLS
//! ([`Figure::ratio_vs_nbdkit`]).

mod servers;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

use indicatif::ProgressBar;
use offhost_bench::affinity;
use offhost_bench::stats::median;
use serde::Serialize;

use crate::error::{require, Context as _, Error, Result};
use crate::tls::Pki;
use servers::{Client, Server};

/// What to measure.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Seconds per fio job.
    #[arg(long, default_value_t = 10)]
    pub runtime: u32,
    /// Export size, and the region fio works over.
    #[arg(long, default_value = "1G")]
    pub size: String,
    /// Rounds (servers alternate within each round); the median round is reported.
    #[arg(long, default_value_t = 1)]
    pub rounds: u32,
    /// nbdkit binary.
    #[arg(long, default_value = "nbdkit")]
    pub nbdkit: String,
    /// fio binary.
    #[arg(long, default_value = "fio")]
    pub fio: String,
    /// Worker threads per connection for this server (`offhost nbd --conn-threads`).
    #[arg(long, default_value_t = 1)]
    pub conn_threads: usize,
    /// Also run both servers with --tls=require --tls-certificates DIR --tls-verify-peer (one
    /// certificate directory made for the run and removed after); all four servers then listen
    /// on TCP loopback (the plain ones with --insecure) and fio reaches the TLS ones with
    /// nbds:// and the directory's client certificate (found by libnbd in $HOME/.pki/libnbd;
    /// fio runs as nobody when the bench runs as root). Reports offhost over TLS against
    /// offhost plain and against nbdkit over TLS, in the same rounds.
    #[arg(long)]
    pub tls: bool,
    /// Leave fio and the servers where the scheduler puts them. By default fio runs on the
    /// first CPU allowed and every server (all its threads) on the second, both servers alike,
    /// so that neither shares a core with the client.
    #[arg(long)]
    pub no_pin: bool,
    /// The `offhost` binary whose `nbd` command is measured.
    #[arg(skip)]
    pub exe: PathBuf,
}

/// One measured figure.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    /// `offhost` or `nbdkit-memory`, with `-tls` when reached over TLS.
    pub server: String,
    /// Whether fio reached the server over TLS (the server ran with `--tls=require`).
    pub tls: bool,
    /// How fio reached it: `unix` (a Unix socket) or, in a run with TLS, `tcp` (loopback).
    pub transport: String,
    /// Workload name.
    pub workload: String,
    /// I/O operations per second (reads + writes).
    pub iops: f64,
    /// Bandwidth, 10^6 bytes per second (reads + writes).
    pub mb_per_s: f64,
    /// This server's IOPS over nbdkit's in the same run, both plain or both over TLS (offhost
    /// rows only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_vs_nbdkit: Option<f64>,
    /// This server's IOPS over TLS over its own IOPS without TLS in the same run (TLS rows
    /// only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_vs_plain: Option<f64>,
    /// IOPS of every round.
    pub rounds_iops: Vec<f64>,
    /// Server CPU time (user + system) per I/O, microseconds (median round): on a shared
    /// machine this compares the servers' efficiency independently of how much CPU each got.
    /// It is read from `/proc/PID/stat` (exited threads included) in clock ticks of 10 ms, so
    /// a workload that costs the server less than a tick shows 0.
    pub server_cpu_us_per_io: f64,
    /// The client's CPU (fio's `usr_cpu` + `sys_cpu`, user and system time of its job) as a
    /// share of one core (median round): near 1 when pinned, fio's core is full and the
    /// client, not the server, bounds the IOPS.
    pub client_core_share: f64,
    /// The server's CPU over the job's run time, as a share of one core (median round).
    pub server_core_share: f64,
    /// The fio job options used.
    pub fio_args: String,
    /// Whether fio ran on one CPU and the server on another (`--no-pin` not given, and the
    /// machine has two CPUs for it).
    pub pinned: bool,
}

struct Workload {
    name: &'static str,
    args: &'static [&'static str],
    /// Prefill jobs run once before the measured ones and are reported too.
    time_based: bool,
}

const WORKLOADS: &[Workload] = &[
    Workload {
        name: "seqwrite-1m-qd4 (prefill)",
        args: &["--rw=write", "--bs=1m", "--iodepth=4"],
        time_based: false,
    },
    Workload {
        name: "randrw-4k-qd16",
        args: &["--rw=randrw", "--bs=4k", "--iodepth=16"],
        time_based: true,
    },
    Workload {
        name: "randread-4k-qd16",
        args: &["--rw=randread", "--bs=4k", "--iodepth=16"],
        time_based: true,
    },
    Workload {
        name: "seqread-1m-qd4",
        args: &["--rw=read", "--bs=1m", "--iodepth=4"],
        time_based: true,
    },
];

/// Run against each server once before the first round and not reported: 4 KiB random
/// reads of the export, which is still unwritten, so neither server allocates anything.
/// Without it the first job of a run (the prefill, against offhost, which goes first) was at
/// times much slower than the same job run alone: 0.44x and 0.52x nbdkit's IOPS in two of
/// five runs, with fio's core at 0.72-0.77 where it is 0.22-0.33 in other prefills, against
/// 0.83-1.02x when run alone in turn with nbdkit.
const WARM_UP: Workload = Workload {
    name: "warm-up",
    args: &[
        "--rw=randread",
        "--bs=4k",
        "--iodepth=16",
        "--time_based",
        "--runtime=2",
    ],
    // Its run time is in its arguments.
    time_based: false,
};

/// What the benches read of fio's JSON report: its jobs.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct FioReport {
    /// The jobs, in the order run.
    #[serde(default)]
    pub jobs: Vec<FioJob>,
}

/// One job of a [`FioReport`] (what is missing reads as zero).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(crate) struct FioJob {
    /// Its `--name`.
    pub jobname: String,
    /// Its reads.
    pub read: FioDir,
    /// Its writes.
    pub write: FioDir,
    /// Its flushes.
    pub sync: FioDir,
    /// User CPU time over its run time, percent.
    pub usr_cpu: f64,
    /// System CPU time over its run time, percent.
    pub sys_cpu: f64,
    /// Its run time, milliseconds.
    pub job_runtime: f64,
}

/// One direction (`read`, `write`, `sync`) of a [`FioJob`].
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(crate) struct FioDir {
    /// Requests done.
    pub total_ios: f64,
    /// Requests per second.
    pub iops: f64,
    /// Bytes per second.
    pub bw_bytes: f64,
    /// Their latency.
    pub lat_ns: FioLatency,
}

/// A [`FioDir`]'s latency, in nanoseconds.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(crate) struct FioLatency {
    /// The mean.
    pub mean: f64,
}

/// fio's JSON report in its standard output (fio may print notes before the document).
pub(crate) fn fio_json(stdout: &[u8]) -> Result<FioReport> {
    let text = String::from_utf8_lossy(stdout);
    let start = text
        .find('{')
        .ok_or_else(|| Error::Peer("fio printed no JSON".into()))?;
    serde_json::from_str(&text[start..]).context("fio JSON")
}

/// What one fio run measured.
struct Measured {
    iops: f64,
    mb_per_s: f64,
    server_cpu_us_per_io: f64,
    client_core_share: f64,
    server_core_share: f64,
    shown: String,
}

fn run_fio(a: &Options, client: &Client, peer: &Server, w: &Workload) -> Result<Measured> {
    let mut args: Vec<String> = vec![
        "--name=bench".into(),
        "--ioengine=nbd".into(),
        format!("--uri={}", peer.uri),
        format!("--size={}", a.size),
        "--output-format=json".into(),
    ];
    args.extend(w.args.iter().map(|s| s.to_string()));
    if w.time_based {
        args.push("--time_based".into());
        args.push(format!("--runtime={}", a.runtime));
    }
    let cpu0 = peer.cpu_s();
    let mut fio = Command::new(&a.fio);
    fio.args(&args);
    client.apply(&mut fio);
    // fio inherits this thread's CPUs: the client's one while it is started.
    let out = match pins(a) {
        Some((host, _)) => {
            let all = affinity::allowed_cpus();
            affinity::pin_current_thread(host)?;
            let out = fio.output();
            affinity::unpin_current_thread(&all);
            out
        }
        None => fio.output(),
    };
    let out = out.with_context(|| format!("cannot run {} (is fio installed?)", a.fio))?;
    if !out.status.success() {
        return Err(Error::Peer(format!(
            "fio failed on {} ({}): {}\n{} said: {}",
            peer.name,
            w.name,
            String::from_utf8_lossy(&out.stderr),
            peer.name,
            peer.log_tail()
        )));
    }
    let job = fio_json(&out.stdout)?
        .jobs
        .into_iter()
        .next()
        .unwrap_or_default();
    let cpu = peer.cpu_s() - cpu0;
    let ios = job.read.total_ios + job.write.total_ios;
    let runtime_s = job.job_runtime / 1e3;
    let shown = args[4..]
        .iter()
        .chain(args[..2].iter())
        .cloned()
        .collect::<Vec<_>>()
        .join(" ");
    Ok(Measured {
        iops: job.read.iops + job.write.iops,
        mb_per_s: (job.read.bw_bytes + job.write.bw_bytes) / 1e6,
        server_cpu_us_per_io: if ios > 0.0 { cpu * 1e6 / ios } else { 0.0 },
        client_core_share: (job.usr_cpu + job.sys_cpu) / 100.0,
        server_core_share: if runtime_s > 0.0 {
            cpu / runtime_s
        } else {
            0.0
        },
        shown,
    })
}

/// Runs the benchmark: one figure per server and workload, offhost's first (then nbdkit, then
/// both over TLS with [`Options::tls`]).
pub fn run(a: &Options, bar: &ProgressBar) -> Result<Vec<Figure>> {
    require(a.rounds >= 1, || "--rounds must be at least 1".into())?;
    let dir = tempfile::tempdir()?;
    let pki = if a.tls { Some(Pki::generate()?) } else { None };
    let (peers, client) = servers::start(a, dir.path(), pki.as_ref())?;
    if let Some((_, engine)) = pins(a) {
        for p in &peers {
            affinity::pin_process_threads(p.pid(), engine)?;
        }
    }
    bar.set_length((a.rounds as usize * peers.len() * WORKLOADS.len()) as u64);
    // res[peer][workload]: every round's measures.
    let mut res: Vec<Vec<Vec<Measured>>> = (0..peers.len())
        .map(|_| (0..WORKLOADS.len()).map(|_| Vec::new()).collect())
        .collect();
    for p in &peers {
        bar.set_message(format!("warming up {}", p.name));
        run_fio(a, &client, p, &WARM_UP)?;
    }
    for round in 0..a.rounds {
        for (wi, w) in WORKLOADS.iter().enumerate() {
            if !w.time_based && round > 0 {
                bar.inc(peers.len() as u64);
                continue;
            }
            for (pi, p) in peers.iter().enumerate() {
                bar.set_message(format!("round {} {} {}", round + 1, p.name, w.name));
                res[pi][wi].push(run_fio(a, &client, p, w)?);
                bar.inc(1);
            }
        }
    }
    let median_of = |rounds: &[Measured], f: fn(&Measured) -> f64| {
        median(&rounds.iter().map(f).collect::<Vec<_>>()).unwrap_or(0.0)
    };
    let iops_of = |pi: usize, wi: usize| median_of(&res[pi][wi], |m| m.iops);
    let ratio = |m: f64, other: Option<usize>, wi: usize| {
        let o = iops_of(other?, wi);
        (o > 0.0).then(|| m / o)
    };
    let mut figs = Vec::new();
    for (wi, w) in WORKLOADS.iter().enumerate() {
        for (pi, p) in peers.iter().enumerate() {
            let rounds = &res[pi][wi];
            let m = iops_of(pi, wi);
            figs.push(Figure {
                server: p.name.clone(),
                tls: p.tls,
                transport: p.transport.into(),
                workload: w.name.to_owned(),
                iops: m,
                mb_per_s: median_of(rounds, |m| m.mb_per_s),
                ratio_vs_nbdkit: ratio(m, p.kit, wi),
                ratio_vs_plain: ratio(m, p.plain, wi),
                rounds_iops: rounds.iter().map(|m| m.iops).collect(),
                server_cpu_us_per_io: median_of(rounds, |m| m.server_cpu_us_per_io),
                client_core_share: median_of(rounds, |m| m.client_core_share),
                server_core_share: median_of(rounds, |m| m.server_core_share),
                fio_args: rounds.last().map(|m| m.shown.clone()).unwrap_or_default(),
                pinned: pins(a).is_some(),
            });
        }
    }
    Ok(figs)
}

/// The CPUs of the client (fio) and of the servers, unless `--no-pin` or the machine has only
/// one CPU to give.
fn pins(a: &Options) -> Option<(usize, usize)> {
    if a.no_pin {
        None
    } else {
        affinity::cpu_pair()
    }
}

/// The figures as a text table.
pub fn table(figs: &[Figure]) -> String {
    let mut s = format!(
        "{:<28} {:<18} {:>12} {:>10} {:>8} {:>8} {:>12} {:>10} {:>10}\n",
        "workload",
        "server",
        "IOPS",
        "MB/s",
        "ratio",
        "x plain",
        "cpu us/io",
        "fio core",
        "srv core"
    );
    let x = |r: Option<f64>| r.map(|r| format!("{r:.2}x")).unwrap_or_default();
    for f in figs {
        let _ = writeln!(
            s,
            "{:<28} {:<18} {:>12.0} {:>10.1} {:>8} {:>8} {:>12.2} {:>10.2} {:>10.2}",
            f.workload,
            f.server,
            f.iops,
            f.mb_per_s,
            x(f.ratio_vs_nbdkit),
            x(f.ratio_vs_plain),
            f.server_cpu_us_per_io,
            f.client_core_share,
            f.server_core_share
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_reports_are_read_past_notes_with_missing_fields_as_zero() {
        let out = br#"note: a note
{"fio version":"fio-3.36","jobs":[{"jobname":"bench","read":{"total_ios":10,"iops":2.5,"bw_bytes":4096,"lat_ns":{"mean":1500.5,"max":9}},"write":{"total_ios":0},"sync":{},"usr_cpu":12.5,"sys_cpu":30.25,"job_runtime":4000}]}"#;
        let r = fio_json(out).unwrap();
        let j = &r.jobs[0];
        assert_eq!(j.jobname, "bench");
        assert_eq!(
            (j.read.total_ios, j.read.iops, j.read.bw_bytes),
            (10.0, 2.5, 4096.0)
        );
        assert_eq!(
            (j.read.lat_ns.mean, j.write.iops, j.sync.total_ios),
            (1500.5, 0.0, 0.0)
        );
        assert_eq!((j.usr_cpu, j.sys_cpu, j.job_runtime), (12.5, 30.25, 4000.0));
        assert!(fio_json(b"no report").is_err());
    }

    fn options(exe: &str, runtime: u32) -> Options {
        Options {
            runtime,
            size: "16M".into(),
            rounds: 1,
            nbdkit: "nbdkit".into(),
            fio: "fio".into(),
            conn_threads: 2,
            exe: PathBuf::from(exe),
            tls: false,
            no_pin: false,
        }
    }

    /// An `offhost nbd --listen ADDR ... [--tls=require --tls-certificates DIR
    /// --tls-verify-peer]` stand-in: nbdkit's memory plugin with the same TLS flags, on the
    /// Unix socket, or on a free loopback port that it announces the way `offhost nbd` does
    /// (`listening on tcp:127.0.0.1:PORT`, once nbdkit listens; nbdkit ends with the script).
    const STAND_IN: &str = r#"#!/bin/sh
listen=$3
tls=
while [ $# -gt 0 ]; do
  [ "$1" = --tls-certificates ] && tls="--tls=require --tls-certificates $2 --tls-verify-peer"
  shift
done
case $listen in
unix:*) exec nbdkit -f -U "${listen#unix:}" $tls memory 16M ;;
esac
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pid=$(mktemp -u)
nbdkit -f --exit-with-parent -i 127.0.0.1 -p "$port" -P "$pid" $tls memory 16M &
while [ ! -s "$pid" ]; do sleep 0.05; done
rm -f "$pid"
echo "listening on tcp:127.0.0.1:$port"
wait
"#;

    fn stand_in() -> tempfile::TempPath {
        let script = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(script.path(), STAND_IN).unwrap();
        let mut perm = std::fs::metadata(script.path()).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(script.path(), perm).unwrap();
        script.into_temp_path()
    }

    /// With nbdkit on both sides (the server under test is nbdkit too, where the binary
    /// would be `offhost`) the bench runs every fio job against both and compares them.
    #[test]
    fn every_workload_runs_against_both_servers() {
        let path = stand_in();
        let figs = run(&options(path.to_str().unwrap(), 1), &ProgressBar::hidden()).unwrap();
        assert_eq!(figs.len(), 2 * WORKLOADS.len());
        for f in &figs {
            assert!(f.iops > 0.0 && f.mb_per_s > 0.0, "{f:?}");
            // fio did some work on its core; the share is of one core (a little over it
            // from rounding when fio is pinned to it).
            assert!(
                f.client_core_share > 0.0 && f.client_core_share < 1.2,
                "{f:?}"
            );
            assert!(!f.tls && f.ratio_vs_plain.is_none(), "{f:?}");
            assert_eq!(f.transport, "unix");
            // fio and the servers on a CPU each wherever there are two.
            assert_eq!(f.pinned, affinity::cpu_pair().is_some(), "{f:?}");
        }
        assert!(figs[0].ratio_vs_nbdkit.is_some() && figs[1].ratio_vs_nbdkit.is_none());
        assert_eq!(table(&figs).lines().count(), 1 + figs.len());
    }

    /// With TLS, both servers run again with `--tls=require` on one certificate directory and
    /// fio reaches them over `nbds+unix://` (a plain client would be refused, so a figure
    /// means TLS carried it); the TLS rows compare with their plain selves and offhost's with
    /// nbdkit's over TLS.
    #[test]
    fn with_tls_every_workload_runs_plain_and_over_tls() {
        let path = stand_in();
        let mut o = options(path.to_str().unwrap(), 1);
        o.tls = true;
        let figs = run(&o, &ProgressBar::hidden()).unwrap();
        assert_eq!(figs.len(), 4 * WORKLOADS.len());
        let servers: Vec<&str> = figs[..4].iter().map(|f| f.server.as_str()).collect();
        assert_eq!(
            servers,
            [
                "offhost",
                "nbdkit-memory",
                "offhost-tls",
                "nbdkit-memory-tls"
            ]
        );
        for f in &figs {
            assert!(f.iops > 0.0 && f.mb_per_s > 0.0, "{f:?}");
            assert_eq!(f.tls, f.server.ends_with("-tls"), "{f:?}");
            assert_eq!(f.transport, "tcp", "{f:?}");
            assert_eq!(f.ratio_vs_plain.is_some(), f.tls, "{f:?}");
            assert_eq!(
                f.ratio_vs_nbdkit.is_some(),
                f.server.starts_with("offhost"),
                "{f:?}"
            );
        }
        let json = serde_json::to_value(&figs[2]).unwrap();
        assert_eq!(json["tls"], true);
        assert!(json["ratio_vs_plain"].as_f64().is_some());
    }

    #[test]
    fn a_server_that_does_not_start_is_reported() {
        let e = run(&options("/nonexistent/offhost", 1), &ProgressBar::hidden()).unwrap_err();
        assert!(e.to_string().contains("start the offhost"), "{e}");
    }
}
