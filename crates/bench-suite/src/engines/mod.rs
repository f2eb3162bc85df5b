//! `engines`: what joining engines costs, against the bare sockets they use (issue 21's
//! performance checks), measured in one run between the same two ends.
//!
//! - `network`: where the ends meet. `netns` (the default where namespaces can be made:
//!   root and iproute2) puts engine `a`, the raw socket's writer and every caller in one
//!   network namespace and engine `b`, the raw socket's reader and the echoes in another,
//!   joined by a veth pair ([`Net`]), as on two machines; `loopback` puts them all on this
//!   machine's loopback. `--netem` impairs the veth pair.
//! - `queue_mb_per_s`: a queue between two engines (`fill rewrite=false @a >x:p(N,64k)` /
//!   `null @b <x`, N from `--buffers`, 16 unless given; two `offhost engine` processes linked
//!   by mutual TLS) while it streams. `fill` writes each of its N buffers once and sends
//!   them again as they come back, as the raw socket's writer sends its one buffer again:
//!   both compare sending, not making the bytes. Each of `rounds`
//!   (taking turns with the raw socket's) runs a short job (an eighth of the bytes) and a
//!   long one, each timed from submission to the end of both parts; the streaming rate is the
//!   long job's extra bytes over its best time less the short job's best, so that submitting
//!   the job, the engines' handshakes and the tasks' start and end, which both jobs pay
//!   alike, cancel out (the raw socket's handshake is outside its timing too).
//!   `queue_job_mb_per_s` is the long job's whole rate and `queue_job_setup_ms` what a job
//!   adds to its streaming time (30-45 ms on loopback here, a few percent of a 2 GB job).
//! - `raw_tls_mb_per_s`: the same bytes in 64 KiB writes over one plain rustls connection
//!   (`tls-raw`: the same certificates and cipher suite, a reader thread), the best of `rounds`.
//! - `rounds_vs_raw_tls`: each round's own ratio, its streaming rate (its long job less its
//!   short one) over its raw socket's rate, in order. The queue and the raw socket of one
//!   round run seconds apart, so each ratio pairs them; the spread shows how much the
//!   machine moved during the run, which the best-of figures above hide. The text gives
//!   their median and range.
//! - `queue_cpu_s_per_gb`, `raw_tls_cpu_s_per_gb`: CPU time (user + system) per GB of each
//!   over all rounds: for the queue, both engine processes' and this process's (which submits
//!   the job), the long jobs' less the short jobs'; for the raw socket, this process's (its
//!   two threads). From `/proc/PID/stat`, in clock ticks of 10 ms per process and run, so a
//!   short run (a few MiB) can read as 0 and then has no ratio `queue_cpu_vs_raw_tls`. Where
//!   both use every core they can (as on a 2-vCPU machine), the throughput ratio is about the
//!   inverse of the CPU ratio; with a core for each busy thread the slowest thread sets the
//!   pace instead.
//! - `queue_busiest_thread_cpu_s_per_gb`, `raw_tls_busiest_thread_cpu_s_per_gb`: the CPU time
//!   per GB of the busiest single thread: of the engines' threads (read every 20 ms from
//!   `/proc/PID/task/TID/schedstat` while each round runs, see `offhost_bench::threads`; the
//!   busiest of each round, summed), and of the raw socket's two threads (their own CPU
//!   clocks). Their ratio `queue_busiest_vs_raw_tls` is what sets the throughput ratio on a
//!   machine with a core for every busy thread; `queue_busiest_thread` names that thread
//!   (`ENGINE:NAME`, in the last round).
//! - `sides`: each engine against the raw socket's thread that ran on its CPUs (engine `a`
//!   and the writer send, engine `b` and the reader receive; see [`Side`]): all the engine's
//!   threads, the long jobs' less the short jobs', and its busiest thread. With the `split`
//!   placement the first is each side's CPU load against the raw socket's on the same CPUs,
//!   the second what would set the side's pace with a core for every busy thread.
//! - `placement`: where the ends of both throughput measurements run. `split` (the default,
//!   with two CPUs or more) starts engine `a` on the first half of this process's CPUs and
//!   engine `b` on the other half (every thread of each engine stays there), and runs the raw
//!   socket's writer on `a`'s CPUs and its reader on `b`'s: two machines would not share
//!   cores either. `shared` lets every thread run anywhere; on a 2-vCPU machine the queue's
//!   four busy threads then crowd onto the core of whichever link thread sets the pace (the
//!   scheduler wakes a worker where it last ran), and the other core idles meanwhile.
//! - `call_us`: a null remote call, a 1-byte message and its answer on a channel over `tls:`
//!   to an echo on a thread of this process (what an engine-to-engine call rides on), median
//!   of `calls`; `tcp_rtt_us`: a 1-byte round trip on a plain TCP socket to an echo thread,
//!   median of as many. Both echoes run on one core and the caller on another, and the two
//!   take turns in blocks of 100 (see `calls_us`): placed differently, one TCP round trip
//!   with both threads on one core took 4 us against 60 us across cores on the same machine.
//! - `task_call_us`: a null call from a task on engine `a` to a pipeline on engine `b`, as a
//!   pipeline makes it (`call`, to `host-in` and `host-out whole=true` on `b`; one call at a
//!   time): the time of `max(calls, 1000)` more calls, from the difference between the best
//!   of two jobs of a tenth as many calls and the best of two jobs of that many more, so
//!   that submitting, the link's handshake and the pipelines' start cancel out (a mean: a
//!   job's calls are timed together). Measured while the engines run with the queue's
//!   placement, before the TCP round trip, so `task_call_vs_tcp` pairs figures taken a
//!   few seconds apart.

