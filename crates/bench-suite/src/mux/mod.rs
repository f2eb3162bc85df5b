//! `mux`: what multiplexing virtual channels on one link gives, after `[DS-link]` (Part 1,
//! section 2): the T9000's virtual links over one DS link (Figure 1) and its short-message
//! rate over many virtual links (Figure 5).
//!
//! - `multiplexed` (Figure 1): one-way bandwidth against message size for N channels
//!   multiplexed on one link (one [`Session`] carrying N channels: `one-link`) against N links
//!   of one channel each (N sessions: `link-per-channel`). Each channel has a sender thread of
//!   its own that sends `size`-byte messages with [`Channel::send`] as fast as credit allows;
//!   the receiving side has a thread per channel that takes the messages in place
//!   ([`Channel::recv_each`]) and counts their bytes. MB/s (10^6 bytes) are the bytes
//!   received over the time from the first send to the last message received. The paper's
//!   single virtual link waits for each packet's acknowledgement, so more virtual links fill
//!   the physical link better; here a channel's credit window is far larger than a message, so
//!   the figure shows instead what N senders sharing one session's lock and socket cost or
//!   gain against N sessions of their own.
//! - `short_rate` (Figure 5): messages of 0 to 32 bytes sent as fast as possible over L links
//!   with `per_link` channels each (10, as in the paper), a sender thread per channel and a
//!   receiving thread per channel; messages per second in total, and the senders' own CPU time
//!   per message (their threads' CPU clocks; the links' flusher threads and the receivers are
//!   not counted). The paper's T9000 reaches 430 kHz with 2.33 us of CPU per message.
//!
//! Every run of a point is bounded twice: by bytes (`--bytes` across all channels of a point)
//! or messages (`--messages`), and by time (`--max-seconds` per sender, checked every 16
//! sends). Each point is run `--rounds` times and its best run is reported; the two layouts of
//! a `multiplexed` point alternate run by run, so that they are compared side by side.
//! The receiving side runs on threads of this process (not pinned: the senders, receivers and
//! the links' own threads share the machine's cores), over a server on a fresh address of the
//! transport, started anew for every point.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use offhost_bench::sizes::{self, format_size};
use offhost_bench::transport::{Kind, Transport};
use offhost_link::{Channel, ChannelOptions, LinkOptions, SendMode, Server, Session};
use serde::Serialize;

use crate::channel::{connect, listen_url};
use crate::error::{check, require, Context, Error, Result};
use crate::tls::Pki;

mod point;
mod report;

use point::{one_point, options, Load};
pub use report::plot;

/// The most channels of one point of `multiplexed` (their receive windows fit one session's).
pub const MAX_CHANNELS: usize = 16;
/// The largest message of `multiplexed`.
pub const MAX_SIZE: usize = 1 << 20;
/// The most channels per link of `short_rate` (their receive windows fit one session's).
pub const MAX_PER_LINK: usize = 128;
/// The most links of `short_rate` (a server's default session limit).
pub const MAX_LINKS: usize = 64;
/// The largest short message.
pub const MAX_SHORT: usize = 64 << 10;
/// A short-message channel's receive window.
const SHORT_WINDOW: u32 = 256 << 10;
/// Sends between two looks at the clock.
const CLOCK_EVERY: u64 = 16;

