//! A live PET scan over offhost engines (`offhost pet replay`): a recorded PETLINK file
//! replayed by the host at an event rate ([`offhost_pet::replay`]), its words split into
//! shares, one per engine, each histogrammed where it lands (`sinogram period=`), the
//! shares' snapshots merged on the first engine (`sino-sum`, exact: integer counts add up),
//! and an image made from the merged sinogram about once a period (`recon period=`, the
//! finest reconstruction that fits: [`offhost_pet::preview`]) and handed back to the host.
//!
//! Nothing is lost unseen: at the end each share's words sent are compared with what its
//! engine's histogram counted, prompts and delayeds apart, and a difference fails the scan
//! naming the engine; an engine lost mid-scan fails it too (the placed job's failure). A
//! replay that could not keep its rate says so ([`offhost_pet::replay::ReplayReport`]).
//!
//! The pipeline ([`text::pipeline`]) runs in this process (one engine: every share's tasks
//! on its workers) or placed over daemons (`@NAME`, the job of `offhost submit --engine`).

#![forbid(unsafe_code)]

mod images;
mod job;
pub mod text;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use offhost_engine::{Budget, EngineConfig, Registry, Stats};
use offhost_link::LinkOptions;
use offhost_node::jobs::{local, placed, JobError, Streams};
use offhost_pet::replay::{Counts, Replay, ReplayError, ReplayReport, Share};
use rustix::time::ClockId;
use serde::Serialize;

pub use images::{ImageSink, Images, MAX_IMAGE_BYTES};
pub use job::{replay, ReplayJob};

/// Why a live scan did not run or did not end well.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The scan cannot be planned (scanner, span, shares).
    #[error("{0}")]
    Plan(String),
    /// The recording or the replay's plan.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// The job could not be started or bridged.
    #[error(transparent)]
    Job(#[from] JobError),
}

/// A live scan to run.
#[derive(Debug, Clone)]
pub struct LiveScan<'a> {
    /// The recording's name, for messages.
    pub name: &'a str,
    /// `(NAME, URL)` of each engine, one share each, the first merging and imaging; none:
    /// in this process.
    pub engines: &'a [(String, String)],
    /// Certificates for `tls:` engines.
    pub options: &'a LinkOptions,
    /// Shares in this process (with engines: one per engine).
    pub shares: usize,
    /// Workers of the engine in this process.
    pub workers: usize,
    /// Axial compression: 1, an odd span, or `ssrb`.
    pub span: &'a str,
    /// Snapshots, merges and live images about this far apart.
    pub period: Duration,
    /// Where the merging engine writes the final merged sinogram (`.hs`: Interfile).
    pub sinogram: Option<&'a str>,
    /// Where it writes the final image.
    pub png: &'a str,
    /// Where it writes each live image.
    pub live: Option<&'a str>,
    /// The final image at the live images' level (fast) instead of a full reconstruction.
    pub final_live: bool,
    /// The local engine (`shm:PATH`) that carries the shares to the engines, which it knows
    /// as peers by their names (`offhost engine --peer NAME=URL`): the off-host transport,
    /// so this process only writes the words into shared memory. None: this process sends
    /// them on its own links.
    pub via: Option<&'a str>,
    /// Where a live view reads the pipeline run in this process, if one watches.
    pub watch: Option<Arc<offhost_engine::watch::One>>,
    /// Where a live view hears of the parts placed on engines, if one watches.
    pub parts: Option<Arc<offhost_node::jobs::parts_view::PartsView>>,
}

/// What one share's engine histogrammed of what it was sent.
#[derive(Debug, Clone, Serialize)]
pub struct ShareCheck {
    /// The engine (`local` in this process).
    pub engine: String,
    /// Words, prompts and delayeds sent.
    pub sent: Counts,
    /// Prompts and delayeds its histogram counted.
    pub histogrammed_prompts: u64,
    /// See `histogrammed_prompts`.
    pub histogrammed_delayeds: u64,
}

