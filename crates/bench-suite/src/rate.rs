//! `rate`: messages per second of a one-way stream through a channel, sent in batches, by copy
//! or (on shared memory) by loan, to a sink engine on a thread. Several transports are
//! measured in turn, run by run, so that their ratios (a `tls` row's `throughput_vs_tcp`)
//! come from runs taken side by side.

use offhost_bench::sizes;
use std::str::FromStr;
use std::time::Instant;

use indicatif::ProgressBar;
use offhost_bench::report::{self, Row};
use offhost_bench::stats::Summary;
use offhost_bench::transport::{Kind, Placement, Transport};
use offhost_link::{ChannelOptions, Message, SendMode, Session};
use offhost_shm::Mode;

use crate::channel::Served;
use crate::error::{check, require, Error, Result};
use crate::tls::Pki;
use offhost_link::Wait;

/// How messages travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RatePath {
    /// Copied through the link (`send_batch`).
    Copy,
    /// Zero-copy loans of the shared pool (`shm-chan` only; the sender does not touch the
    /// bytes).
    Loan,
}

impl RatePath {
    /// The name in commands and rows.
    pub fn name(self) -> &'static str {
        match self {
            RatePath::Copy => "copy",
            RatePath::Loan => "loan",
        }
    }
}

/// A rate path name that names nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown path {0:?} (expected copy or loan)")]
pub struct UnknownRatePath(pub String);

impl FromStr for RatePath {
    type Err = UnknownRatePath;
    fn from_str(s: &str) -> Result<RatePath, UnknownRatePath> {
        match s {
            "copy" => Ok(RatePath::Copy),
            "loan" => Ok(RatePath::Loan),
            other => Err(UnknownRatePath(other.into())),
        }
    }
}

/// What to measure.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Channel transports, comma-separated: shm-chan, tcp, tls, unix, mem (`shm`, this
    /// command's old name for shm-chan, is read as shm-chan for a while), and iceoryx2 as the
    /// peer (publish-subscribe, copy path; `shm-chan,iceoryx2` adds shm-chan's time per
    /// message over iceoryx2's). Several are measured in turn, run by run; `tls,tcp` adds
    /// TLS's throughput over TCP's (tls uses a certificate directory made for the run and
    /// removed after).
    #[arg(
        long = "transport",
        value_name = "TRANSPORT",
        value_delimiter = ',',
        default_value = "shm-chan"
    )]
    pub transports: Vec<Transport>,
    /// Message sizes in bytes (a K, M or G suffix multiplies by 1024, 1024^2, 1024^3).
    #[arg(long, value_delimiter = ',', default_value = "64", value_parser = sizes::parse_size)]
    pub sizes: Vec<usize>,
    /// Paths, comma-separated: copy, loan (shm-chan only).
    #[arg(
        long = "path",
        value_name = "PATH",
        value_delimiter = ',',
        default_value = "copy"
    )]
    pub paths: Vec<RatePath>,
    /// Messages per run (default: 4 GiB worth, from 200 up to 2 million).
    #[arg(long)]
    pub count: Option<usize>,
    /// Messages per send_batch call (copy path).
    #[arg(long, default_value_t = 256)]
    pub batch: usize,
    /// Runs per size and path; the report gives the median and the slowest.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Doorbell mode on shared memory: poll, block or adaptive.
    #[arg(long, default_value = "adaptive")]
    pub mode: Mode,
    /// Interrupt coalescing on shared memory (shm-chan), both sides: each wait sleeps until
    /// RECORDS records have come or DELAY has passed with one there (`8`, `32,200us`; default
    /// delay 1ms). Rows report it beside the wake-ups per message.
    #[arg(long, value_name = "RECORDS[,DELAY]")]
    pub event_limit: Option<offhost_shm::EventLimit>,
}

