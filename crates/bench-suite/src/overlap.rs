//! `bench engine --overlap`: double buffering (`[DS-link]` part 1 §3: the interface fills one
//! buffer while the other is on the wire). The same stream is sent with one message in flight
//! (the host copies message N+1 only once N has been carried: unoverlapped) and with two (it
//! copies N+1 while N is carried: double buffered), on two paths:
//!
//! - `host-port`: the host fills a `host-in` buffer (the copy) that the engine carries on
//!   (`crc32c`, which reads every byte: a transfer that costs about what the copy does) and
//!   hands back at `host-out`; a message is carried once it is back.
//! - `off-host`: the host copies each message into its local engine's shared-memory pool
//!   (`HostQueue::push_send`); that engine sends it over a plain TCP link on loopback to a
//!   second engine, whose host receives it; a message is carried once the second engine has
//!   acknowledged it. Both engines run in this process.
//!
//! The sizes take turns, and within a size the two depths (the order flips every round);
//! `overlap_gain` is the median over rounds of two-in-flight throughput over one-in-flight.

use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use offhost_engine::{EngineConfig, Pipeline, Registry};
use offhost_link::offload::{recv_all, ChannelId, HostQueue, OpenOptions, Outcome};
use offhost_link::peer::PeerConfig;
use offhost_link::{LinkOptions, Server};
use offhost_node::offload::{Offload, OffloadConfig};
use serde::Serialize;

use crate::error::{Context as _, Error, Result};

const T: Duration = Duration::from_secs(30);

/// Measured throughput of one path, size and depth, all rounds together.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// `host-port` or `off-host`.
    pub path: &'static str,
    /// Message size, bytes.
    pub size: usize,
    /// Messages in flight at most: 1 (unoverlapped) or 2 (double buffered).
    pub in_flight: usize,
    /// Messages carried.
    pub messages: u64,
    /// Throughput, 10^6 bytes per second.
    pub mb_per_s: f64,
}

/// Double buffering's gain on one path and size.
#[derive(Debug, Clone, Serialize)]
pub struct Gain {
    /// `host-port` or `off-host`.
    pub path: &'static str,
    /// Message size, bytes.
    pub size: usize,
    /// Median over rounds of two-in-flight throughput over one-in-flight (goal >= 1.3 where
    /// copy and transfer cost about the same).
    pub overlap_gain: f64,
    /// Each round's ratio.
    pub rounds: Vec<f64>,
}

/// What `bench engine --overlap` reports.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Per path, size and depth.
    pub rows: Vec<Row>,
    /// Per path and size.
    pub gains: Vec<Gain>,
}

impl Report {
    /// The report as a text table.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<10} {:>9} {:>15} {:>15} {:>8}\n",
            "path", "size", "1 in flight", "2 in flight", "gain"
        );
        for g in &self.gains {
            let mb = |d: usize| {
                self.rows
                    .iter()
                    .find(|r| r.path == g.path && r.size == g.size && r.in_flight == d)
                    .map_or(f64::NAN, |r| r.mb_per_s)
            };
            s.push_str(&format!(
                "{:<10} {:>9} {:>10.0} MB/s {:>10.0} MB/s {:>7.2}x\n",
                g.path,
                offhost_bench::sizes::format_size(g.size),
                mb(1),
                mb(2),
                g.overlap_gain
            ));
        }
        s
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Message sizes.
    pub sizes: Vec<usize>,
    /// Seconds each path, size and depth is streamed per round.
    pub seconds: f64,
    /// Rounds.
    pub rounds: usize,
}

