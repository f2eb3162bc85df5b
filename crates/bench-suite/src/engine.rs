//! `engine`: the engine's overheads against memcpy, measured in one run.
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

use offhost_bench::sizes;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use offhost_bench::cpu::process_cpu_s;
use offhost_engine::{EngineConfig, Pipeline, Registry};
use serde::Serialize;

use crate::error::{check, Error, Result};

const AUDIO_ION: &str = include_str!("../../../examples/audio.ion");

/// What to measure.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Buffers sent through the hop chain.
    #[arg(long, default_value_t = 400_000)]
    pub hop_buffers: u64,
    /// Bytes sent through the 4-stage chain (K, M, G suffixes).
    #[arg(long, default_value = "2G", value_parser = |s: &str| sizes::parse_size(s).map(|v| v as u64))]
    pub chain_bytes: u64,
    /// Seconds of audio streamed through examples/audio.ion.
    #[arg(long, default_value_t = 600.0)]
    pub audio_seconds: f64,
    /// Instead: WebAssembly modules against the built-ins they stand for (pass-through
    /// against `count`, mu-law against `mulaw`) at 64 B (--hop-buffers buffers) and 64 KiB
    /// (--chain-bytes bytes); see `crate::wasm`.
    #[arg(long)]
    pub wasm: bool,
    /// Where the example modules are (examples/wasm/build.sh writes them there).
    #[arg(long, default_value = "target/wasm-examples")]
    pub wasm_modules: std::path::PathBuf,
    /// Instead: what a live view costs, the 4-stage chain with and without a view and a
    /// connected page, alternating (see `crate::view`).
    #[arg(long)]
    pub view: bool,
    /// Instead: the telephony chain (WAV, mix, 44.1 to 8 kHz, mu-law) by offhost, sox and
    /// GStreamer on one input of --audio-seconds: wall, CPU and SNR against the ideal
    /// converter, in rounds (see `crate::audio_peers`).
    #[arg(long)]
    pub peers: bool,
    /// Rounds of --peers (each runs every tool once).
    #[arg(long, default_value_t = 3)]
    pub peer_rounds: usize,
    /// Instead: double buffering, one message in flight against two, on host ports and the
    /// off-host transport (see `crate::overlap`).
    #[arg(long)]
    pub overlap: bool,
    /// Message sizes of --overlap (K, M suffixes).
    #[arg(long, value_delimiter = ',', default_value = "4K,64K,1M", value_parser = sizes::parse_size)]
    pub overlap_sizes: Vec<usize>,
    /// Seconds of --overlap's each stream (per path, size, depth and round; 3 rounds).
    #[arg(long, default_value_t = 0.5)]
    pub overlap_seconds: f64,
}

impl Options {
    /// What `--peers` runs, with `exe` as offhost.
    pub fn peers_plan(&self, exe: std::path::PathBuf) -> crate::audio_peers::Plan {
        crate::audio_peers::Plan {
            exe,
            seconds: self.audio_seconds,
            rounds: self.peer_rounds,
        }
    }

    /// What `--overlap` measures.
    pub fn overlap_plan(&self) -> crate::overlap::Plan {
        crate::overlap::Plan {
            sizes: self.overlap_sizes.clone(),
            seconds: self.overlap_seconds,
            rounds: 3,
        }
    }
}

