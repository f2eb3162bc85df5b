//! `offhost pet bench` (to become `offhost bench pet`): histogramming speed on one core and
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
    #[arg(long, default_value = "../shared/data/petlink/small_listmode_file.l")]
    petlink: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn best_of(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// Runs the benchmark.
pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    let scanner = Scanner::demo();
    eprintln!(
        "simulating {} events for the histogramming measurement...",
        a.events
    );
    let mut src = Source::new(&scanner, SimConfig::default())?;
    let mut events = Vec::with_capacity(a.events);
    let t = Instant::now();
    src.fill(&mut events, a.events);
    let sim_s = t.elapsed().as_secs_f64();

    // Histogramming on one core: the calling thread, events already in memory.
    let mut h = Histogrammer::new(&scanner, EnergyWindow::kev(435.0, 650.0))?;
    let hist_s = best_of(a.reps, || h.add(&events));
    let events_per_s = a.events as f64 / hist_s;

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
            let s = best_of(a.reps, || ph.add_words(&all));
            Some(all.len() as f64 / s)
        }
        Err(e) => {
            eprintln!("skipping PETLINK words: {}: {e}", a.petlink.display());
            None
        }
    };

    // End to end: simulate at the clinical rate, window, histogram (acquisition).
    eprintln!(
        "running the demo pipeline with {} events...",
        a.pipeline_events
    );
    let text = format!(
        "pet-sim scanner=demo phantom=nema events={} rate={} seed=1 >events:lm(16,64k)\n\
         energy-window lower=435 upper=650 <events >windowed\n\
         sinogram scanner=demo span=1 snapshot={} <windowed >sinograms\n\
         null <sinograms\n",
        a.pipeline_events,
        a.rate,
        (a.pipeline_events / 4).max(1)
    );
    let registry = offhost_pet::tasks::registry();
    let cfg = EngineConfig::default();
    let t = Instant::now();
    let stats = Pipeline::parse(&text)?
        .start(&registry, &cfg)?
        .wait()
        .context("demo pipeline")?;
    let pipe_s = t.elapsed().as_secs_f64();
    let acquisition_s = a.pipeline_events as f64 / a.rate;
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
        "hist_best_s": hist_s,
        "petlink_words_per_s": petlink,
        "sim_events_per_s": a.events as f64 / sim_s,
        "pipeline_events": a.pipeline_events,
        "pipeline_rate": a.rate,
        "pipeline_acquisition_s": acquisition_s,
        "pipeline_wall_s": pipe_s,
        "pipeline_events_per_s": a.pipeline_events as f64 / pipe_s,
        "realtime_factor": acquisition_s / pipe_s,
        "pipeline_workers": cfg.workers,
        "recon_fbp_s": fbp_s,
        "recon_mlem10_s": mlem_s,
        "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
    });
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "histogramming, one core: {:.1} M events/s (best of {} passes over {} events)",
            events_per_s / 1e6,
            a.reps,
            a.events
        );
        if let Some(w) = petlink {
            println!("PETLINK words, one core: {:.1} M words/s", w / 1e6);
        }
        println!(
            "simulation, one core: {:.2} M events/s",
            a.events as f64 / sim_s / 1e6
        );
        println!(
            "demo pipeline: {} events at {:.1} M/s = {:.2} s of scan in {:.2} s wall: real-time factor {:.2} ({} workers)",
            a.pipeline_events,
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