/// Runs the overlap bench; `bar` counts the streams.
pub fn run(plan: &Plan, bar: &ProgressBar) -> Result<Report> {
    let off = OffHost::start()?;
    let secs = Duration::from_secs_f64(plan.seconds.max(0.01));
    let rounds = plan.rounds.max(1);
    bar.set_length((plan.sizes.len() * rounds * 4) as u64);
    let mut rows = Vec::new();
    let mut gains = Vec::new();
    for &size in &plan.sizes {
        for path in ["host-port", "off-host"] {
            // (messages, seconds) per depth, and each round's ratio.
            let mut sum = [(0u64, 0f64); 2];
            let mut ratios = Vec::with_capacity(rounds);
            for round in 0..rounds {
                let mut rate = [0f64; 2];
                let order = if round % 2 == 0 { [1, 2] } else { [2, 1] };
                for depth in order {
                    bar.set_message(format!("overlap {path} {size} B, {depth} in flight"));
                    let (n, s) = match path {
                        "host-port" => host_port(size, depth, secs),
                        _ => off.stream(size, depth, secs),
                    }
                    .with_context(|| format!("{path} {size} B, {depth} in flight"))?;
                    sum[depth - 1].0 += n;
                    sum[depth - 1].1 += s;
                    rate[depth - 1] = n as f64 * size as f64 / s;
                    bar.inc(1);
                }
                ratios.push(rate[1] / rate[0]);
            }
            for (d, (n, s)) in sum.iter().enumerate() {
                rows.push(Row {
                    path,
                    size,
                    in_flight: d + 1,
                    messages: *n,
                    mb_per_s: *n as f64 * size as f64 / s / 1e6,
                });
            }
            gains.push(Gain {
                path,
                size,
                overlap_gain: offhost_bench::stats::median(&ratios).unwrap_or(f64::NAN),
                rounds: ratios,
            });
        }
    }
    Ok(Report { rows, gains })
}

/// Streams `size`-byte messages through `host-in` -> `crc32c` -> `host-out` for `secs`, at
/// most `depth` in flight; the messages carried and the seconds taken.
fn host_port(size: usize, depth: usize, secs: Duration) -> Result<(u64, f64)> {
    let text = format!("host-in name=in >a:p(4,{size})\ncrc32c <a >b\nhost-out name=out <b\n");
    let config = EngineConfig {
        workers: 1,
        pin: false,
        batch: 16,
    };
    let mut run = Pipeline::parse(&text)
        .and_then(|p| p.start(&Registry::with_builtins(), &config))
        .map_err(|e| Error::Check(e.to_string()))?;
    let (input, out) = match (run.host_input("in"), run.host_output("out")) {
        (Some(i), Some(o)) => (i, o),
        _ => return Err(Error::Check("the pipeline has no host ports".into())),
    };
    let src = vec![0x5au8; size];
    let front = input.front();
    let t0 = Instant::now();
    let (mut sent, mut back) = (0u64, 0u64);
    loop {
        while sent - back < depth as u64 && t0.elapsed() < secs {
            // The copy: the message into a buffer laid out for the pool.
            let mut buf = input.spare();
            buf.resize(front, 0);
            buf.extend_from_slice(&src);
            input
                .send_quiet_at(buf, front)
                .map_err(|e| Error::Check(format!("host-in: {e}")))?;
            input.wake();
            sent += 1;
        }
        if back == sent {
            // The time is up (else a message went just now) and every one came back. A
            // loop that went on while time was left could find it up here and then wait
            // for a message never sent.
            break;
        }
        match out.recv_timeout(T) {
            Ok(Some(b)) if b.len() == size => back += 1,
            Ok(Some(b)) => return Err(Error::Check(format!("{} bytes back for {size}", b.len()))),
            Ok(None) => return Err(Error::Check("host-out ended early".into())),
            Err(e) => return Err(Error::Check(format!("host-out: {e}"))),
        }
    }
    let took = t0.elapsed().as_secs_f64();
    drop(input);
    while let Ok(Some(_)) = out.recv_timeout(T) {}
    run.wait().map_err(|e| Error::Check(e.to_string()))?;
    Ok((back, took))
}

/// Two off-host engines in this process, `alpha` linked to `beta` over plain TCP on loopback.
/// They serve until the process ends (an `Offload` has no shutdown): a run starts one pair.
struct OffHost {
    alpha: String,
    beta: String,
}

