//! The two host programs of the offload bench, each its own process (so that its CPU time and
//! wake-ups are its own): the measuring host A (`offhost bench offload-host`) and the peer
//! host B that echoes and sinks (`offhost bench offload-peer`). Both take their spec as JSON.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use offhost_bench::cpu;
use offhost_bench::stats::Summary;
use offhost_link::offload::{ChannelId, HostQueue, OpenOptions, Outcome, QueueError, RecvSize};
use offhost_link::peer::PeerConfig;
use offhost_link::LinkOptions;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// How host A reaches the network.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Through its local engine's off-host queue at this shm address.
    OffHost {
        /// `shm:PATH`.
        engine: String,
    },
    /// Running the peer link itself.
    InHost {
        /// Its node name (what engine B answers to).
        name: String,
        /// Engine B's URL.
        peer_url: String,
        /// Certificates for `tls:`.
        certs: Option<PathBuf>,
    },
}

/// What host A does.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Task {
    /// Per size: a ping-pong for latency, then a stream for throughput, CPU and wake-ups.
    Table {
        /// Message sizes.
        sizes: Vec<usize>,
        /// Timed round trips per size (fewer for large messages).
        round_trips: usize,
        /// Seconds each size is streamed (after a tenth of that to warm up).
        stream_seconds: f64,
    },
    /// A rate-limited channel streamed for a while.
    Rate {
        /// Bytes per second.
        rate: u64,
        /// Burst, bytes.
        burst: u64,
        /// Message size.
        size: usize,
        /// How long.
        seconds: f64,
    },
    /// A bulk stream for a while (the load of the priority experiment).
    Bulk {
        /// Message size.
        size: usize,
        /// How long.
        seconds: f64,
    },
    /// 64-byte round trips on an urgent (or bulk) channel.
    Ping {
        /// On the urgent lane.
        urgent: bool,
        /// Timed round trips.
        round_trips: usize,
    },
}

/// Host A's spec.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostSpec {
    /// How it reaches the network.
    pub access: Access,
    /// What it does.
    pub task: Task,
}

/// One size of the table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SizeResult {
    /// Message size.
    pub size: usize,
    /// One-way time (half the round trip), ns, over the timed round trips.
    pub one_way_ns: Vec<f64>,
    /// Messages streamed.
    pub messages: u64,
    /// Seconds the stream took (first submission to last completion).
    pub seconds: f64,
    /// This process's CPU time during the stream, ns (all its threads).
    pub cpu_ns: u64,
    /// This process's voluntary context switches during the stream (all its threads).
    pub wakeups: u64,
}

impl SizeResult {
    /// Adds another round of the same size: its round trips, messages, time, CPU, wake-ups.
    pub fn add(&mut self, other: SizeResult) {
        self.one_way_ns.extend(other.one_way_ns);
        self.messages += other.messages;
        self.seconds += other.seconds;
        self.cpu_ns += other.cpu_ns;
        self.wakeups += other.wakeups;
    }
}

/// What host A measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HostReport {
    /// Table: one entry per size.
    pub sizes: Vec<SizeResult>,
    /// Rate and bulk: bytes delivered and over how long.
    pub delivered: Option<(u64, f64)>,
    /// Ping: one-way times, ns.
    pub ping_ns: Vec<f64>,
}

fn q_err(what: &str) -> impl Fn(QueueError) -> Error + '_ {
    move |e| Error::Peer(format!("{what}: {e}"))
}

fn connect(access: &Access) -> Result<HostQueue> {
    match access {
        Access::OffHost { engine } => HostQueue::connect(engine).map_err(q_err("connect")),
        Access::InHost {
            name,
            peer_url,
            certs,
        } => {
            let mut opts = LinkOptions::new().insecure(peer_url.starts_with("tcp:"));
            if let Some(c) = certs {
                opts = opts.tls_certificates(c);
            }
            HostQueue::in_host(PeerConfig::new(name).peer("beta", peer_url).options(opts))
                .map_err(q_err("in-host node"))
        }
    }
}

fn check(c: &offhost_link::offload::Completion) -> Result<()> {
    match &c.outcome {
        Outcome::Failed(f) => Err(Error::Check(format!("{:?} failed: {f}", c.op))),
        _ => Ok(()),
    }
}

/// Waits up to 30 s for a completion; `what` says what did not come.
fn wait_30s(q: &mut HostQueue, what: impl FnOnce() -> String) -> Result<()> {
    if q.wait(1, Some(Duration::from_secs(30)))
        .map_err(q_err("wait"))?
        == 0
    {
        return Err(Error::Check(what()));
    }
    Ok(())
}

