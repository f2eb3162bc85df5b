//! `offhost bench pingpong`: one-way latency (half the round trip) and throughput against the
//! echo engine, in another process over shared memory (`shm`) or on a thread (`mem`).

use anyhow::{bail, ensure, Context, Result};
use offhost_bench::{affinity, cpu, stats::Summary};
use offhost_shm::{Config, Endpoint, Mode};
use serde::Serialize;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::echo::Url;

const T: Option<Duration> = Some(Duration::from_secs(10));
/// Records up to this size go inline in the ring by default; larger ones as pool buffers.
const INLINE_MAX: usize = 4096;

/// Which transport the bench measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Transport {
    /// Shared memory with an echo engine in another process.
    Shm,
    /// The same rings with the echo engine on a thread of this process.
    Mem,
}

/// How records travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum PathChoice {
    /// Inline up to 4096 bytes, pool buffers above.
    Auto,
    /// Copied into the ring.
    Inline,
    /// Written into a pool buffer and sent by descriptor.
    Loan,
}

/// Arguments of `offhost bench pingpong`.
#[derive(clap::Args, Debug)]
pub struct PingpongArgs {
    /// shm (echo engine in another process) or mem (echo engine on a thread).
    #[arg(long, value_enum, default_value = "shm")]
    transport: Transport,
    /// Doorbell mode of both sides: poll, block or adaptive.
    #[arg(long, default_value = "poll")]
    mode: Mode,
    /// Record sizes in bytes.
    #[arg(long, value_delimiter = ',', default_value = "8,64,4096,65536,1048576")]
    sizes: Vec<usize>,
    /// A running echo engine (shm:PATH or shm:@name) instead of starting one.
    #[arg(long)]
    connect: Option<Url>,
    /// Timed round trips per size (default: from 20000 for small records down to 500).
    #[arg(long)]
    iters: Option<usize>,
    /// Spin budget of adaptive mode, in microseconds.
    #[arg(long, default_value_t = 50)]
    spin_us: u64,
    /// How records travel.
    #[arg(long, value_enum, default_value = "auto")]
    path: PathChoice,
    /// Seconds over which the idle echo engine's CPU use is measured (0: skip).
    #[arg(long, default_value_t = 1.0)]
    idle_secs: f64,
    /// Also measure the floors first and report ratios against them.
    #[arg(long)]
    floors: bool,
    /// Print a JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

/// One line of the report.
#[derive(Debug, Serialize)]
struct Row {
    bench: &'static str,
    transport: &'static str,
    mode: &'static str,
    size: usize,
    path: &'static str,
    iters: usize,
    one_way_ns_median: f64,
    one_way_ns_p99: f64,
    mb_per_s: f64,
    /// CPU use of the idle echo engine, percent of one core (null when not measurable).
    cpu_idle_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    vs_cacheline: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    vs_futex: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    vs_memcpy: Option<f64>,
}

/// The echo engine the bench talks to, and how to read its CPU time.
enum Peer {
    Process(Child),
    Thread(std::thread::JoinHandle<()>, u32),
    Remote,
}

impl Peer {
    fn cpu_time(&self) -> Option<Duration> {
        match self {
            Peer::Process(c) => cpu::process_cpu_time(c.id()),
            Peer::Thread(_, tid) => cpu::thread_cpu_time(*tid),
            Peer::Remote => None,
        }
    }
}

fn uses_loan(path: PathChoice, size: usize) -> bool {
    match path {
        PathChoice::Auto => size > INLINE_MAX,
        PathChoice::Inline => false,
        PathChoice::Loan => true,
    }
}

fn config(args: &PingpongArgs) -> Config {
    let inline_max = args
        .sizes
        .iter()
        .filter(|&&s| !uses_loan(args.path, s))
        .max()
        .copied()
        .unwrap_or(0);
    let loan_max = args
        .sizes
        .iter()
        .filter(|&&s| uses_loan(args.path, s))
        .max()
        .copied()
        .unwrap_or(64);
    Config {
        ring_bytes: ((inline_max + 8).next_power_of_two() as u64).max(64 << 10),
        pool_buffers: 4,
        buffer_size: (loan_max.div_ceil(64) * 64).max(64) as u32,
        mode: args.mode,
        spin: Duration::from_micros(args.spin_us),
    }
}

fn connect_retry(addr: &str, config: &Config, child: &mut Child) -> Result<Endpoint> {
    let start = Instant::now();
    loop {
        match offhost_shm::connect(addr, config) {
            Ok(ep) => return Ok(ep),
            Err(e) => {
                if let Some(status) = child.try_wait()? {
                    bail!("echo engine exited ({status}) before accepting: {e}");
                }
                if start.elapsed() > Duration::from_secs(10) {
                    return Err(e).context("echo engine did not accept within 10 s");
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

fn start_peer(
    args: &PingpongArgs,
    config: &Config,
    cpus: Option<(usize, usize)>,
) -> Result<(Endpoint, Peer)> {
    match (args.transport, &args.connect) {
        (Transport::Mem, Some(_)) => bail!("--connect needs --transport shm"),
        (Transport::Shm, Some(Url::Shm(addr))) => {
            let ep = offhost_shm::connect(addr, config)
                .with_context(|| format!("connect to echo engine at shm:{addr}"))?;
            Ok((ep, Peer::Remote))
        }
        (Transport::Shm, Some(Url::Mem)) => bail!("--connect needs an shm: address"),
        (Transport::Shm, None) => {
            let addr = format!("@offhost-bench-{}", std::process::id());
            let mut cmd = Command::new(std::env::current_exe()?);
            cmd.args(["echo", "--listen", &format!("shm:{addr}"), "--once"])
                .args(["--mode", args.mode.name()])
                .args(["--spin-us", &args.spin_us.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if let Some((_, b)) = cpus {
                cmd.args(["--pin", &b.to_string()]);
            }
            let mut child = cmd.spawn().context("start the echo engine")?;
            match connect_retry(&addr, config, &mut child) {
                Ok(ep) => Ok((ep, Peer::Process(child))),
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    Err(e)
                }
            }
        }
        (Transport::Mem, None) => {
            let (host, engine) = offhost_shm::pair(config)?;
            let (tid_tx, tid_rx) = std::sync::mpsc::channel();
            let handle = std::thread::spawn(move || {
                if let Some((_, b)) = cpus {
                    affinity::pin_current_thread(b);
                }
                let _ = tid_tx.send(cpu::current_tid());
                if let Err(e) = offhost_shm::echo(engine) {
                    eprintln!("echo thread: {e}");
                }
            });
            let tid = tid_rx.recv().context("echo thread did not start")?;
            Ok((host, Peer::Thread(handle, tid)))
        }
    }
}

/// Runs `offhost bench pingpong`.
pub fn run(args: PingpongArgs) -> Result<()> {
    ensure!(!args.sizes.is_empty(), "--sizes is empty");
    ensure!(
        args.sizes.iter().all(|&s| s > 0),
        "--sizes: record sizes must be at least 1 byte"
    );
    let floors = args
        .floors
        .then(|| super::floors::measure_with_progress(100_000));
    let config = config(&args);
    let cpus = affinity::cpu_pair();
    let (ep, peer) = start_peer(&args, &config, cpus)?;
    if let Some((a, _)) = cpus {
        affinity::pin_current_thread(a);
    }
    let transport = match args.transport {
        Transport::Shm => "shm",
        Transport::Mem => "mem",
    };
    let mut ep = ep;
    let mut rows = Vec::new();
    for &size in &args.sizes {
        let loan = uses_loan(args.path, size);
        let iters = args
            .iters
            .unwrap_or((50_000_000 / size).clamp(500, 20_000))
            .max(1);
        let s = measure(&mut ep, size, loan, iters)
            .with_context(|| format!("pingpong of {size}-byte records"))?;
        let mb_per_s = size as f64 / s.median * 1e3;
        rows.push(Row {
            bench: "pingpong",
            transport,
            mode: args.mode.name(),
            size,
            path: if loan { "loan" } else { "inline" },
            iters,
            one_way_ns_median: s.median,
            one_way_ns_p99: s.p99,
            mb_per_s,
            cpu_idle_pct: None,
            vs_cacheline: floors.as_ref().map(|f| s.median / f.cacheline_ns),
            vs_futex: floors.as_ref().map(|f| s.median / f.futex_ns),
            vs_memcpy: floors
                .as_ref()
                .map(|f| mb_per_s / (f.memcpy_gb_per_s * 1e3)),
        });
    }
    let idle = idle_cpu_pct(&peer, args.idle_secs);
    for r in &mut rows {
        r.cpu_idle_pct = idle;
    }
    drop(ep); // the echo engine sees the hang-up and ends
    match peer {
        Peer::Process(mut c) => {
            let deadline = Instant::now() + Duration::from_secs(5);
            while c.try_wait()?.is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if c.try_wait()?.is_none() {
                let _ = c.kill();
                let _ = c.wait();
                eprintln!("pingpong: echo engine did not exit on hang-up; killed it");
            }
        }
        Peer::Thread(h, _) => h
            .join()
            .map_err(|_| anyhow::anyhow!("echo thread panicked"))?,
        Peer::Remote => {}
    }
    print(&rows, args.json)
}

/// Times `iters` round trips of `size`-byte records after a tenth as many untimed ones; returns
/// one-way times (half of each round trip) in ns.
fn measure(ep: &mut Endpoint, size: usize, loan: bool, iters: usize) -> Result<Summary> {
    let pb = indicatif::ProgressBar::with_draw_target(
        Some((iters + iters / 10) as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    pb.set_message(format!("pingpong {size} B"));
    pb.set_style(
        indicatif::ProgressStyle::with_template("{msg} {bar:30} {pos}/{len}")
            .expect("progress template"),
    );
    let data: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
    let mut back = vec![0u8; size];
    let mut samples = Vec::with_capacity(iters);
    let warmup = iters / 10;
    for k in 0..warmup + iters {
        let t0 = Instant::now();
        round_trip(ep, &data, &mut back, loan)?;
        let dt = t0.elapsed();
        if k >= warmup {
            samples.push(dt.as_nanos() as f64 / 2.0);
        }
        if k % 256 == 0 {
            pb.set_position(k as u64);
        }
    }
    pb.finish_and_clear();
    ensure!(back == data, "echoed bytes differ from the bytes sent");
    Ok(Summary::of(&mut samples).expect("samples"))
}

/// Sends `data` (copied into the ring, or into a pool buffer) and copies the echo into `back`.
fn round_trip(ep: &mut Endpoint, data: &[u8], back: &mut [u8], loan: bool) -> Result<()> {
    if loan {
        let mut buf = ep.sender().alloc(T)?;
        buf.set_len(data.len())?;
        buf.copy_from_slice(data);
        ep.sender().send_buf(buf, T)?;
    } else {
        ep.sender().send(data, T)?;
    }
    let r = ep.receiver().recv(T)?;
    ensure!(
        r.len() == back.len(),
        "echo of {} bytes for {} sent",
        r.len(),
        back.len()
    );
    back.copy_from_slice(r.bytes());
    Ok(())
}

/// CPU use of the echo engine while no records flow, in percent of one core.
fn idle_cpu_pct(peer: &Peer, secs: f64) -> Option<f64> {
    if secs <= 0.0 {
        return None;
    }
    // Let an adaptive engine's spin budget run out first.
    std::thread::sleep(Duration::from_millis(200));
    let c0 = peer.cpu_time()?;
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let c1 = peer.cpu_time()?;
    Some((c1.saturating_sub(c0)).as_secs_f64() / t0.elapsed().as_secs_f64() * 100.0)
}

fn print(rows: &[Row], json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(rows)?);
        return Ok(());
    }
    println!(
        "{:<9} {:<9} {:>8} {:<6} {:>12} {:>12} {:>10} {:>9}",
        "transport", "mode", "size", "path", "median ns", "p99 ns", "MB/s", "idle cpu"
    );
    for r in rows {
        println!(
            "{:<9} {:<9} {:>8} {:<6} {:>12.0} {:>12.0} {:>10.1} {:>8}",
            r.transport,
            r.mode,
            r.size,
            r.path,
            r.one_way_ns_median,
            r.one_way_ns_p99,
            r.mb_per_s,
            r.cpu_idle_pct
                .map_or("-".to_owned(), |p| format!("{p:.2}%"))
        );
    }
    if rows.iter().any(|r| r.vs_cacheline.is_some()) {
        println!();
        println!(
            "{:>8} {:>14} {:>10} {:>10}",
            "size", "x cache-line", "x futex", "x memcpy"
        );
        for r in rows {
            println!(
                "{:>8} {:>14.2} {:>10.3} {:>10.3}",
                r.size,
                r.vs_cacheline.unwrap_or(f64::NAN),
                r.vs_futex.unwrap_or(f64::NAN),
                r.vs_memcpy.unwrap_or(f64::NAN)
            );
        }
    }
    Ok(())
}
