//! `engine --rpc`: the engine's characteristic times, as `[ION]` tabulates its tasking
//! system's (Table 1), measured in one run.
//!
//! - `null_subroutine_ns`: a call of an empty function through a pointer the compiler cannot
//!   see through, the unit the seed compares a task switch with.
//! - `system_call_ns`: a simple system call (`getppid`, which no library caches), the paper's
//!   other yardstick for a task switch.
//! - `task_switch_ns`: two `spin` tasks on one worker, each ending its turn at once with more
//!   to do: the time from one task's turn to the other's, with no synchronisation between
//!   them (total time / turns).
//! - `event_sync_ns`: what passing a buffer through a queue adds to a task switch: the cost of
//!   a hop in a chain of pass-through tasks with one buffer in the loop (so every put wakes a
//!   blocked reader and every hop is a switch; the slope between a chain of 16 and of 0, so
//!   source and sink cancel) less `task_switch_ns`. (`bench engine`'s `hop_ns` lets buffers
//!   queue up and run in batches: the cost per buffer when switches are shared.)
//! - `local_call_ns`: a null client/server call between two tasks of one engine: the client
//!   (`fill` on a free list of one 64-byte buffer) sends its request to the server (`null`),
//!   and the answer is the buffer coming back to the client's free list, which wakes the
//!   client for its next call (a null call's answer carries no data). Total time / calls.
//! - `own_call_us`: the paper's same-processor call, between tasks of one engine through the
//!   call machinery: a `call name=svc` task calls a service of its own pipeline (`host-in`
//!   and `host-out whole=true`) for each 1-byte buffer of `fill` on a free list of one, and a
//!   sink notes when each answer arrives: the median time between two answers, after a tenth
//!   as many untimed (the call task hands each request to the service's `host-in` and is
//!   woken by its `host-out`: task switches on the engine's workers, no thread of its own).
//! - `host_call_us`: a null call from the host into its own embedded engine: one byte into
//!   `host-in`, through the queue to `host-out`, back to the host (median of `calls`).
//! - `remote_call_us`: the same call to the same pipeline running in another engine (an
//!   `offhost engine` process reached over `tls:` on loopback, mutual TLS): the caller's link
//!   session, the other engine's link, its daemon's bridges, its tasks and back (median).
//!   The caller is a link client, not a task.
//! - `task_call_us`: the paper's remote call, between tasks: a `call` task in this process's
//!   engine (one worker) calls the same echo in the other engine (`host-in` and `host-out
//!   whole=true`) for each 1-byte buffer of `fill` on a free list of one, and a sink notes
//!   when each answer arrives: the median time between two answers (one call from task to
//!   task), after a tenth as many untimed.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use offhost_bench::stats::median;
use offhost_engine::{
    Args, Build, Context, EngineConfig, Get, Pipeline, Registry, Status, Task, TaskError, TaskInfo,
};
use offhost_node::daemon::{Client, DaemonError};
use serde::Serialize;

use crate::engine::{best_of, chain, time_pipeline};
use crate::error::{check, Error, Result};
use crate::tls::Pki;

/// What to measure.
#[derive(Debug, Clone, clap::Args)]
#[group(id = "rpc-options")]
pub struct Options {
    /// Turns of the task-switch, queue-hop and local-call loops.
    #[arg(long = "rpc-turns", default_value_t = 200_000)]
    pub turns: u64,
    /// Timed host and remote calls (the median counts).
    #[arg(long = "rpc-calls", default_value_t = 5000)]
    pub calls: usize,
    /// The `offhost` binary whose `engine` command serves the remote call (`None`: no remote
    /// call).
    #[arg(skip)]
    pub exe: Option<PathBuf>,
}