impl Options {
    /// Reads `shm` (this command's old name for channels over shared memory) as `shm-chan`;
    /// returns a note saying so when it did.
    pub fn shm_as_channels(&mut self) -> Option<String> {
        let old = self.transports.contains(&Transport::Shm);
        for t in &mut self.transports {
            if *t == Transport::Shm {
                *t = Transport::ShmChan;
            }
        }
        old.then(|| "note: bench rate reads shm as shm-chan (channels over shared memory)".into())
    }
}

impl Options {
    fn check(&self) -> Result<()> {
        require(!self.transports.is_empty(), || {
            "no transport to measure".into()
        })?;
        for t in &self.transports {
            require(
                t.kind() == Kind::Channel || *t == Transport::Iceoryx2,
                || {
                    format!("--transport {t}: rate measures channels (shm-chan, tcp, tls, unix or mem) and iceoryx2")
                },
            )?;
        }
        require(self.runs > 0 && self.batch > 0, || {
            "--runs and --batch must be at least 1".into()
        })?;
        require(
            !self.paths.contains(&RatePath::Loan)
                || self.transports.iter().all(|&t| t == Transport::ShmChan),
            || {
                "--path loan needs --transport shm-chan (iceoryx2 is measured on the copy path)"
                    .into()
            },
        )
    }
}

/// Runs the rate bench; one row per size, path and transport. `bar` shows the runs.
pub fn run(o: &Options, bar: &ProgressBar) -> Result<Vec<Row>> {
    o.check()?;
    let loans = o.paths.contains(&RatePath::Loan);
    let shm = offhost_shm::Config {
        mode: o.mode,
        event_limit: o.event_limit,
        ..offhost_link::default_shm_config()
    };
    let pki = Pki::for_transports(&o.transports)?;
    // iceoryx2 sets up its services run by run (`crate::iceoryx2::rate_run`).
    let served = o
        .transports
        .iter()
        .map(|&t| match t {
            Transport::Iceoryx2 => Ok(None),
            t => Served::start_with(t, Some(&shm), pki.as_ref(), move |s| sink(s, loans)).map(Some),
        })
        .collect::<Result<Vec<_>>>()?;
    let n = o.transports.len();
    bar.set_length((o.sizes.len() * o.paths.len() * o.runs * n) as u64);
    let mut rows = Vec::new();
    for &size in &o.sizes {
        for &path in &o.paths {
            let count = o
                .count
                .unwrap_or((4usize << 30) / size)
                .clamp(200, 2_000_000);
            let mut ns = vec![Vec::with_capacity(o.runs); n];
            // Wake-ups (this process's voluntary context switches: host and sink) and messages.
            let mut woken: Vec<Option<(u64, u64)>> = vec![Some((0, 0)); n];
            for run in 0..o.runs {
                for (i, s) in served.iter().enumerate() {
                    bar.set_message(format!(
                        "rate {} {size} B {}: run {}/{}",
                        o.transports[i],
                        path.name(),
                        run + 1,
                        o.runs
                    ));
                    let before = switches();
                    ns[i].push(match s {
                        Some(s) => one_run(s.session(), size, path, count, o.batch)?,
                        None => crate::iceoryx2::rate_run(o.mode, shm.spin, size, count)?,
                    });
                    let run = before
                        .zip(switches())
                        .map(|(b, a)| (a.saturating_sub(b), count as u64));
                    woken[i] = woken[i].zip(run).map(|(w, r)| (w.0 + r.0, w.1 + r.1));
                    bar.inc(1);
                }
            }
            for ((&t, ns), woken) in o.transports.iter().zip(ns).zip(woken) {
                let s = Summary::of(&ns).ok_or_else(|| Error::Check("no runs".into()))?;
                let mode = if t.has_modes() { o.mode } else { Mode::Block };
                let mut r = Row::new("rate", t.name(), mode.name(), size, &s);
                // The slowest run, as the 99th percentile of so few.
                r.one_way_ns_p99 = s.max;
                r.peer = Some(Placement::Thread.name().into());
                r.path = Some(path.name().into());
                r.iters = Some(count);
                r.wakeups_per_msg = woken.map(|(w, msgs)| w as f64 / msgs.max(1) as f64);
                r.event_limit = o
                    .event_limit
                    .filter(|_| t.is_offhost_shm())
                    .map(|l| l.records);
                if n > 1 {
                    // Runs of the transports alternate: each run is a round.
                    r.round_medians_ns = ns;
                }
                rows.push(r);
            }
        }
    }
    for s in served.into_iter().flatten() {
        s.finish()?;
    }
    report::throughput_vs_tcp(&mut rows);
    crate::pingpong::vs_iceoryx2(&mut rows);
    Ok(rows)
}

