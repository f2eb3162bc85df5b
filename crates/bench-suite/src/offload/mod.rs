//! `bench offload`: `[Off-host]`'s measurements today. A host sends messages to a host on another
//! "machine" (two network namespaces joined by a veth pair, or loopback), either **in-host**
//! (the host process runs the TLS link itself) or **off-host** (it hands submission records to
//! its local engine over shared memory, and the engine runs the link). For sizes 64 B to 1 MiB
//! it measures, in the sending host's process: CPU time (user + system, all its threads) and
//! voluntary context switches (wake-ups) per message over a stream, the stream's throughput,
//! and the one-way time (half a host-to-host round trip). `--experiment rate` checks that a
//! rate-limited channel holds its rate, `--experiment priority` an urgent channel's latency
//! while a bulk channel saturates the link.
//!
//! Processes: engine B and the peer host B (echo and sink) on side B; engine A (off-host only)
//! and the measuring host A on side A. Each host is its own process, so its figures are its
//! own ([`host`]).

pub mod host;
pub mod net;

use offhost_bench::sizes;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use offhost_bench::report::Row;
use serde::Serialize;

use crate::error::{Context as _, Error, Result};
use crate::process::PeerProcess;
use host::{Access, HostReport, HostSpec, PeerSpec, Task};
pub use net::{Net, Network};

/// In-host or off-host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Mode {
    /// The host runs the link.
    InHost,
    /// The host's local engine runs the link.
    OffHost,
}

impl Mode {
    /// `in-host` or `off-host`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::InHost => "in-host",
            Mode::OffHost => "off-host",
        }
    }
}

/// A mode name that names no mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode {0:?}: in-host or off-host")]
pub struct UnknownMode(pub String);

impl std::str::FromStr for Mode {
    type Err = UnknownMode;
    fn from_str(s: &str) -> std::result::Result<Self, UnknownMode> {
        match s {
            "in-host" => Ok(Mode::InHost),
            "off-host" => Ok(Mode::OffHost),
            o => Err(UnknownMode(o.to_owned())),
        }
    }
}

/// Flags that name no experiment, or settings it cannot run with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ExperimentError {
    /// No experiment has this name.
    #[error("--experiment {0}: table, rate or priority")]
    Unknown(String),
    /// The rate experiment's `--seconds` is not a number of seconds above 0 and at most a day.
    #[error("--seconds {0}: a number of seconds above 0 and at most a day")]
    Seconds(f64),
}

/// Which experiment.
#[derive(Debug, Clone, PartialEq)]
pub enum Experiment {
    /// Per mode and size: CPU and wake-ups per message, throughput, latency (the table).
    Table,
    /// A channel limited to `rate` bytes/s with `burst`, streamed for `seconds`.
    Rate {
        /// Bytes per second.
        rate: u64,
        /// Burst, bytes.
        burst: u64,
        /// How long.
        seconds: f64,
    },
    /// 64 B round trips on an urgent channel, idle and while a bulk channel streams.
    Priority {
        /// Timed round trips per measurement.
        round_trips: usize,
    },
}

impl Experiment {
    /// The experiment `name` (`table`, `rate`, `priority`) with its settings.
    pub fn from_flags(
        name: &str,
        rate: u64,
        burst: u64,
        seconds: f64,
        round_trips: usize,
    ) -> std::result::Result<Experiment, ExperimentError> {
        Ok(match name {
            "table" => Experiment::Table,
            "rate" if !(seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0) => {
                return Err(ExperimentError::Seconds(seconds))
            }
            "rate" => Experiment::Rate {
                rate,
                burst,
                seconds,
            },
            "priority" => Experiment::Priority { round_trips },
            o => return Err(ExperimentError::Unknown(o.to_owned())),
        })
    }
}

