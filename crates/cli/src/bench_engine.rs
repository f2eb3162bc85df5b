//! `offhost bench engine`: the engine's overheads against memcpy, measured in one run.
//!
//! - `hop_ns`: cost per buffer per task hop. A `fill` source sends small buffers through a
//!   chain of K pass-through `count` tasks into `null`; the figure is the slope
//!   (time(K=16) - time(K=0)) / (16 x buffers), so source and sink costs cancel.
//! - `chain4_gb_per_s`: `fill` (which writes every byte, as a device would) -> 4 x `count` ->
//!   `null` over 64 KiB buffers; `memcpy_gb_per_s` copies the same bytes between 64 KiB
//!   buffers of a working set the size of the pool.
//! - `audio_*`: `examples/audio.ion` over a long stream (default 600 s of audio): real-time
//!   factor by wall clock and by CPU time (user + system of the whole process, which on a
//!   shared machine is the steadier figure), and resident memory sampled while it runs.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use indicatif::{ProgressBar, ProgressStyle};
use offhost_engine::{EngineConfig, Pipeline, Registry};
use serde::Serialize;

const AUDIO_ION: &str = include_str!("../../../examples/audio.ion");

/// Arguments of `offhost bench engine`.
#[derive(clap::Args, Debug)]
pub struct BenchEngineArgs {
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Buffers sent through the hop chain.
    #[arg(long, default_value_t = 400_000)]
    hop_buffers: u64,
    /// Bytes sent through the 4-stage chain (k, M, G suffixes).
    #[arg(long, default_value = "2G")]
    chain_bytes: String,
    /// Seconds of audio streamed through examples/audio.ion.
    #[arg(long, default_value_t = 600.0)]
    audio_seconds: f64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize, Debug)]
struct Report {
    workers: usize,
    hop_ns: f64,
    hop_buffers: u64,
    chain4_gb_per_s: f64,
    memcpy_gb_per_s: f64,
    chain4_over_memcpy: f64,
    chain_bytes: u64,
    audio_seconds: f64,
    audio_elapsed_s: f64,
    audio_realtime_factor: f64,
    audio_cpu_s: f64,
    audio_realtime_factor_cpu: f64,
    audio_rss_kib_start: u64,
    audio_rss_kib_max: u64,
    audio_rss_kib_end: u64,
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// CPU time (user + system) of this process so far, in seconds, from /proc/self/stat
/// (clock ticks of 1/100 s).
fn cpu_s() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // Fields after the command name (which may contain spaces) start at ')'.
            let rest = &s[s.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            let utime: f64 = f.get(11)?.parse().ok()?;
            let stime: f64 = f.get(12)?.parse().ok()?;
            Some((utime + stime) / 100.0)
        })
        .unwrap_or(0.0)
}

fn time_pipeline(text: &str, cfg: &EngineConfig) -> anyhow::Result<f64> {
    let reg = Registry::with_builtins();
    let run = Pipeline::parse(text)?.start(&reg, cfg)?;
    let t0 = Instant::now();
    run.wait().map_err(|e| anyhow!("{e}"))?;
    Ok(t0.elapsed().as_secs_f64())
}

fn chain(k: usize, bytes: u64, size: usize, count: usize) -> String {
    let mut s = format!("fill bytes={bytes} >q0:p({count},{size})\n");
    for i in 0..k {
        s.push_str(&format!("count <q{i} >q{}\n", i + 1));
    }
    s.push_str(&format!("null <q{k}\n"));
    s
}

fn best_of(n: usize, mut f: impl FnMut() -> anyhow::Result<f64>) -> anyhow::Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..n {
        best = best.min(f()?);
    }
    Ok(best)
}

fn memcpy_gb_per_s(bytes: u64, size: usize, count: usize) -> f64 {
    let src: Vec<Vec<u8>> = (0..count).map(|i| vec![i as u8; size]).collect();
    let mut dst: Vec<Vec<u8>> = (0..count).map(|_| vec![0u8; size]).collect();
    let n = (bytes / size as u64) as usize;
    let t0 = Instant::now();
    for i in 0..n {
        let j = i % count;
        dst[j].copy_from_slice(&src[(j + 1) % count]);
    }
    let dt = t0.elapsed().as_secs_f64();
    std::hint::black_box(&dst);
    bytes as f64 / dt / 1e9
}

/// Wall seconds, CPU seconds, RSS at start, max and end (KiB).
type AudioRun = (f64, f64, u64, u64, u64);

