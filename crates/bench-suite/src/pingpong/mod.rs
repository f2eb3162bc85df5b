//! `pingpong`: one-way latency (half the round trip) and throughput against an echo peer, per
//! transport and message size, in one run, in rounds ([`Options::rounds`]) or interleaved in
//! blocks ([`Options::interleave`]), with each channel's ratio to its raw peer and, when
//! asked, ratios to the machine's floors.

mod interleave;
mod peer;

use offhost_bench::sizes;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use offhost_bench::affinity;
use offhost_bench::floors::{self, Floors};
use offhost_bench::report::{self, Row};
use offhost_bench::stats::{median, Summary};
use offhost_bench::transport::{Placement, Transport};
use offhost_shm::{Config, Mode};

use crate::error::{check, require, Context as _, Error, Result};
use crate::tls::Pki;
pub(crate) use peer::options as channel_options;
use peer::PingPeer;

/// Records up to this size go inline in the ring by default; larger ones as pool buffers.
pub const INLINE_MAX: usize = 4096;

/// How records travel on the raw ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecordPath {
    /// Inline up to [`INLINE_MAX`] bytes, pool buffers above.
    #[default]
    Auto,
    /// Copied into the ring.
    Inline,
    /// Written into a pool buffer and sent by descriptor.
    Loan,
}

/// A record path name that names nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown record path {0:?} (expected auto, inline or loan)")]
pub struct UnknownPath(pub String);

impl FromStr for RecordPath {
    type Err = UnknownPath;
    fn from_str(s: &str) -> Result<RecordPath, UnknownPath> {
        match s {
            "auto" => Ok(RecordPath::Auto),
            "inline" => Ok(RecordPath::Inline),
            "loan" => Ok(RecordPath::Loan),
            other => Err(UnknownPath(other.into())),
        }
    }
}

/// The address in `shm:ADDR` (a socket path or `@name`), as `--raw` and `bench pingpong
/// --connect` take it.
pub fn shm_addr(url: &str) -> Result<String, ShmAddrError> {
    match url.strip_prefix("shm:") {
        Some(a) if !a.is_empty() && a != "@" => Ok(a.to_owned()),
        Some(_) => Err(ShmAddrError::NoPath(url.to_owned())),
        None if url == "mem" || url.starts_with("mem:") => {
            Err(ShmAddrError::InProcess(url.to_owned()))
        }
        None => Err(ShmAddrError::Unknown(url.to_owned())),
    }
}

/// What is wrong with an address [`shm_addr`] was given (each holds the address).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShmAddrError {
    /// `shm:` with no socket path or name after it.
    #[error("{0:?}: shm: needs a socket path or @name")]
    NoPath(String),
    /// A `mem:` address: in-process only, nothing listens there.
    #[error(
        "{0:?}: mem: is in-process only; it has no listener \
         (try `offhost bench pingpong --transport shm --peer thread`)"
    )]
    InProcess(String),
    /// Not an `shm:` address.
    #[error("{0:?}: unknown address (expected shm:PATH or shm:@name)")]
    Unknown(String),
}