/// Runs the experiment `o.experiment` names and gives what `offhost bench offload` prints:
/// the report as text (as JSON with `json`), and notes: the table's note, and the plots
/// written into `plot` (the table only).
pub fn report(
    o: &Options,
    json: bool,
    plot: Option<&Path>,
    bar: &ProgressBar,
) -> Result<(String, Vec<String>)> {
    fn shown<T: Serialize>(json: bool, v: &T, text: impl FnOnce(&T) -> String) -> Result<String> {
        Ok(match json {
            true => serde_json::to_string_pretty(v)? + "\n",
            false => text(v),
        })
    }
    Ok(match &o.experiment {
        Experiment::Table => {
            let (rows, note) = table(o, bar)?;
            let mut notes: Vec<String> = note.into_iter().collect();
            if let Some(dir) = plot {
                let files =
                    plots(dir, &rows).with_context(|| format!("--plot {}", dir.display()))?;
                notes.extend(files.iter().map(|f| format!("wrote {}", f.display())));
            }
            let text = match json {
                true => offhost_bench::report::to_json(&rows) + "\n",
                false => text_table(&rows),
            };
            (text, notes)
        }
        &Experiment::Rate {
            rate: r,
            burst,
            seconds,
        } => {
            let r = rate(o, r, burst, seconds, bar)?;
            (shown(json, &r, RateReport::text)?, vec![])
        }
        &Experiment::Priority { round_trips } => {
            let r = priority(o, round_trips, bar)?;
            (shown(json, &r, PriorityReport::text)?, vec![])
        }
    })
}

/// What to run.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Message sizes in bytes (K, M suffixes).
    #[arg(long, value_delimiter = ',', default_value = "64,256,1K,4K,16K,64K,256K,1M", value_parser = sizes::parse_size)]
    pub sizes: Vec<usize>,
    /// Modes, comma-separated: in-host, off-host.
    #[arg(long, value_delimiter = ',', default_value = "in-host,off-host")]
    pub modes: Vec<Mode>,
    /// netns (two network namespaces joined by a veth pair: needs root and iproute2) or
    /// loopback (default: netns where it can be made).
    #[arg(long)]
    pub network: Option<Network>,
    /// tc netem arguments for both ends of the veth pair, e.g. "delay 1ms loss 0.1%".
    #[arg(long, value_name = "ARGS")]
    pub netem: Option<String>,
    /// Plain TCP between the engines instead of TLS.
    #[arg(long)]
    pub plain_tcp: bool,
    /// One more argument for both engines (repeatable), e.g. --engine-arg=--host-wait=block.
    #[arg(long = "engine-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub engine_args: Vec<String>,
    /// Timed round trips per size (fewer for large messages).
    #[arg(long, default_value_t = 1000)]
    pub round_trips: usize,
    /// Seconds each size is streamed, over all rounds (each round warms up for a tenth of
    /// its share first). Shorter streams spread more: at 1 MiB a round of 1 s moves about
    /// 1300 messages, and single runs of 3 s ranged 0.88-1.06 off/in where runs of 8-9 s
    /// ranged 0.92-0.99 (docs/notes/offload.md).
    #[arg(long, default_value_t = 8.0)]
    pub stream_seconds: f64,
    /// Rounds per size: in-host and off-host take turns (the order flips every round) so
    /// that the machine's drift falls on both alike; a row sums its rounds. The priority
    /// experiment's rounds: idle pings, then pings under load, each time.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// The `offhost` binary (engines and hosts are its subcommands).
    #[arg(skip)]
    pub exe: PathBuf,
    /// Which experiment.
    #[arg(skip = Experiment::Table)]
    pub experiment: Experiment,
}

/// The engines and files of a run.
struct Setup {
    net: Net,
    dir: tempfile::TempDir,
    certs: Option<PathBuf>,
    url_b: String,
    shm_a: String,
    shm_b: String,
    _engine_b: PeerProcess,
    engine_a: Option<PeerProcess>,
    exe: PathBuf,
    note: Option<String>,
}