use std::net::TcpListener;
use std::path::PathBuf;
use std::time::Instant;

use indicatif::ProgressBar;
use offhost_bench::plain;
use offhost_bench::run::{Conn, Role};
use offhost_bench::stats::{median, Summary};
use offhost_bench::threads::Sampler;
use offhost_bench::transport::Transport;
use offhost_bench::{affinity, cpu};
use offhost_engine::Registry;
use offhost_link::{ChannelOptions, Server, Session};
use offhost_node::daemon::{Client, DaemonError};
use offhost_node::jobs::placed::{self, PlacedJob};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::offload::{Net, Network};
use crate::process::PeerProcess;
use crate::tls::Pki;

mod sides;

pub use sides::{Side, SideRole};

/// What to measure.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Bytes through the queue between the engines (the long job of each round; the short one
    /// takes an eighth) and through the raw TLS socket.
    #[arg(long, default_value = "2G", value_parser = |s: &str| offhost_bench::sizes::parse_size(s).map(|v| v as u64))]
    pub bytes: u64,
    /// Runs of each throughput measurement (the best counts).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Timed calls and round trips.
    #[arg(long, default_value_t = 5000)]
    pub calls: usize,
    /// Where the two ends run: `split` gives engine `a` (and the raw socket's writer) one
    /// half of the CPUs and engine `b` (and its reader) the other, as two machines would
    /// have cores of their own; `shared` lets every thread run anywhere. With one CPU both
    /// are `shared`.
    #[arg(long, value_enum, default_value_t = Placement::Split)]
    pub placement: Placement,
    /// Buffers of the queue's free list (`fill rewrite=false @a >x:p(N,64k)`): how far the
    /// source may run ahead of the link.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub buffers: u32,
    /// One more argument for both engines (repeatable), e.g. --engine-arg=--workers=1.
    #[arg(long = "engine-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub engine_args: Vec<String>,
    /// Where the two ends meet: netns (engine `a`, the raw socket's writer and the callers
    /// in one network namespace, engine `b`, the reader and the echoes in another, joined by
    /// a veth pair: needs root and iproute2) or loopback (default: netns where it can be
    /// made).
    #[arg(long)]
    pub network: Option<Network>,
    /// tc netem arguments for both ends of the veth pair, e.g. "delay 1ms" (with netns).
    #[arg(long, value_name = "ARGS")]
    pub netem: Option<String>,
    /// The `offhost` binary whose `engine` command is measured.
    #[arg(skip)]
    pub exe: PathBuf,
}

/// Where the two ends of the throughput measurements run (see [`Options::placement`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// Each end on a half of the CPUs of its own.
    Split,
    /// Every thread anywhere.
    Shared,
}