/// Round trips of `msg` out on `tx`, back on `rx`; one-way times in ns.
fn ping(
    q: &mut HostQueue,
    tx: ChannelId,
    rx: ChannelId,
    size: usize,
    warmup: usize,
    timed: usize,
) -> Result<Vec<f64>> {
    let msg = vec![0xa5u8; size];
    let mut out = Vec::with_capacity(timed);
    let recv_tag = u64::MAX;
    for i in 0..warmup + timed {
        let t0 = Instant::now();
        q.push_recv(rx, RecvSize::Any, recv_tag)
            .map_err(q_err("recv"))?;
        loop {
            match q.push_send(tx, &msg, i as u64) {
                Ok(()) => break,
                // Every pool buffer still carries an earlier ping whose delivery the remote
                // engine has not acknowledged yet (the answer can come first): their
                // completions bring the buffers home.
                Err(QueueError::Full(_)) if q.outstanding() > 1 => {
                    q.submit().map_err(q_err("submit"))?;
                    wait_30s(q, || format!("no {size}-byte ping completed in 30 s"))?;
                    while let Some(c) = q.pop() {
                        check(&c)?;
                    }
                }
                Err(e) => return Err(q_err("send")(e)),
            }
        }
        q.submit().map_err(q_err("submit"))?;
        let mut back = false;
        while !back {
            wait_30s(q, || format!("no answer to a {size}-byte ping in 30 s"))?;
            while let Some(c) = q.pop() {
                check(&c)?;
                if c.tag == recv_tag && c.op == offhost_link::offload::Op::Recv {
                    if c.data.len() != size {
                        return Err(Error::Check(format!(
                            "a {size}-byte ping came back with {} bytes",
                            c.data.len()
                        )));
                    }
                    back = true;
                }
            }
        }
        let dt = t0.elapsed();
        if i >= warmup {
            out.push(dt.as_nanos() as f64 / 2.0);
        }
    }
    // Let the last sends complete.
    while q.outstanding() > 0 {
        q.wait(1, Some(Duration::from_secs(30)))
            .map_err(q_err("wait"))?;
        while let Some(c) = q.pop() {
            check(&c)?;
        }
    }
    Ok(out)
}

/// Streams `n` messages of `size` (or until `until`) on `tx`, at most `window` in flight;
/// returns the messages delivered and the seconds taken.
fn stream(
    q: &mut HostQueue,
    tx: ChannelId,
    size: usize,
    n: u64,
    until: Option<Instant>,
) -> Result<(u64, f64)> {
    let msg = vec![0x5au8; size];
    let limits = q.limits();
    // A deep window, as a queue is meant to be used: up to 512 messages and 32 MiB in flight.
    let window = 512usize.min(limits.max_outstanding as usize - 2);
    let max_bytes = (32u64 << 20).min(limits.max_bytes);
    let t0 = Instant::now();
    let (mut pushed, mut done) = (0u64, 0u64);
    let more = |pushed: u64| pushed < n && until.is_none_or(|u| Instant::now() < u);
    while more(pushed) || done < pushed {
        let mut staged = false;
        while more(pushed)
            && q.outstanding() < window
            && (q.bytes_in_flight() == 0 || q.bytes_in_flight() + size as u64 <= max_bytes)
        {
            match q.push_send(tx, &msg, pushed) {
                Ok(()) => {}
                // Out of pool buffers: reap first.
                Err(QueueError::Full(_)) if q.outstanding() > 0 => break,
                Err(e) => return Err(q_err("send")(e)),
            }
            pushed += 1;
            staged = true;
        }
        if staged {
            q.submit().map_err(q_err("submit"))?;
        }
        if q.wait_batch(Some(Duration::from_secs(60)))
            .map_err(q_err("wait"))?
            == 0
        {
            return Err(Error::Check("no completion within 60 s".into()));
        }
        while let Some(c) = q.pop() {
            check(&c)?;
            done += 1;
        }
    }
    Ok((done, t0.elapsed().as_secs_f64()))
}

fn open(q: &mut HostQueue, address: &str, opts: OpenOptions) -> Result<ChannelId> {
    q.open(address, opts)
        .map_err(|e| Error::Peer(format!("open {address}: {e}")))
}