/// This process's voluntary context switches so far (all threads: the host and the sink).
fn switches() -> Option<u64> {
    offhost_bench::cpu::account(None, &[])
        .ok()
        .map(|a| a.voluntary_switches)
}

/// Streams `count` messages on a fresh channel; returns ns per message, from the first send
/// (once the sink said it is ready) until the sink has taken the last one.
fn one_run(
    session: &Session,
    size: usize,
    path: RatePath,
    count: usize,
    batch: usize,
) -> Result<f64> {
    let opts = ChannelOptions {
        packet_size: size.clamp(8, 64 * 1024).next_power_of_two(),
        recv_buffer: (4 * size).max(4 << 20) as u32,
        max_message: size as u64,
        send_mode: SendMode::Async,
    };
    let ch = session.open(&format!("rate-{}", path.name()), opts)?;
    let data = vec![0x5au8; size];
    let refs: Vec<&[u8]> = vec![&data; batch.min(count)];
    // The clock starts once the sink has the channel: the rate is the stream's, not the time
    // it takes the engine to accept a channel.
    ch.recv()?
        .ok_or_else(|| Error::Check("sink ended before it was ready".into()))?;
    let t0 = Instant::now();
    match path {
        RatePath::Copy => {
            let mut left = count;
            while left > 0 {
                let n = left.min(batch);
                ch.send_batch(&refs[..n])?;
                left -= n;
            }
        }
        RatePath::Loan => {
            for _ in 0..count {
                let mut loan = ch.loan(None)?;
                loan.set_len(size)?;
                ch.send_loan(loan)?;
            }
        }
    }
    ch.close()?;
    // The sink answers with the number it took once it saw the end of the stream.
    let got = ch
        .recv()?
        .ok_or_else(|| Error::Check("sink ended without a count".into()))?;
    let elapsed = t0.elapsed();
    let got = <[u8; 8]>::try_from(got.as_slice())
        .map(u64::from_le_bytes)
        .map_err(|_| Error::Check(format!("sink count of {} bytes", got.len())))?;
    check(got == count as u64, || {
        format!("sink took {got} messages of {count}")
    })?;
    Ok(elapsed.as_nanos() as f64 / count as f64)
}

