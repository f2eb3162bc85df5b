//! `offhost bench pingpong`: one-way latency (half the round trip) and throughput against the
//! echo engine, in another process over shared memory (`shm`) or on a thread (`mem`).

use anyhow::{bail, ensure, Context, Result};
use offhost_bench::{affinity, cpu, samples::Summary};
use offhost_shm::{Config, Endpoint, Mode};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::report::{emit, Output, Row};
use crate::echo::Url;

const T: Option<Duration> = Some(Duration::from_secs(10));
/// Records up to this size go inline in the ring by default; larger ones as pool buffers.
const INLINE_MAX: usize = 4096;

/// Which transport the bench measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Transport {
    /// Shared memory with an echo engine in another process.
    Shm,
    /// The same rings with the echo engine on a thread of this process.
    Mem,
    /// Channels over TCP loopback (echo engine on a thread).
    Tcp,
    /// Channels over a Unix socket (echo engine on a thread).
    Unix,
    /// Channels over shared memory (`offhost echo` in another process).
    ShmChan,
    /// Plain TCP loopback echo, no offhost protocol.
    TcpRaw,
    /// Plain Unix-socket echo, no offhost protocol.
    UnixRaw,
    /// Plain pipe echo, no offhost protocol.
    PipeRaw,
}

/// How records travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum PathChoice {
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
    /// Transports, comma-separated: shm and mem (raw rings), tcp, unix and shm-chan (channels),
    /// tcp-raw, unix-raw and pipe-raw (plain sockets and pipes).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "shm")]
    pub(super) transport: Vec<Transport>,
    /// Doorbell mode of both sides: poll, block or adaptive.
    #[arg(long, default_value = "poll")]
    pub(super) mode: Mode,
    /// Record sizes in bytes (a K, M or G suffix multiplies by 1024, 1024^2, 1024^3).
    #[arg(long, value_delimiter = ',', default_value = "8,64,4096,65536,1048576", value_parser = offhost_bench::sizes::parse_size)]
    pub(super) sizes: Vec<usize>,
    /// A running echo engine (shm:PATH or shm:@name) instead of starting one.
    #[arg(long)]
    connect: Option<Url>,
    /// Timed round trips per size (default: from 20000 for small records down to 500).
    #[arg(long)]
    iters: Option<usize>,
    /// Measure every transport this many times in turn, a share of the round trips each time,
    /// and pool the samples: transports then see the same changes of the machine's state
    /// (on a shared VM the same transport can run twice as fast in one minute as in the next),
    /// so their ratios mean more.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: u32,
    /// Keep every transport's echo peer running and measure the transports in turn, this
    /// many round trips at a time (after a few untimed ones), until each has its round trips:
    /// adjacent blocks of different transports then share the machine's state far more often
    /// than whole rounds do. Each block's median is reported like a round's. (The idle echo
    /// engine's CPU use is not measured then.)
    #[arg(long, value_name = "ROUND_TRIPS", conflicts_with_all = ["rounds", "connect"],
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    interleave: Option<u64>,
    /// Spin budget of adaptive mode, in microseconds.
    #[arg(long, default_value_t = 50)]
    spin_us: u64,
    /// How records travel.
    #[arg(long, value_enum, default_value = "auto")]
    pub(super) path: PathChoice,
    /// Seconds over which the idle echo engine's CPU use is measured (0: skip).
    #[arg(long, default_value_t = 1.0)]
    idle_secs: f64,
    /// Have the echo engine read every byte of buffer records (so data crosses cores).
    #[arg(long)]
    pub(super) touch: bool,
    /// Also measure the floors first and report ratios against them.
    #[arg(long)]
    floors: bool,
    /// Fit t(n) = t0 + n / r_inf per transport and mode (t0, r_inf, n_1/2).
    #[arg(long)]
    fit: bool,
    /// Print JSON (an array of rows; with --fit, an object with `rows` and `fit`).
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV instead of the aligned table.
    #[arg(long)]
    csv: bool,
    /// Write throughput and latency plots (SVG) into this folder.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
}