/// What to measure.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Channel transport: tcp, tls, unix, shm-chan (`shm` is read as shm-chan) or mem; tls
    /// uses a certificate directory made for the run.
    #[arg(long, default_value = "tcp")]
    pub transport: Transport,
    /// Channels N of `multiplexed`, comma-separated (at most 16): each N is measured on one
    /// link carrying N channels and on N links of one channel each.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,5")]
    pub channels: Vec<usize>,
    /// Message sizes of `multiplexed` in bytes (a K, M or G suffix multiplies by 1024,
    /// 1024^2, 1024^3; at most 1M).
    #[arg(long, value_delimiter = ',', default_value = "64,256,1024,4096,16384,65536", value_parser = sizes::parse_size)]
    pub sizes: Vec<usize>,
    /// Bytes sent per point of `multiplexed`, shared among its channels (K, M, G suffixes).
    #[arg(long, default_value = "64M", value_parser = |s: &str| offhost_bench::sizes::parse_size(s).map(|v| v as u64))]
    pub bytes: u64,
    /// The longest a point sends, in seconds (each sender stops at this time or its count).
    #[arg(long, default_value_t = 2.0)]
    pub max_seconds: f64,
    /// Links L of `short_rate`, comma-separated (at most 64).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4")]
    pub links: Vec<usize>,
    /// Channels per link of `short_rate` (the paper's 10; at most 128).
    #[arg(long, default_value_t = 10)]
    pub per_link: usize,
    /// Message sizes of `short_rate` in bytes, comma-separated (0 allowed; the paper's 0 to 32).
    #[arg(long, value_delimiter = ',', default_value = "0,8,32")]
    pub rate_sizes: Vec<usize>,
    /// Messages sent per point of `short_rate`, shared among its channels.
    #[arg(long, default_value_t = 2_000_000)]
    pub messages: u64,
    /// Runs of each point (the best counts); the two layouts of `multiplexed` alternate run
    /// by run.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
}

impl Options {
    /// The transport measured (`shm` read as `shm-chan`).
    fn transport(&self) -> Transport {
        match self.transport {
            Transport::Shm => Transport::ShmChan,
            t => t,
        }
    }

    fn check(&self) -> Result<()> {
        let t = self.transport();
        require(t.kind() == Kind::Channel, || {
            format!("--transport {t}: mux measures channels (tcp, tls, unix, shm-chan or mem)")
        })?;
        require(
            self.channels
                .iter()
                .all(|&n| (1..=MAX_CHANNELS).contains(&n)),
            || format!("--channels must be from 1 to {MAX_CHANNELS}"),
        )?;
        require(
            self.sizes.iter().all(|&s| (1..=MAX_SIZE).contains(&s)),
            || format!("--sizes must be from 1 byte to {}", format_size(MAX_SIZE)),
        )?;
        require(
            self.links.iter().all(|&n| (1..=MAX_LINKS).contains(&n)),
            || format!("--links must be from 1 to {MAX_LINKS}"),
        )?;
        require((1..=MAX_PER_LINK).contains(&self.per_link), || {
            format!("--per-link must be from 1 to {MAX_PER_LINK}")
        })?;
        require(self.rate_sizes.iter().all(|&s| s <= MAX_SHORT), || {
            format!("--rate-sizes must be at most {}", format_size(MAX_SHORT))
        })?;
        require(
            self.bytes > 0 && self.messages > 0 && self.rounds > 0,
            || "--bytes, --messages and --rounds must be at least 1".into(),
        )?;
        require(
            self.max_seconds.is_finite() && self.max_seconds > 0.0,
            || {
                format!(
                    "--max-seconds {} must be a positive number",
                    self.max_seconds
                )
            },
        )
    }

    fn cap(&self) -> Duration {
        Duration::from_secs_f64(self.max_seconds)
    }
}

/// How the channels of a `multiplexed` point are carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// All N channels on one link (one session): the paper's virtual links on one DS link.
    OneLink,
    /// A link (session) of its own for each channel.
    LinkPerChannel,
}

impl Layout {
    /// The name in the table and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Layout::OneLink => "one-link",
            Layout::LinkPerChannel => "link-per-channel",
        }
    }
}

/// One point of `multiplexed` (its best run).
#[derive(Debug, Clone, Serialize)]
pub struct MuxRow {
    /// One link carrying the channels, or a link per channel.
    pub layout: Layout,
    /// Channels N, each with its own sender thread.
    pub channels: usize,
    /// Message size, bytes.
    pub size: usize,
    /// Messages received, all channels together.
    pub messages: u64,
    /// Bytes received, all channels together.
    pub bytes: u64,
    /// From the first send to the last message received, seconds.
    pub seconds: f64,
    /// Bytes received per second, MB/s (10^6 bytes).
    pub mb_per_s: f64,
}