/// The figures of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// An empty function called through a pointer, ns.
    pub null_subroutine_ns: f64,
    /// A simple system call (`getppid`), ns.
    pub system_call_ns: f64,
    /// One task's turn to another's, without synchronisation, ns.
    pub task_switch_ns: f64,
    /// A buffer's hop through a queue to a blocked task, ns.
    pub hop_ns: f64,
    /// What a queue adds to a task switch (hop less switch), ns.
    pub event_sync_ns: f64,
    /// A null call between two tasks of one engine, ns.
    pub local_call_ns: f64,
    /// A null call from a `call` task to a service of its own pipeline, median, us.
    pub own_call_us: f64,
    /// A null call from the host into its embedded engine, median, us.
    pub host_call_us: f64,
    /// The same call to another engine over TLS on loopback, median, us (`None` without the
    /// binary).
    pub remote_call_us: Option<f64>,
    /// task switch / null subroutine (the seed: 25).
    pub switch_over_subroutine: f64,
    /// remote call / host call (the paper's remote over same-processor call: 1.33).
    pub remote_over_host_call: Option<f64>,
    /// A null call from a task of this engine to a pipeline in another engine over TLS on
    /// loopback (`call`), median, us (`None` without the binary).
    pub task_call_us: Option<f64>,
}

impl Report {
    /// The figures as text, in the paper's table's order.
    pub fn text(&self) -> String {
        let us = |v: Option<f64>| match v {
            Some(r) => format!("{r:.1} us"),
            None => "not measured (no offhost binary)".into(),
        };
        let (remote, task) = (us(self.remote_call_us), us(self.task_call_us));
        format!(
            "null subroutine                  {:>10.1} ns\n\
             simple system call               {:>10.1} ns\n\
             task switch                      {:>10.1} ns\n\
             event synchronisation            {:>10.1} ns   (queue hop {:.1} ns less the switch)\n\
             null call, same engine           {:>10.1} ns\n\
             null call, task to task          {:>10.1} us   (a call task to its own pipeline's service)\n\
             null call, host to its engine    {:>10.1} us\n\
             null call, another engine (TLS)  {remote:>13}   (from a link client)\n\
             null call, task to task (TLS)    {task:>13}   (a call task to another engine)\n\
             task switch / subroutine         {:>10.1}     ([ION]: 25)\n",
            self.null_subroutine_ns,
            self.system_call_ns,
            self.task_switch_ns,
            self.event_sync_ns,
            self.hop_ns,
            self.local_call_ns,
            self.own_call_us,
            self.host_call_us,
            self.switch_over_subroutine,
        )
    }
}

#[inline(never)]
fn empty(x: u64) -> u64 {
    x
}

fn null_subroutine_ns(turns: u64) -> f64 {
    let f: fn(u64) -> u64 = std::hint::black_box(empty);
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        let mut acc = 0u64;
        for i in 0..turns {
            acc = acc.wrapping_add(f(std::hint::black_box(i)));
        }
        std::hint::black_box(acc);
        best = best.min(t.elapsed().as_secs_f64() * 1e9 / turns.max(1) as f64);
    }
    best
}

fn system_call_ns(turns: u64) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        for _ in 0..turns {
            std::hint::black_box(rustix::process::getppid());
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e9 / turns.max(1) as f64);
    }
    best
}

/// A task that ends each turn at once with more to do, `turns` times.
struct Spin {
    left: u64,
    count: Arc<AtomicU64>,
}

impl Task for Spin {
    fn run(&mut self, _cx: &mut Context<'_>) -> std::result::Result<Status, TaskError> {
        self.count.fetch_add(1, Ordering::Relaxed);
        if self.left == 0 {
            return Ok(Status::Done);
        }
        self.left -= 1;
        Ok(Status::Progress)
    }
}

fn registry(count: &Arc<AtomicU64>) -> Registry {
    let mut r = Registry::with_builtins();
    let count = Arc::clone(count);
    r.register(
        TaskInfo::new(
            "spin",
            "ends each turn at once with more to do (bench engine --rpc)",
        )
        .arg("turns", "1000", "turns before it is done")
        .inputs(0, 0)
        .outputs(0, 0),
        move |a: &Args, _: &mut Build<'_>| {
            Ok(Box::new(Spin {
                left: a.parse("turns")?,
                count: Arc::clone(&count),
            }))
        },
    );
    r
}