/// Starts `offhost engine ARGS` on one side; returns it and the URLs it listens on.
pub(crate) fn engine(
    exe: &Path,
    prefix: &[String],
    args: &[String],
) -> Result<(PeerProcess, Vec<String>)> {
    let mut cmd = command(exe, prefix);
    cmd.arg("engine").args(args);
    let mut p = PeerProcess::spawn_piped("engine", &mut cmd)?;
    let err = p.take_stderr().expect("piped");
    let mut lines = BufReader::new(err);
    let want = args.iter().filter(|a| *a == "--listen").count();
    let mut urls = Vec::new();
    let start = Instant::now();
    while urls.len() < want {
        let mut line = String::new();
        if lines.read_line(&mut line)? == 0 || start.elapsed() > crate::process::START_TIMEOUT {
            return Err(Error::Peer(format!("engine did not start: {line}")));
        }
        if let Some(u) = line.trim().strip_prefix("engine: listening on ") {
            urls.push(u.to_owned());
        }
    }
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = lines.read_to_end(&mut sink);
    });
    Ok((p, urls))
}

fn command(exe: &Path, prefix: &[String]) -> Command {
    match prefix.split_first() {
        None => Command::new(exe),
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(exe);
            c
        }
    }
}

impl Setup {
    fn new(o: &Options, need_a: bool) -> Result<Setup> {
        let (net, note) = Net::choose(o.network, o.netem.as_deref())?;
        let dir = tempfile::tempdir()?;
        let certs = if o.plain_tcp {
            None
        } else {
            let d = dir.path().join("pki");
            let status = Command::new(&o.exe)
                .args([
                    "certs",
                    d.to_str().unwrap_or_default(),
                    "--host",
                    &net.addr_b,
                ])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()?;
            if !status.success() {
                return Err(Error::Peer("offhost certs failed".into()));
            }
            Some(d)
        };
        let mut access: Vec<String> = match &certs {
            Some(d) => vec!["--tls-certificates".into(), d.display().to_string()],
            None => vec!["--insecure".into()],
        };
        let scheme = if o.plain_tcp { "tcp" } else { "tls" };
        let shm_b = format!("shm:{}", dir.path().join("b.sock").display());
        let shm_a = format!("shm:{}", dir.path().join("a.sock").display());
        let mut args_b: Vec<String> = vec![
            "--name".into(),
            "beta".into(),
            "--listen".into(),
            format!("{scheme}:{}:0", net.addr_b),
            "--listen".into(),
            shm_b.clone(),
        ];
        args_b.extend(access.iter().cloned());
        args_b.extend(o.engine_args.iter().cloned());
        let (engine_b, urls) = engine(&o.exe, &net.prefix(false), &args_b)?;
        let url_b = urls[0].clone();
        let engine_a = if need_a {
            let mut args_a: Vec<String> = vec![
                "--name".into(),
                "alpha".into(),
                "--listen".into(),
                shm_a.clone(),
                "--peer".into(),
                format!("beta={url_b}"),
            ];
            args_a.append(&mut access);
            args_a.extend(o.engine_args.iter().cloned());
            Some(engine(&o.exe, &net.prefix(true), &args_a)?.0)
        } else {
            None
        };
        Ok(Setup {
            net,
            dir,
            certs,
            url_b,
            shm_a,
            shm_b,
            _engine_b: engine_b,
            engine_a,
            exe: o.exe.clone(),
            note,
        })
    }

    fn access(&self, mode: Mode) -> Access {
        match mode {
            Mode::OffHost => Access::OffHost {
                engine: self.shm_a.clone(),
            },
            Mode::InHost => Access::InHost {
                name: "alphah".into(),
                peer_url: self.url_b.clone(),
                certs: self.certs.clone(),
            },
        }
    }

