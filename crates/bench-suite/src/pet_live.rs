//! `pet-live`: a live scan (`offhost pet replay`) at the highest rate it sustains, against the
//! offline histogramming rate of the same cores, with the host's CPU and the images' period
//! and age (issue 50's performance check).
//!
//! For each placement and engine count:
//! - `offline_events_per_s`: the recording's words histogrammed as `offhost pet hist` does
//!   (PETLINK words into a sinogram at the span), by as many threads of this process as
//!   there are engines, each its own share, all at once; the best of two passes of about
//!   `seconds / 4` each. The engines of the `netns` rows are processes on this machine's same
//!   cores, so this is their offline rate too.
//! - A first run unpaced (the shares go as fast as the engines take them, held back by the
//!   channels' credit) gives `unpaced_events_per_s`. Then paced runs, each of `seconds`, at
//!   100, 95, 90, 80 and 65 % of it, until one keeps its rate (within 2 % or 50 ms of its plan)
//!   with every two live images at most 1.2 periods apart (the longest gap, not the median):
//!   `sustained_events_per_s` is its rate (none if no try did), and its images and host CPU
//!   are the row's. `tries` lists every run.
//! - `host_cpu_ms_per_mevent`: the host's CPU per million events of that run (in this
//!   process: the threads that read and send the shares; with engine processes: this whole
//!   process); `host_core_share`: that CPU over the run's time (the goal is under 5 % of a
//!   core).
//! - `image_period_s` (median gap between live images at the host), `image_gap_max_s`,
//!   `image_latency_s` (median age of an image's data when it arrives, from the net counts
//!   its PNG gives), `final_image_latency_s` (last event to the full final image).
//!
//! Placements: `in-process` (one engine in this process, the shares as its tasks); `netns`
//! (each engine an `offhost engine` process over mutual TLS: the first, which merges and
//! makes the images, in one network namespace, the others with this process in another,
//! joined by a veth pair; loopback where namespaces cannot be made, with a note); `offload`
//! (as `netns`, with this process handing the shares to a local `offhost engine` over shared
//! memory, which sends them on to the engines, its peers: `offhost pet replay --via`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use offhost_live::{LiveReport, LiveScan};
use offhost_pet::replay::{Plan, Recording, Replay, CHUNK_WORDS};
use offhost_pet::PetlinkHistogrammer;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::offload::Net;
use crate::process::PeerProcess;
use crate::tls::Pki;

/// Where the engines run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// One engine in this process.
    InProcess,
    /// `offhost engine` processes over TLS in network namespaces.
    Netns,
    /// As `netns`, the shares going through a local `offhost engine` on shared memory (the
    /// off-host transport), which carries them to the engines as its peers.
    Offload,
}

/// What to measure.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// The PETLINK recording replayed (looped as long as each run needs).
    #[arg(long, default_value = "data/petlink/small_listmode_file.l")]
    pub petlink: PathBuf,
    /// Engine counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub engines: Vec<usize>,
    /// Placements, comma-separated: in-process, netns.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "in-process,netns,offload"
    )]
    pub placements: Vec<Placement>,
    /// Seconds of each run.
    #[arg(long, default_value_t = 30.0)]
    pub seconds: f64,
    /// Seconds between snapshots, merges and live images.
    #[arg(long, default_value_t = 1.0)]
    pub period: f64,
    /// Axial compression of the sinograms.
    #[arg(long, default_value = "ssrb")]
    pub span: String,
    /// The `offhost` binary whose `engine` command runs the netns rows.
    #[arg(skip)]
    pub exe: PathBuf,
}

/// One run of a live scan.
#[derive(Debug, Clone, Serialize)]
pub struct Try {
    /// The rate asked for, events/s (none: unpaced).
    pub rate: Option<f64>,
    /// The rate it sustained.
    pub sustained_events_per_s: f64,
    /// Whether it kept the rate asked for.
    pub kept_rate: bool,
    /// Its live images' median period, s.
    pub image_period_s: Option<f64>,
    /// Every time between two live images at the host, s, in order.
    pub image_gaps_s: Vec<f64>,
    /// Every live image's age at the host, s, in order.
    pub image_ages_s: Vec<f64>,
    /// Why it failed, if it did.
    pub failure: Option<String>,
}