/// One worker: the paper's tasks shared one processor.
const ONE_WORKER: EngineConfig = EngineConfig {
    workers: 1,
    pin: false,
    batch: 64,
};

/// Seconds per turn of two spinning tasks.
fn task_switch_ns(turns: u64) -> Result<f64> {
    let count = Arc::new(AtomicU64::new(0));
    let reg = registry(&count);
    let text = format!("spin turns={turns}\nspin turns={turns}\n");
    let secs = best_of(3, || {
        count.store(0, Ordering::Relaxed);
        time_pipeline(&text, &reg, &ONE_WORKER)
    })?;
    let n = count.load(Ordering::Relaxed);
    check(n >= 2 * turns, || {
        format!("spin tasks ran {n} turns, expected {}", 2 * turns)
    })?;
    Ok(secs * 1e9 / n as f64)
}

fn hop_ns(buffers: u64) -> Result<f64> {
    let reg = Registry::with_builtins();
    // One buffer in the loop: every put wakes a blocked reader, every hop is a switch.
    let hops = |k| time_pipeline(&chain(k, buffers * 64, 64, 1), &reg, &ONE_WORKER);
    let t0 = best_of(3, || hops(0))?;
    let t16 = best_of(3, || hops(16))?;
    Ok(((t16 - t0) / (16.0 * buffers as f64) * 1e9).max(0.0))
}

fn local_call_ns(calls: u64) -> Result<f64> {
    let reg = Registry::with_builtins();
    let text = format!("fill bytes={} >q:p(1,64)\nnull <q\n", calls * 64);
    Ok(best_of(3, || time_pipeline(&text, &reg, &ONE_WORKER))? * 1e9 / calls.max(1) as f64)
}

/// The pipeline a null call goes through: one byte in, the same buffer out.
const ECHO: &str = "host-in name=req >r:p(4,64)\nhost-out name=resp <r\n";

const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The median of `calls` timed calls, after a tenth as many untimed: `call` sends byte `i`
/// and returns the length of the answer, which must be 1.
fn median_call_us(
    calls: usize,
    what: &str,
    mut call: impl FnMut(u8) -> Result<usize>,
) -> Result<f64> {
    let mut times = Vec::with_capacity(calls);
    for i in 0..calls + calls / 10 {
        let t = Instant::now();
        let len = call(i as u8)?;
        let dt = t.elapsed();
        check(len == 1, || format!("{what} returned {len} bytes"))?;
        if i >= calls / 10 {
            times.push(dt.as_secs_f64() * 1e6);
        }
    }
    median(&times).ok_or_else(|| Error::Check("no call was timed".into()))
}

fn host_call_us(calls: usize) -> Result<f64> {
    let reg = Registry::with_builtins();
    let mut run = Pipeline::parse(ECHO)?.start(&reg, &ONE_WORKER)?;
    let missing = || Error::Check("the echo pipeline has no host ports".into());
    let mut input = run.host_input("req").ok_or_else(missing)?;
    let output = run.host_output("resp").ok_or_else(missing)?;
    let host = |e: offhost_engine::HostError| Error::Check(format!("echo pipeline: {e}"));
    let us = median_call_us(calls, "echo", |i| {
        input.send(vec![i]).map_err(host)?;
        let b = output
            .recv_timeout(CALL_TIMEOUT)
            .map_err(host)?
            .ok_or_else(|| Error::Check("the echo pipeline ended".into()))?;
        Ok(b.len())
    })?;
    input.close();
    run.wait()?;
    Ok(us)
}

/// The pipeline a task's null call goes to: each request back as its answer, whole (also
/// `bench engines`').
pub(crate) const SERVE: &str =
    "host-in name=svc whole=true >r:p(4,64)\nhost-out name=svc whole=true <r\n";