/// What to measure.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Transports, comma-separated: shm (the raw ring), shm-chan, tcp, tls, unix, mem
    /// (channels), tcp-raw, tls-raw, unix-raw, pipe-raw, crossbeam, iceoryx2 (plain). Old
    /// name: shm-link for shm-chan. tls is channels over mutual TLS on loopback, tls-raw one
    /// plain rustls connection (tls's raw peer); both use a certificate directory made for
    /// the run and removed after. `--transport tls,tcp` adds TLS's throughput over TCP's to
    /// the report. iceoryx2 (its publish-subscribe services, on a thread, waiting in --mode)
    /// beside shm or shm-chan adds their one-way time over iceoryx2's.
    #[arg(
        long = "transport",
        value_name = "TRANSPORT",
        value_delimiter = ',',
        default_value = "shm"
    )]
    pub transports: Vec<Transport>,
    /// Doorbell mode of both sides on shared memory: poll, block or adaptive.
    #[arg(long, default_value = "poll")]
    pub mode: Mode,
    /// Message sizes in bytes (a K, M or G suffix multiplies by 1024, 1024^2, 1024^3).
    #[arg(long, value_delimiter = ',', default_value = "8,64,4096,65536,1048576", value_parser = sizes::parse_size)]
    pub sizes: Vec<usize>,
    /// Where the echo runs: thread or process (default: `offhost echo` in another process for
    /// shm and shm-chan, a thread for the rest).
    #[arg(long)]
    pub peer: Option<Placement>,
    /// A running raw echo engine (shm:PATH or shm:@name) instead of starting one.
    #[arg(long, value_parser = shm_addr)]
    pub connect: Option<String>,
    /// Timed round trips per size (default: from 20000 for small messages down to 500).
    #[arg(long)]
    pub iters: Option<usize>,
    /// Measure every transport this many times in turn, a share of the round trips each time,
    /// and pool the samples: the transports' ratios then share the machine's changing state.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rounds: u32,
    /// Keep every transport's echo running and measure the transports in turn, this many
    /// round trips at a time: adjacent blocks share the machine's state far more often than
    /// rounds do. Each block's median is reported like a round's (idle CPU is not measured).
    #[arg(long, value_name = "ROUND_TRIPS", conflicts_with_all = ["rounds", "connect"],
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub interleave: Option<u64>,
    /// Spin budget of adaptive mode, in microseconds.
    #[arg(long, default_value_t = 50)]
    pub spin_us: u64,
    /// How records travel on the raw ring: auto (inline up to 4096 bytes, pool buffers
    /// above), inline or loan.
    #[arg(long, default_value = "auto")]
    pub path: RecordPath,
    /// Seconds over which the idle raw-ring echo's CPU use is measured (0: skip).
    #[arg(long, default_value_t = 1.0)]
    pub idle_secs: f64,
    /// Have the raw-ring echo read every byte of buffer records (so data crosses cores).
    #[arg(long)]
    pub touch: bool,
    /// Also measure the floors first and report ratios against them.
    #[arg(long)]
    pub floors: bool,
    /// Interrupt coalescing on shared memory (shm, shm-chan), both sides: each wait sleeps
    /// until RECORDS records have come or DELAY has passed with one there (`8`, `8,200us`;
    /// default delay 1ms). A ping-pong has one message in flight, so it pays the delay on
    /// every message: the latency side of the trade (`bench rate` shows the wake-ups saved).
    #[arg(long, value_name = "RECORDS[,DELAY]")]
    pub event_limit: Option<offhost_shm::EventLimit>,
    /// The `offhost` binary whose `echo` command serves process peers.
    #[arg(skip)]
    pub exe: PathBuf,
}

impl Options {
    /// Options for `transports` with every other setting at its default.
    pub fn new(transports: Vec<Transport>, sizes: Vec<usize>, exe: PathBuf) -> Options {
        Options {
            transports,
            mode: Mode::Poll,
            sizes,
            peer: None,
            connect: None,
            iters: None,
            rounds: 1,
            interleave: None,
            spin_us: 50,
            path: RecordPath::Auto,
            idle_secs: 1.0,
            touch: false,
            floors: false,
            event_limit: None,
            exe,
        }
    }

    /// Where the echo of `t` runs.
    fn placement(&self, t: Transport) -> Result<Placement> {
        if self.connect.is_some() {
            return if t == Transport::Shm {
                Ok(Placement::Remote)
            } else {
                Err(Error::Invalid("--connect needs --transport shm".into()))
            };
        }
        let p = self.peer.unwrap_or_else(|| peer::default_placement(t));
        require(p == Placement::Thread || t.is_offhost_shm(), || {
            format!("--peer {p}: {t} runs its echo on a thread only")
        })?;
        Ok(p)
    }

    fn check(&self) -> Result<()> {
        require(!self.transports.is_empty(), || {
            "no transport to measure".into()
        })?;
        require(!self.sizes.is_empty(), || {
            "no message size to measure".into()
        })?;
        require(self.rounds >= 1, || "--rounds must be at least 1".into())?;
        require(self.interleave.is_none() || self.rounds == 1, || {
            "--interleave excludes --rounds".into()
        })?;
        require(self.interleave != Some(0), || {
            "--interleave must be at least 1".into()
        })?;
        for &t in &self.transports {
            self.placement(t)?;
        }
        Ok(())
    }