/// The figures of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Where the two ends met: two network namespaces joined by a veth pair, or loopback.
    pub network: Network,
    /// Why the network is loopback when namespaces were not asked for by name and could not
    /// be made.
    pub network_note: Option<String>,
    /// What was done to the veth pair (`tc netem`), if anything.
    pub impairment: Option<String>,
    /// Bytes per run.
    pub bytes: u64,
    /// Buffers of the queue's free list.
    pub buffers: u32,
    /// Where the ends ran: `split` with the CPUs of each (`cpus_a`, `cpus_b`), or `shared`.
    pub placement: Placement,
    /// The CPUs of engine `a` and the raw socket's writer (all of them when shared).
    pub cpus_a: Vec<usize>,
    /// The CPUs of engine `b` and the raw socket's reader (all of them when shared).
    pub cpus_b: Vec<usize>,
    /// A queue between two engines over TLS, MB/s while it streams: the long job's bytes
    /// beyond the short one's over its best time beyond the short one's best; `None` when
    /// the long job never took longer than the short one (a run of a few MiB, where the
    /// difference is lost in the jitter of setting the jobs up).
    pub queue_mb_per_s: Option<f64>,
    /// The same queue's whole long job, MB/s (best time): with submitting the job, the
    /// engines' TLS handshakes and the tasks' start and end.
    pub queue_job_mb_per_s: f64,
    /// What a job adds to its streaming time, milliseconds: the long job's best time less
    /// its bytes at the streaming rate (`None` with `queue_mb_per_s`).
    pub queue_job_setup_ms: Option<f64>,
    /// One raw rustls connection, 64 KiB writes, MB/s (best run).
    pub raw_tls_mb_per_s: f64,
    /// queue / raw TLS (issue 21 asks for >= 0.9); `None` with `queue_mb_per_s`.
    pub queue_vs_raw_tls: Option<f64>,
    /// Each round's queue / raw TLS, in order: the round's long job's extra bytes over its
    /// extra time beside its short job, against the round's raw socket; `None` for a round
    /// whose long job did not take longer than its short one.
    pub rounds_vs_raw_tls: Vec<Option<f64>>,
    /// CPU seconds per GB through the queue: both engines and the submitting process, the
    /// long jobs' CPU less the short jobs' over the bytes between them.
    pub queue_cpu_s_per_gb: f64,
    /// CPU seconds per GB through the raw TLS socket.
    pub raw_tls_cpu_s_per_gb: f64,
    /// queue / raw TLS CPU per byte; `None` when the raw socket's run was too short to
    /// measure (less than a clock tick of CPU).
    pub queue_cpu_vs_raw_tls: Option<f64>,
    /// The busiest thread of the engines in the last round, `ENGINE:NAME`.
    pub queue_busiest_thread: String,
    /// CPU seconds per GB of the queue's busiest thread (the busiest of each round).
    pub queue_busiest_thread_cpu_s_per_gb: f64,
    /// CPU seconds per GB of the raw socket's busier thread (of each round).
    pub raw_tls_busiest_thread_cpu_s_per_gb: f64,
    /// queue / raw TLS busiest thread's CPU per byte (what bounds the throughput ratio with a
    /// core for every busy thread); `None` when the raw socket's thread ran for no measurable
    /// time.
    pub queue_busiest_vs_raw_tls: Option<f64>,
    /// Engine `a` (sending) against the raw writer, and engine `b` (receiving) against the
    /// raw reader.
    pub sides: [Side; 2],
    /// A null call on a channel over TLS, median, microseconds.
    pub call_us: f64,
    /// A 1-byte round trip on plain TCP, median, microseconds.
    pub tcp_rtt_us: f64,
    /// call / TCP round trip (issue 21 asks for <= 1.2).
    pub call_vs_tcp: f64,
    /// A null call from a task on engine `a` to a pipeline on engine `b` (`call`), mean,
    /// microseconds; `None` if the longer jobs did not take longer.
    pub task_call_us: Option<f64>,
    /// task call / TCP round trip.
    pub task_call_vs_tcp: Option<f64>,
}