/// A sink that notes when each buffer reached it.
struct Stamp {
    at: Arc<Mutex<Vec<Instant>>>,
}

impl Task for Stamp {
    fn run(&mut self, cx: &mut Context<'_>) -> std::result::Result<Status, TaskError> {
        loop {
            match cx.get(0) {
                Get::Buf(_) => self
                    .at
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(Instant::now()),
                Get::Empty => return Ok(Status::Blocked),
                Get::Closed => return Ok(Status::Done),
            }
        }
    }
}

/// When each buffer reached a `stamp` sink.
type Stamps = Arc<Mutex<Vec<Instant>>>;

/// The built-in tasks, `engine-out` and `call` reaching engines with `options`, and
/// `stamp`, which notes in the list returned when each buffer reaches it.
fn stamping_registry(options: offhost_link::LinkOptions) -> (Registry, Stamps) {
    let at: Stamps = Arc::new(Mutex::new(Vec::new()));
    let mut reg = Registry::with_builtins();
    offhost_node::remote::register(&mut reg, offhost_node::remote::Links::own(options));
    let stamps = Arc::clone(&at);
    reg.register(
        TaskInfo::new(
            "stamp",
            "notes when each buffer arrives (bench engine --rpc)",
        )
        .inputs(1, 1)
        .outputs(0, 0),
        move |_: &Args, _: &mut Build<'_>| {
            Ok(Box::new(Stamp {
                at: Arc::clone(&stamps),
            }))
        },
    );
    (reg, at)
}

/// A `call` task's median null call to [`SERVE`] in the engine at `url`: the time between
/// two answers reaching the sink after it, once a tenth of the calls has warmed up. The
/// request source always has the next request ready (its one buffer comes back as soon as
/// the request is sent), so each interval is one whole call from task to task.
fn task_call_us(url: &str, pki: &Pki, client: &Client, calls: usize) -> Result<f64> {
    let (reg, at) = stamping_registry(pki.link_options());
    let peer = |e: DaemonError| Error::Peer(e.to_string());
    let sub = client.submit(SERVE).map_err(peer)?;
    let n = calls + calls / 10 + 1;
    let text = format!(
        "fill bytes={n} >q:q(1,1)\ncall url={url} pipeline={} name=svc engine=server <q >a:a(1,64)\nstamp <a\n",
        sub.id
    );
    time_pipeline(&text, &reg, &ONE_WORKER)?;
    // A service runs until stopped.
    client.stop(sub.id).map_err(peer)?;
    let state = client.wait(sub.id).map_err(peer)?;
    check(state.state == "finished", || {
        format!("the served echo did not finish: {state}")
    })?;
    median_between(&at, n, calls)
}

/// A `call` task's median null call to [`SERVE`] in its own pipeline, as [`task_call_us`]
/// times one to another engine.
fn own_call_us(calls: usize) -> Result<f64> {
    let (reg, at) = stamping_registry(Default::default());
    let n = calls + calls / 10 + 1;
    let text = format!("{SERVE}fill bytes={n} >q:q(1,1)\ncall name=svc <q >a:a(1,64)\nstamp <a\n");
    time_pipeline(&text, &reg, &ONE_WORKER)?;
    median_between(&at, n, calls)
}

/// The median time between the `n` answers noted in `at`, after the first tenth of `calls`.
fn median_between(at: &Stamps, n: usize, calls: usize) -> Result<f64> {
    let at = at.lock().unwrap_or_else(|e| e.into_inner());
    check(at.len() == n, || {
        format!("{} answers to {n} calls", at.len())
    })?;
    let times: Vec<f64> = at
        .windows(2)
        .skip(calls / 10)
        .map(|w| (w[1] - w[0]).as_secs_f64() * 1e6)
        .collect();
    median(&times).ok_or_else(|| Error::Check("no call was timed".into()))
}