/// The echo engine the bench talks to, and how to read its CPU time.
pub(super) enum Peer {
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

pub(super) fn uses_loan(path: PathChoice, size: usize) -> bool {
    match path {
        PathChoice::Auto => size > INLINE_MAX,
        PathChoice::Inline => false,
        PathChoice::Loan => true,
    }
}

pub(super) fn config(args: &PingpongArgs) -> Config {
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
        ring_bytes: ((inline_max + 16).next_power_of_two() as u64).max(64 << 10),
        pool_buffers: 4,
        buffer_size: (loan_max.div_ceil(64) * 64).max(64) as u32,
        mode: args.mode,
        spin: Duration::from_micros(args.spin_us),
    }
}

fn connect_retry(addr: &str, config: &Config, child: &mut Child) -> Result<Endpoint> {
    until_accepted(child, || offhost_shm::connect(addr, config))
}

/// Calls `connect` until the echo engine spawned as `child` accepts, for at most 10 s; fails
/// at once if the child exits first.
pub(super) fn until_accepted<T, E>(
    child: &mut Child,
    mut connect: impl FnMut() -> std::result::Result<T, E>,
) -> Result<T>
where
    E: std::error::Error + Send + Sync + 'static,
{
    let start = Instant::now();
    loop {
        match connect() {
            Ok(t) => return Ok(t),
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

pub(super) fn start_peer(
    args: &PingpongArgs,
    transport: Transport,
    config: &Config,
    cpus: Option<(usize, usize)>,
) -> Result<(Endpoint, Peer)> {
    match (transport, &args.connect) {
        (
            t @ (Transport::Tcp
            | Transport::Unix
            | Transport::ShmChan
            | Transport::TcpRaw
            | Transport::UnixRaw
            | Transport::PipeRaw),
            _,
        ) => bail!("{t:?} is not a raw-ring transport"),
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
            cmd.args([
                "echo",
                "--raw",
                "--listen",
                &format!("shm:{addr}"),
                "--once",
            ])
            .args(["--mode", args.mode.name()])
            .args(["--spin-us", &args.spin_us.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
            if let Some((_, b)) = cpus {
                cmd.args(["--pin", &b.to_string()]);
            }
            if args.touch {
                cmd.arg("--touch");
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
            let touch = args.touch;
            let (host, engine) = offhost_shm::pair(config)?;
            let (tid_tx, tid_rx) = std::sync::mpsc::channel();
            let handle = std::thread::spawn(move || {
                if let Some((_, b)) = cpus {
                    affinity::pin_current_thread(b);
                }
                let _ = tid_tx.send(cpu::current_tid());
                if let Err(e) = offhost_shm::echo_with(engine, touch) {
                    eprintln!("echo thread: {e}");
                }
            });
            let tid = tid_rx.recv().context("echo thread did not start")?;
            Ok((host, Peer::Thread(handle, tid)))
        }
    }
}

/// Samples of one report row, pooled over the rounds.
pub(super) struct Pooled {
    transport: &'static str,
    mode: Mode,
    size: usize,
    path: &'static str,
    touch: bool,
    samples: Vec<f64>,
    /// The median of each round's (or interleaved block's) samples.
    pub(super) round_medians: Vec<f64>,
    cpu_idle_pct: Option<f64>,
}

impl Pooled {
    /// The row of transport `t` (reported as `name`) at `size` with its first round's
    /// `samples` (not empty).
    pub(super) fn new(
        args: &PingpongArgs,
        t: Transport,
        name: &'static str,
        size: usize,
        samples: Vec<f64>,
    ) -> Result<Pooled> {
        let median = Summary::of(&samples).context("no samples")?.median;
        let (mode, path, touch) = match t {
            Transport::Shm | Transport::Mem => {
                let path = if uses_loan(args.path, size) {
                    "loan"
                } else {
                    "inline"
                };
                (args.mode, path, args.touch)
            }
            Transport::ShmChan => (args.mode, "copy", true),
            // Doorbell modes apply to shared memory only; sockets and pipes block.
            _ => (Mode::Block, "copy", true),
        };
        Ok(Pooled {
            transport: name,
            mode,
            size,
            path,
            touch,
            samples,
            round_medians: vec![median],
            cpu_idle_pct: None,
        })
    }
}

/// Runs `offhost bench pingpong`.
pub fn run(args: PingpongArgs) -> Result<()> {
    // Chosen before anything pins this thread (the echo engine inherits our affinity).
    let cpus = affinity::cpu_pair();
    let floors = args
        .floors
        .then(|| super::floors::measure_with_progress(100_000));
    let rounds = args.rounds as usize;
    let mut pooled: Vec<Pooled> = Vec::new();
    if let Some(block) = args.interleave {
        pooled = super::interleave::measure(&args, cpus, block as usize)?;
    }
    for round in 0..rounds * usize::from(args.interleave.is_none()) {
        let last = round + 1 == rounds;
        let mut blocks = Vec::new();
        for &t in &args.transport {
            match t {
                Transport::Shm | Transport::Mem => {
                    blocks.extend(ring_samples(&args, t, cpus, round, last)?)
                }
                other => {
                    for &size in &args.sizes {
                        let iters = share(iters_for(&args, size), rounds, round);
                        let (name, s) =
                            super::channels::pingpong(other, args.mode, size, iters, cpus)
                                .with_context(|| {
                                    format!("pingpong of {size}-byte messages over {other:?}")
                                })?;
                        blocks.push(Pooled::new(&args, other, name, size, s)?);
                    }
                }
            }
        }
        if round == 0 {
            pooled = blocks;
        } else {
            for (p, b) in pooled.iter_mut().zip(blocks) {
                p.samples.extend(b.samples);
                p.round_medians.extend(b.round_medians);
                p.cpu_idle_pct = b.cpu_idle_pct.or(p.cpu_idle_pct);
            }
        }
    }
    let mut rows = Vec::new();
    for p in pooled {
        let s = Summary::of(&p.samples).context("no samples")?;
        let mut r = row(
            p.transport,
            p.mode,
            p.size,
            p.path,
            p.samples.len(),
            &s,
            floors.as_ref(),
        );
        r.touch = p.touch;
        r.cpu_idle_pct = p.cpu_idle_pct;
        if p.round_medians.len() > 1 {
            r.round_medians_ns = p.round_medians;
        }
        rows.push(r);
    }
    vs_raw(&mut rows);
    emit(
        &rows,
        Output {
            json: args.json,
            csv: args.csv,
            fit: args.fit,
            plot: args.plot.as_deref(),
        },
    )
}

/// The raw peer a channel transport is compared with.
fn raw_peer(transport: &str) -> Option<&'static str> {
    match transport {
        "shm-chan" => Some("shm"),
        "tcp" => Some("tcp-raw"),
        "unix" => Some("unix-raw"),
        _ => None,
    }
}

/// Fills each channel row's `vs_raw`: the median over rounds (or blocks) of its round median
/// divided by its raw peer's in the same round, when the run measured both more than once.
fn vs_raw(rows: &mut [Row]) {
    for i in 0..rows.len() {
        let Some(peer) = raw_peer(rows[i].transport) else {
            continue;
        };
        let raw = rows
            .iter()
            .find(|r| r.transport == peer && r.size == rows[i].size && r.mode == rows[i].mode);
        let Some(raw) = raw else { continue };
        let (a, b) = (&rows[i].round_medians_ns, &raw.round_medians_ns);
        if a.len() < 2 || a.len() != b.len() {
            continue;
        }
        let ratios: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
        rows[i].vs_raw = Summary::of(&ratios).map(|s| s.median);
    }
}

/// Round `round`'s share of `iters` round trips split over `rounds` (the shares add up to
/// `iters`; each is at least 1).
fn share(iters: usize, rounds: usize, round: usize) -> usize {
    (iters / rounds + usize::from(round < iters % rounds)).max(1)
}

/// Timed round trips for `size`: `--iters`, or from 20000 for small sizes down to 500.
pub(super) fn iters_for(args: &PingpongArgs, size: usize) -> usize {
    args.iters
        .unwrap_or((50_000_000 / size).clamp(500, 20_000))
        .max(1)
}

/// A report line from one-way times `s` (ns).
fn row(
    transport: &'static str,
    mode: Mode,
    size: usize,
    path: &'static str,
    iters: usize,
    s: &Summary,
    floors: Option<&offhost_bench::floors::Floors>,
) -> Row {
    let mb_per_s = size as f64 / s.median * 1e3;
    Row {
        bench: "pingpong",
        transport,
        mode: mode.name(),
        size,
        path,
        touch: false,
        iters,
        one_way_ns_median: s.median,
        one_way_ns_p99: s.p99,
        mb_per_s,
        round_medians_ns: Vec::new(),
        vs_raw: None,
        cpu_idle_pct: None,
        vs_cacheline: floors.map(|f| s.median / f.cacheline_ns),
        vs_futex: floors.map(|f| s.median / f.futex_ns),
        vs_memcpy: floors.map(|f| mb_per_s / (f.memcpy_gb_per_s * 1e3)),
        summary: *s,
    }
}

/// One round of the raw-ring transport `transport` (`shm`, `mem`): samples per size, and on the
/// `last` round the echo engine's CPU use while idle.
fn ring_samples(
    args: &PingpongArgs,
    transport: Transport,
    cpus: Option<(usize, usize)>,
    round: usize,
    last: bool,
) -> Result<Vec<Pooled>> {
    let config = config(args);
    let (ep, peer) = start_peer(args, transport, &config, cpus)?;
    if let Some((a, _)) = cpus {
        affinity::pin_current_thread(a);
    }
    let name = if transport == Transport::Shm {
        "shm"
    } else {
        "mem"
    };
    let mut ep = ep;
    let mut blocks = Vec::new();
    for &size in &args.sizes {
        let loan = uses_loan(args.path, size);
        let iters = share(iters_for(args, size), args.rounds as usize, round);
        let samples = measure(&mut ep, size, loan, iters)
            .with_context(|| format!("pingpong of {size}-byte records"))?;
        blocks.push(Pooled::new(args, transport, name, size, samples)?);
    }
    if last {
        let idle = idle_cpu_pct(&peer, args.idle_secs);
        for b in &mut blocks {
            b.cpu_idle_pct = idle;
        }
    }
    drop(ep); // the echo engine sees the hang-up and ends
    stop_peer(peer)?;
    Ok(blocks)
}

/// Waits for an echo engine whose host hung up to end (a process that does not is killed
/// after 5 s).
pub(super) fn stop_peer(peer: Peer) -> Result<()> {
    match peer {
        Peer::Process(mut c) => {
            if reap(&mut c)? {
                eprintln!("pingpong: echo engine did not exit on hang-up; killed it");
            }
        }
        Peer::Thread(h, _) => h
            .join()
            .map_err(|_| anyhow::anyhow!("echo thread panicked"))?,
        Peer::Remote => {}
    }
    Ok(())
}

/// Waits up to 5 s for an echo process whose host hung up to exit, then kills it; true when it
/// had to be killed.
pub(super) fn reap(child: &mut Child) -> Result<bool> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while child.try_wait()?.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    if child.try_wait()?.is_some() {
        return Ok(false);
    }
    let _ = child.kill();
    let _ = child.wait();
    Ok(true)
}

/// Times `iters` round trips of `size`-byte records after a tenth as many untimed ones; returns
/// one-way times (half of each round trip) in ns.
fn measure(ep: &mut Endpoint, size: usize, loan: bool, iters: usize) -> Result<Vec<f64>> {
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
    Ok(samples)
}

/// Sends `data` (copied into the ring, or into a pool buffer) and copies the echo into `back`.
pub(super) fn round_trip(
    ep: &mut Endpoint,
    data: &[u8],
    back: &mut [u8],
    loan: bool,
) -> Result<()> {
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