    /// Raw ring records larger than this travel in pool buffers.
    fn loan_above(&self) -> usize {
        match self.path {
            RecordPath::Auto => INLINE_MAX,
            RecordPath::Inline => usize::MAX,
            RecordPath::Loan => 0,
        }
    }

    /// The raw ring's set-up: a ring for the largest inline record, pool buffers for the
    /// largest loaned one.
    fn ring_config(&self) -> Config {
        let loan = |s: &&usize| **s > self.loan_above();
        let inline_max = self.sizes.iter().filter(|s| !loan(s)).max().copied();
        let loan_max = self.sizes.iter().filter(loan).max().copied();
        Config {
            ring_bytes: ((inline_max.unwrap_or(0) + 16).next_power_of_two() as u64).max(64 << 10),
            pool_buffers: 4,
            buffer_size: (loan_max.unwrap_or(64).div_ceil(64) * 64).max(64) as u32,
            mode: self.mode,
            spin: Duration::from_micros(self.spin_us),
            event_limit: self.event_limit,
        }
    }

    /// Timed round trips for `size`: `iters`, or from 20000 for small sizes down to 500.
    fn iters_for(&self, size: usize) -> usize {
        self.iters
            .unwrap_or((50_000_000 / size).clamp(500, 20_000))
            .max(1)
    }
}

/// The rows of a run, and what the run noticed on the way (printed by the caller).
#[derive(Debug)]
pub struct Outcome {
    /// One row per transport and size, in the order of the transports.
    pub rows: Vec<Row>,
    /// Notes: an echo engine that had to be killed, and the like.
    pub notes: Vec<String>,
}

/// Samples of one report row, pooled over the rounds (or blocks).
struct Pooled {
    transport: Transport,
    placement: Placement,
    size: usize,
    samples: Vec<f64>,
    /// The median of each round's (or interleaved block's) samples.
    round_medians: Vec<f64>,
    cpu_idle_pct: Option<f64>,
    /// Wake-ups (both sides' voluntary context switches) over the one-way messages they
    /// were counted for; `None` once a count failed.
    wakeups: Option<(u64, u64)>,
}

/// Wake-ups counted over the timed round trips of one block.
type Wakeups = Option<(u64, u64)>;

fn add_wakeups(a: Wakeups, b: Wakeups) -> Wakeups {
    a.zip(b).map(|(a, b)| (a.0 + b.0, a.1 + b.1))
}

impl Pooled {
    /// The row of `peer`'s transport at `size` with its first round's `samples` (not empty).
    fn new(
        peer: &PingPeer,
        size: usize,
        (samples, wakeups): (Vec<f64>, Wakeups),
    ) -> Result<Pooled> {
        let m = median(&samples).ok_or_else(|| Error::Check("no samples".into()))?;
        Ok(Pooled {
            transport: peer.transport(),
            placement: peer.placement(),
            size,
            samples,
            round_medians: vec![m],
            cpu_idle_pct: None,
            wakeups,
        })
    }

    fn row(self, o: &Options, floors: Option<&Floors>) -> Result<Row> {
        let s = Summary::of(&self.samples).ok_or_else(|| Error::Check("no samples".into()))?;
        let t = self.transport;
        // Doorbell modes apply to shared memory only; sockets, pipes and crossbeam block.
        let mode = if t.has_modes() { o.mode } else { Mode::Block };
        let mut r = Row::new("pingpong", t.name(), mode.name(), self.size, &s);
        let (path, touch) = match t {
            Transport::Shm if self.size > o.loan_above() => ("loan", o.touch),
            Transport::Shm => ("inline", o.touch),
            _ => ("copy", true),
        };
        r.peer = Some(self.placement.name().into());
        r.path = Some(path.into());
        r.touch = Some(touch);
        r.iters = Some(self.samples.len());
        r.cpu_idle_pct = Some(self.cpu_idle_pct);
        r.wakeups_per_msg = self
            .wakeups
            .filter(|w| w.1 > 0)
            .map(|(n, msgs)| n as f64 / msgs as f64);
        r.event_limit = o
            .event_limit
            .filter(|_| t.is_offhost_shm())
            .map(|l| l.records);
        if self.round_medians.len() > 1 {
            r.round_medians_ns = self.round_medians;
        }
        if let Some(f) = floors {
            r.against(f);
        }
        Ok(r)
    }
}