/// The figures of one run.
#[derive(Serialize, Debug)]
pub struct Report {
    /// Worker threads.
    pub workers: usize,
    /// Cost per buffer per task hop, ns.
    pub hop_ns: f64,
    /// Buffers sent through the hop chain.
    pub hop_buffers: u64,
    /// The 4-stage chain's throughput, GB/s.
    pub chain4_gb_per_s: f64,
    /// memcpy of the same bytes, GB/s.
    pub memcpy_gb_per_s: f64,
    /// chain4 / memcpy.
    pub chain4_over_memcpy: f64,
    /// Bytes through the chain.
    pub chain_bytes: u64,
    /// Seconds of audio streamed.
    pub audio_seconds: f64,
    /// Wall time of the audio stream, s.
    pub audio_elapsed_s: f64,
    /// Audio seconds per wall second.
    pub audio_realtime_factor: f64,
    /// CPU time of the audio stream (user + system), s.
    pub audio_cpu_s: f64,
    /// Audio seconds per CPU second.
    pub audio_realtime_factor_cpu: f64,
    /// Resident memory at the start of the audio stream, KiB.
    pub audio_rss_kib_start: u64,
    /// Most resident memory seen while it ran, KiB.
    pub audio_rss_kib_max: u64,
    /// Resident memory at its end, KiB.
    pub audio_rss_kib_end: u64,
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

/// Seconds from the start of `text` (built from `reg`) to the end of its run. The clock
/// starts before the engine does, not after `start` returns: the workers run the tasks as
/// soon as they exist, and a short pipeline can be done before `start` returns (the time
/// then misses the run, not the start-up, which costs tens of microseconds).
pub(crate) fn time_pipeline(text: &str, reg: &Registry, cfg: &EngineConfig) -> Result<f64> {
    let pipeline = Pipeline::parse(text)?;
    let t0 = Instant::now();
    let run = pipeline.start(reg, cfg)?;
    run.wait()?;
    Ok(t0.elapsed().as_secs_f64())
}

/// `fill` through `k` pass-through `count` tasks into `null`, on a free list of `count`
/// buffers of `size` bytes.
pub(crate) fn chain(k: usize, bytes: u64, size: usize, count: usize) -> String {
    let mut s = format!("fill bytes={bytes} >q0:p({count},{size})\n");
    for i in 0..k {
        s.push_str(&format!("count <q{i} >q{}\n", i + 1));
    }
    s.push_str(&format!("null <q{k}\n"));
    s
}

/// The smallest of `n` results of `f`.
pub(crate) fn best_of(n: usize, mut f: impl FnMut() -> Result<f64>) -> Result<f64> {
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

fn audio(seconds: f64, cfg: &EngineConfig, bar: &ProgressBar) -> Result<AudioRun> {
    let dir = tempfile::tempdir()?;
    let wav = dir.path().join("loudspeaker.wav");
    let text = AUDIO_ION
        .replace("seconds=10", &format!("seconds={seconds}"))
        .replace("path=loudspeaker.wav", &format!("path={}", wav.display()));
    check(text.contains(&format!("seconds={seconds}")), || {
        "examples/audio.ion changed shape".into()
    })?;
    let reg = Registry::with_builtins();
    let mut run = Pipeline::parse(&text)?.start(&reg, cfg)?;
    let out = run
        .host_output("host")
        .ok_or_else(|| Error::Check("audio.ion has no host-out name=host".into()))?;
    let sink = std::thread::spawn(move || {
        let mut n = 0u64;
        while let Some(b) = out.recv() {
            n += b.len() as u64;
        }
        n
    });
    let rss_start = rss_kib();
    let mut rss_max = rss_start;
    let cpu0 = process_cpu_s(None).unwrap_or(0.0);
    let t0 = Instant::now();
    while !run.wait_timeout(Duration::from_millis(50)) {
        rss_max = rss_max.max(rss_kib());
        bar.tick();
    }
    let dt = t0.elapsed().as_secs_f64();
    run.wait()?;
    let bytes = sink
        .join()
        .map_err(|_| Error::Check("host reader panicked".into()))?;
    let cpu = process_cpu_s(None).unwrap_or(0.0) - cpu0;
    check(bytes > 0, || "no mu-law output".into())?;
    let rss_end = rss_kib();
    Ok((dt, cpu, rss_start, rss_max.max(rss_end), rss_end))
}

/// Runs the benchmark; `bar` shows its four phases.
pub fn run(o: &Options, bar: &ProgressBar) -> Result<Report> {
    let cfg = EngineConfig {
        workers: o.workers.max(1),
        pin: false,
        batch: 64,
    };
    let reg = Registry::with_builtins();
    bar.set_length(4);
    bar.set_message("hop chain");
    let small = 64usize;
    let hop_bytes = o.hop_buffers * small as u64;
    let t0 = best_of(3, || {
        time_pipeline(&chain(0, hop_bytes, small, 256), &reg, &cfg)
    })?;
    let t16 = best_of(3, || {
        time_pipeline(&chain(16, hop_bytes, small, 256), &reg, &cfg)
    })?;
    let hop_ns = ((t16 - t0) / (16.0 * o.hop_buffers as f64) * 1e9).max(0.0);
    bar.inc(1);

    bar.set_message("4-stage chain");
    let big = 64 * 1024;
    let chain4 = o.chain_bytes as f64
        / best_of(3, || {
            time_pipeline(&chain(4, o.chain_bytes, big, 32), &reg, &cfg)
        })?
        / 1e9;
    bar.inc(1);
    bar.set_message("memcpy");
    let memcpy = (0..3)
        .map(|_| memcpy_gb_per_s(o.chain_bytes, big, 32))
        .fold(0.0, f64::max);
    bar.inc(1);
    bar.set_message(format!("audio, {} s of stream", o.audio_seconds));
    let (dt, cpu, rs, rm, re) = audio(o.audio_seconds, &cfg, bar)?;
    bar.inc(1);
    Ok(Report {
        workers: cfg.workers,
        hop_ns,
        hop_buffers: o.hop_buffers,
        chain4_gb_per_s: chain4,
        memcpy_gb_per_s: memcpy,
        chain4_over_memcpy: chain4 / memcpy,
        chain_bytes: o.chain_bytes,
        audio_seconds: o.audio_seconds,
        audio_elapsed_s: dt,
        audio_realtime_factor: o.audio_seconds / dt,
        audio_cpu_s: cpu,
        audio_realtime_factor_cpu: o.audio_seconds / cpu.max(0.01),
        audio_rss_kib_start: rs,
        audio_rss_kib_max: rm,
        audio_rss_kib_end: re,
    })
}

impl Report {
    /// The figures as text.
    pub fn table(&self) -> String {
        format!(
            "workers                 {}\n\
             hop                     {:.1} ns per buffer per task\n\
             4-stage chain, 64 KiB   {:.2} GB/s\n\
             memcpy, 64 KiB          {:.2} GB/s\n\
             chain / memcpy          {:.2}\n\
             audio example           {:.0}x real time ({} s of audio in {:.2} s)\n\
             audio, per CPU second   {:.0}x real time ({:.2} s of CPU)\n\
             resident memory         start {} KiB, max {} KiB, end {} KiB\n",
            self.workers,
            self.hop_ns,
            self.chain4_gb_per_s,
            self.memcpy_gb_per_s,
            self.chain4_over_memcpy,
            self.audio_realtime_factor,
            self.audio_seconds,
            self.audio_elapsed_s,
            self.audio_realtime_factor_cpu,
            self.audio_cpu_s,
            self.audio_rss_kib_start,
            self.audio_rss_kib_max,
            self.audio_rss_kib_end
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short run of every phase: the chains move their bytes and the audio example its
    /// stream, and the text shows each figure.
    #[test]
    fn a_small_run_measures_every_phase() {
        let o = Options {
            workers: 1,
            hop_buffers: 2000,
            chain_bytes: 4 << 20,
            audio_seconds: 0.5,
            wasm: false,
            wasm_modules: "target/wasm-examples".into(),
            view: false,
            peers: false,
            peer_rounds: 1,
            overlap: false,
            overlap_sizes: vec![],
            overlap_seconds: 0.0,
        };
        let r = run(&o, &ProgressBar::hidden()).unwrap();
        assert!(r.chain4_gb_per_s > 0.0 && r.memcpy_gb_per_s > 0.0, "{r:?}");
        assert!(r.audio_elapsed_s > 0.0 && r.audio_rss_kib_max >= r.audio_rss_kib_start);
        assert_eq!(r.table().lines().count(), 8);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["chain_bytes"], 4 << 20);
    }

    #[test]
    fn a_bad_pipeline_is_an_error() {
        let cfg = EngineConfig::default();
        assert!(time_pipeline("no-such-task >x\n", &Registry::with_builtins(), &cfg).is_err());
    }
}