/// How a live scan went.
#[derive(Debug, Clone, Serialize)]
pub struct LiveReport {
    /// The replay: rate asked and sustained, counts sent.
    pub replay: ReplayReport,
    /// Each share's counts, sent and histogrammed (equal, or the scan failed).
    pub shares: Vec<ShareCheck>,
    /// Images that reached the host, the final one included.
    pub images: usize,
    /// The median time between two live images at the host, s.
    pub image_period_s: Option<f64>,
    /// The longest time between two live images at the host, s.
    pub image_gap_max_s: Option<f64>,
    /// Every time between two live images at the host, s, in order.
    pub image_gaps_s: Vec<f64>,
    /// Every live image's age at the host (see `image_latency_s`), s, in order.
    pub image_ages_s: Vec<f64>,
    /// The median age of a live image's data at the host: from when the replay had handed
    /// out the events of the sinogram it shows (its PNG gives the net counts) to its arrival.
    pub image_latency_s: Option<f64>,
    /// From the last event handed out to the final image at the host, s (the final image is
    /// the full reconstruction).
    pub final_image_latency_s: Option<f64>,
    /// The merged sinogram's net counts (prompts less delayeds in the field of view).
    pub merged_net_counts: Option<i64>,
    /// The host's CPU seconds: in this process, those of the threads that read and send the
    /// shares (the engine's are its own); with engines elsewhere, this whole process's over
    /// the job (reading, sending over the links, waiting for the parts).
    pub host_cpu_s: f64,
    /// What each engine's tasks report, `(engine, task, report)` in order.
    pub reports: Vec<(String, String, String)>,
    /// Why it failed: an engine lost, a task failed, events lost; none if it ended well.
    pub failure: Option<String>,
}

impl LiveReport {
    /// The report as lines for a terminal.
    pub fn text(&self) -> String {
        let r = &self.replay;
        let mut t = format!(
            "replayed {} events ({} prompts, {} delayeds; {} loops) in {:.2} s: {:.3} M events/s",
            r.sent.events(),
            r.sent.prompts,
            r.sent.delayeds,
            r.loops,
            r.seconds,
            r.sustained_events_per_s / 1e6,
        );
        if let Some(rate) = r.rate {
            t += &match r.kept_rate {
                true => format!(" (asked {:.3} M/s: kept)", rate / 1e6),
                false => format!(
                    " (asked {:.3} M/s: NOT kept, {:.2} s behind at worst: the engines held it back)",
                    rate / 1e6,
                    r.most_behind_s
                ),
            };
        }
        t.push('\n');
        for s in &self.shares {
            t += &format!(
                "  {}: {} prompts and {} delayeds sent, {} and {} histogrammed\n",
                s.engine,
                s.sent.prompts,
                s.sent.delayeds,
                s.histogrammed_prompts,
                s.histogrammed_delayeds
            );
        }
        t += &format!(
            "host: {:.3} CPU s, {:.2} ms per million events\n",
            self.host_cpu_s,
            self.host_cpu_s * 1e9 / r.sent.events().max(1) as f64
        );
        if let Some(n) = self.merged_net_counts {
            t += &format!("merged sinogram: {n} net counts\n");
        }
        t += &format!("{} images", self.images);
        if let Some(p) = self.image_period_s {
            t += &format!(", {p:.2} s apart (median)");
        }
        if let Some(g) = self.image_gap_max_s {
            t += &format!(", {g:.2} s at most");
        }
        if let Some(l) = self.image_latency_s {
            t += &format!(", {l:.2} s behind the scan (median)");
        }
        if let Some(l) = self.final_image_latency_s {
            t += &format!("; the final one {l:.2} s after the last event");
        }
        t.push('\n');
        for (e, task, rep) in &self.reports {
            t += &format!("  {e} {task}: {rep}\n");
        }
        t
    }
}

/// The message size of shares sent through a local engine: a buffer of its shared memory's
/// default pool (`offhost_link::offload::default_segment`), 16 chunks.
const VIA_MESSAGE: usize = 1 << 20;

/// The threads sending shares through a local engine, each ending with its error.
type Senders = Arc<Mutex<Vec<std::thread::JoinHandle<Result<(), String>>>>>;

/// Sends `share` to `address` through the local engine at `via`, then the end mark.
fn send_via(via: &str, address: &str, mut share: Share) -> Result<(), String> {
    use offhost_link::offload::{self, HostQueue, OpenOptions};
    let fail = |e: offload::QueueError| format!("sending {address} through {via}: {e}");
    let mut q = HostQueue::connect(via).map_err(fail)?;
    let ch = q.open(address, OpenOptions::bulk()).map_err(fail)?;
    offload::send_all(&mut q, ch, &mut share, VIA_MESSAGE).map_err(fail)?;
    Ok(())
}

fn cpu_s(clock: ClockId) -> f64 {
    let t = rustix::time::clock_gettime(clock);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// A share whose reading thread adds its CPU time to a total when it reads the end: the
/// thread (`jobs::pump_in`'s) does nothing but read this share and send what it reads.
struct Metered(Share, Arc<Mutex<f64>>);

impl std::io::Read for Metered {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        if n == 0 {
            *self.1.lock().unwrap_or_else(|e| e.into_inner()) += cpu_s(ClockId::ThreadCPUTime);
        }
        Ok(n)
    }
}

fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// Engine name of share `k`.
fn engine_of<'a>(scan: &'a LiveScan<'_>, k: usize) -> &'a str {
    scan.engines.get(k).map_or("local", |(n, _)| n.as_str())
}

/// Runs `scan` with the shares of `replay` (from [`Replay::new`], one per engine, or
/// `scan.shares` in this process) on engines with the tasks of `registry`.
pub fn run(
    scan: &LiveScan<'_>,
    replay: &Arc<Replay>,
    shares: Vec<Share>,
    registry: &Registry,
) -> Result<LiveReport, LiveError> {
    let n = shares.len();
    if !scan.engines.is_empty() && n != scan.engines.len() {
        return Err(LiveError::Plan(format!(
            "{n} shares for {} engines: one share per engine",
            scan.engines.len()
        )));
    }
    let scanner = replay.recording().scanner();
    let preset = scanner.preset_name().ok_or_else(|| {
        LiveError::Plan(format!(
            "{}: its header's scanner ({} rings of {} detectors) is no preset the engines know (mmr, demo)",
            scan.name, scanner.rings, scanner.detectors_per_ring
        ))
    })?;
    let names: Vec<&str> = (0..n).map(|k| engine_of(scan, k)).collect();
    let text = text::pipeline(&text::Shape {
        engines: names.clone(),
        scanner: preset,
        span: scan.span,
        period: scan.period,
        sinogram: scan.sinogram,
        png: scan.png,
        live: scan.live,
        final_live: scan.final_live,
    })?;
    let images = Arc::new(Mutex::new(Images::default()));
    let sink = ImageSink::new(!scan.engines.is_empty(), Arc::clone(&images));
    let mut streams = Streams::default().output(text::IMAGES, sink);
    let mut ins = Vec::new();
    let threads_cpu = Arc::new(Mutex::new(0f64));
    let senders: Senders = Arc::new(Mutex::new(Vec::new()));
    for s in shares {
        let k = s.index();
        let ch = text::events_channel(k);
        ins.push(format!("{ch}=<share {k} of {}>", scan.name));
        streams = match (scan.via, scan.engines.is_empty()) {
            (Some(via), false) => {
                let (via, peer, senders) = (via.to_owned(), names[k].to_owned(), senders.clone());
                let (channel, url) = (ch.clone(), scan.engines[k].1.clone());
                let options = scan.options.clone();
                streams.routed(&ch, move |id| {
                    let address = format!("{peer}/in/{id}/{channel}");
                    let t = std::thread::spawn(move || {
                        let sent = send_via(&via, &address, s);
                        if let Err(why) = &sent {
                            // The engine's input would wait for ever: end it from here, so
                            // the job ends, its histogram short of what was planned.
                            let end = offhost_node::daemon::Client::connect_with(&url, &options)
                                .and_then(|c| Ok(c.open_input(id, &channel)?.close()?));
                            if let Err(e) = end {
                                return Err(format!("{why}; and ending the input at {url}: {e}"));
                            }
                        }
                        sent
                    });
                    senders.lock().unwrap_or_else(|e| e.into_inner()).push(t);
                })
            }
            _ => streams.input(&ch, Metered(s, Arc::clone(&threads_cpu))),
        };
    }
    let process_cpu = cpu_s(ClockId::ProcessCPUTime);
    let outs = [format!("{}=<images>", text::IMAGES)];
    // Each part's statistics, by engine, and the failure.
    let (parts, failure): (Vec<(String, Stats)>, Option<String>) = if scan.engines.is_empty() {
        let job = local::LocalJob {
            path: scan.name,
            text: &text,
            config: EngineConfig {
                workers: scan.workers.max(1),
                ..EngineConfig::default()
            },
            budget: Budget::default(),
            outs: &outs,
            ins: &ins,
            duration: None,
            json: false,
            watch: scan.watch.clone(),
            streams: Some(&streams),
        };
        let done = local::run(&job, registry, |_| {}, |_| {})?;
        (vec![("local".into(), done.stats)], done.failure)
    } else {
        let job = placed::PlacedJob {
            engines: scan.engines,
            options: scan.options,
            path: scan.name,
            text: &text,
            outs: &outs,
            ins: &ins,
            modules: &[],
            streams: Some(&streams),
        };
        let done = placed::run(&job, registry, None, |engine, url, id| {
            if let Some(p) = &scan.parts {
                p.add(engine, url, id);
            }
        })?;
        let parts = (done.parts.into_iter())
            .filter_map(|p| Some((p.engine, p.state?.stats?)))
            .collect();
        (parts, done.failure)
    };
    // The shares sent through the local engine: each sender's end, the first failure.
    let sent_via = std::mem::take(&mut *senders.lock().unwrap_or_else(|e| e.into_inner()));
    let mut via_failure = None;
    for t in sent_via {
        let r = t.join().unwrap_or_else(|_| Err("a sender panicked".into()));
        if let Err(e) = r {
            via_failure.get_or_insert(e);
        }
    }
    let failure = failure.or(via_failure);
    let report = replay.report();
    let host_cpu_s = match scan.engines.is_empty() {
        true => *threads_cpu.lock().unwrap_or_else(|e| e.into_inner()),
        false => cpu_s(ClockId::ProcessCPUTime) - process_cpu,
    };
    let (checks, lost) = check_shares(scan, replay, &parts, n);
    let reports = (parts.iter())
        .flat_map(|(e, st)| {
            st.tasks
                .iter()
                .filter_map(move |t| Some((e.clone(), t.name.clone(), t.report.clone()?)))
        })
        .collect::<Vec<_>>();
    let merged = (reports.iter())
        .find(|(_, t, _)| t == "sino-sum")
        .and_then(|(_, _, r)| r.split_once("final: "))
        .and_then(|(_, r)| r.split_once(' '))
        .and_then(|(v, _)| v.parse().ok());
    let im = images.lock().unwrap_or_else(|e| e.into_inner());
    let times: Vec<Instant> = im.arrived.iter().map(|a| a.0).collect();
    let gaps: Vec<f64> = (times.windows(2))
        .map(|w| (w[1] - w[0]).as_secs_f64())
        .collect();
    // The live images: all but the last, the final one.
    let live = &im.arrived[..im.arrived.len().saturating_sub(1)];
    let live_gaps = gaps[..gaps.len().saturating_sub(1)].to_vec();
    // Each live image's age: from when its sinogram's last events were handed out.
    let ages: Vec<f64> = (live.iter())
        .filter_map(|(at, net)| Some(at.saturating_duration_since(replay.handed_by((*net)?)?)))
        .map(|d| d.as_secs_f64())
        .collect();
    let end = replay
        .started()
        .map(|s| s + Duration::from_secs_f64(report.seconds));
    let final_latency = match (times.last(), end) {
        (Some(&last), Some(end)) if failure.is_none() => {
            Some(last.saturating_duration_since(end).as_secs_f64())
        }
        _ => None,
    };
    Ok(LiveReport {
        replay: report,
        shares: checks,
        images: im.arrived.len(),
        image_period_s: median(&mut live_gaps.clone()),
        image_gap_max_s: live_gaps.iter().copied().reduce(f64::max),
        image_latency_s: median(&mut ages.clone()),
        image_gaps_s: live_gaps,
        image_ages_s: ages,
        final_image_latency_s: final_latency,
        merged_net_counts: merged,
        host_cpu_s,
        reports,
        failure: failure.or(lost),
    })
}