/// Runs the pingpong; `bar` shows each phase.
pub fn run(o: &Options, bar: &ProgressBar) -> Result<Outcome> {
    o.check()?;
    // Chosen before anything pins this thread (an echo process inherits our affinity).
    let cpus = affinity::cpu_pair();
    let floors = o.floors.then(|| {
        let plan = floors::Plan {
            warmup: 10_000,
            samples: 100_000,
        };
        floors::measure(plan, &mut |phase| {
            bar.set_message(format!("floors: {phase}"))
        })
    });
    // One throw-away certificate directory for every TLS peer of the run.
    let pki = Pki::for_transports(&o.transports)?;
    let pki = pki.as_ref();
    let mut notes = Vec::new();
    let pooled = match o.interleave {
        Some(block) => interleave::measure(o, cpus, block as usize, pki, bar, &mut notes)?,
        None => rounds(o, cpus, pki, bar, &mut notes)?,
    };
    let mut rows = pooled
        .into_iter()
        .map(|p| p.row(o, floors.as_ref()))
        .collect::<Result<Vec<_>>>()?;
    vs_raw(&mut rows);
    vs_iceoryx2(&mut rows);
    report::throughput_vs_tcp(&mut rows);
    if o.transports.contains(&Transport::Mem) {
        notes.push(
            "note: mem is channels over the in-process mem: transport; the raw ring with its echo \
             on a thread (pingpong's old mem) is --transport shm --peer thread"
                .into(),
        );
    }
    Ok(Outcome { rows, notes })
}

/// Every transport in turn, `o.rounds` times: the raw ring's echo serves every size of a
/// round, every other transport's one size.
fn rounds(
    o: &Options,
    cpus: Option<(usize, usize)>,
    pki: Option<&Pki>,
    bar: &ProgressBar,
    notes: &mut Vec<String>,
) -> Result<Vec<Pooled>> {
    let rounds = o.rounds as usize;
    let mut pooled: Vec<Pooled> = Vec::new();
    for round in 0..rounds {
        let mut blocks = Vec::new();
        for &t in &o.transports {
            if t == Transport::Shm {
                let last = round + 1 == rounds;
                blocks.extend(ring_round(o, cpus, round, last, bar, notes)?);
                continue;
            }
            for &size in &o.sizes {
                let iters = share(o.iters_for(size), rounds, round);
                let mut peer = PingPeer::start(o, t, size, cpus, pki)
                    .with_context(|| format!("start the {t} echo for {size}-byte messages"))?;
                let samples = time(&mut peer, size, iters, bar);
                let block = samples.and_then(|s| Pooled::new(&peer, size, s));
                notes.extend(peer.finish()?);
                blocks.push(
                    block.with_context(|| format!("pingpong of {size}-byte messages over {t}"))?,
                );
            }
        }
        if round == 0 {
            pooled = blocks;
            continue;
        }
        for (p, b) in pooled.iter_mut().zip(blocks) {
            p.samples.extend(b.samples);
            p.round_medians.extend(b.round_medians);
            p.cpu_idle_pct = b.cpu_idle_pct.or(p.cpu_idle_pct);
            p.wakeups = add_wakeups(p.wakeups, b.wakeups);
        }
    }
    Ok(pooled)
}