/// One point of `short_rate` (its best run).
#[derive(Debug, Clone, Serialize)]
pub struct RateRow {
    /// Links L (sessions).
    pub links: usize,
    /// Channels per link.
    pub per_link: usize,
    /// Message size, bytes.
    pub size: usize,
    /// Messages received, all channels together.
    pub messages: u64,
    /// From the first send to the last message received, seconds.
    pub seconds: f64,
    /// Messages received per second, all channels together.
    pub msgs_per_s: f64,
    /// The sender threads' CPU time per message sent, microseconds.
    pub sender_cpu_us_per_msg: f64,
}

/// The figures of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The transport measured.
    pub transport: String,
    /// Runs of each point; every row is its point's best run.
    pub rounds: usize,
    /// Bandwidth against message size, N channels on one link against a link per channel
    /// (Figure 1).
    pub multiplexed: Vec<MuxRow>,
    /// Short messages per second over L links of `per_link` channels (Figure 5).
    pub short_rate: Vec<RateRow>,
    /// The most channels measured on one link (5 by default), for `one_link_gain`.
    pub gain_channels: Option<usize>,
    /// At the largest size: one link's bandwidth with `gain_channels` channels over its
    /// bandwidth with one (the paper's Figure 1 gain of more virtual links).
    pub one_link_gain: Option<f64>,
    /// At the largest size and `gain_channels` channels: one link's bandwidth over that of a
    /// link per channel.
    pub one_link_vs_links: Option<f64>,
    /// The highest short-message rate, messages per second (the paper's T9000: 430 kHz).
    pub peak_msgs_per_s: Option<f64>,
}

/// Measures both figures; `bar` advances once per point. An empty list of channels (or
/// links) leaves its figure out.
pub fn run(o: &Options, bar: &ProgressBar) -> Result<Report> {
    o.check()?;
    let t = o.transport();
    let pki = Pki::for_transports(&[t])?;
    let points = 2 * o.channels.len() * o.sizes.len() + o.links.len() * o.rate_sizes.len();
    bar.set_length(points as u64);
    let mut multiplexed = Vec::new();
    for &size in &o.sizes {
        for &n in &o.channels {
            let mut best: [Option<MuxRow>; 2] = [None, None];
            for round in 0..o.rounds {
                for (i, layout) in [Layout::OneLink, Layout::LinkPerChannel]
                    .into_iter()
                    .enumerate()
                {
                    let what = format!(
                        "mux {t} {} N={n} {size} B, run {}/{}",
                        layout.name(),
                        round + 1,
                        o.rounds
                    );
                    bar.set_message(what.clone());
                    let (sessions, per_session) = match layout {
                        Layout::OneLink => (1, n),
                        Layout::LinkPerChannel => (n, 1),
                    };
                    let load = Load {
                        sessions,
                        per_session,
                        size,
                        count: (o.bytes / size as u64 / n as u64).max(1),
                        cap: o.cap(),
                        options: options(size, (2 * size).max(1 << 20) as u32),
                    };
                    let m = one_point(t, pki.as_ref(), &load).context(what)?;
                    let row = MuxRow {
                        layout,
                        channels: n,
                        size,
                        messages: m.messages,
                        bytes: m.bytes,
                        seconds: m.seconds,
                        mb_per_s: m.bytes as f64 / m.seconds / 1e6,
                    };
                    if best[i].as_ref().is_none_or(|b| row.mb_per_s > b.mb_per_s) {
                        best[i] = Some(row);
                    }
                }
            }
            multiplexed.extend(best.into_iter().flatten());
            bar.inc(2);
        }
    }
    let mut short_rate = Vec::new();
    for &size in &o.rate_sizes {
        for &links in &o.links {
            let mut best: Option<RateRow> = None;
            for round in 0..o.rounds {
                let what = format!(
                    "short messages {t} {links} links {size} B, run {}/{}",
                    round + 1,
                    o.rounds
                );
                bar.set_message(what.clone());
                let load = Load {
                    sessions: links,
                    per_session: o.per_link,
                    size,
                    count: (o.messages / (links * o.per_link) as u64).max(1),
                    cap: o.cap(),
                    options: options(size, SHORT_WINDOW),
                };
                let m = one_point(t, pki.as_ref(), &load).context(what)?;
                let row = RateRow {
                    links,
                    per_link: o.per_link,
                    size,
                    messages: m.messages,
                    seconds: m.seconds,
                    msgs_per_s: m.messages as f64 / m.seconds,
                    sender_cpu_us_per_msg: m.sender_cpu_s * 1e6 / m.messages as f64,
                };
                if best.as_ref().is_none_or(|b| row.msgs_per_s > b.msgs_per_s) {
                    best = Some(row);
                }
            }
            short_rate.extend(best);
            bar.inc(1);
        }
    }
    Ok(summarise(t, o.rounds, multiplexed, short_rate))
}

