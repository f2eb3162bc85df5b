//! `pet`: histogramming speed on one core and the demo pipeline's real-time factor at a
//! clinical count rate, with the real mMR file's PETLINK words and a reconstruction.

use std::path::PathBuf;
use std::time::Instant;

use indicatif::ProgressBar;
use offhost_bench::cpu::thread_cpu_s;
use offhost_engine::{EngineConfig, Pipeline};
use offhost_pet::recon::{self, Method};
use offhost_pet::PetlinkHistogrammer;
use offhost_pet::Scanner;
use offhost_pet::{EnergyWindow, Histogrammer};
use offhost_pet::{SimConfig, Source};
use serde::Serialize;

use crate::error::{Context as _, Result};

/// What to measure.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Events held in memory for the histogramming measurement.
    #[arg(long, default_value_t = 4_000_000)]
    pub events: usize,
    /// Passes over them (the best pass is reported).
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Events through the end-to-end demo pipeline.
    #[arg(long, default_value_t = 8_000_000)]
    pub pipeline_events: u64,
    /// Simulated clinical count rate of the pipeline, events per second.
    #[arg(long, default_value_t = 4.0e6)]
    pub rate: f64,
    /// PETLINK file replayed for the word-histogramming measurement.
    #[arg(long, default_value = "data/petlink/small_listmode_file.l")]
    pub petlink: PathBuf,
    /// Subsets of the 3D OSEM rows at most (the largest divisor of views / 4 up to it, as
    /// STIR's OSMAPOSL needs; STIR gets the same).
    #[arg(long, default_value_t = 21)]
    pub subsets: usize,
    /// Full iterations of the 3D OSEM rows.
    #[arg(long, default_value_t = 1)]
    pub iterations: usize,
    /// Skip 3D OSEM of the mMR file (its sensitivity images take minutes).
    #[arg(long)]
    pub no_mmr_osem: bool,
    /// A STIR build (DIR/bin/OSMAPOSL): STIR's OSEM of the same sinograms, timed and compared.
    #[arg(long)]
    pub stir: Option<PathBuf>,
}

/// The figures of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Events histogrammed into span 1 per wall second, one core (best pass).
    pub events_per_s: f64,
    /// Events histogrammed per pass.
    pub hist_events: usize,
    /// Passes over them (the best counts).
    pub hist_passes: usize,
    /// Events histogrammed into span 1 per CPU second.
    pub events_per_cpu_s: f64,
    /// Size of the span-1 sinogram, bytes.
    pub hist_sinogram_bytes: usize,
    /// Events histogrammed into SSRB sinograms per wall second.
    pub ssrb_events_per_s: f64,
    /// The same per CPU second.
    pub ssrb_events_per_cpu_s: f64,
    /// Size of the SSRB sinogram, bytes.
    pub ssrb_sinogram_bytes: usize,
    /// Best pass of the span-1 histogramming, s.
    pub hist_best_s: f64,
    /// PETLINK words histogrammed per wall second (none without the file).
    pub petlink_words_per_s: Option<f64>,
    /// The same per CPU second.
    pub petlink_words_per_cpu_s: Option<f64>,
    /// List-mode events read from PETLINK words in memory per wall second, one core (none
    /// without the file).
    pub petlink_read_events_per_s: Option<f64>,
    /// The same events read from PETSIRD (the file converted in memory) per wall second.
    pub petsird_read_events_per_s: Option<f64>,
    /// PETSIRD's read rate over PETLINK's (goal: at least 0.8).
    pub petsird_vs_petlink: Option<f64>,
    /// PETSIRD events per second with the header's parse left out of each pass (the converted
    /// mMR file's header is 1.56 MB of 3.5).
    pub petsird_events_only_per_s: Option<f64>,
    /// That over PETLINK's rate.
    pub petsird_events_only_vs_petlink: Option<f64>,
    /// Simulated events per wall second, one core.
    pub sim_events_per_s: f64,
    /// The same per CPU second.
    pub sim_events_per_cpu_s: f64,
    /// Events of the recorded-file replay.
    pub replay_events: usize,
    /// Scan time those events span, s.
    pub replay_scan_s: f64,
    /// Wall time of the replay pipeline, s.
    pub replay_wall_s: f64,
    /// Events per wall second of the replay.
    pub replay_events_per_s: f64,
    /// Scan seconds per wall second of the replay.
    pub realtime_factor: f64,
    /// Events of the live demo pipeline.
    pub pipeline_events: u64,
    /// Its simulated count rate, events per second.
    pub pipeline_rate: f64,
    /// The scan time its events span, s.
    pub pipeline_acquisition_s: f64,
    /// Its wall time, s.
    pub pipeline_wall_s: f64,
    /// Its events per wall second.
    pub pipeline_events_per_s: f64,
    /// Scan seconds per wall second of the live pipeline.
    pub live_realtime_factor: f64,
    /// Its worker threads.
    pub pipeline_workers: usize,
    /// FBP of a demo sinogram, s.
    pub recon_fbp_s: f64,
    /// MLEM, 10 iterations, s.
    pub recon_mlem10_s: f64,
    /// 3D OSEM of the demo sinogram (span 1, 16 subsets by default): median subset
    /// iteration, s.
    pub osem_demo_subiteration_s: f64,
    /// Its sensitivity images, s.
    pub osem_demo_sensitivity_s: f64,
    /// 3D OSEM of the mMR file's span-11 sinogram: median subset iteration, s.
    pub osem_mmr_subiteration_s: Option<f64>,
    /// Its sensitivity images, s.
    pub osem_mmr_sensitivity_s: Option<f64>,
    /// STIR's OSMAPOSL on the demo sinogram: median subset iteration, s (with `--stir`).
    pub stir_demo_subiteration_s: Option<f64>,
    /// offhost's time per subset iteration over STIR's, demo (goal: at most 0.5).
    pub osem_vs_stir_demo: Option<f64>,
    /// Correlation of offhost's and STIR's demo images (voxel by voxel; goal: at least 0.95).
    pub stir_correlation_demo: Option<f64>,
    /// The same after a 5 x 5 binomial blur of both.
    pub stir_correlation_demo_blurred: Option<f64>,
    /// STIR's OSMAPOSL on the mMR sinogram: median subset iteration, s.
    pub stir_mmr_subiteration_s: Option<f64>,
    /// offhost's time per subset iteration over STIR's, mMR.
    pub osem_vs_stir_mmr: Option<f64>,
    /// Correlation of offhost's and STIR's mMR images.
    pub stir_correlation_mmr: Option<f64>,
    /// The same after a 5 x 5 binomial blur of both.
    pub stir_correlation_mmr_blurred: Option<f64>,
    /// Cores of this machine.
    pub cores: usize,
    /// The live source's report.
    #[serde(skip)]
    pub source: String,
    /// Notes for the reader (a measurement skipped, and why).
    #[serde(skip)]
    pub notes: Vec<String>,
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