/// The figures of one placement and engine count.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Where the engines ran.
    pub placement: Placement,
    /// How many.
    pub engines: usize,
    /// The offline histogramming rate of as many threads, events/s.
    pub offline_events_per_s: f64,
    /// The unpaced run's rate.
    pub unpaced_events_per_s: f64,
    /// The highest paced rate kept with every two images at most 1.2 periods apart; none if
    /// no try kept.
    pub sustained_events_per_s: Option<f64>,
    /// sustained / offline (goal >= 0.8).
    pub sustained_vs_offline: Option<f64>,
    /// The host's CPU per million events in the sustained run (else the unpaced one), ms.
    pub host_cpu_ms_per_mevent: f64,
    /// That CPU over the run's time (goal < 0.05).
    pub host_core_share: f64,
    /// Median time between live images at the host, s (goal <= 1.2 with a 1 s period).
    pub image_period_s: Option<f64>,
    /// The longest time between live images, s.
    pub image_gap_max_s: Option<f64>,
    /// Median age of a live image's data at the host, s.
    pub image_latency_s: Option<f64>,
    /// From the last event to the final full image at the host, s.
    pub final_image_latency_s: Option<f64>,
    /// Images that came back in that run.
    pub images: usize,
    /// Every run, in order.
    pub tries: Vec<Try>,
}

/// The figures of one bench run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Seconds of each run.
    pub seconds: f64,
    /// Seconds between live images.
    pub period: f64,
    /// The sinograms' span.
    pub span: String,
    /// Events in one pass over the recording.
    pub events_per_loop: u64,
    /// One row per placement and engine count.
    pub rows: Vec<Row>,
    /// What to know about the figures (a fallback to loopback, say).
    pub notes: Vec<String>,
}

impl Report {
    /// The rows as a table.
    pub fn table(&self) -> String {
        let f = |v: Option<f64>, d: usize| v.map_or("-".into(), |x| format!("{x:.d$}"));
        let mut t = format!(
            "live scan, {} s runs, images every {} s, span {}\n{:<11} {:>3} {:>9} {:>9} {:>9} {:>6} {:>9} {:>6} {:>7} {:>7} {:>7}\n",
            self.seconds,
            self.period,
            self.span,
            "placement",
            "eng",
            "offline",
            "unpaced",
            "sustain",
            "ratio",
            "host ms/M",
            "core",
            "img s",
            "img max",
            "age s"
        );
        for r in &self.rows {
            let name = match r.placement {
                Placement::InProcess => "in-process",
                Placement::Netns => "netns",
                Placement::Offload => "offload",
            };
            t += &format!(
                "{:<11} {:>3} {:>8.2}M {:>8.2}M {:>9} {:>6} {:>9.2} {:>6.3} {:>7} {:>7} {:>7}\n",
                name,
                r.engines,
                r.offline_events_per_s / 1e6,
                r.unpaced_events_per_s / 1e6,
                r.sustained_events_per_s
                    .map_or("-".into(), |x| format!("{:.2}M", x / 1e6)),
                f(r.sustained_vs_offline, 2),
                r.host_cpu_ms_per_mevent,
                r.host_core_share,
                f(r.image_period_s, 2),
                f(r.image_gap_max_s, 2),
                f(r.image_latency_s, 2),
            );
        }
        for n in &self.notes {
            t += &format!("note: {n}\n");
        }
        t
    }
}

/// Events/s of `threads` threads histogramming `words` at `span`, all at once, each into a
/// sinogram of its own made beforehand: the events of every pass over the longest thread's
/// time. Passes enough for about `seconds` (from a timed pass of one thread), the best of two.
fn offline(rec: &Recording, words: &[u32], threads: usize, span: u32, seconds: f64) -> f64 {
    let events_per_word = rec.stats().events as f64 / rec.stats().words.max(1) as f64;
    let pass = |threads: usize, passes: usize| -> f64 {
        let start = std::sync::Barrier::new(threads);
        let longest = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let mut h =
                            PetlinkHistogrammer::new(rec.scanner(), span).expect("span checked");
                        start.wait();
                        let t = Instant::now();
                        for _ in 0..passes {
                            for c in words.chunks(CHUNK_WORDS) {
                                h.add_words(c);
                            }
                        }
                        h.flush();
                        t.elapsed().as_secs_f64()
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or(f64::INFINITY))
                .fold(0f64, f64::max)
        });
        (threads * passes * words.len()) as f64 * events_per_word / longest
    };
    let one = pass(1, 4);
    let passes = (one * seconds / (words.len() as f64 * events_per_word))
        .ceil()
        .max(1.0) as usize;
    pass(threads, passes).max(pass(threads, passes))
}