    /// Starts host B answering host A's node of `mode`.
    fn peer(&self, mode: Mode) -> Result<PeerProcess> {
        let reply = match mode {
            Mode::OffHost => "alpha",
            Mode::InHost => "alphah",
        };
        let spec = PeerSpec {
            engine: self.shm_b.clone(),
            reply: reply.into(),
        };
        let mut cmd = command(&self.exe, &self.net.prefix(false));
        cmd.args([
            "bench",
            "offload-peer",
            "--spec",
            &serde_json::to_string(&spec)?,
        ]);
        PeerProcess::spawn("peer host", &mut cmd)
    }

    /// Starts host A with `task` (`what` names it in errors): its process, whose stderr is
    /// left to the caller, and the thread that collects its report from stdout.
    fn spawn_host(
        &self,
        mode: Mode,
        task: Task,
        what: &str,
    ) -> Result<(PeerProcess, std::thread::JoinHandle<String>)> {
        let spec = HostSpec {
            access: self.access(mode),
            task,
        };
        let mut cmd = command(&self.exe, &self.net.prefix(true));
        cmd.args([
            "bench",
            "offload-host",
            "--spec",
            &serde_json::to_string(&spec)?,
        ]);
        let mut p = PeerProcess::spawn_piped(what, &mut cmd)?;
        let out = p.take_stdout().expect("piped");
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            let mut out = out;
            let _ = out.read_to_string(&mut s);
            s
        });
        Ok((p, reader))
    }

    /// Runs host A with `task`, ticking `bar` per line it reports, for at most `bound`.
    fn host(
        &self,
        mode: Mode,
        task: Task,
        bar: &ProgressBar,
        bound: Duration,
    ) -> Result<HostReport> {
        let (mut p, reader) = self.spawn_host(mode, task, "measuring host")?;
        let err = p.take_stderr().expect("piped");
        let bar2 = bar.clone();
        let errs = std::thread::spawn(move || {
            let mut kept = String::new();
            for line in BufReader::new(err).lines().map_while(|l| l.ok()) {
                if line.starts_with("done ") {
                    bar2.inc(1);
                } else {
                    kept.push_str(&line);
                    kept.push('\n');
                }
            }
            kept
        });
        let t0 = Instant::now();
        while p.id() != 0 && t0.elapsed() < bound {
            if reader.is_finished() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if !reader.is_finished() {
            drop(p);
            return Err(Error::Peer(format!(
                "the measuring host ran past {bound:?}"
            )));
        }
        let text = reader.join().unwrap_or_default();
        let _ = p.reap(Duration::from_secs(5));
        let stderr = errs.join().unwrap_or_default();
        serde_json::from_str(text.trim()).map_err(|e| {
            Error::Peer(format!(
                "the measuring host failed ({e}): {}",
                stderr.trim()
            ))
        })
    }
}

fn table_rows(mode: Mode, transport: &str, network: Network, r: &HostReport) -> Vec<Row> {
    let mut rows = Vec::new();
    for s in &r.sizes {
        let Some(sum) = host::summary(&s.one_way_ns) else {
            continue;
        };
        let mut row = Row::new("offload", transport, mode.name(), s.size, &sum);
        let n = s.messages.max(1) as f64;
        row.peer = Some(match network {
            Network::Netns => "netns".into(),
            Network::Loopback => "loopback".into(),
        });
        row.iters = Some(s.one_way_ns.len());
        row.mb_per_s = s.messages as f64 * s.size as f64 / s.seconds / 1e6;
        row.msgs_per_s = Some(s.messages as f64 / s.seconds);
        row.host_cpu_us_per_msg = Some(s.cpu_ns as f64 / 1e3 / n);
        row.host_wakeups_per_msg = Some(s.wakeups as f64 / n);
        row.latency_us_median = Some(sum.median / 1e3);
        rows.push(row);
    }
    rows
}