/// The link client's median call (`remote_call_us`) and a task's median call
/// ([`task_call_us`]) to one other engine.
fn remote_calls_us(exe: &std::path::Path, calls: usize) -> Result<(f64, f64)> {
    let pki = Pki::generate()?;
    let dir = pki.dir().to_string_lossy().into_owned();
    let args: Vec<String> = [
        "--name",
        "server",
        "--listen",
        "tls:127.0.0.1:0",
        "--tls-certificates",
        &dir,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (_engine, urls) = crate::offload::engine(exe, &[], &args)?;
    let url = urls
        .first()
        .ok_or_else(|| Error::Peer("the engine named no URL".into()))?;
    let client = Client::connect_with(url, &pki.link_options())
        .map_err(|e| Error::Peer(format!("{url}: {e}")))?;
    let sub = client
        .submit(ECHO)
        .map_err(|e| Error::Peer(format!("submit: {e}")))?;
    let peer = |e: DaemonError| Error::Peer(e.to_string());
    let req = client.open_input(sub.id, "req").map_err(peer)?;
    let resp = client.open_output(sub.id, "resp").map_err(peer)?;
    let us = median_call_us(calls, "remote echo", |i| {
        req.send(&[i])?;
        let m = resp
            .recv_wait(CALL_TIMEOUT)?
            .ok_or_else(|| Error::Peer("the remote echo ended".into()))?;
        Ok(m.len())
    })?;
    req.close()?;
    let state = client.wait(sub.id).map_err(peer)?;
    check(state.state == "finished", || {
        format!("the remote echo did not finish: {state}")
    })?;
    let task = task_call_us(url, &pki, &client, calls)?;
    Ok((us, task))
}

/// Measures; `bar` shows the steps.
pub fn run(o: &Options, bar: &ProgressBar) -> Result<Report> {
    bar.set_length(7);
    bar.set_message("null subroutine, system call");
    let sub = null_subroutine_ns(o.turns.max(1000) * 10);
    let sys = system_call_ns(o.turns.max(1000));
    bar.inc(1);
    bar.set_message("task switch");
    let switch = task_switch_ns(o.turns.max(1))?;
    bar.inc(1);
    bar.set_message("queue hop");
    let hop = hop_ns(o.turns.max(1))?;
    bar.inc(1);
    bar.set_message("null call, same engine");
    let local = local_call_ns(o.turns.max(1))?;
    bar.inc(1);
    bar.set_message("null call, host to engine");
    let host = host_call_us(o.calls.max(1))?;
    bar.inc(1);
    bar.set_message("null call, task to task in one engine");
    let own = own_call_us(o.calls.max(1))?;
    bar.inc(1);
    bar.set_message("null call, another engine");
    let (remote, task) = match &o.exe {
        Some(exe) => {
            let (r, t) = remote_calls_us(exe, o.calls.max(1))?;
            (Some(r), Some(t))
        }
        None => (None, None),
    };
    bar.inc(1);
    Ok(Report {
        null_subroutine_ns: sub,
        system_call_ns: sys,
        task_switch_ns: switch,
        hop_ns: hop,
        event_sync_ns: (hop - switch).max(0.0),
        local_call_ns: local,
        own_call_us: own,
        host_call_us: host,
        remote_call_us: remote,
        switch_over_subroutine: switch / sub.max(1e-3),
        remote_over_host_call: remote.map(|r| r / host.max(1e-3)),
        task_call_us: task,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_in_process_time_is_measured() {
        let o = Options {
            turns: 2000,
            calls: 50,
            exe: None,
        };
        let r = run(&o, &ProgressBar::hidden()).unwrap();
        assert!(r.null_subroutine_ns > 0.0);
        assert!(r.task_switch_ns > r.null_subroutine_ns, "{r:?}");
        assert!(r.local_call_ns > 0.0 && r.host_call_us > 0.0, "{r:?}");
        assert!(r.own_call_us > 0.0, "{r:?}");
        assert!(r.remote_call_us.is_none() && r.task_call_us.is_none());
        assert!(r.text().contains("task switch"));
    }
}