/// The report with its summary figures.
fn summarise(
    t: Transport,
    rounds: usize,
    multiplexed: Vec<MuxRow>,
    short_rate: Vec<RateRow>,
) -> Report {
    let largest = multiplexed.iter().map(|r| r.size).max();
    let most = multiplexed.iter().map(|r| r.channels).max();
    let at = |layout: Layout, n: Option<usize>| {
        multiplexed
            .iter()
            .find(|r| Some(r.size) == largest && r.layout == layout && Some(r.channels) == n)
            .map(|r| r.mb_per_s)
    };
    let many = at(Layout::OneLink, most);
    let one_link_gain = many.zip(at(Layout::OneLink, Some(1))).map(|(a, b)| a / b);
    let one_link_vs_links = many
        .zip(at(Layout::LinkPerChannel, most))
        .map(|(a, b)| a / b);
    let peak_msgs_per_s = short_rate.iter().map(|r| r.msgs_per_s).reduce(f64::max);
    Report {
        transport: t.name().into(),
        rounds,
        gain_channels: most,
        one_link_gain,
        one_link_vs_links,
        peak_msgs_per_s,
        multiplexed,
        short_rate,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> Options {
        Options {
            transport: Transport::Tcp,
            channels: vec![1, 2],
            sizes: vec![64, 4096],
            bytes: 256 << 10,
            max_seconds: 0.5,
            links: vec![1, 2],
            per_link: 2,
            rate_sizes: vec![0, 8, 32],
            messages: 20_000,
            rounds: 1,
        }
    }

    /// Every point moves every byte it sent, at a positive rate, and the report has a row
    /// per point and its summary figures.
    #[test]
    fn every_point_moves_its_bytes() {
        let o = tiny();
        let r = run(&o, &ProgressBar::hidden()).unwrap();
        println!("{}", r.text());
        assert_eq!(r.multiplexed.len(), 2 * 2 * 2);
        assert_eq!(r.short_rate.len(), 2 * 3);
        for m in &r.multiplexed {
            assert!(m.mb_per_s > 0.0 && m.messages > 0, "{m:?}");
            assert_eq!(m.bytes, m.messages * m.size as u64, "{m:?}");
            // Bounded by bytes: a point sends at most its share of --bytes per channel.
            let per = (o.bytes / m.size as u64 / m.channels as u64).max(1);
            assert!(m.messages <= per * m.channels as u64, "{m:?}");
        }
        for x in &r.short_rate {
            assert!(x.msgs_per_s > 0.0 && x.messages > 0, "{x:?}");
            assert!(x.sender_cpu_us_per_msg >= 0.0, "{x:?}");
            assert!(x.messages <= o.messages, "{x:?}");
        }
        assert!(r.one_link_gain.is_some_and(|g| g > 0.0));
        assert_eq!(r.gain_channels, Some(2));
        assert!(r.peak_msgs_per_s.is_some_and(|p| p > 0.0));
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(plot(&r, dir.path()).unwrap().len(), 2);
    }

    #[test]
    fn a_raw_transport_or_an_option_out_of_range_is_refused() {
        let mut o = tiny();
        o.transport = Transport::TcpRaw;
        let e = run(&o, &ProgressBar::hidden()).unwrap_err();
        assert!(e.to_string().contains("mux measures channels"), "{e}");
        let mut o = tiny();
        o.max_seconds = 0.0;
        assert!(run(&o, &ProgressBar::hidden()).is_err());
    }
}