/// One live run: `rate` (none: unpaced) for about `seconds` at `guess` events/s.
#[allow(clippy::too_many_arguments)]
fn live(
    o: &Options,
    rec: &Arc<Recording>,
    engines: &[(String, String)],
    options: &offhost_link::LinkOptions,
    shares: usize,
    rate: Option<f64>,
    guess: f64,
    files: &std::path::Path,
    via: Option<&str>,
) -> Result<LiveReport> {
    let per_loop = rec.stats().events.max(1) as f64;
    let loops = (rate.unwrap_or(guess) * o.seconds / per_loop)
        .ceil()
        .max(1.0) as u32;
    let (replay, parts) = Replay::new(
        Arc::clone(rec),
        Plan {
            shares,
            loops,
            rate,
        },
    )
    .map_err(|e| Error::Peer(e.to_string()))?;
    let png = files.join("scan.png").to_string_lossy().into_owned();
    let scan = LiveScan {
        name: &o.petlink.to_string_lossy(),
        engines,
        options,
        shares,
        workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
        span: &o.span,
        period: Duration::from_secs_f64(o.period),
        sinogram: None,
        // In this process the path is taken as it is; an engine takes it beneath its files.
        png: if engines.is_empty() { &png } else { "scan.png" },
        live: None,
        final_live: false,
        via,
        watch: None,
        parts: None,
    };
    let mut r = offhost_pet::tasks::registry();
    offhost_node::remote::register(
        &mut r,
        offhost_node::remote::Links::own(offhost_link::LinkOptions::default()),
    );
    offhost_live::run(&scan, &replay, parts, &r).map_err(|e| Error::Peer(e.to_string()))
}

/// The paced tries, as parts of the unpaced rate.
const PACED: [f64; 5] = [1.0, 0.95, 0.9, 0.8, 0.65];

/// A row from its runs: the unpaced one, then paced tries down from its rate ([`PACED`]).
fn row(
    o: &Options,
    placement: Placement,
    offline_rate: f64,
    bar: &ProgressBar,
    mut run: impl FnMut(Option<f64>, f64) -> Result<LiveReport>,
) -> Result<Row> {
    let to_try = |r: &LiveReport| Try {
        rate: r.replay.rate,
        sustained_events_per_s: r.replay.sustained_events_per_s,
        kept_rate: r.replay.kept_rate,
        image_period_s: r.image_period_s,
        image_gaps_s: r.image_gaps_s.clone(),
        image_ages_s: r.image_ages_s.clone(),
        failure: r.failure.clone(),
    };
    let unpaced = run(None, offline_rate)?;
    bar.inc(1);
    let mut tries = vec![to_try(&unpaced)];
    let mut kept: Option<LiveReport> = None;
    for step in PACED {
        let rate = step * unpaced.replay.sustained_events_per_s;
        let r = run(Some(rate), rate)?;
        bar.inc(1);
        tries.push(to_try(&r));
        let images_ok = r.image_gap_max_s.is_some_and(|g| g <= 1.2 * o.period);
        if r.failure.is_none() && r.replay.kept_rate && images_ok {
            kept = Some(r);
            break;
        }
    }
    let shown = kept.as_ref().unwrap_or(&unpaced);
    let sustained = kept.as_ref().map(|r| r.replay.sustained_events_per_s);
    let events = shown.replay.sent.events().max(1) as f64;
    Ok(Row {
        placement,
        engines: unpaced.shares.len(),
        offline_events_per_s: offline_rate,
        unpaced_events_per_s: unpaced.replay.sustained_events_per_s,
        sustained_events_per_s: sustained,
        sustained_vs_offline: sustained.map(|s| s / offline_rate),
        host_cpu_ms_per_mevent: shown.host_cpu_s * 1e9 / events,
        host_core_share: shown.host_cpu_s / shown.replay.seconds.max(1e-9),
        image_period_s: shown.image_period_s,
        image_gap_max_s: shown.image_gap_max_s,
        image_latency_s: shown.image_latency_s,
        final_image_latency_s: shown.final_image_latency_s,
        images: shown.images,
        tries,
    })
}