/// Events per second read from PETLINK words, from the same events as PETSIRD, and from
/// PETSIRD less its header's parse (best of `reps` passes, each over at least 4 M events, every
/// pass counting them all).
fn read_rates(
    petlink: &std::path::Path,
    reps: usize,
) -> std::result::Result<(f64, f64, f64), String> {
    use offhost_pet::petsird::{petlink_to_petsird, PetsirdReader};
    use offhost_pet::PetlinkReader;
    use std::io::Cursor;
    let h = offhost_pet::files::header_for(petlink, None).map_err(|e| e.to_string())?;
    let bytes = std::fs::read(petlink).map_err(|e| format!("{}: {e}", petlink.display()))?;
    let mut ps = Vec::new();
    let (c, _) = petlink_to_petsird(petlink, &h, &mut ps).map_err(|e| e.to_string())?;
    if c.events == 0 {
        return Err("no events".into());
    }
    let times = 4_000_000u64.div_ceil(c.events);
    let words = &bytes[h.data_offset as usize..];
    let (tl, _) = best_of(reps, || {
        for _ in 0..times {
            let mut r = PetlinkReader::new(Cursor::new(words), &h, h.data_offset).expect("reader");
            let (mut buf, mut n) = (Vec::new(), 0u64);
            while r.read_words(&mut buf, 1 << 16).expect("words") > 0 {
                n += buf.iter().filter(|&&w| w >> 31 == 0).count() as u64;
            }
            assert_eq!(n, c.events);
        }
    });
    // Each pass also times the header's parse (PETLINK's pass is given its header), so the
    // events' own rate is the pass less that.
    let header_s = std::cell::Cell::new(0.0);
    let mut events_only = f64::INFINITY;
    let (ts, _) = best_of(reps, || {
        let (t, h0) = (Instant::now(), header_s.get());
        for _ in 0..times {
            let th = Instant::now();
            let mut r = PetsirdReader::new(Cursor::new(&ps[..]), ps.len() as u64).expect("reader");
            header_s.set(header_s.get() + th.elapsed().as_secs_f64());
            let (mut buf, mut n) = (Vec::new(), 0u64);
            while r.next_block(&mut buf).expect("block").is_some() {
                n += buf.len() as u64;
                buf.clear();
            }
            assert_eq!(n, c.events);
        }
        events_only = events_only.min(t.elapsed().as_secs_f64() - (header_s.get() - h0));
    });
    let total = (times * c.events) as f64;
    Ok((total / tl, total / ts, total / events_only))
}