/// One round of the raw ring: samples per size from one echo, and on the `last` round the
/// echo's CPU use while idle.
fn ring_round(
    o: &Options,
    cpus: Option<(usize, usize)>,
    round: usize,
    last: bool,
    bar: &ProgressBar,
    notes: &mut Vec<String>,
) -> Result<Vec<Pooled>> {
    let mut peer = PingPeer::start(o, Transport::Shm, 0, cpus, None)?;
    let mut blocks = Vec::new();
    for &size in &o.sizes {
        let iters = share(o.iters_for(size), o.rounds as usize, round);
        let samples = time(&mut peer, size, iters, bar)
            .with_context(|| format!("pingpong of {size}-byte records"))?;
        blocks.push(Pooled::new(&peer, size, samples)?);
    }
    if last {
        let idle = idle_cpu_pct(&peer, o.idle_secs);
        for b in &mut blocks {
            b.cpu_idle_pct = idle;
        }
    }
    notes.extend(peer.finish()?);
    Ok(blocks)
}

/// The bytes pingpong sends for `size`.
fn message(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i * 7 + size) as u8).collect()
}

/// Times `iters` round trips of `size`-byte messages after a tenth as many untimed ones;
/// returns one-way times (half of each round trip) in ns, and the wake-ups of both sides
/// over the timed ones with the messages they carried (two per round trip).
fn time(
    peer: &mut PingPeer,
    size: usize,
    iters: usize,
    bar: &ProgressBar,
) -> Result<(Vec<f64>, Wakeups)> {
    let data = message(size);
    let mut back = Vec::with_capacity(size);
    let warmup = iters / 10;
    bar.set_length((warmup + iters) as u64);
    bar.set_position(0);
    bar.set_message(format!("pingpong {} {size} B", peer.transport()));
    let mut samples = Vec::with_capacity(iters);
    let mut before = None;
    for k in 0..warmup + iters {
        if k == warmup {
            before = peer.switches();
        }
        let t0 = Instant::now();
        peer.round_trip(&data, &mut back)?;
        if k >= warmup {
            samples.push(t0.elapsed().as_nanos() as f64 / 2.0);
        }
        if k % 256 == 0 {
            bar.set_position(k as u64);
        }
    }
    let wakeups = before
        .zip(peer.switches())
        .map(|(b, a)| (a.saturating_sub(b), 2 * iters as u64));
    check(back == data, || {
        "echoed bytes differ from the bytes sent".into()
    })?;
    Ok((samples, wakeups))
}

/// Round `round`'s share of `iters` round trips split over `rounds` (the shares add up to
/// `iters`; each is at least 1).
fn share(iters: usize, rounds: usize, round: usize) -> usize {
    (iters / rounds + usize::from(round < iters % rounds)).max(1)
}

/// CPU use of the echo while no records flow, in percent of one core.
fn idle_cpu_pct(peer: &PingPeer, secs: f64) -> Option<f64> {
    if secs <= 0.0 {
        return None;
    }
    // Let an adaptive engine's spin budget run out first.
    std::thread::sleep(Duration::from_millis(200));
    let c0 = peer.echo_cpu_time()?;
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let c1 = peer.echo_cpu_time()?;
    Some((c1.saturating_sub(c0)).as_secs_f64() / t0.elapsed().as_secs_f64() * 100.0)
}

/// Fills each channel row's `vs_raw`: the median over rounds (or blocks) of its round median
/// divided by its raw peer's in the same round, when the run measured both more than once.
fn vs_raw(rows: &mut [Row]) {
    for i in 0..rows.len() {
        let peer = rows[i].transport.parse().ok().and_then(Transport::raw_peer);
        let Some(peer) = peer else { continue };
        let raw = rows.iter().find(|r| {
            r.transport == peer.name() && r.size == rows[i].size && r.mode == rows[i].mode
        });
        let Some(raw) = raw else { continue };
        rows[i].vs_raw = round_ratio(&rows[i], raw);
    }
}

/// The median of `a`'s round (or block) medians over `b`'s, when both were measured in the
/// same rounds, more than one.
fn round_ratio(a: &Row, b: &Row) -> Option<f64> {
    let (a, b) = (&a.round_medians_ns, &b.round_medians_ns);
    if a.len() < 2 || a.len() != b.len() {
        return None;
    }
    let ratios: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
    median(&ratios)
}