/// The table: one row per (mode, size), and a note when the network is not the one asked for.
pub fn table(o: &Options, bar: &ProgressBar) -> Result<(Vec<Row>, Option<String>)> {
    if o.sizes.is_empty() || o.modes.is_empty() {
        return Err(Error::Invalid("no sizes or no modes".into()));
    }
    let setup = Setup::new(o, o.modes.contains(&Mode::OffHost))?;
    let rounds = o.rounds.max(1);
    bar.set_length((o.sizes.len() * o.modes.len() * rounds) as u64);
    let transport = if o.plain_tcp { "tcp" } else { "tls" };
    // Per size, the modes take turns in rounds (the order flips every round), so that the
    // shared machine's drift falls on both alike; a row sums its mode's rounds.
    let mut merged: Vec<(Mode, host::SizeResult)> = Vec::new();
    for &size in &o.sizes {
        for round in 0..rounds {
            let mut order = o.modes.clone();
            if round % 2 == 1 {
                order.reverse();
            }
            for mode in order {
                let peer = setup.peer(mode)?;
                let r = setup
                    .host(
                        mode,
                        Task::Table {
                            sizes: vec![size],
                            round_trips: o.round_trips.div_ceil(rounds),
                            stream_seconds: o.stream_seconds / rounds as f64,
                        },
                        bar,
                        Duration::from_secs(1200),
                    )
                    .with_context(|| format!("{} run", mode.name()))?;
                drop(peer);
                for got in r.sizes {
                    match merged
                        .iter_mut()
                        .find(|(m, s)| *m == mode && s.size == got.size)
                    {
                        Some((_, s)) => s.add(got),
                        None => merged.push((mode, got)),
                    }
                }
            }
        }
    }
    let mut rows = Vec::new();
    for &mode in &o.modes {
        let sizes = merged
            .iter()
            .filter(|(m, _)| *m == mode)
            .map(|(_, s)| s.clone())
            .collect();
        let r = HostReport {
            sizes,
            ..HostReport::default()
        };
        rows.extend(table_rows(mode, transport, setup.net.kind, &r));
    }
    let mut note = setup.note.clone();
    if let Some(i) = &setup.net.impairment {
        note = Some(format!("link: {i}"));
    }
    let _ = (&setup.dir, &setup.engine_a);
    Ok((rows, note))
}

/// What the rate experiment found.
#[derive(Debug, Clone, Serialize)]
pub struct RateReport {
    /// `off-host`: the engine enforces the rate.
    pub mode: &'static str,
    /// Configured bytes per second.
    pub rate: u64,
    /// Configured burst, bytes.
    pub burst: u64,
    /// Message size.
    pub size: usize,
    /// Seconds streamed.
    pub seconds: f64,
    /// Bytes per second delivered.
    pub achieved: f64,
    /// (achieved - rate) / rate, percent.
    pub error_pct: f64,
}

impl RateReport {
    /// One line of text.
    pub fn text(&self) -> String {
        format!(
            "rate {} B/s, burst {} B, {} B messages, {:.1} s: achieved {:.0} B/s ({:+.2}%)\n",
            self.rate, self.burst, self.size, self.seconds, self.achieved, self.error_pct
        )
    }
}

/// A rate-limited channel through the engine.
pub fn rate(
    o: &Options,
    rate: u64,
    burst: u64,
    seconds: f64,
    bar: &ProgressBar,
) -> Result<RateReport> {
    let setup = Setup::new(o, true)?;
    bar.set_length(1);
    let size = 64 << 10;
    let _peer = setup.peer(Mode::OffHost)?;
    let r = setup.host(
        Mode::OffHost,
        Task::Rate {
            rate,
            burst,
            size,
            seconds,
        },
        bar,
        Duration::from_secs_f64(seconds * 3.0 + 60.0),
    )?;
    bar.inc(1);
    let (bytes, secs) = r
        .delivered
        .ok_or_else(|| Error::Check("the rate run reported nothing".into()))?;
    let achieved = bytes as f64 / secs;
    Ok(RateReport {
        mode: "off-host",
        rate,
        burst,
        size,
        seconds: secs,
        achieved,
        error_pct: (achieved - rate as f64) / rate as f64 * 100.0,
    })
}

