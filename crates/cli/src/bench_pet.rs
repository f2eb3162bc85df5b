//! `offhost bench pet`: histogramming speed on one core and
//! the demo pipeline's real-time factor at a clinical count rate.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context as _;
use offhost_engine::{EngineConfig, Pipeline};
use offhost_pet::petlink_hist::PetlinkHistogrammer;
use offhost_pet::recon::{self, Method};
use offhost_pet::sim::{SimConfig, Source};
use offhost_pet::sinogram::{EnergyWindow, Histogrammer};
use offhost_pet::Scanner;
use serde_json::json;

/// Options of the PET benchmark.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Events held in memory for the histogramming measurement.
    #[arg(long, default_value_t = 4_000_000)]
    events: usize,
    /// Passes over them (the best pass is reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Events through the end-to-end demo pipeline.
    #[arg(long, default_value_t = 8_000_000)]
    pipeline_events: u64,
    /// Simulated clinical count rate of the pipeline, events per second.
    #[arg(long, default_value_t = 4.0e6)]
    rate: f64,
    /// PETLINK file replayed for the word-histogramming measurement.
    #[arg(long, default_value = "data/petlink/small_listmode_file.l")]
    petlink: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// CPU time of the calling thread, seconds (the machine is shared: wall time includes
/// other people's work, thread CPU time does not).
fn thread_cpu_s() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// Best wall time and best thread CPU time over `reps` runs of `f`.
fn best_of(reps: usize, mut f: impl FnMut()) -> (f64, f64) {
    (0..reps.max(1))
        .map(|_| {
            let (t, c) = (Instant::now(), thread_cpu_s());
            f();
            (t.elapsed().as_secs_f64(), thread_cpu_s() - c)
        })
        .fold((f64::INFINITY, f64::INFINITY), |(a, b), (x, y)| {
            (a.min(x), b.min(y))
        })
}