impl Report {
    /// The figures as text.
    pub fn text(&self) -> String {
        let unmeasured = "not measurable (too short a run: raise --bytes)";
        let streaming = match (self.queue_mb_per_s, self.queue_vs_raw_tls) {
            (Some(q), Some(r)) => format!(
                "{q:.0} MB/s; raw TLS socket {:.0} MB/s; ratio {r:.2}",
                self.raw_tls_mb_per_s
            ),
            _ => format!(
                "{unmeasured}; raw TLS socket {:.0} MB/s",
                self.raw_tls_mb_per_s
            ),
        };
        let measured: Vec<f64> = self.rounds_vs_raw_tls.iter().flatten().copied().collect();
        let by_round = match Summary::of(&measured) {
            Some(s) if s.samples >= 2 => format!(
                "each round's ratio: median {:.2}, {:.2}-{:.2} over {} rounds\n",
                s.median, s.min, s.max, s.samples
            ),
            _ => String::new(),
        };
        let placement = match self.placement {
            Placement::Split => format!(
                "each end on CPUs of its own: a (and the raw writer) on {:?}, b (and the raw reader) on {:?}",
                self.cpus_a, self.cpus_b
            ),
            Placement::Shared => "every thread on any CPU".to_owned(),
        };
        let network = match (self.network, &self.network_note) {
            (Network::Netns, _) => format!(
                "two network namespaces joined by a veth pair{}",
                self.impairment
                    .as_ref()
                    .map_or(String::new(), |i| format!(" ({i})"))
            ),
            (Network::Loopback, Some(why)) => why.clone(),
            (Network::Loopback, None) => "loopback".to_owned(),
        };
        format!(
            "network: {network}\n\
             placement: {placement}\n\
             queue between two engines (TLS, 64 KiB buffers), streaming: {streaming}\n\
             {by_round}\
             whole job through the queue: {:.0} MB/s (setting up and ending a job: {})\n\
             CPU per GB: queue {:.3} s; raw TLS socket {:.3} s; ratio {}\n\
             busiest thread's CPU per GB: queue {:.3} s ({}); raw TLS socket {:.3} s; ratio {}\n\
             {}{}\
             null call over a TLS channel: {:.1} us; TCP round trip {:.1} us; ratio {:.2}\n\
             null call from a task on a to a pipeline on b: {}\n",
            self.queue_job_mb_per_s,
            self.queue_job_setup_ms
                .map_or(unmeasured.to_owned(), |ms| format!("{ms:.0} ms")),
            self.queue_cpu_s_per_gb,
            self.raw_tls_cpu_s_per_gb,
            self.queue_cpu_vs_raw_tls
                .map_or(unmeasured.to_owned(), |r| format!("{r:.2}")),
            self.queue_busiest_thread_cpu_s_per_gb,
            self.queue_busiest_thread,
            self.raw_tls_busiest_thread_cpu_s_per_gb,
            self.queue_busiest_vs_raw_tls
                .map_or("not measurable".to_owned(), |r| format!("{r:.2}")),
            self.sides[0].text(),
            self.sides[1].text(),
            self.call_us,
            self.tcp_rtt_us,
            self.call_vs_tcp,
            match (self.task_call_us, self.task_call_vs_tcp) {
                (Some(c), Some(r)) => format!("{c:.1} us; ratio {r:.2} to the TCP round trip"),
                _ => "not measurable (the longer jobs took no longer)".to_owned(),
            }
        )
    }
}

/// Measures; `bar` shows the steps.
pub fn run(o: &Options, bar: &ProgressBar) -> Result<Report> {
    let (net, note) = Net::choose(o.network, o.netem.as_deref())?;
    let pki = Pki::generate_for(&[net.addr_a.clone(), net.addr_b.clone()])?;
    // This side's work (submitting, the raw writer, the callers) runs in `a`'s namespace.
    let report = net.on_side(true, || measure(o, bar, &net, &pki))??;
    Ok(Report {
        network_note: note,
        ..report
    })
}