/// What the priority experiment found.
#[derive(Debug, Clone, Serialize)]
pub struct PriorityReport {
    /// `off-host`.
    pub mode: &'static str,
    /// Rounds of idle and loaded pings; the medians are of all of them.
    pub rounds: usize,
    /// 64 B one-way median on an urgent channel, idle link, us.
    pub idle_us: f64,
    /// The same while a bulk channel streams 64 KiB messages, us.
    pub loaded_urgent_us: f64,
    /// 64 B on a bulk channel under the same load, us (what priority saves).
    pub loaded_bulk_us: f64,
    /// `loaded_urgent_us / idle_us`.
    pub urgent_ratio: f64,
    /// `loaded_bulk_us / idle_us`.
    pub bulk_ratio: f64,
    /// The bulk stream's throughput, MB/s.
    pub bulk_mb_per_s: f64,
}

impl PriorityReport {
    /// One line of text.
    pub fn text(&self) -> String {
        format!(
            "64 B one way, {} rounds: idle {:.1} us; under a bulk stream ({:.0} MB/s): urgent {:.1} us ({:.2}x idle), bulk channel {:.1} us ({:.2}x)\n",
            self.rounds, self.idle_us, self.bulk_mb_per_s, self.loaded_urgent_us, self.urgent_ratio, self.loaded_bulk_us, self.bulk_ratio
        )
    }
}

/// An urgent channel's latency, idle and under a bulk stream, in `o.rounds` rounds (each
/// round pings on an idle link, then under load, so that the machine's drift falls on both
/// alike); the medians are of all rounds' samples.
pub fn priority(o: &Options, round_trips: usize, bar: &ProgressBar) -> Result<PriorityReport> {
    let setup = Setup::new(o, true)?;
    let rounds = o.rounds.max(1);
    bar.set_length(4 * rounds as u64);
    let _peer = setup.peer(Mode::OffHost)?;
    let bound = Duration::from_secs(300);
    let ping = |urgent| Task::Ping {
        urgent,
        round_trips,
    };
    let (mut idle, mut urgent, mut bulk) = (Vec::new(), Vec::new(), Vec::new());
    let (mut bulk_bytes, mut bulk_secs) = (0u64, 0.0f64);
    for _ in 0..rounds {
        idle.extend(setup.host(Mode::OffHost, ping(true), bar, bound)?.ping_ns);
        bar.inc(1);
        // The load: another host streaming 64 KiB messages through the same engine and link.
        let bulk_load = Task::Bulk {
            size: 64 << 10,
            seconds: 6.0,
        };
        let load = setup.spawn_host(Mode::OffHost, bulk_load, "bulk host")?;
        std::thread::sleep(Duration::from_millis(500));
        urgent.extend(setup.host(Mode::OffHost, ping(true), bar, bound)?.ping_ns);
        bar.inc(1);
        bulk.extend(setup.host(Mode::OffHost, ping(false), bar, bound)?.ping_ns);
        bar.inc(1);
        let text = load.1.join().unwrap_or_default();
        let _ = load.0.reap(Duration::from_secs(5));
        let lr: HostReport = serde_json::from_str(text.trim())
            .map_err(|e| Error::Peer(format!("the bulk host failed: {e}")))?;
        if let Some((b, s)) = lr.delivered {
            bulk_bytes += b;
            bulk_secs += s;
        }
        bar.inc(1);
    }
    let median = |ns: &[f64]| host::summary(ns).map_or(f64::NAN, |s| s.median / 1e3);
    let (idle, urgent, bulk) = (median(&idle), median(&urgent), median(&bulk));
    Ok(PriorityReport {
        mode: "off-host",
        rounds,
        idle_us: idle,
        loaded_urgent_us: urgent,
        loaded_bulk_us: bulk,
        urgent_ratio: urgent / idle,
        bulk_ratio: bulk / idle,
        bulk_mb_per_s: if bulk_secs > 0.0 {
            bulk_bytes as f64 / bulk_secs / 1e6
        } else {
            0.0
        },
    })
}

