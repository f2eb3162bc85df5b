//! `nbd`: this NBD server (`offhost nbd`) against nbdkit's `memory` plugin, same fio jobs
//! (fio's `nbd` ioengine, i.e. libnbd), same run, both over Unix sockets.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use indicatif::ProgressBar;
use offhost_bench::cpu::process_cpu_s;
use offhost_bench::stats::median;
use serde::Serialize;

use crate::error::{require, Context as _, Error, Result};
use crate::process::{exists, PeerProcess};

/// What to measure.
#[derive(Debug, Clone)]
pub struct Options {
    /// Seconds per fio job.
    pub runtime: u32,
    /// Export size, and the region fio works over (as fio and `offhost nbd` read it: `1G`).
    pub size: String,
    /// Rounds (servers alternate within each round); the median round is reported.
    pub rounds: u32,
    /// nbdkit binary.
    pub nbdkit: String,
    /// fio binary.
    pub fio: String,
    /// Worker threads per connection for this server (`offhost nbd --conn-threads`).
    pub conn_threads: usize,
    /// The `offhost` binary whose `nbd` command is measured.
    pub exe: PathBuf,
}

/// One measured figure.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    /// `offhost` or `nbdkit-memory`.
    pub server: String,
    /// Workload name.
    pub workload: String,
    /// I/O operations per second (reads + writes).
    pub iops: f64,
    /// Bandwidth, 10^6 bytes per second (reads + writes).
    pub mb_per_s: f64,
    /// This server's IOPS over nbdkit's in the same round (offhost rows only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_vs_nbdkit: Option<f64>,
    /// IOPS of every round.
    pub rounds_iops: Vec<f64>,
    /// Server CPU time (user + system) per I/O, microseconds (median round): on a shared
    /// machine this compares the servers' efficiency independently of how much CPU each got.
    pub server_cpu_us_per_io: f64,
    /// The fio job options used.
    pub fio_args: String,
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

/// A server under test.
struct Server {
    name: &'static str,
    process: PeerProcess,
    socket: PathBuf,
}

impl Server {
    /// Starts `cmd` and waits until `ready` exists (nbdkit's pid file, written once it
    /// listens; our server's socket, bound before it serves). Probing by connecting would make
    /// nbdkit log a broken handshake.
    fn start(
        name: &'static str,
        cmd: &mut Command,
        socket: PathBuf,
        ready: &Path,
    ) -> Result<Server> {
        let mut process = PeerProcess::spawn(name, cmd)?;
        process.until_ready(Duration::from_secs(20), || exists(ready))?;
        Ok(Server {
            name,
            process,
            socket,
        })
    }

    /// CPU seconds (user + system) the server has used so far.
    fn cpu_s(&self) -> f64 {
        process_cpu_s(Some(self.process.id())).unwrap_or(0.0)
    }
}