/// [`run`] on side `a` of `net`.
fn measure(o: &Options, bar: &ProgressBar, net: &Net, pki: &Pki) -> Result<Report> {
    let files = tempfile::tempdir()?;
    bar.set_length(4);
    bar.set_message("engines");
    let dir = pki.dir().to_string_lossy().into_owned();
    let all = affinity::allowed_cpus();
    let (placement, (cpus_a, cpus_b)) = match (o.placement, affinity::halves()) {
        (Placement::Split, Some(halves)) => (Placement::Split, halves),
        _ => (Placement::Shared, (all.clone(), all.clone())),
    };
    let mut engines = Vec::new();
    for (name, cpus) in [("a", &cpus_a), ("b", &cpus_b)] {
        let listen = format!("tls:{}:0", net.addr_of(name == "a"));
        let args: Vec<String> = [
            "--name",
            name,
            "--listen",
            &listen,
            "--tls-certificates",
            &dir,
            "--files",
            &files.path().to_string_lossy(),
        ]
        .iter()
        .map(|s| s.to_string())
        .chain(o.engine_args.iter().cloned())
        .collect();
        // The engine process inherits this thread's CPUs, and its threads the process's.
        affinity::pin_current_thread_to(cpus)?;
        let started = crate::offload::engine(&o.exe, &net.prefix(name == "a"), &args);
        affinity::unpin_current_thread(&all);
        engines.push(started?);
    }
    let list: Vec<(String, String)> = engines
        .iter()
        .zip(["a", "b"])
        .map(|((_, urls), n)| (n.to_string(), urls[0].clone()))
        .collect();
    let options = pki.link_options();
    let registry = Registry::with_builtins();
    bar.inc(1);
    // The queue and the raw socket take turns, round by round, so that both see the same
    // states of the machine.
    let mut raw = 0f64;
    let pids: Vec<u32> = engines.iter().map(|(p, _)| p.id()).collect();
    // CPU seconds of the engines and of this process, now.
    let cpu_now = |with_engines: bool| -> Result<f64> {
        let mut total =
            cpu::process_cpu_s(None).ok_or_else(|| Error::Peer("no /proc/self/stat".into()))?;
        for &pid in pids.iter().filter(|_| with_engines) {
            total += cpu::process_cpu_s(Some(pid))
                .ok_or_else(|| Error::Peer(format!("engine process {pid} is gone")))?;
        }
        Ok(total)
    };
    let (mut queue_cpu, mut raw_cpu) = (0f64, 0f64);
    // The busiest thread's CPU seconds, summed over the rounds, and the last round's name.
    let (mut queue_busiest, mut raw_busiest) = (0f64, 0f64);
    let mut busiest_name = String::new();
    // Engine a and the raw writer, engine b and the raw reader.
    let mut tallies = [sides::Tally::default(), sides::Tally::default()];
    // The short job's bytes: enough to start streaming, small beside the long one.
    let short = (o.bytes / SHORT_PART).max(64 << 10).min(o.bytes / 2);
    // The shortest time of each job over the rounds (best of rounds, as for the raw socket).
    let (mut short_secs, mut long_secs, mut streamed) = (f64::INFINITY, f64::INFINITY, 0u64);
    let mut rounds_vs_raw = Vec::new();
    for round in 1..=o.rounds.max(1) {
        bar.set_message(format!("queue between engines, round {round}"));
        let run_job = |bytes: u64| -> Result<QueueRun> {
            let text = format!(
                "fill bytes={bytes} rewrite=false @a >x:p({},64k)\nnull @b <x\n",
                o.buffers
            );
            let job = PlacedJob {
                engines: &list,
                options: &options,
                path: "engines.ion",
                text: &text,
                outs: &[],
                ins: &[],
                modules: &[],
                streams: None,
            };
            let cpu0 = cpu_now(true)?;
            let sampler = Sampler::start(&pids, SAMPLE_PERIOD)?;
            let t = Instant::now();
            let done = placed::run(&job, &registry, None, |_, _, _| {});
            let secs = t.elapsed().as_secs_f64();
            let threads = sampler.stop();
            let done = done.map_err(|e| Error::Peer(e.to_string()))?;
            if let Some(f) = done.failure {
                return Err(Error::Peer(f));
            }
            let cpu = cpu_now(true)? - cpu0;
            Ok(QueueRun { secs, cpu, threads })
        };
        let s = run_job(short)?;
        let l = run_job(o.bytes)?;
        if let Some(t) = l.threads.first() {
            queue_busiest += t.cpu_s;
            let engine = pids
                .iter()
                .position(|&p| p == t.pid)
                .map_or("?", |i| list[i].0.as_str());
            busiest_name = format!("{engine}:{}", t.name);
        }
        short_secs = short_secs.min(s.secs);
        long_secs = long_secs.min(l.secs);
        queue_cpu += (l.cpu - s.cpu).max(0.0);
        streamed += o.bytes - short;
        bar.set_message(format!("raw TLS socket, round {round}"));
        let cpu0 = cpu_now(false)?;
        let (mb_per_s, writer, reader) =
            raw_tls_mb_per_s(pki, net, o.bytes, (&cpus_a, &cpus_b), &all)?;
        raw = raw.max(mb_per_s);
        let round_queue = streaming_rate(o.bytes - short, l.secs - s.secs);
        rounds_vs_raw.push(round_queue.map(|q| q / 1e6 / mb_per_s));
        raw_busiest += writer.max(reader);
        for ((tally, &pid), raw_thread) in tallies.iter_mut().zip(&pids).zip([writer, reader]) {
            tally.add(pid, &s.threads, &l.threads, raw_thread);
        }
        raw_cpu += cpu_now(false)? - cpu0;
    }
    // The long job's extra bytes over its extra time: the setting up and tearing down that
    // both jobs pay alike cancel out. Differences of the best times, not the best of the
    // rounds' differences (which picks out the round whose noise favoured it most).
    let queue = streaming_rate(o.bytes - short, long_secs - short_secs);
    let setup_ms = queue.map(|rate| (long_secs - o.bytes as f64 / rate) * 1e3);
    let queue = queue.map(|rate| rate / 1e6);
    let streamed_gb = (streamed as f64 / 1e9).max(f64::MIN_POSITIVE);
    let gb = (o.bytes as f64 * o.rounds.max(1) as f64 / 1e9).max(f64::MIN_POSITIVE);
    let (queue_cpu, raw_cpu) = (queue_cpu / streamed_gb, raw_cpu / gb);
    let (queue_busiest, raw_busiest) = (queue_busiest / gb, raw_busiest / gb);
    let sides = [
        tallies[0].side("a", sides::SideRole::Sending, streamed_gb, gb),
        tallies[1].side("b", sides::SideRole::Receiving, streamed_gb, gb),
    ];
    bar.set_message("null calls from a task on a to b");
    let task_call = task_call_us(&list, &options, o.calls)?;
    drop(
        engines
            .into_iter()
            .map(|(p, _)| p)
            .collect::<Vec<PeerProcess>>(),
    );
    bar.inc(2);
    bar.set_message("null calls");
    let (call, rtt) = calls_us(&options, net, o.calls)?;
    bar.inc(1);
    Ok(Report {
        network: net.kind,
        network_note: None,
        impairment: net.impairment.clone(),
        bytes: o.bytes,
        buffers: o.buffers,
        placement,
        cpus_a,
        cpus_b,
        queue_mb_per_s: queue,
        queue_job_mb_per_s: o.bytes as f64 / long_secs / 1e6,
        queue_job_setup_ms: setup_ms,
        raw_tls_mb_per_s: raw,
        queue_vs_raw_tls: queue.map(|q| q / raw),
        rounds_vs_raw_tls: rounds_vs_raw,
        queue_cpu_s_per_gb: queue_cpu,
        raw_tls_cpu_s_per_gb: raw_cpu,
        // A run shorter than a clock tick can read as 0 s: no ratio then.
        queue_cpu_vs_raw_tls: (raw_cpu > 0.0 && queue_cpu > 0.0).then(|| queue_cpu / raw_cpu),
        queue_busiest_thread: busiest_name,
        queue_busiest_thread_cpu_s_per_gb: queue_busiest,
        raw_tls_busiest_thread_cpu_s_per_gb: raw_busiest,
        queue_busiest_vs_raw_tls: (raw_busiest > 0.0).then(|| queue_busiest / raw_busiest),
        sides,
        call_us: call,
        tcp_rtt_us: rtt,
        call_vs_tcp: call / rtt,
        task_call_us: task_call,
        task_call_vs_tcp: task_call.map(|c| c / rtt),
    })
}