/// One OSEM row: ours (sensitivity s, median subset iteration s) and, with `--stir`, STIR's
/// (median subset iteration s, correlation, blurred correlation).
struct OsemRow {
    ours: (f64, f64),
    stir: Option<(f64, Option<f64>, Option<f64>)>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// 3D OSEM of `sino` (a.subsets x a.iterations) and, with `--stir`, STIR's of the same data
/// written as Interfile projection data.
fn osem_row(
    a: &Options,
    sino: &offhost_pet::Sinogram,
    pairs: bool,
    name: &str,
    notes: &mut Vec<String>,
) -> Result<OsemRow> {
    // STIR's OSMAPOSL needs the subsets to divide views / 4 (its symmetries): the largest
    // such divisor up to `--subsets` (21 for the mMR's 252 views, 16 for the demo's 128).
    let quarter = (sino.scanner.views as usize / 4).max(1);
    let subsets = (1..=a.subsets.max(1))
        .rev()
        .find(|d| quarter.is_multiple_of(*d))
        .unwrap_or(1);
    let cfg = recon::OsemConfig {
        subsets,
        iterations: a.iterations,
        threads: 0,
    };
    // With STIR, its model: every bin one line or tube (no ring-pair or detector-pair
    // weights), spread as its ray-tracing matrix does.
    let model = match a.stir {
        Some(_) => offhost_pet::recon3d::Model::stir(),
        None => offhost_pet::recon3d::Model::default(),
    };
    let (img, t) = offhost_pet::recon3d::osem_3d_model(sino, pairs, None, &cfg, model, &|_| {})?;
    let ours = (t.sensitivity_s, median(t.subiterations_s));
    let Some(dir) = &a.stir else {
        return Ok(OsemRow { ours, stir: None });
    };
    let work =
        std::env::temp_dir().join(format!("offhost-bench-stir-{}-{name}", std::process::id()));
    let run = || -> std::result::Result<(f64, Option<f64>, Option<f64>), String> {
        std::fs::create_dir_all(&work).map_err(|e| e.to_string())?;
        let hs = work.join(format!("{name}.hs"));
        let flags = offhost_pet::sinofile::SinoFlags {
            last: true,
            detector_pairs: pairs,
        };
        offhost_pet::projdata::write(&hs, sino, flags).map_err(|e| e.to_string())?;
        let xy = sino.scanner.radial_bins as usize;
        let s = offhost_pet::stir::osem(dir, &hs, (cfg.subsets, cfg.iterations), xy, 0, &work)?;
        Ok((
            median(s.subiterations_s),
            offhost_pet::stir::correlation(&s.image, &img, false),
            offhost_pet::stir::correlation(&s.image, &img, true),
        ))
    };
    let stir = run()
        .map_err(|e| notes.push(format!("STIR's OSEM of the {name} sinogram: {e}")))
        .ok();
    let _ = std::fs::remove_dir_all(&work);
    Ok(OsemRow { ours, stir })
}

/// Runs the benchmark; `bar` names each phase.
pub fn run(a: &Options, bar: &ProgressBar) -> Result<Report> {
    let scanner = Scanner::demo();
    let mut notes = Vec::new();
    bar.set_message(format!("simulating {} events", a.events));
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
    bar.set_message("histogramming");
    let petlink = match std::fs::read(&a.petlink) {
        Ok(bytes) => {
            let words: Vec<u32> = bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect();
            let mut all = Vec::new();
            while !words.is_empty() && all.len() < 4_000_000 {
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
            notes.push(format!(
                "skipping PETLINK words: {}: {e}",
                a.petlink.display()
            ));
            None
        }
    };

    // Reading list mode: the mMR file's events from PETLINK words and from PETSIRD (the file
    // converted in memory), both from bytes in memory, replayed to at least 4 M events.
    bar.set_message("reading PETLINK and PETSIRD");
    let reads = read_rates(&a.petlink, a.reps)
        .map_err(|e| notes.push(format!("skipping the list-mode read rates: {e}")))
        .ok();

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
    bar.set_message(format!("live demo pipeline, {} events", a.pipeline_events));
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
    bar.set_message("reconstruction");
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

    // 3D OSEM: the demo sinogram, then the mMR file's span-11 histogram; STIR's on the same.
    bar.set_message("3D OSEM");
    let demo = osem_row(a, &sino, true, "demo", &mut notes)?;
    let mmr = match (a.no_mmr_osem, std::fs::read(&a.petlink)) {
        (false, Ok(bytes)) => {
            let words: Vec<u32> = bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect();
            let mut ph = PetlinkHistogrammer::new(&Scanner::mmr(), 11)?;
            ph.add_words(&words);
            let (s, _, _) = ph.finish();
            bar.set_message("3D OSEM of the mMR file");
            Some(osem_row(a, &s, false, "mmr", &mut notes)?)
        }
        _ => None,
    };

    Ok(Report {
        events_per_s,
        hist_events: a.events,
        hist_passes: a.reps.max(1),
        events_per_cpu_s: a.events as f64 / hist_cpu_s,
        hist_sinogram_bytes: 4 * h.snapshot().data.len(),
        ssrb_events_per_s: a.events as f64 / ssrb_s,
        ssrb_events_per_cpu_s: a.events as f64 / ssrb_cpu_s,
        ssrb_sinogram_bytes: 4 * h2.snapshot().data.len(),
        hist_best_s: hist_s,
        petlink_words_per_s: petlink.map(|p| p.0),
        petlink_words_per_cpu_s: petlink.map(|p| p.1),
        petlink_read_events_per_s: reads.map(|r| r.0),
        petsird_read_events_per_s: reads.map(|r| r.1),
        petsird_vs_petlink: reads.map(|r| r.1 / r.0),
        petsird_events_only_per_s: reads.map(|r| r.2),
        petsird_events_only_vs_petlink: reads.map(|r| r.2 / r.0),
        sim_events_per_s: a.events as f64 / sim_s,
        sim_events_per_cpu_s: a.events as f64 / sim_cpu_s,
        replay_events: a.events,
        replay_scan_s: scan_s,
        replay_wall_s: replay_s,
        replay_events_per_s: a.events as f64 / replay_s,
        realtime_factor: scan_s / replay_s,
        pipeline_events: 2 * half,
        pipeline_rate: a.rate,
        pipeline_acquisition_s: acquisition_s,
        pipeline_wall_s: pipe_s,
        pipeline_events_per_s: a.pipeline_events as f64 / pipe_s,
        live_realtime_factor: acquisition_s / pipe_s,
        pipeline_workers: cfg.workers,
        recon_fbp_s: fbp_s,
        recon_mlem10_s: mlem_s,
        osem_demo_subiteration_s: demo.ours.1,
        osem_demo_sensitivity_s: demo.ours.0,
        osem_mmr_subiteration_s: mmr.as_ref().map(|m| m.ours.1),
        osem_mmr_sensitivity_s: mmr.as_ref().map(|m| m.ours.0),
        stir_demo_subiteration_s: demo.stir.map(|s| s.0),
        osem_vs_stir_demo: demo.stir.map(|s| demo.ours.1 / s.0),
        stir_correlation_demo: demo.stir.and_then(|s| s.1),
        stir_correlation_demo_blurred: demo.stir.and_then(|s| s.2),
        stir_mmr_subiteration_s: mmr.as_ref().and_then(|m| m.stir).map(|s| s.0),
        osem_vs_stir_mmr: mmr.as_ref().and_then(|m| m.stir.map(|s| m.ours.1 / s.0)),
        stir_correlation_mmr: mmr.as_ref().and_then(|m| m.stir).and_then(|s| s.1),
        stir_correlation_mmr_blurred: mmr.as_ref().and_then(|m| m.stir).and_then(|s| s.2),
        cores: offhost_bench::affinity::cores(),
        source: sim_report,
        notes,
    })
}

impl Report {
    /// The figures as text.
    pub fn text(&self) -> String {
        let m = |v: f64| v / 1e6;
        let mut s = format!(
            "histogramming into span 1 (16 MiB), one core: {:.1} M events/s wall, {:.1} M events per CPU second (best of {} passes over {} events)\n\
             histogramming into 2D (SSRB, 2 MiB), one core: {:.1} M events/s wall, {:.1} M per CPU second\n",
            m(self.events_per_s),
            m(self.events_per_cpu_s),
            self.hist_passes,
            self.hist_events,
            m(self.ssrb_events_per_s),
            m(self.ssrb_events_per_cpu_s)
        );
        if let (Some(w), Some(c)) = (self.petlink_words_per_s, self.petlink_words_per_cpu_s) {
            s += &format!(
                "PETLINK words, one core: {:.1} M words/s wall, {:.1} M per CPU second\n",
                m(w),
                m(c)
            );
        }
        if let (Some(l), Some(p)) = (
            self.petlink_read_events_per_s,
            self.petsird_read_events_per_s,
        ) {
            s += &format!(
                "reading list mode, one core: PETLINK {:.1} M events/s, PETSIRD {:.1} M events/s ({:.2}x; {:.2}x without the header's parse)\n",
                m(l),
                m(p),
                p / l,
                self.petsird_events_only_vs_petlink.unwrap_or(f64::NAN)
            );
        }
        s += &format!(
            "simulation, one core: {:.2} M events/s wall, {:.2} M per CPU second\n\
             recorded events replayed (read, energy window, sinogram): {} events = {:.2} s of scan at {:.1} M/s in {:.2} s wall: real-time factor {:.2}\n\
             live demo pipeline (2 simulators, windows, sinogram): {} events at {:.1} M/s = {:.2} s of scan in {:.2} s wall: real-time factor {:.2} ({} workers)\n  \
             source: {}\n\
             reconstruction of 31 slices: FBP {:.2} s, MLEM 10 iterations {:.2} s\n",
            m(self.sim_events_per_s),
            m(self.sim_events_per_cpu_s),
            self.replay_events,
            self.replay_scan_s,
            m(self.replay_events as f64 / self.replay_scan_s),
            self.replay_wall_s,
            self.realtime_factor,
            self.pipeline_events,
            m(self.pipeline_rate),
            self.pipeline_acquisition_s,
            self.pipeline_wall_s,
            self.live_realtime_factor,
            self.pipeline_workers,
            self.source,
            self.recon_fbp_s,
            self.recon_mlem10_s
        );
        s += &format!(
            "3D OSEM, demo sinogram: {:.3} s a subset iteration, sensitivity {:.2} s\n",
            self.osem_demo_subiteration_s, self.osem_demo_sensitivity_s
        );
        if let (Some(i), Some(t)) = (self.osem_mmr_subiteration_s, self.osem_mmr_sensitivity_s) {
            s += &format!(
                "3D OSEM, mMR span 11: {i:.3} s a subset iteration, sensitivity {t:.2} s\n"
            );
        }
        for (what, st, c, cb) in [
            (
                "demo",
                self.stir_demo_subiteration_s,
                self.stir_correlation_demo,
                self.stir_correlation_demo_blurred,
            ),
            (
                "mMR",
                self.stir_mmr_subiteration_s,
                self.stir_correlation_mmr,
                self.stir_correlation_mmr_blurred,
            ),
        ] {
            if let Some(st) = st {
                s += &format!(
                    "STIR OSMAPOSL, {what}: {st:.3} s a subset iteration; images' correlation {:.3} ({:.3} blurred)\n",
                    c.unwrap_or(f64::NAN),
                    cb.unwrap_or(f64::NAN)
                );
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small run of every phase on the repository's mMR file: the replay and the live
    /// pipeline move every event, and the text names each figure.
    #[test]
    fn a_small_run_measures_every_phase() {
        let o = Options {
            events: 20_000,
            reps: 1,
            pipeline_events: 20_000,
            rate: 4.0e6,
            petlink: PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../data/petlink/small_listmode_file.l"),
            subsets: 4,
            iterations: 1,
            no_mmr_osem: true,
            stir: None,
        };
        let r = run(&o, &ProgressBar::hidden()).unwrap();
        assert!(r.notes.is_empty(), "{:?}", r.notes);
        assert!(r.petlink_words_per_s.unwrap() > 0.0);
        assert!(r.petsird_read_events_per_s.unwrap() > 0.0);
        assert_eq!((r.replay_events, r.pipeline_events), (20_000, 20_000));
        assert!(r.realtime_factor > 0.0 && r.live_realtime_factor > 0.0);
        let t = r.text();
        assert_eq!(t.lines().count(), 10, "{t}");
        assert!(r.osem_demo_subiteration_s > 0.0 && r.osem_mmr_subiteration_s.is_none());
        let missing = Options {
            petlink: "/nonexistent.l".into(),
            ..o
        };
        let r = run(&missing, &ProgressBar::hidden()).unwrap();
        assert!(r.petlink_words_per_s.is_none() && r.notes[0].contains("skipping"));
        assert!(r.petsird_read_events_per_s.is_none());
        assert_eq!(r.text().lines().count(), 8);
    }
}
