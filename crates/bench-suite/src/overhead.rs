//! `overhead`: the CPU a channel adds to the raw ring, without cross-core traffic. One thread
//! drives both ends of a channel session over an in-process shared-memory pair (poll mode)
//! and, in turn, both ends of a bare ring pair: send, receive, send back, receive, each
//! message copied out as an application would. What is left between the two is the channel
//! layer's own work (session lock, frames, credit), which the machine's state (where the
//! hypervisor puts the two vCPUs today) does not blur as it blurs a ping-pong between two
//! cores.

use offhost_bench::sizes;
use std::fmt::Write as _;
use std::time::Instant;

use indicatif::ProgressBar;
use offhost_link::Server;
use serde::Serialize;

use crate::channel::{connect, listen_url};
use crate::error::{check, require, Context as _, Error, Result};
use offhost_bench::transport::Transport;
use offhost_link::Wait;

/// What to measure.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Message sizes in bytes (a K, M or G suffix multiplies by 1024, 1024^2, 1024^3).
    #[arg(long, value_delimiter = ',', default_value = "64,4096", value_parser = sizes::parse_size)]
    pub sizes: Vec<usize>,
    /// Round trips per trial.
    #[arg(long, default_value_t = 100_000)]
    pub iters: usize,
    /// Trials per size, channels and ring in turn; the fastest of each counts.
    #[arg(long, default_value_t = 15)]
    pub trials: usize,
}

/// A channel round trip against the raw ring's, at one size.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Always `overhead`.
    pub bench: &'static str,
    /// Message size, bytes.
    pub size: usize,
    /// Round trips per trial.
    pub iters: usize,
    /// Trials.
    pub trials: usize,
    /// CPU time of one channel round trip (2 sends, 2 receives), fastest trial.
    pub channel_round_trip_ns: f64,
    /// The same over the bare ring.
    pub raw_round_trip_ns: f64,
    /// channel / raw.
    pub ratio: f64,
    /// What a channel adds to one hop: (channel - raw) / 2.
    pub extra_ns_per_hop: f64,
}

/// Runs the comparison at every size; `bar` counts trials.
pub fn run(o: &Options, bar: &ProgressBar) -> Result<Vec<Comparison>> {
    require(o.iters > 0, || "--iters must be at least 1".into())?;
    require(o.trials > 0, || "--trials must be at least 1".into())?;
    bar.set_length((o.sizes.len() * o.trials) as u64);
    let mut rows = Vec::new();
    for &size in &o.sizes {
        bar.set_message(format!("overhead {size} B"));
        rows.push(measure(size, o, bar).with_context(|| format!("{size}-byte messages"))?);
    }
    Ok(rows)
}

fn measure(size: usize, o: &Options, bar: &ProgressBar) -> Result<Comparison> {
    let config = offhost_shm::Config {
        mode: offhost_shm::Mode::Poll,
        ring_bytes: ((size + 4096).next_power_of_two() as u64 * 4).max(1 << 20),
        ..offhost_link::default_shm_config()
    };
    // This thread drives both sessions; the engine's is accepted on an unpinned thread.
    let (url, _dir) = listen_url(Transport::ShmChan)?;
    let server = Server::bind(&url)?;
    let url = server.url().to_owned();
    let engine = std::thread::spawn(move || server.accept());
    let host = connect(&url, Some(&config))?;
    let engine = engine
        .join()
        .map_err(|_| Error::Check("accepting thread panicked".into()))??;
    let a = host.open("overhead", crate::pingpong::channel_options(size))?;
    let b = engine.accept()?;
    let (ring_a, ring_b) = offhost_shm::pair(&config)?;
    let (mut a_tx, mut a_rx) = ring_a.split();
    let (mut b_tx, mut b_rx) = ring_b.split();

    let msg: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
    let mut buf = Vec::with_capacity(size);
    let (mut chan, mut raw) = (f64::MAX, f64::MAX);
    for _ in 0..o.trials {
        let t0 = Instant::now();
        for _ in 0..o.iters {
            a.send(&msg)?;
            check(b.recv_into(&mut buf, Wait::Forever)?, || {
                "the channel ended".into()
            })?;
            b.send(&buf)?;
            check(a.recv_into(&mut buf, Wait::Forever)?, || {
                "the channel ended".into()
            })?;
        }
        chan = chan.min(t0.elapsed().as_nanos() as f64 / o.iters as f64);
        check(buf == msg, || {
            "the channel's round trip changed the bytes".into()
        })?;
        let t0 = Instant::now();
        for _ in 0..o.iters {
            a_tx.send(&msg, None)?;
            copy_out(&mut b_rx, &mut buf)?;
            b_tx.send(&buf, None)?;
            copy_out(&mut a_rx, &mut buf)?;
        }
        raw = raw.min(t0.elapsed().as_nanos() as f64 / o.iters as f64);
        check(buf == msg, || {
            "the ring's round trip changed the bytes".into()
        })?;
        bar.inc(1);
    }
    Ok(Comparison {
        bench: "overhead",
        size,
        iters: o.iters,
        trials: o.trials,
        channel_round_trip_ns: chan,
        raw_round_trip_ns: raw,
        ratio: chan / raw,
        extra_ns_per_hop: (chan - raw) / 2.0,
    })
}

/// Receives the next record and copies its bytes into `buf`, as a channel receive does.
fn copy_out(rx: &mut offhost_shm::Receiver, buf: &mut Vec<u8>) -> Result<()> {
    let r = rx.recv(None)?;
    buf.clear();
    buf.extend_from_slice(r.bytes());
    Ok(())
}

/// The comparisons as a text table.
pub fn table(rows: &[Comparison]) -> String {
    let mut s = format!(
        "{:>8} {:>16} {:>14} {:>7} {:>14}\n",
        "size", "channel ns/rt", "raw ns/rt", "ratio", "extra ns/hop"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:>8} {:>16.0} {:>14.0} {:>7.2} {:>14.0}",
            r.size, r.channel_round_trip_ns, r.raw_round_trip_ns, r.ratio, r.extra_ns_per_hop
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_round_trips_are_timed_and_compared() {
        let o = Options {
            sizes: vec![8, 300],
            iters: 50,
            trials: 2,
        };
        let rows = run(&o, &ProgressBar::hidden()).unwrap();
        assert_eq!(rows.iter().map(|r| r.size).collect::<Vec<_>>(), [8, 300]);
        for r in &rows {
            assert!(r.channel_round_trip_ns > 0.0 && r.raw_round_trip_ns > 0.0);
            assert_eq!(r.ratio, r.channel_round_trip_ns / r.raw_round_trip_ns);
        }
        assert_eq!(table(&rows).lines().count(), 3);
        let none = Options { iters: 0, ..o };
        assert!(run(&none, &ProgressBar::hidden())
            .unwrap_err()
            .to_string()
            .contains("--iters"));
    }
}