fn audio(seconds: f64, cfg: &EngineConfig, bar: &ProgressBar) -> anyhow::Result<AudioRun> {
    let dir = tempfile::tempdir()?;
    let wav = dir.path().join("loudspeaker.wav");
    let text = AUDIO_ION
        .replace("seconds=10", &format!("seconds={seconds}"))
        .replace("path=loudspeaker.wav", &format!("path={}", wav.display()));
    anyhow::ensure!(
        text.contains(&format!("seconds={seconds}")),
        "examples/audio.ion changed shape"
    );
    let reg = Registry::with_builtins();
    let mut run = Pipeline::parse(&text)?.start(&reg, cfg)?;
    let out = run
        .host_output("host")
        .context("audio.ion has host-out name=host")?;
    let sink = std::thread::spawn(move || {
        let mut n = 0u64;
        while let Some(b) = out.recv() {
            n += b.len() as u64;
        }
        n
    });
    let rss_start = rss_kib();
    let mut rss_max = rss_start;
    let cpu0 = cpu_s();
    let t0 = Instant::now();
    while !run.wait_timeout(Duration::from_millis(50)) {
        rss_max = rss_max.max(rss_kib());
        bar.tick();
    }
    let dt = t0.elapsed().as_secs_f64();
    run.wait().map_err(|e| anyhow!("{e}"))?;
    let bytes = sink.join().map_err(|_| anyhow!("host reader panicked"))?;
    let cpu = cpu_s() - cpu0;
    anyhow::ensure!(bytes > 0, "no mu-law output");
    let rss_end = rss_kib();
    Ok((dt, cpu, rss_start, rss_max.max(rss_end), rss_end))
}

/// Runs the benchmark and prints the figures.
pub fn run(args: BenchEngineArgs) -> anyhow::Result<()> {
    let cfg = EngineConfig {
        workers: args.workers.max(1),
        pin: false,
        batch: 64,
    };
    let chain_bytes = offhost_engine::parse_size(&args.chain_bytes).ok_or_else(|| {
        anyhow!(
            "--chain-bytes {}: expected a size like 2G",
            args.chain_bytes
        )
    })?;
    let bar = ProgressBar::new(4);
    bar.set_style(
        ProgressStyle::with_template("{bar:20} {pos}/{len} {msg}").expect("valid template"),
    );

    bar.set_message("hop chain");
    let small = 64usize;
    let hop_bytes = args.hop_buffers * small as u64;
    let t0 = best_of(3, || time_pipeline(&chain(0, hop_bytes, small, 256), &cfg))?;
    let t16 = best_of(3, || time_pipeline(&chain(16, hop_bytes, small, 256), &cfg))?;
    let hop_ns = ((t16 - t0) / (16.0 * args.hop_buffers as f64) * 1e9).max(0.0);
    bar.inc(1);

    bar.set_message("4-stage chain");
    let big = 64 * 1024;
    let chain4 = chain_bytes as f64
        / best_of(3, || time_pipeline(&chain(4, chain_bytes, big, 32), &cfg))?
        / 1e9;
    bar.inc(1);
    bar.set_message("memcpy");
    let memcpy = (0..3)
        .map(|_| memcpy_gb_per_s(chain_bytes, big, 32))
        .fold(0.0, f64::max);
    bar.inc(1);
    bar.set_message(format!("audio, {} s of stream", args.audio_seconds));
    let (dt, cpu, rs, rm, re) = audio(args.audio_seconds, &cfg, &bar)?;
    bar.inc(1);
    bar.finish_and_clear();

    let r = Report {
        workers: cfg.workers,
        hop_ns,
        hop_buffers: args.hop_buffers,
        chain4_gb_per_s: chain4,
        memcpy_gb_per_s: memcpy,
        chain4_over_memcpy: chain4 / memcpy,
        chain_bytes,
        audio_seconds: args.audio_seconds,
        audio_elapsed_s: dt,
        audio_realtime_factor: args.audio_seconds / dt,
        audio_cpu_s: cpu,
        audio_realtime_factor_cpu: args.audio_seconds / cpu.max(0.01),
        audio_rss_kib_start: rs,
        audio_rss_kib_max: rm,
        audio_rss_kib_end: re,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!("workers                 {}", r.workers);
        println!(
            "hop                     {:.1} ns per buffer per task",
            r.hop_ns
        );
        println!("4-stage chain, 64 KiB   {:.2} GB/s", r.chain4_gb_per_s);
        println!("memcpy, 64 KiB          {:.2} GB/s", r.memcpy_gb_per_s);
        println!("chain / memcpy          {:.2}", r.chain4_over_memcpy);
        println!(
            "audio example           {:.0}x real time ({} s of audio in {:.2} s)",
            r.audio_realtime_factor, r.audio_seconds, r.audio_elapsed_s
        );
        println!(
            "audio, per CPU second   {:.0}x real time ({:.2} s of CPU)",
            r.audio_realtime_factor_cpu, r.audio_cpu_s
        );
        println!(
            "resident memory         start {} KiB, max {} KiB, end {} KiB",
            r.audio_rss_kib_start, r.audio_rss_kib_max, r.audio_rss_kib_end
        );
    }
    Ok(())
}