/// Each share's counts sent against its histogram's, and the first difference as a failure.
fn check_shares(
    scan: &LiveScan<'_>,
    replay: &Replay,
    parts: &[(String, Stats)],
    n: usize,
) -> (Vec<ShareCheck>, Option<String>) {
    // The sinogram tasks in order of their lines: share k's is the k-th of the pipeline.
    let mut hist: Vec<(u32, u64, u64)> = Vec::new();
    for (_, st) in parts {
        for t in &st.tasks {
            if t.name == "sinogram" {
                let (_, p, d) = (t.report.as_deref())
                    .and_then(offhost_pet::tasks::report_counts)
                    .unwrap_or_default();
                hist.push((t.line as u32, p, d));
            }
        }
    }
    hist.sort_by_key(|h| h.0);
    let mut lost = None;
    let checks: Vec<ShareCheck> = (0..n)
        .map(|k| {
            let sent = replay.sent(k);
            let (_, p, d) = hist.get(k).copied().unwrap_or_default();
            let engine = engine_of(scan, k).to_owned();
            if (p, d) != (sent.prompts, sent.delayeds) && lost.is_none() {
                lost = Some(format!(
                    "events lost between the host and engine {engine}: {} prompts and {} delayeds sent, {p} and {d} histogrammed",
                    sent.prompts, sent.delayeds
                ));
            }
            ShareCheck {
                engine,
                sent,
                histogrammed_prompts: p,
                histogrammed_delayeds: d,
            }
        })
        .collect();
    (checks, lost)
}

/// Reads a PETLINK recording and plans its replay: `shares` readers.
pub fn plan(
    file: &std::path::Path,
    header: &offhost_pet::PetlinkHeader,
    plan: offhost_pet::replay::Plan,
) -> Result<(Arc<Replay>, Vec<Share>), LiveError> {
    let rec = offhost_pet::replay::Recording::petlink(file, header)?;
    Ok(Replay::new(Arc::new(rec), plan)?)
}