/// Ratios of the goals from the table's rows, as lines of text.
pub fn goals(rows: &[Row]) -> Vec<String> {
    let find = |mode: &str, size: usize| rows.iter().find(|r| r.mode == mode && r.size == size);
    let mut out = Vec::new();
    if let (Some(i), Some(o)) = (find("in-host", 65536), find("off-host", 65536)) {
        let (ic, oc) = (
            i.host_cpu_us_per_msg.unwrap_or(f64::NAN),
            o.host_cpu_us_per_msg.unwrap_or(f64::NAN),
        );
        let (iw, ow) = (
            i.host_wakeups_per_msg.unwrap_or(f64::NAN),
            o.host_wakeups_per_msg.unwrap_or(f64::NAN),
        );
        out.push(format!(
            "64 KiB: host CPU off-host/in-host {:.3} (goal <= 0.25); wake-ups per message off-host {:.3} (goal <= 1), off-host/in-host {:.3} (goal <= 0.25)",
            oc / ic,
            ow,
            ow / iw
        ));
    }
    let ratios: Vec<String> = rows
        .iter()
        .filter(|r| r.mode == "off-host" && r.size >= 4096)
        .filter_map(|o| {
            find("in-host", o.size).map(|i| format!("{}: {:.2}", o.size, o.mb_per_s / i.mb_per_s))
        })
        .collect();
    if !ratios.is_empty() {
        out.push(format!(
            "throughput off-host/in-host (goal >= 0.9 from 4 KiB): {}",
            ratios.join(", ")
        ));
    }
    out
}

/// The table's text form.
pub fn text_table(rows: &[Row]) -> String {
    let mut out = format!(
        "{:<9} {:<5} {:>8} {:>12} {:>12} {:>10} {:>12}\n",
        "mode", "link", "size", "host us/msg", "wakeups/msg", "MB/s", "latency us"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<9} {:<5} {:>8} {:>12.2} {:>12.3} {:>10.1} {:>12.1}\n",
            r.mode,
            r.transport,
            r.size,
            r.host_cpu_us_per_msg.unwrap_or(f64::NAN),
            r.host_wakeups_per_msg.unwrap_or(f64::NAN),
            r.mb_per_s,
            r.latency_us_median.unwrap_or(f64::NAN),
        ));
    }
    for g in goals(rows) {
        out.push_str(&g);
        out.push('\n');
    }
    out
}

/// Writes the throughput and latency plots and two more: host CPU and wake-ups per message
/// against size, a line per mode.
pub fn plots(dir: &Path, rows: &[Row]) -> Result<Vec<PathBuf>> {
    use offhost_bench::plot::{plot_xy, series_of, Spec};
    let mut files = offhost_bench::plot::plot_rows(dir, rows)?;
    for (name, y, f) in [
        (
            "offload-host-cpu.svg",
            "host CPU us per message",
            (|r: &Row| r.host_cpu_us_per_msg.unwrap_or(f64::NAN)) as fn(&Row) -> f64,
        ),
        (
            "offload-host-wakeups.svg",
            "host wake-ups per message",
            |r: &Row| r.host_wakeups_per_msg.unwrap_or(f64::NAN),
        ),
    ] {
        let path = dir.join(name);
        let spec = Spec {
            title: format!("offload: {y} vs message size"),
            x_label: "message size (bytes)".into(),
            y_label: y.into(),
            log_y: true,
        };
        plot_xy(&path, &spec, &series_of(rows, f))?;
        files.push(path);
    }
    Ok(files)
}