/// The sink engine: counts the messages of each channel and answers with the count.
fn sink(session: Session, loans: bool) -> Result<()> {
    while let Ok(ch) = session.accept() {
        ch.send(b"ready")?;
        let mut n = 0u64;
        if loans && ch.name() == "rate-loan" {
            while let Some(m) = ch.recv_message(Wait::Forever)? {
                check(matches!(m, Message::Loan(_)), || "expected loans".into())?;
                n += 1;
            }
        } else {
            // Every message is looked at in place (its first byte), none is copied.
            let mut seen = 0u8;
            loop {
                let k = ch.recv_each(1024, |m| seen ^= m.first().copied().unwrap_or(0))?;
                if k == 0 {
                    break;
                }
                n += k as u64;
            }
            std::hint::black_box(seen);
        }
        ch.send(&n.to_le_bytes())?;
        ch.close()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(t: Transport, paths: &[RatePath]) -> Options {
        Options {
            transports: vec![t],
            sizes: vec![64],
            paths: paths.to_vec(),
            count: Some(300),
            batch: 32,
            runs: 2,
            mode: Mode::Block,
            event_limit: None,
        }
    }

    #[test]
    fn every_channel_transport_streams_and_counts() {
        for t in [Transport::Mem, Transport::Unix, Transport::ShmChan] {
            let rows = run(&options(t, &[RatePath::Copy]), &ProgressBar::hidden()).unwrap();
            assert_eq!(rows.len(), 1);
            let r = &rows[0];
            assert_eq!(
                (r.transport.as_str(), r.iters, r.samples),
                (t.name(), Some(300), 2)
            );
            assert!(r.msgs_per_s.unwrap() > 0.0 && r.one_way_ns_p99 >= r.one_way_ns_median);
        }
        let rows = run(
            &options(Transport::ShmChan, &[RatePath::Loan]),
            &ProgressBar::hidden(),
        );
        assert_eq!(rows.unwrap()[0].path.as_deref(), Some("loan"));
    }

    #[test]
    fn an_event_limit_is_reported_on_shared_memory_beside_the_wake_ups() {
        let mut o = options(Transport::ShmChan, &[RatePath::Copy]);
        o.transports.push(Transport::Unix);
        o.event_limit = Some("8,1ms".parse().unwrap());
        let rows = run(&o, &ProgressBar::hidden()).unwrap();
        assert_eq!(rows[0].event_limit, Some(8));
        assert_eq!(rows[1].event_limit, None, "a socket has no doorbell");
        for r in &rows {
            assert!(r.wakeups_per_msg.is_some_and(|w| w >= 0.0), "{r:?}");
            assert_eq!(r.iters, Some(300));
        }
    }

    /// TLS and TCP streamed in turn: a row each, the runs as rounds, and TLS's throughput
    /// over TCP's from them.
    #[test]
    fn tls_and_tcp_run_side_by_side() {
        let mut o = options(Transport::Tls, &[RatePath::Copy]);
        o.transports.push(Transport::Tcp);
        o.sizes = vec![65536];
        let rows = run(&o, &ProgressBar::hidden()).unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r.transport.as_str()).collect();
        assert_eq!(names, ["tls", "tcp"]);
        assert!(rows.iter().all(|r| r.round_medians_ns.len() == 2));
        assert!(rows[0].throughput_vs_tcp.is_some_and(|v| v > 0.0));
        assert_eq!(rows[1].throughput_vs_tcp, None);
    }

    /// shm-chan and iceoryx2 streamed in turn: a row each, and shm-chan's time per message
    /// over iceoryx2's from the rounds.
    #[cfg(feature = "iceoryx2")]
    #[test]
    fn shm_chan_and_iceoryx2_run_side_by_side() {
        let mut o = options(Transport::ShmChan, &[RatePath::Copy]);
        o.transports.push(Transport::Iceoryx2);
        o.mode = Mode::Adaptive;
        let rows = run(&o, &ProgressBar::hidden()).unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r.transport.as_str()).collect();
        assert_eq!(names, ["shm-chan", "iceoryx2"]);
        assert!(rows
            .iter()
            .all(|r| r.mode == "adaptive" && r.iters == Some(300)));
        assert!(
            rows[0].vs_iceoryx2.is_some_and(|v| v > 0.0),
            "{:?}",
            rows[0]
        );
        assert_eq!(rows[1].vs_iceoryx2, None);
        assert!(report::rate_table(&rows).contains("x iceoryx2"));
    }

    #[test]
    fn loans_and_raw_transports_are_refused_where_they_cannot_be() {
        let e = run(
            &options(Transport::Tcp, &[RatePath::Loan]),
            &ProgressBar::hidden(),
        );
        assert!(e
            .unwrap_err()
            .to_string()
            .contains("needs --transport shm-chan"));
        let e = run(
            &options(Transport::Shm, &[RatePath::Copy]),
            &ProgressBar::hidden(),
        );
        assert!(e
            .unwrap_err()
            .to_string()
            .contains("rate measures channels"));
    }
}
