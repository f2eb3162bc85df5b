//! `offhost bench nbd`: this NBD server against nbdkit's `memory` plugin, same fio jobs (fio's
//! `nbd` ioengine, i.e. libnbd), same run, both over Unix sockets.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

/// Arguments of the NBD benchmark.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Print one JSON object per server and workload (a JSON array).
    #[arg(long)]
    json: bool,
    /// Seconds per fio job.
    #[arg(long, default_value_t = 10)]
    runtime: u32,
    /// Export size, and the region fio works over.
    #[arg(long, default_value = "1G")]
    size: String,
    /// Rounds (servers alternate within each round); the median round is reported.
    #[arg(long, default_value_t = 1)]
    rounds: u32,
    /// nbdkit binary.
    #[arg(long, default_value = "nbdkit")]
    nbdkit: String,
    /// fio binary.
    #[arg(long, default_value = "fio")]
    fio: String,
    /// Worker threads per connection for this server (`offhost nbd --conn-threads`).
    #[arg(long, default_value_t = offhost_nbd::server::DEFAULT_CONN_THREADS)]
    conn_threads: usize,
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

struct Peer {
    name: &'static str,
    child: Child,
    socket: PathBuf,
}

impl Peer {
    /// CPU seconds (user + system) the server process has used so far, from /proc.
    fn cpu_s(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // Fields after the command name (which is in parentheses): utime is the 14th field
        // of the line, stime the 15th, in clock ticks (100 per second on Linux).
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let f: Vec<f64> = rest
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0.0))
            .collect();
        if f.len() > 12 {
            (f[11] + f[12]) / 100.0
        } else {
            0.0
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `ready` exists (nbdkit's pid file, written once it listens; our server's
/// socket, bound before `serve`). Probing by connecting would make nbdkit log a broken
/// handshake.
fn wait_ready(ready: &Path, child: &mut Child, what: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if ready.exists() {
            return Ok(());
        }
        if let Some(st) = child.try_wait()? {
            bail!("{what} exited before listening: {st}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("{what} was not ready ({}) within 20 s", ready.display())
}

fn start(
    name: &'static str,
    mut cmd: Command,
    socket: PathBuf,
    ready: &Path,
) -> anyhow::Result<Peer> {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot start {name} ({cmd:?})"))?;
    wait_ready(ready, &mut child, name)?;
    Ok(Peer {
        name,
        child,
        socket,
    })
}

fn run_fio(a: &BenchArgs, peer: &Peer, w: &Workload) -> anyhow::Result<(f64, f64, f64, String)> {
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
        bail!(
            "fio failed on {} ({}): {}",
            peer.name,
            w.name,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // fio may print notes before the JSON document.
    let start = text.find('{').context("fio printed no JSON")?;
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

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the benchmark.
pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.rounds >= 1, "--rounds must be at least 1");
    let dir = tempfile::tempdir()?;
    let exe = std::env::current_exe()?;
    let ours_sock = dir.path().join("offhost.sock");
    let kit_sock = dir.path().join("nbdkit.sock");
    let mut ours_cmd = Command::new(&exe);
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
        start("offhost", ours_cmd, ours_sock.clone(), &ours_sock)?,
        start("nbdkit-memory", kit_cmd, kit_sock, &kit_pid)
            .context("nbdkit is the peer of this benchmark")?,
    ];
    let total = (a.rounds as usize * peers.len() * WORKLOADS.len()) as u64;
    let pb = ProgressBar::new(total);
    pb.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")?);
    // results[peer][workload] = (iops per round, MB/s per round, cpu per io per round, args)
    type Rounds = (Vec<f64>, Vec<f64>, Vec<f64>, String);
    let mut res: Vec<Vec<Rounds>> = vec![vec![Default::default(); WORKLOADS.len()]; 2];
    for round in 0..a.rounds {
        for (wi, w) in WORKLOADS.iter().enumerate() {
            if !w.time_based && round > 0 {
                pb.inc(peers.len() as u64);
                continue;
            }
            for (pi, p) in peers.iter().enumerate() {
                pb.set_message(format!("round {} {} {}", round + 1, p.name, w.name));
                let (iops, mbps, cpu, shown) = run_fio(&a, p, w)?;
                let r = &mut res[pi][wi];
                r.0.push(iops);
                r.1.push(mbps);
                r.2.push(cpu);
                r.3 = shown;
                pb.inc(1);
            }
        }
    }
    pb.finish_and_clear();
    let mut figs = Vec::new();
    for (wi, w) in WORKLOADS.iter().enumerate() {
        let kit_iops = median(&mut res[1][wi].0.clone());
        for (pi, p) in peers.iter().enumerate() {
            let (iops, mbps, cpu, shown) = &res[pi][wi];
            let m = median(&mut iops.clone());
            figs.push(Figure {
                server: p.name.to_owned(),
                workload: w.name.to_owned(),
                iops: m,
                mb_per_s: median(&mut mbps.clone()),
                ratio_vs_nbdkit: (pi == 0 && kit_iops > 0.0).then(|| m / kit_iops),
                rounds_iops: iops.clone(),
                server_cpu_us_per_io: median(&mut cpu.clone()),
                fio_args: shown.clone(),
            });
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&figs)?);
    } else {
        println!(
            "{:<28} {:<14} {:>12} {:>10} {:>8} {:>12}",
            "workload", "server", "IOPS", "MB/s", "ratio", "cpu us/io"
        );
        for f in &figs {
            println!(
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
    }
    Ok(())
}