/// Runs the bench.
pub fn run(o: &Options, bar: &ProgressBar) -> Result<Report> {
    let header =
        offhost_pet::files::header_for(&o.petlink, None).map_err(|e| Error::Peer(e.to_string()))?;
    let rec =
        Arc::new(Recording::petlink(&o.petlink, &header).map_err(|e| Error::Peer(e.to_string()))?);
    let span = offhost_pet::files::span_of(rec.scanner(), &o.span)
        .map_err(|e| Error::Peer(e.to_string()))?;
    bar.set_length((o.engines.len() * o.placements.len() * (1 + PACED.len())) as u64);
    let mut notes = Vec::new();
    let mut rows = Vec::new();
    for &n in &o.engines {
        bar.set_message(format!("offline, {n} threads"));
        let offline_rate = offline(&rec, rec.words(), n.max(1), span, o.seconds / 4.0);
        for &p in &o.placements {
            bar.set_message(format!("{p:?}, {n} engines"));
            let files = tempfile::tempdir()?;
            let r = match p {
                Placement::InProcess => row(o, p, offline_rate, bar, |rate, guess| {
                    let opts = offhost_link::LinkOptions::default();
                    live(o, &rec, &[], &opts, n, rate, guess, files.path(), None)
                })?,
                Placement::Netns | Placement::Offload => {
                    let (net, note) =
                        Net::choose(None, None).map_err(|e| Error::Peer(e.to_string()))?;
                    notes.extend(note);
                    let pki = Pki::generate_for(&[net.addr_a.clone(), net.addr_b.clone()])?;
                    let mut procs = start_engines(o, &net, &pki, n, files.path())?;
                    let list: Vec<(String, String)> = procs
                        .iter()
                        .map(|(name, _, u)| (name.clone(), u.clone()))
                        .collect();
                    let via = match p {
                        Placement::Offload => {
                            let (proc, url) = local_engine(o, &net, &pki, &list, files.path())?;
                            procs.push(("local".into(), proc, url.clone()));
                            Some(url)
                        }
                        _ => None,
                    };
                    let options = pki.link_options();
                    let r = net.on_side(true, || {
                        row(o, p, offline_rate, bar, |rate, guess| {
                            let f = files.path();
                            live(o, &rec, &list, &options, n, rate, guess, f, via.as_deref())
                        })
                    })??;
                    for (_, proc, _) in procs {
                        let _ = proc.reap(Duration::from_secs(5));
                    }
                    r
                }
            };
            rows.push(r);
        }
    }
    Ok(Report {
        seconds: o.seconds,
        period: o.period,
        span: o.span.clone(),
        events_per_loop: rec.stats().events,
        rows,
        notes,
    })
}

/// The local engine of the `offload` rows, on side A with this process: a shared-memory
/// listener, and the engines of `list` as its peers; its URL.
fn local_engine(
    o: &Options,
    net: &Net,
    pki: &Pki,
    list: &[(String, String)],
    files: &std::path::Path,
) -> Result<(PeerProcess, String)> {
    let sock = files.join("local.sock");
    let mut args: Vec<String> = vec![
        "--name".into(),
        "local".into(),
        "--listen".into(),
        format!("shm:{}", sock.display()),
        "--tls-certificates".into(),
        pki.dir().to_string_lossy().into_owned(),
    ];
    for (name, url) in list {
        args.extend(["--peer".into(), format!("{name}={url}")]);
    }
    let (p, urls) = crate::offload::engine(&o.exe, &net.prefix(true), &args)?;
    Ok((p, urls[0].clone()))
}

/// `n` engine processes: `e0` (which merges and images) on side B, the others on side A
/// with this process.
fn start_engines(
    o: &Options,
    net: &Net,
    pki: &Pki,
    n: usize,
    files: &std::path::Path,
) -> Result<Vec<(String, PeerProcess, String)>> {
    let dir = pki.dir().to_string_lossy().into_owned();
    (0..n)
        .map(|k| {
            let name = format!("e{k}");
            let side_a = k > 0;
            let f = files.join(&name);
            std::fs::create_dir_all(&f)?;
            let listen = format!("tls:{}:0", net.addr_of(side_a));
            let args: Vec<String> = [
                "--name",
                &name,
                "--listen",
                &listen,
                "--tls-certificates",
                &dir,
                "--files",
                &f.to_string_lossy(),
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let (p, urls) = crate::offload::engine(&o.exe, &net.prefix(side_a), &args)?;
            Ok((name, p, urls[0].clone()))
        })
        .collect()
}
