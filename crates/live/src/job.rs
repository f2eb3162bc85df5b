//! `offhost pet replay`: its flags and what it does with them.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use offhost_engine::Registry;
use offhost_link::LinkOptions;
use offhost_pet::replay::Plan;

use crate::{LiveError, LiveReport, LiveScan};

/// Replay a recorded PETLINK scan as a live one: paced to a rate, split over engines that
/// each histogram their share, merged exactly and imaged about once a period.
#[derive(clap::Args, Debug, Clone)]
pub struct ReplayJob {
    /// PETLINK list-mode file.
    pub file: PathBuf,
    /// Its Interfile header (default: the .hdr beside the file that names it).
    #[arg(long)]
    pub header: Option<PathBuf>,
    /// Events per second (`4e6`); without it, as fast as the engines take them.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Times the file goes through; elapsed-time tags go on rising.
    #[arg(long = "loop", default_value_t = 1)]
    pub loops: u32,
    /// An engine, NAME=URL, repeatable: one share each; the first merges and makes the
    /// images (its files directory gets them). Without any, the scan runs in this process.
    #[arg(long = "engine", value_name = "NAME=URL")]
    pub engines: Vec<String>,
    /// Send the shares through this local engine (shm:PATH), the off-host transport: it
    /// must know every --engine as a peer of the same name (offhost engine --peer NAME=URL).
    /// Without it this process sends them over its own TLS links.
    #[arg(long, value_name = "shm:PATH", requires = "engines")]
    pub via: Option<String>,
    /// Certificate directory for tls: engines (ca-cert.pem, client-cert.pem, client-key.pem).
    #[arg(long, value_name = "DIR")]
    pub tls_certificates: Option<PathBuf>,
    /// Shares in this process (without --engine).
    #[arg(long, default_value_t = 2)]
    pub shares: usize,
    /// Workers of the engine in this process (default: the CPUs).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Axial compression of the sinograms: 1, an odd span (the mMR's 11) or ssrb.
    #[arg(long, default_value = "ssrb")]
    pub span: String,
    /// Snapshots, merges and live images about this far apart (`1`, `500ms`).
    #[arg(long, default_value = "1", value_parser = offhost_units_seconds)]
    pub period: Duration,
    /// Write the final merged sinogram here (X.hs: STIR Interfile; beneath the first
    /// engine's files directory).
    #[arg(long, value_name = "FILE")]
    pub sinogram: Option<String>,
    /// The final image (beneath the first engine's files directory).
    #[arg(long, default_value = "scan.png")]
    pub png: String,
    /// Write each live image here as it is made (on the first engine).
    #[arg(long)]
    pub live: Option<String>,
    /// The final image: full (2D FBP of every rebinned plane at full resolution; about 10 s
    /// for the mMR on two cores) or live (at the live images' level, in a fraction of that).
    #[arg(long = "final", value_name = "full|live", default_value = "full", value_parser = ["full", "live"])]
    pub final_image: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// A live view of the scan: its tasks, counters, sinograms and images as they come.
    #[command(flatten)]
    pub view: offhost_view::ViewArgs,
    /// How long the view stays after the scan.
    #[command(flatten)]
    pub linger: offhost_view::ViewLinger,
}

fn offhost_units_seconds(s: &str) -> Result<Duration, String> {
    offhost_units::parse_seconds(s).map_err(|e| e.to_string())
}

/// Runs `job`; `progress(sent, planned)` hears of the events sent about five times a second.
pub fn replay(
    job: &ReplayJob,
    registry: &Registry,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<LiveReport, LiveError> {
    let header = offhost_pet::files::header_for(&job.file, job.header.as_deref())
        .map_err(|e| LiveError::Plan(e.to_string()))?;
    let engines = offhost_node::jobs::placed::named(&job.engines)?.unwrap_or_default();
    let shares = match engines.len() {
        0 => job.shares,
        n => n,
    };
    let (replay, readers) = crate::plan(
        &job.file,
        &header,
        Plan {
            shares,
            loops: job.loops,
            rate: job.rate,
        },
    )?;
    let mut options = LinkOptions::new();
    if let Some(d) = &job.tls_certificates {
        options = options.tls_certificates(d);
    }
    let name = job.file.display().to_string();
    let scan = LiveScan {
        name: &name,
        engines: &engines,
        options: &options,
        shares,
        workers: job
            .workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())),
        span: &job.span,
        period: job.period,
        sinogram: job.sinogram.as_deref(),
        png: &job.png,
        live: job.live.as_deref(),
        final_live: job.final_image == "live",
        via: job.via.as_deref(),
        watch: None,
        parts: None,
    };
    // A view reads the pipeline here, or each engine's parts there.
    let one = Arc::new(offhost_engine::watch::One::default());
    let parts = Arc::new(offhost_node::jobs::parts_view::PartsView::new(
        &name, &options,
    ));
    let source: Arc<dyn offhost_engine::watch::Watched> = match engines.is_empty() {
        true => one.clone(),
        false => parts.clone(),
    };
    let config = job.view.config(job.tls_certificates.as_deref(), false);
    let view = offhost_view::View::start_said(config, source)
        .map_err(|e| LiveError::Plan(format!("--view: {e}")))?;
    let scan = LiveScan {
        watch: view.as_ref().map(|_| one),
        parts: view.as_ref().map(|_| parts),
        ..scan
    };
    let planned = replay.planned().events();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                progress(replay.events_sent(), planned);
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        let r = crate::run(&scan, &replay, readers, registry);
        done.store(true, Ordering::Relaxed);
        r
    })
    .inspect(|_| job.linger.wait(view.as_ref()))
}