impl OffHost {
    fn start() -> Result<OffHost> {
        let opts = LinkOptions::new().insecure(true);
        static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = format!(
            "{}-{}",
            std::process::id(),
            RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let mut shm = Vec::new();
        let mut beta_url = String::new();
        for name in ["beta", "alpha"] {
            let server = Server::bind_with("tcp:127.0.0.1:0", &opts)?;
            let mut pc = PeerConfig::new(name).options(opts.clone());
            if name == "alpha" {
                pc = pc.peer("beta", &beta_url);
            } else {
                beta_url = server.url().to_owned();
            }
            let offload = Offload::new(OffloadConfig::new(pc), None)
                .map_err(|e| Error::Check(format!("engine {name}: {e}")))?;
            let addr = format!("@offhost-overlap-{n}-{name}");
            let listener = offhost_shm::Listener::bind(&addr)?;
            let o = Arc::clone(&offload);
            std::thread::spawn(move || {
                o.serve_shm(listener, Arc::new(|s: offhost_link::Session| s.close()))
            });
            let o = Arc::clone(&offload);
            std::thread::spawn(move || o.serve_links(&server, None));
            shm.push(format!("shm:{addr}"));
        }
        Ok(OffHost {
            beta: shm[0].clone(),
            alpha: shm[1].clone(),
        })
    }

    /// Streams for `secs` from a host of alpha to a host of beta, at most `depth` messages in
    /// flight, then the end mark; the messages carried and the seconds taken.
    fn stream(&self, size: usize, depth: usize, secs: Duration) -> Result<(u64, f64)> {
        let q_err = |what: &'static str| move |e| Error::Check(format!("{what}: {e}"));
        let mut rx = HostQueue::connect(&self.beta).map_err(q_err("connect to beta"))?;
        let sink = rx
            .open("sink", OpenOptions::bulk())
            .map_err(q_err("open sink"))?;
        let receiver =
            std::thread::spawn(move || recv_all(&mut rx, sink, &mut std::io::sink(), Some(T)));
        let mut q = HostQueue::connect(&self.alpha).map_err(q_err("connect to alpha"))?;
        let tx = q
            .open("beta/sink", OpenOptions::bulk())
            .map_err(q_err("open beta/sink"))?;
        let src = vec![0x5au8; size];
        let t0 = Instant::now();
        let (mut sent, mut done) = (0u64, 0u64);
        loop {
            if sent - done < depth as u64 && t0.elapsed() < secs {
                q.push_send(tx, &src, sent).map_err(q_err("send"))?;
                q.submit().map_err(q_err("submit"))?;
                sent += 1;
                continue;
            }
            if done == sent {
                // The time is up and every send is done (as in `host_port`).
                break;
            }
            reap(&mut q, &mut done)?;
        }
        let took = t0.elapsed().as_secs_f64();
        end(&mut q, tx)?;
        let got = receiver
            .join()
            .map_err(|_| Error::Check("receiving host panicked".into()))?
            .map_err(q_err("receive"))?;
        if got != sent * size as u64 {
            return Err(Error::Check(format!(
                "beta's host got {got} bytes of {}",
                sent * size as u64
            )));
        }
        Ok((done, took))
    }
}

/// Waits for completions and counts the delivered sends; a failed one is the error.
fn reap(q: &mut HostQueue, done: &mut u64) -> Result<()> {
    if q.wait_batch(Some(T))
        .map_err(|e| Error::Check(format!("wait: {e}")))?
        == 0
    {
        return Err(Error::Check("no completion within 30 s".into()));
    }
    while let Some(c) = q.pop() {
        if let Outcome::Failed(f) = c.outcome {
            return Err(Error::Check(format!("send: {f}")));
        }
        *done += 1;
    }
    Ok(())
}

/// Sends the end mark (an empty message) and waits for it.
fn end(q: &mut HostQueue, tx: ChannelId) -> Result<()> {
    q.push_send(tx, &[], u64::MAX)
        .and_then(|()| q.submit())
        .map_err(|e| Error::Check(format!("end mark: {e}")))?;
    let mut n = 0;
    while q.outstanding() > 0 {
        reap(q, &mut n)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both paths carry every message at both depths (the receiving host counts the bytes),
    /// and each size has its gain; the table shows them.
    #[test]
    fn both_paths_stream_at_both_depths() {
        let plan = Plan {
            sizes: vec![4096, 65536],
            seconds: 0.05,
            rounds: 2,
        };
        let r = run(&plan, &ProgressBar::hidden()).unwrap();
        assert_eq!(r.rows.len(), 8);
        assert!(
            r.rows
                .iter()
                .all(|row| row.messages > 0 && row.mb_per_s > 0.0),
            "{r:?}"
        );
        assert_eq!(r.gains.len(), 4);
        for g in &r.gains {
            assert_eq!(g.rounds.len(), 2);
            assert!(g.overlap_gain.is_finite() && g.overlap_gain > 0.0, "{g:?}");
        }
        let t = r.table();
        assert!(
            t.contains("host-port") && t.contains("off-host") && t.contains("64K"),
            "{t}"
        );
    }
}