/// See `task_call_us` in the module's documentation; `engines` are `a` and `b` with their
/// URLs, and `b` serves [`SERVE`](crate::rpc::SERVE).
fn task_call_us(
    engines: &[(String, String)],
    options: &offhost_link::LinkOptions,
    calls: usize,
) -> Result<Option<f64>> {
    let [(_, a), (_, b)] = engines else {
        return Err(Error::Check("two engines, a and b".into()));
    };
    let connect = |url: &str| {
        Client::connect_with(url, options).map_err(|e| Error::Peer(format!("{url}: {e}")))
    };
    let (ca, cb) = (connect(a)?, connect(b)?);
    let peer = |e: DaemonError| Error::Peer(e.to_string());
    let job = |n: usize| -> Result<f64> {
        let served = cb.submit(crate::rpc::SERVE).map_err(peer)?;
        let text = format!(
            "fill bytes={n} >q:q(1,1)\ncall url={b} pipeline={} name=svc engine=b <q >r:r(1,64)\nnull <r\n",
            served.id
        );
        let t = Instant::now();
        let caller = ca.submit(&text).map_err(peer)?;
        let state = ca.wait(caller.id).map_err(peer)?;
        let secs = t.elapsed().as_secs_f64();
        // A service runs until stopped.
        cb.stop(served.id).map_err(peer)?;
        let served = cb.wait(served.id).map_err(peer)?;
        for s in [&state, &served] {
            if s.state != "finished" {
                return Err(Error::Peer(format!("a null-call job did not finish: {s}")));
            }
        }
        Ok(secs)
    };
    let more = calls.max(1000);
    let few = more / 10;
    let (mut short, mut long) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..2 {
        short = short.min(job(few)?);
        long = long.min(job(few + more)?);
    }
    Ok((long > short).then(|| (long - short) / more as f64 * 1e6))
}