/// Runs the benchmark.
pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    let scanner = Scanner::demo();
    eprintln!(
        "simulating {} events for the histogramming measurement...",
        a.events
    );
    let mut src = Source::new(
        &scanner,
        SimConfig {
            rate: a.rate,
            ..SimConfig::default()
        },
    )?;
    let mut events = Vec::with_capacity(a.events);
    let (t, c) = (Instant::now(), thread_cpu_s());
    src.fill(&mut events, a.events);
    let (sim_s, sim_cpu_s) = (t.elapsed().as_secs_f64(), thread_cpu_s() - c);

    // Histogramming on one core: the calling thread, events already in memory. The span-1
    // sinogram (256 sinograms, 16 MiB) is larger than the caches, so nearly every event
    // is a cache miss; the single-slice-rebinned one (31 sinograms, 2 MiB) stays in cache.
    let mut h = Histogrammer::new(&scanner, EnergyWindow::kev(435.0, 650.0))?;
    // Each pass ends with a flush, so increments still waiting in buckets (sinograms over
    // 2 MiB) are counted in the pass that added them.
    let (hist_s, hist_cpu_s) = best_of(a.reps, || {
        h.add(&events);
        h.flush();
    });
    let events_per_s = a.events as f64 / hist_s;
    let mut h2 = Histogrammer::new(
        &scanner.with_span(scanner.ssrb_span()),
        EnergyWindow::kev(435.0, 650.0),
    )?;
    let (ssrb_s, ssrb_cpu_s) = best_of(a.reps, || {
        h2.add(&events);
        h2.flush();
    });

    // PETLINK words (the real mMR file, replayed to at least 4 M words).
    let petlink = match std::fs::read(&a.petlink) {
        Ok(bytes) => {
            let words: Vec<u32> = bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect();
            let mut all = Vec::new();
            while all.len() < 4_000_000 {
                all.extend_from_slice(&words);
            }
            let mut ph = PetlinkHistogrammer::new(&Scanner::mmr(), 11)?;
            let (s, c) = best_of(a.reps, || {
                ph.add_words(&all);
                ph.flush();
            });
            Some((all.len() as f64 / s, all.len() as f64 / c))
        }
        Err(e) => {
            eprintln!("skipping PETLINK words: {}: {e}", a.petlink.display());
            None
        }
    };

    // Processing at the clinical rate: the events above, recorded to a file, replayed
    // through read -> energy window -> sinogram (with snapshots). Their time stamps span
    // `events / rate` seconds of scan.
    let file = std::env::temp_dir().join(format!("offhost-bench-pet-{}.lm", std::process::id()));
    {
        let mut w = offhost_pet::listmode::Writer::create(&file, &scanner)?;
        w.write_events(&events)?;
        w.finish()?;
    }
    let registry = offhost_pet::tasks::registry();
    let cfg = EngineConfig::default();
    let replay = format!(
        "pet-read path={} >events:lm(16,64k)\n\
         energy-window lower=435 upper=650 <events >windowed\n\
         sinogram scanner=demo span=1 snapshot={} <windowed >sinograms\n\
         null <sinograms\n",
        file.display(),
        (a.events / 4).max(1)
    );
    let t = Instant::now();
    let replayed = Pipeline::parse(&replay)?
        .start(&registry, &cfg)?
        .wait()
        .context("replay pipeline");
    let replay_s = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&file);
    replayed?;
    let scan_s = src.time_s();

    // Live: two simulated sources (one per core) at the clinical rate, window, histogram.
    eprintln!(
        "running the live demo pipeline with {} events...",
        a.pipeline_events
    );
    let half = a.pipeline_events / 2;
    let text = format!(
        "pet-sim scanner=demo phantom=nema events={half} rate={r} seed=1 >e1:lm1(16,64k)\n\
         pet-sim scanner=demo phantom=nema events={half} rate={r} seed=2 >e2:lm2(16,64k)\n\
         energy-window lower=435 upper=650 <e1 >w1\n\
         energy-window lower=435 upper=650 <e2 >w2\n\
         sinogram scanner=demo span=1 snapshot={snap} <w1 <w2 >sinograms\n\
         null <sinograms\n",
        r = a.rate / 2.0,
        snap = (a.pipeline_events / 4).max(1)
    );
    let t = Instant::now();
    let stats = Pipeline::parse(&text)?
        .start(&registry, &cfg)?
        .wait()
        .context("demo pipeline")?;
    let pipe_s = t.elapsed().as_secs_f64();
    let acquisition_s = (2 * half) as f64 / a.rate;
    let sim_report = stats.tasks[0].report.clone().unwrap_or_default();

    // Reconstruction of a full demo sinogram.
    let (sino, _) = {
        let mut h = Histogrammer::new(&scanner, EnergyWindow::kev(435.0, 650.0))?;
        h.add(&events);
        h.finish()
    };
    let t = Instant::now();
    let _ = recon::reconstruct(&sino, Method::Fbp, true);
    let fbp_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let _ = recon::reconstruct(&sino, Method::Mlem(10), true);
    let mlem_s = t.elapsed().as_secs_f64();

    let v = json!({
        "events_per_s": events_per_s,
        "hist_events": a.events,
        "events_per_cpu_s": a.events as f64 / hist_cpu_s,
        "hist_sinogram_bytes": 4 * h.snapshot().data.len(),
        "ssrb_events_per_s": a.events as f64 / ssrb_s,
        "ssrb_events_per_cpu_s": a.events as f64 / ssrb_cpu_s,
        "ssrb_sinogram_bytes": 4 * h2.snapshot().data.len(),
        "hist_best_s": hist_s,
        "petlink_words_per_s": petlink.map(|p| p.0),
        "petlink_words_per_cpu_s": petlink.map(|p| p.1),
        "sim_events_per_s": a.events as f64 / sim_s,
        "sim_events_per_cpu_s": a.events as f64 / sim_cpu_s,
        "replay_events": a.events,
        "replay_scan_s": scan_s,
        "replay_wall_s": replay_s,
        "replay_events_per_s": a.events as f64 / replay_s,
        "realtime_factor": scan_s / replay_s,
        "pipeline_events": 2 * half,
        "pipeline_rate": a.rate,
        "pipeline_acquisition_s": acquisition_s,
        "pipeline_wall_s": pipe_s,
        "pipeline_events_per_s": a.pipeline_events as f64 / pipe_s,
        "live_realtime_factor": acquisition_s / pipe_s,
        "pipeline_workers": cfg.workers,
        "recon_fbp_s": fbp_s,
        "recon_mlem10_s": mlem_s,
        "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
    });
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "histogramming into span 1 (16 MiB), one core: {:.1} M events/s wall, {:.1} M events per CPU second (best of {} passes over {} events)",
            events_per_s / 1e6,
            a.events as f64 / hist_cpu_s / 1e6,
            a.reps,
            a.events
        );
        println!(
            "histogramming into 2D (SSRB, 2 MiB), one core: {:.1} M events/s wall, {:.1} M per CPU second",
            a.events as f64 / ssrb_s / 1e6,
            a.events as f64 / ssrb_cpu_s / 1e6
        );
        if let Some((w, c)) = petlink {
            println!(
                "PETLINK words, one core: {:.1} M words/s wall, {:.1} M per CPU second",
                w / 1e6,
                c / 1e6
            );
        }
        println!(
            "simulation, one core: {:.2} M events/s wall, {:.2} M per CPU second",
            a.events as f64 / sim_s / 1e6,
            a.events as f64 / sim_cpu_s / 1e6
        );
        println!(
            "recorded events replayed (read, energy window, sinogram): {} events = {:.2} s of scan at {:.1} M/s in {:.2} s wall: real-time factor {:.2}",
            a.events,
            scan_s,
            a.events as f64 / scan_s / 1e6,
            replay_s,
            scan_s / replay_s
        );
        println!(
            "live demo pipeline (2 simulators, windows, sinogram): {} events at {:.1} M/s = {:.2} s of scan in {:.2} s wall: real-time factor {:.2} ({} workers)",
            2 * half,
            a.rate / 1e6,
            acquisition_s,
            pipe_s,
            acquisition_s / pipe_s,
            cfg.workers
        );
        println!("  source: {sim_report}");
        println!("reconstruction of 31 slices: FBP {fbp_s:.2} s, MLEM 10 iterations {mlem_s:.2} s");
    }
    Ok(())
}