fn run_fio(a: &Options, peer: &Server, w: &Workload) -> Result<(f64, f64, f64, String)> {
    let uri = format!("nbd+unix:///?socket={}", peer.socket.display());
    let mut args: Vec<String> = vec![
        "--name=bench".into(),
        "--ioengine=nbd".into(),
        format!("--uri={uri}"),
        format!("--size={}", a.size),
        "--output-format=json".into(),
    ];
    args.extend(w.args.iter().map(|s| s.to_string()));
    if w.time_based {
        args.push("--time_based".into());
        args.push(format!("--runtime={}", a.runtime));
    }
    let cpu0 = peer.cpu_s();
    let out = Command::new(&a.fio)
        .args(&args)
        .output()
        .with_context(|| format!("cannot run {} (is fio installed?)", a.fio))?;
    if !out.status.success() {
        return Err(Error::Peer(format!(
            "fio failed on {} ({}): {}",
            peer.name,
            w.name,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // fio may print notes before the JSON document.
    let start = text
        .find('{')
        .ok_or_else(|| Error::Peer("fio printed no JSON".into()))?;
    let v: serde_json::Value = serde_json::from_str(&text[start..]).context("fio JSON")?;
    let job = &v["jobs"][0];
    let f = |dir: &str, k: &str| job[dir][k].as_f64().unwrap_or(0.0);
    let cpu = peer.cpu_s() - cpu0;
    let ios = f("read", "total_ios") + f("write", "total_ios");
    let cpu_us_per_io = if ios > 0.0 { cpu * 1e6 / ios } else { 0.0 };
    let iops = f("read", "iops") + f("write", "iops");
    let mbps = (f("read", "bw_bytes") + f("write", "bw_bytes")) / 1e6;
    let shown = args[4..]
        .iter()
        .chain(args[..2].iter())
        .cloned()
        .collect::<Vec<_>>()
        .join(" ");
    Ok((iops, mbps, cpu_us_per_io, shown))
}

/// Runs the benchmark: one figure per server and workload, offhost's first.
pub fn run(a: &Options, bar: &ProgressBar) -> Result<Vec<Figure>> {
    require(a.rounds >= 1, || "--rounds must be at least 1".into())?;
    let dir = tempfile::tempdir()?;
    let ours_sock = dir.path().join("offhost.sock");
    let kit_sock = dir.path().join("nbdkit.sock");
    let mut ours_cmd = Command::new(&a.exe);
    ours_cmd.args([
        "nbd",
        "--listen",
        &format!("unix:{}", ours_sock.display()),
        "--export",
        &format!("bench=mem:{}", a.size),
        "--conn-threads",
        &a.conn_threads.to_string(),
    ]);
    let mut kit_cmd = Command::new(&a.nbdkit);
    let kit_pid = dir.path().join("nbdkit.pid");
    kit_cmd
        .args(["-f", "-U"])
        .arg(&kit_sock)
        .arg("-P")
        .arg(&kit_pid)
        .args(["memory", &a.size]);
    let peers = [
        Server::start("offhost", &mut ours_cmd, ours_sock.clone(), &ours_sock)?,
        Server::start("nbdkit-memory", &mut kit_cmd, kit_sock, &kit_pid)
            .context("nbdkit is the peer of this benchmark")?,
    ];
    bar.set_length((a.rounds as usize * peers.len() * WORKLOADS.len()) as u64);
    // results[peer][workload] = (iops per round, MB/s per round, cpu per io per round, args)
    type Rounds = (Vec<f64>, Vec<f64>, Vec<f64>, String);
    let mut res: Vec<Vec<Rounds>> = vec![vec![Default::default(); WORKLOADS.len()]; 2];
    for round in 0..a.rounds {
        for (wi, w) in WORKLOADS.iter().enumerate() {
            if !w.time_based && round > 0 {
                bar.inc(peers.len() as u64);
                continue;
            }
            for (pi, p) in peers.iter().enumerate() {
                bar.set_message(format!("round {} {} {}", round + 1, p.name, w.name));
                let (iops, mbps, cpu, shown) = run_fio(a, p, w)?;
                let r = &mut res[pi][wi];
                r.0.push(iops);
                r.1.push(mbps);
                r.2.push(cpu);
                r.3 = shown;
                bar.inc(1);
            }
        }
    }
    let median = |v: &[f64]| median(v).unwrap_or(0.0);
    let mut figs = Vec::new();
    for (wi, w) in WORKLOADS.iter().enumerate() {
        let kit_iops = median(&res[1][wi].0);
        for (pi, p) in peers.iter().enumerate() {
            let (iops, mbps, cpu, shown) = &res[pi][wi];
            let m = median(iops);
            figs.push(Figure {
                server: p.name.to_owned(),
                workload: w.name.to_owned(),
                iops: m,
                mb_per_s: median(mbps),
                ratio_vs_nbdkit: (pi == 0 && kit_iops > 0.0).then(|| m / kit_iops),
                rounds_iops: iops.clone(),
                server_cpu_us_per_io: median(cpu),
                fio_args: shown.clone(),
            });
        }
    }
    Ok(figs)
}

/// The figures as a text table.
pub fn table(figs: &[Figure]) -> String {
    let mut s = format!(
        "{:<28} {:<14} {:>12} {:>10} {:>8} {:>12}\n",
        "workload", "server", "IOPS", "MB/s", "ratio", "cpu us/io"
    );
    for f in figs {
        let _ = writeln!(
            s,
            "{:<28} {:<14} {:>12.0} {:>10.1} {:>8} {:>12.2}",
            f.workload,
            f.server,
            f.iops,
            f.mb_per_s,
            f.ratio_vs_nbdkit
                .map(|r| format!("{r:.2}x"))
                .unwrap_or_default(),
            f.server_cpu_us_per_io
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(exe: &str, runtime: u32) -> Options {
        Options {
            runtime,
            size: "16M".into(),
            rounds: 1,
            nbdkit: "nbdkit".into(),
            fio: "fio".into(),
            conn_threads: 2,
            exe: PathBuf::from(exe),
        }
    }

    /// With nbdkit on both sides (the server under test is nbdkit too, where the binary
    /// would be `offhost`) the bench runs every fio job against both and compares them.
    #[test]
    fn every_workload_runs_against_both_servers() {
        let script = tempfile::NamedTempFile::new().unwrap();
        // An `offhost nbd --listen unix:SOCK ...` stand-in: nbdkit's memory plugin there.
        std::fs::write(
            script.path(),
            "#!/bin/sh\nsock=${3#unix:}\nexec nbdkit -f -U \"$sock\" memory 16M\n",
        )
        .unwrap();
        let mut perm = std::fs::metadata(script.path()).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(script.path(), perm).unwrap();
        let path = script.into_temp_path();
        let figs = run(&options(path.to_str().unwrap(), 1), &ProgressBar::hidden()).unwrap();
        assert_eq!(figs.len(), 2 * WORKLOADS.len());
        for f in &figs {
            assert!(f.iops > 0.0 && f.mb_per_s > 0.0, "{f:?}");
        }
        assert!(figs[0].ratio_vs_nbdkit.is_some() && figs[1].ratio_vs_nbdkit.is_none());
        assert_eq!(table(&figs).lines().count(), 1 + figs.len());
    }

    #[test]
    fn a_server_that_does_not_start_is_reported() {
        let e = run(&options("/nonexistent/offhost", 1), &ProgressBar::hidden()).unwrap_err();
        assert!(e.to_string().contains("start the offhost"), "{e}");
    }
}