/// The queue's streaming rate, bytes per second: the long job's `extra_bytes` over its
/// `extra_secs` beside the short job; `None` when it carried no more or took no longer.
fn streaming_rate(extra_bytes: u64, extra_secs: f64) -> Option<f64> {
    (extra_secs > 0.0 && extra_bytes > 0).then(|| extra_bytes as f64 / extra_secs)
}

/// One job through the queue: its wall-clock time, the CPU time of the engines and of this
/// process, and the engines' threads, busiest first.
struct QueueRun {
    secs: f64,
    cpu: f64,
    threads: Vec<offhost_bench::threads::ThreadCpu>,
}

/// The short job of each round carries `bytes / SHORT_PART`.
const SHORT_PART: u64 = 8;

/// How often the engines' threads are read while the queue runs (what a thread runs after its
/// last reading before it exits is missed).
const SAMPLE_PERIOD: std::time::Duration = std::time::Duration::from_millis(20);

/// `bytes` in 64 KiB writes over one raw TLS connection, read by another thread; MB/s, and
/// the CPU seconds of the writer and of the reader. The writer (this thread, until it is
/// done) runs on `cpus.0`, the reader on `cpus.1`; `all` is what this thread gets back. The
/// reader's end is accepted on side `b` of `net`.
fn raw_tls_mb_per_s(
    pki: &Pki,
    net: &Net,
    bytes: u64,
    cpus: (&[usize], &[usize]),
    all: &[usize],
) -> Result<(f64, f64, f64)> {
    const PIECE: usize = 64 << 10;
    let listener = net.on_side(false, || TcpListener::bind((net.addr_b.as_str(), 0)))??;
    let (mut tx, mut rx) = crate::tls::pair_over(pki, listener)?;
    let n = bytes.div_ceil(PIECE as u64);
    let reader_cpus = cpus.1.to_vec();
    let reader = std::thread::spawn(move || -> std::io::Result<f64> {
        affinity::pin_current_thread_to(&reader_cpus).map_err(std::io::Error::other)?;
        let cpu0 = cpu::thread_cpu_s();
        let mut buf = vec![0u8; PIECE];
        for _ in 0..n {
            rx.recv(&mut buf)?;
        }
        Ok(cpu::thread_cpu_s() - cpu0)
    });
    let msg = vec![7u8; PIECE];
    let pinned = affinity::pin_current_thread_to(cpus.0);
    let cpu0 = cpu::thread_cpu_s();
    let t = Instant::now();
    let sent = pinned
        .map_err(std::io::Error::other)
        .and_then(|()| (0..n).try_for_each(|_| tx.send(&msg)));
    let sender_cpu = cpu::thread_cpu_s() - cpu0;
    affinity::unpin_current_thread(all);
    if let Err(e) = sent {
        drop(tx); // the reader sees the end instead of waiting for ever
        let _ = reader.join();
        return Err(e.into());
    }
    let reader_cpu = reader
        .join()
        .map_err(|_| Error::Peer("raw TLS reader panicked".into()))??;
    let mb_per_s = (n * PIECE as u64) as f64 / t.elapsed().as_secs_f64() / 1e6;
    Ok((mb_per_s, sender_cpu, reader_cpu))
}