/// Runs host A's task (in this process, which should do nothing else).
pub fn host_main(spec: &HostSpec) -> Result<HostReport> {
    let mut q = connect(&spec.access)?;
    let mut report = HostReport::default();
    match &spec.task {
        Task::Table {
            sizes,
            round_trips,
            stream_seconds,
        } => {
            let ping_tx = open(&mut q, "beta/ping", OpenOptions::bulk())?;
            let pong = open(&mut q, "pong", OpenOptions::bulk())?;
            let sink = open(&mut q, "beta/sink", OpenOptions::bulk())?;
            for &size in sizes {
                let timed = (*round_trips).min((64 << 20) / size.max(1)).max(20);
                let one_way_ns = ping(&mut q, ping_tx, pong, size, timed / 10 + 2, timed)?;
                let secs = Duration::from_secs_f64(stream_seconds.max(0.01));
                // Warm the stream's path first, then count.
                stream(
                    &mut q,
                    sink,
                    size,
                    u64::MAX,
                    Some(Instant::now() + secs / 10),
                )?;
                let before = cpu::account(None, &[])?;
                let (messages, seconds) =
                    stream(&mut q, sink, size, u64::MAX, Some(Instant::now() + secs))?;
                let used = cpu::account(None, &[])?.since(&before);
                report.sizes.push(SizeResult {
                    size,
                    one_way_ns,
                    messages,
                    seconds,
                    cpu_ns: used.cpu_ns,
                    wakeups: used.voluntary_switches,
                });
                eprintln!("done {size}");
            }
        }
        Task::Rate {
            rate,
            burst,
            size,
            seconds,
        } => {
            let tx = open(&mut q, "beta/sink", OpenOptions::bulk().rate(*rate, *burst))?;
            let until = Instant::now() + Duration::from_secs_f64(*seconds);
            let (n, secs) = stream(&mut q, tx, *size, u64::MAX, Some(until))?;
            report.delivered = Some((n * *size as u64, secs));
        }
        Task::Bulk { size, seconds } => {
            let tx = open(&mut q, "beta/sink", OpenOptions::bulk())?;
            let until = Instant::now() + Duration::from_secs_f64(*seconds);
            let (n, secs) = stream(&mut q, tx, *size, u64::MAX, Some(until))?;
            report.delivered = Some((n * *size as u64, secs));
        }
        Task::Ping {
            urgent,
            round_trips,
        } => {
            let (to, back, opts) = if *urgent {
                ("beta/pingu", "pongu", OpenOptions::urgent())
            } else {
                ("beta/ping", "pong", OpenOptions::bulk())
            };
            let tx = open(&mut q, to, opts)?;
            let rx = open(&mut q, back, OpenOptions::bulk())?;
            report.ping_ns = ping(&mut q, tx, rx, 64, round_trips / 10 + 2, *round_trips)?;
        }
    }
    Ok(report)
}

/// Host B's spec: echo `ping` to `REPLY/pong` and `pingu` to `REPLY/pongu` (urgent), take
/// and drop `sink`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerSpec {
    /// Engine B's shm address.
    pub engine: String,
    /// The name of host A's node (`alpha`, or the in-host node's).
    pub reply: String,
}

/// Runs host B until its engine goes away (or it is killed).
pub fn peer_main(spec: &PeerSpec) -> Result<()> {
    let mut q = HostQueue::connect(&spec.engine).map_err(q_err("connect"))?;
    let ping = open(&mut q, "ping", OpenOptions::bulk())?;
    let pingu = open(&mut q, "pingu", OpenOptions::bulk())?;
    let sink = open(&mut q, "sink", OpenOptions::bulk())?;
    // Opened at the first ping: engine B knows host A's node once that has linked to it.
    let (mut pong, mut pongu) = (None, None);
    for (ch, n) in [(ping, 2), (pingu, 2), (sink, 32)] {
        for _ in 0..n {
            q.push_recv(ch, RecvSize::Any, u64::from(ch.0))
                .map_err(q_err("recv"))?;
        }
    }
    q.submit().map_err(q_err("submit"))?;
    loop {
        q.wait(1, None).map_err(q_err("wait"))?;
        while let Some(c) = q.pop() {
            if let Outcome::Failed(f) = &c.outcome {
                if f.code == offhost_link::offload::ErrorCode::EngineGone {
                    return Ok(());
                }
                continue;
            }
            if c.op != offhost_link::offload::Op::Recv {
                continue;
            }
            let (slot, name, opts) = if c.channel == ping {
                (&mut pong, "pong", OpenOptions::bulk())
            } else if c.channel == pingu {
                (&mut pongu, "pongu", OpenOptions::urgent())
            } else {
                (&mut None, "", OpenOptions::bulk())
            };
            let back = match (*slot, name) {
                (_, "") => None,
                (Some(ch), _) => Some(ch),
                (None, _) => {
                    let ch = open(&mut q, &format!("{}/{name}", spec.reply), opts)?;
                    *slot = Some(ch);
                    Some(ch)
                }
            };
            if let Some(b) = back {
                loop {
                    match q.push_send(b, &c.data, 0) {
                        Ok(()) => break,
                        // Out of pool buffers: earlier answers' completions bring them home.
                        Err(QueueError::Full(_)) if q.outstanding() > 0 => {
                            q.submit().map_err(q_err("submit"))?;
                            let n = q.wait(0, Some(Duration::ZERO)).map_err(q_err("wait"))?;
                            q.wait(n + 1, None).map_err(q_err("wait"))?;
                        }
                        Err(e) => return Err(q_err("send")(e)),
                    }
                }
            }
            q.push_recv(c.channel, RecvSize::Any, u64::from(c.channel.0))
                .map_err(q_err("recv"))?;
        }
        q.submit().map_err(q_err("submit"))?;
    }
}

/// Summary of one-way times.
pub fn summary(ns: &[f64]) -> Option<Summary> {
    Summary::of(ns)
}