/// Fills each offhost shared-memory row's `vs_iceoryx2` (`shm`, `shm-chan`): its one-way
/// time (or, in `bench rate`, time per message) over iceoryx2's of the same size, mode and
/// path in the same run.
pub(crate) fn vs_iceoryx2(rows: &mut [Row]) {
    for i in 0..rows.len() {
        let ours = rows[i]
            .transport
            .parse()
            .is_ok_and(Transport::is_offhost_shm);
        if !ours {
            continue;
        }
        let peer = rows.iter().find(|r| {
            r.transport == Transport::Iceoryx2.name()
                && r.size == rows[i].size
                && r.mode == rows[i].mode
                && r.path == rows[i].path
        });
        let Some(peer) = peer else { continue };
        rows[i].vs_iceoryx2 = round_ratio(&rows[i], peer)
            .or(Some(rows[i].one_way_ns_median / peer.one_way_ns_median));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shm_addresses_parse_or_say_what_is_wrong() {
        assert_eq!(shm_addr("shm:/tmp/x"), Ok("/tmp/x".into()));
        assert_eq!(shm_addr("shm:@e"), Ok("@e".into()));
        assert_eq!(shm_addr("shm:"), Err(ShmAddrError::NoPath("shm:".into())));
        assert_eq!(
            shm_addr("mem:"),
            Err(ShmAddrError::InProcess("mem:".into()))
        );
        assert_eq!(
            shm_addr("tcp:1"),
            Err(ShmAddrError::Unknown("tcp:1".into()))
        );
        assert!(shm_addr("mem:")
            .unwrap_err()
            .to_string()
            .contains("in-process"));
    }

    fn options(t: &[Transport], sizes: &[usize]) -> Options {
        let mut o = Options::new(t.to_vec(), sizes.to_vec(), PathBuf::from("/nonexistent"));
        o.iters = Some(40);
        o.idle_secs = 0.0;
        o
    }

    #[test]
    fn shares_add_up() {
        assert_eq!(
            (0..3).map(|r| share(31, 3, r)).collect::<Vec<_>>(),
            [11, 10, 10]
        );
        assert_eq!(share(1, 3, 2), 1);
    }

    /// Every transport whose echo can run on a thread gives a row with its own name, kind of
    /// path and placement; the raw ring inline and by loan.
    #[test]
    fn every_transport_on_a_thread_echoes_the_bytes() {
        let all: Vec<Transport> = Transport::ALL
            .into_iter()
            .filter(|&t| t != Transport::Iceoryx2 || crate::iceoryx2::AVAILABLE)
            .collect();
        let mut o = options(&all, &[64, 8192]);
        o.peer = Some(Placement::Thread);
        o.mode = Mode::Block;
        // Coalescing on shared memory: the echo still answers every message (after the delay).
        o.event_limit = Some("4,1ms".parse().unwrap());
        let out = run(&o, &ProgressBar::hidden()).unwrap();
        assert_eq!(out.rows.len(), all.len() * 2);
        for (r, &t) in out.rows.chunks(2).zip(&all) {
            assert_eq!((r[0].transport.as_str(), r[1].size), (t.name(), 8192));
            assert_eq!(r[0].peer.as_deref(), Some("thread"));
            assert_eq!(r[0].iters, Some(40));
            assert!(r[0].cpu_idle_pct.is_some(), "the key is always there");
            assert_eq!(r[0].event_limit, t.is_offhost_shm().then_some(4), "{t}");
            // Both sides of a blocking round trip on shared memory sleep: on a quiet machine
            // about one wake-up per message (under the limit each sleep waits out the
            // delay). On an overloaded one a side that was preempted finds the answer there
            // and does not sleep: 0.05-0.26 for `shm` with four copies of this test on two
            // cores. A wait that spun instead of sleeping would have none.
            let w = r[0].wakeups_per_msg.unwrap();
            assert!(
                w > 0.0 || !t.has_modes() && w >= 0.0,
                "{t}: {w} wake-ups per message"
            );
        }
        assert_eq!(out.rows[0].path.as_deref(), Some("inline"));
        assert_eq!(out.rows[1].path.as_deref(), Some("loan"));
        assert_eq!(out.rows[2].path.as_deref(), Some("copy"));
        // Only the note on what mem measures (it is among the transports).
        assert_eq!(out.notes.len(), 1, "{:?}", out.notes);
        assert!(out.notes[0].starts_with("note: mem is channels"));
    }

    /// In rounds, each channel row carries the median of its per-round ratios to its raw peer.
    #[test]
    fn rounds_pool_samples_and_compare_channels_with_their_raw_peer() {
        let mut o = options(&[Transport::Crossbeam, Transport::Mem], &[100]);
        o.rounds = 3;
        let rows = run(&o, &ProgressBar::hidden()).unwrap().rows;
        assert_eq!(rows.len(), 2);
        let (raw, chan) = (&rows[0], &rows[1]);
        assert_eq!(chan.round_medians_ns.len(), 3);
        let mut ratios: Vec<f64> = chan
            .round_medians_ns
            .iter()
            .zip(&raw.round_medians_ns)
            .map(|(a, b)| a / b)
            .collect();
        ratios.sort_by(f64::total_cmp);
        assert_eq!(chan.vs_raw, Some(ratios[1]));
        assert_eq!(raw.vs_raw, None);
    }

    /// TLS channels and the raw rustls connection run with their unencrypted counterparts in
    /// one run (rounds, then interleaved): each TLS row has its ratio to the raw peer and its
    /// throughput over tcp's.
    #[test]
    fn tls_rows_carry_their_ratios_to_tls_raw_and_to_tcp() {
        let ts = [
            Transport::Tcp,
            Transport::Tls,
            Transport::TcpRaw,
            Transport::TlsRaw,
        ];
        for interleave in [None, Some(10)] {
            let mut o = options(&ts, &[65536]);
            (o.rounds, o.interleave) = if interleave.is_some() {
                (1, interleave)
            } else {
                (2, None)
            };
            let rows = run(&o, &ProgressBar::hidden()).unwrap().rows;
            let names: Vec<&str> = rows.iter().map(|r| r.transport.as_str()).collect();
            assert_eq!(names, ["tcp", "tls", "tcp-raw", "tls-raw"]);
            let tls = &rows[1];
            assert!(tls.vs_raw.is_some_and(|v| v > 0.0), "{tls:?}");
            for r in &rows {
                let want = r.transport.starts_with("tls");
                assert_eq!(r.throughput_vs_tcp.is_some(), want, "{r:?}");
                assert!(r.throughput_vs_tcp.unwrap_or(1.0) > 0.0, "{r:?}");
            }
        }
    }

    #[test]
    fn impossible_placements_and_combinations_are_refused() {
        let mut o = options(&[Transport::Tcp], &[8]);
        o.peer = Some(Placement::Process);
        let e = run(&o, &ProgressBar::hidden()).unwrap_err();
        assert!(e.to_string().contains("on a thread only"), "{e}");
        let mut o = options(&[Transport::Mem], &[8]);
        o.connect = Some("@nobody".into());
        assert!(run(&o, &ProgressBar::hidden())
            .unwrap_err()
            .to_string()
            .contains("--connect"));
        let mut o = options(&[Transport::Shm], &[8]);
        (o.interleave, o.rounds) = (Some(10), 2);
        assert!(run(&o, &ProgressBar::hidden()).is_err());
    }

    /// A process peer needs the `offhost` binary: without one the start says so.
    #[test]
    fn a_missing_echo_binary_is_reported() {
        let o = options(&[Transport::Shm], &[8]);
        let e = run(&o, &ProgressBar::hidden()).unwrap_err();
        assert!(e.to_string().contains("start the echo engine"), "{e}");
    }

    #[test]
    fn the_ring_is_sized_for_the_largest_record_of_each_path() {
        let o = options(&[Transport::Shm], &[8, 4096, 65536]);
        let c = o.ring_config();
        assert_eq!((c.ring_bytes, c.buffer_size), (64 << 10, 65536));
        let mut o = options(&[Transport::Shm], &[200_000]);
        o.path = RecordPath::Inline;
        assert_eq!(o.ring_config().ring_bytes, 256 << 10);
    }
}