/// Runs `f` `n` times and appends each run's time, microseconds, to `out`, but for the first
/// `skip` runs.
fn time_each(
    n: usize,
    skip: usize,
    out: &mut Vec<f64>,
    mut f: impl FnMut() -> Result<()>,
) -> Result<()> {
    for i in 0..n {
        let t = Instant::now();
        f()?;
        if i >= skip {
            out.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    Ok(())
}

/// Round trips per block when the null call and the TCP round trip take turns.
const BLOCK: usize = 100;

/// The median null call on a channel over `tls:` to an echo (what an engine-to-engine call
/// rides on) and the median 1-byte round trip on a plain TCP socket to an echo, microseconds,
/// measured alike: both echoes on the engine core (threads of this process), the caller on the
/// host core, so each call wakes a thread on the other core, and the two taking turns in
/// blocks of [`BLOCK`] so that both see the same state of the machine. A tenth more of each
/// is run first, untimed. The echoes listen on side `b` of `net`.
fn calls_us(options: &offhost_link::LinkOptions, net: &Net, calls: usize) -> Result<(f64, f64)> {
    let (host_core, engine_core) = affinity::host_engine_cores();
    let server = net.on_side(false, || {
        Server::bind_with(&format!("tls:{}:0", net.addr_b), options)
    })??;
    let url = server.url().to_owned();
    std::thread::Builder::new()
        .name("engines-echo".into())
        .spawn(move || {
            // Its sessions' threads inherit the core.
            let _ = affinity::pin_current_thread(engine_core);
            offhost_link::serve_echo(&server)
        })?;
    let session = Session::connect_with(&url, options)?;
    let ch = session.open("call", ChannelOptions::default())?;
    let listener = net.on_side(false, || TcpListener::bind((net.addr_b.as_str(), 0)))??;
    let (host, peer) = plain::tcp_pair(listener)?;
    let mut tcp = plain::start_pair(Transport::TcpRaw, host, peer, Role::Echo, 1)?;
    let tcp = tcp.conn();
    let cpus = affinity::allowed_cpus();
    let _ = affinity::pin_current_thread(host_core);
    let measured = (|| -> Result<(f64, f64)> {
        let (mut call, mut rtt) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
        let warm = calls / 10;
        let mut done = 0;
        while done < warm + calls {
            let n = BLOCK.min(warm + calls - done);
            let skip = warm.saturating_sub(done);
            time_each(n, skip, &mut call, || {
                ch.send(&[1])?;
                ch.recv()?
                    .ok_or_else(|| Error::Peer("the echo ended".into()))?;
                Ok(())
            })?;
            let (msg, mut back) = ([1u8], [0u8]);
            time_each(n, skip, &mut rtt, || {
                tcp.send(&msg)?;
                tcp.recv(&mut back)?;
                Ok(())
            })?;
            done += n;
        }
        let none = || Error::Peer("no calls".into());
        Ok((
            median(&call).ok_or_else(none)?,
            median(&rtt).ok_or_else(none)?,
        ))
    })();
    affinity::unpin_current_thread(&cpus);
    session.close();
    measured
}
