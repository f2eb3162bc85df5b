//! The measurement driver shared by every bench: message patterns over an [`Conn`],
//! warm-up, repetitions, statistics, CPU load and wake-ups, producing a [`Row`].
//!
//! Patterns (the names of the `offhost bench` subcommands):
//! - `pingpong` (Comms1): send, receive the echo; one-way time = half the round trip.
//! - `exchange` (Comms2): both directions at once. One message is kept in flight against an
//!   echo peer, so every step sends one message and receives one while the peer does the same;
//!   a step therefore moves two messages at once, and the recorded time is half a step — a
//!   quarter of a two-step exchange bounce, as PARKBENCH records it. `mb_per_s` is then the
//!   two directions together (an ideal full-duplex link gives twice Comms1).
//! - `stream` (like osu_bw): a window of messages sent back to back, then a one-byte
//!   acknowledgement from a sink peer; the time per message is the window's time divided by
//!   the window.
//! - `rate`: `stream` of short messages, reported in messages per second.

use std::io;
use std::time::{Duration, Instant};

use crate::cpu::{self, Account, LoadProbe};
use crate::report::Row;
use crate::stats::Summary;

/// One side of a message connection: whole messages of a size both sides know.
pub trait Conn: Send {
    /// Sends one message.
    fn send(&mut self, msg: &[u8]) -> io::Result<()>;
    /// Sends `msg` `count` times; transports that batch publication override this.
    fn send_many(&mut self, msg: &[u8], count: usize) -> io::Result<()> {
        for _ in 0..count {
            self.send(msg)?;
        }
        Ok(())
    }
    /// Receives one message of exactly `buf.len()` bytes.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<()>;
    /// Sends `out` while receiving into `inb`, both at once (for byte streams whose buffers
    /// could not hold both messages otherwise). Default: send, then receive.
    fn exchange(&mut self, out: &[u8], inb: &mut [u8]) -> io::Result<()> {
        self.send(out)?;
        self.recv(inb)
    }
    /// Called once before `exchange` steps begin and once after (with `false`).
    fn set_exchange_mode(&mut self, on: bool) -> io::Result<()> {
        let _ = on;
        Ok(())
    }
}

/// What the peer does with each message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Reflects every message (pingpong, exchange).
    Echo,
    /// Reads `window` messages, then answers with one byte (stream, rate).
    Sink {
        /// Messages per acknowledgement.
        window: usize,
    },
}

/// The message pattern the host drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// Comms1.
    PingPong,
    /// Comms2.
    Exchange,
    /// A window of messages in flight (`stream` and `rate`).
    Stream {
        /// Messages per acknowledgement.
        window: usize,
    },
}

impl Pattern {
    /// The peer role this pattern needs.
    pub fn role(self) -> Role {
        match self {
            Pattern::PingPong | Pattern::Exchange => Role::Echo,
            Pattern::Stream { window } => Role::Sink { window },
        }
    }

    /// Messages a step accounts for, in the one-way time: the step time is divided by this.
    fn messages_per_step(self) -> f64 {
        match self {
            Pattern::PingPong | Pattern::Exchange => 2.0,
            Pattern::Stream { window } => window as f64,
        }
    }
}

/// Runs the peer side of `role` on `ep` with messages of `size` bytes until the host goes
/// away (an error on receive ends it quietly).
pub fn serve(ep: &mut dyn Conn, role: Role, size: usize) {
    let mut buf = vec![0u8; size];
    match role {
        Role::Echo => {
            while ep.recv(&mut buf).is_ok() {
                if ep.send(&buf).is_err() {
                    return;
                }
            }
        }
        Role::Sink { window } => loop {
            for _ in 0..window {
                if ep.recv(&mut buf).is_err() {
                    return;
                }
            }
            if ep.send(&[1]).is_err() {
                return;
            }
        },
    }
}

/// How long to measure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    /// Warm-up time before any sample (excluded from every statistic).
    pub warmup: Duration,
    /// Fewest warm-up steps, however long they take.
    pub warmup_steps: usize,
    /// Timed repetitions (samples).
    pub reps: usize,
    /// Target duration of one repetition; the steps per repetition follow from the warm-up.
    pub rep_time: Duration,
    /// Most steps in one repetition.
    pub max_steps: usize,
    /// Time of the extra pass with counting tasks for CPU load; `None`: no load pass.
    pub cpu_time: Option<Duration>,
    /// Stop taking repetitions once they have taken this long (at least one is always
    /// taken; the row's `samples` says how many were); `None`: all `reps`.
    pub budget: Option<Duration>,
}

impl Plan {
    /// A plan from a repetition preset: `small` (tests), `quick`, `normal`, `long`.
    pub fn preset(name: &str) -> Option<Plan> {
        let (warm_ms, reps, rep_us) = match name {
            "small" => (2, 5, 200),
            "quick" => (10, 11, 1000),
            "normal" => (30, 31, 2000),
            "long" => (100, 101, 5000),
            _ => return None,
        };
        Some(Plan {
            warmup: Duration::from_millis(warm_ms),
            warmup_steps: 3,
            reps,
            rep_time: Duration::from_micros(rep_us),
            max_steps: 1_000_000,
            cpu_time: None,
            budget: None,
        })
    }
}

/// A step of the pattern on the host side, with its buffers.
struct Host<'a> {
    ep: &'a mut dyn Conn,
    pattern: Pattern,
    out: Vec<u8>,
    inb: Vec<u8>,
    ack: [u8; 1],
}

impl Host<'_> {
    fn step(&mut self) -> io::Result<()> {
        match self.pattern {
            Pattern::PingPong => {
                self.ep.send(&self.out)?;
                self.ep.recv(&mut self.inb)
            }
            Pattern::Exchange => self.ep.exchange(&self.out, &mut self.inb),
            Pattern::Stream { window } => {
                self.ep.send_many(&self.out, window)?;
                self.ep.recv(&mut self.ack)
            }
        }
    }

    fn steps(&mut self, n: usize) -> io::Result<Duration> {
        let t = Instant::now();
        for _ in 0..n {
            self.step()?;
        }
        Ok(t.elapsed())
    }
}

/// The result of measuring one (pattern, endpoint, size) point.
#[derive(Debug, Clone)]
pub struct Measured {
    /// One-way ns per message, one value per repetition.
    pub samples: Vec<f64>,
    /// Steps per repetition.
    pub steps_per_rep: usize,
    /// Wake-ups (voluntary switches, host and engine) per message in the timed repetitions.
    pub wakeups_per_msg: Option<f64>,
    /// CPU time of the measuring (host) thread per message in the timed repetitions, µs:
    /// what the host spends, polling included, which the counting pass's load leaves out when
    /// the host shares its core with the counter.
    pub host_cpu_us_per_msg: Option<f64>,
    /// CPU loads from the counting pass.
    pub loads: Option<cpu::Loads>,
}

fn accounts(engine_pid: Option<u32>) -> Option<Account> {
    let mine = cpu::account(None, &[]).ok()?;
    match engine_pid {
        Some(p) => {
            let theirs = cpu::account(Some(p), &[]).ok()?;
            Some(Account {
                cpu_ns: mine.cpu_ns + theirs.cpu_ns,
                voluntary_switches: mine.voluntary_switches + theirs.voluntary_switches,
            })
        }
        None => Some(mine),
    }
}

/// Measures `pattern` with `size`-byte messages over `ep`, whose peer must already be serving
/// `pattern.role()`. `engine_pid` names the peer's process when it is not this one, so its
/// wake-ups are counted too.
pub fn measure(
    ep: &mut dyn Conn,
    pattern: Pattern,
    size: usize,
    plan: &Plan,
    probe: Option<&LoadProbe>,
    engine_pid: Option<u32>,
) -> io::Result<Measured> {
    let mut out = vec![0u8; size];
    for (i, b) in out.iter_mut().enumerate() {
        *b = i as u8;
    }
    let mut h = Host {
        ep,
        pattern,
        out,
        inb: vec![0u8; size],
        ack: [0],
    };
    if pattern == Pattern::Exchange {
        h.ep.set_exchange_mode(true)?;
        h.ep.send(&h.out)?; // prime: one message in flight from here on
    }
    let result = measure_primed(&mut h, plan, probe, engine_pid);
    if pattern == Pattern::Exchange {
        let drained = h.ep.recv(&mut h.inb);
        h.ep.set_exchange_mode(false)?;
        drained?;
    }
    result
}

fn measure_primed(
    h: &mut Host<'_>,
    plan: &Plan,
    probe: Option<&LoadProbe>,
    engine_pid: Option<u32>,
) -> io::Result<Measured> {
    let per_step_msgs = h.pattern.messages_per_step();
    // Warm-up: at least `warmup_steps` (and one) and `plan.warmup`; it also sizes the
    // repetitions.
    let t = Instant::now();
    let mut warm = 0usize;
    while warm < plan.warmup_steps.max(1) || t.elapsed() < plan.warmup {
        h.step()?;
        warm += 1;
    }
    let per_step = t.elapsed().as_secs_f64() / warm as f64;
    let steps = ((plan.rep_time.as_secs_f64() / per_step) as usize).clamp(1, plan.max_steps);
    let before = accounts(engine_pid);
    let cpu_before = thread_cpu();
    let mut samples = Vec::with_capacity(plan.reps);
    let began = Instant::now();
    for _ in 0..plan.reps.max(1) {
        let d = h.steps(steps)?;
        samples.push(d.as_nanos() as f64 / (steps as f64 * per_step_msgs));
        if plan.budget.is_some_and(|b| began.elapsed() > b) {
            break;
        }
    }
    let cpu_after = thread_cpu();
    let after = accounts(engine_pid);
    let msgs = (samples.len() * steps) as f64 * per_step_msgs;
    let host_cpu_us_per_msg = Some(cpu_after.saturating_sub(cpu_before).as_secs_f64() * 1e6 / msgs);
    let wakeups_per_msg = match (before, after) {
        (Some(b), Some(a)) => Some(a.since(&b).voluntary_switches as f64 / msgs),
        _ => None,
    };
    let loads = match (probe, plan.cpu_time) {
        (Some(p), Some(time)) => {
            let running = p.start().map_err(io::Error::other)?;
            let t = Instant::now();
            while t.elapsed() < time {
                h.step()?;
            }
            Some(running.finish().map_err(io::Error::other)?)
        }
        _ => None,
    };
    Ok(Measured {
        samples,
        steps_per_rep: steps,
        wakeups_per_msg,
        host_cpu_us_per_msg,
        loads,
    })
}

/// CPU time this thread has used.
fn thread_cpu() -> std::time::Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    std::time::Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

impl Measured {
    /// The row for this point (`None` if no sample was taken).
    pub fn row(&self, bench: &str, transport: &str, mode: &str, size: usize) -> Option<Row> {
        let s = Summary::of(&self.samples)?;
        let mut r = Row::new(bench, transport, mode, size, &s);
        r.wakeups_per_msg = self.wakeups_per_msg;
        r.host_cpu_us_per_msg = self.host_cpu_us_per_msg;
        if let Some(l) = self.loads {
            r.cpu_load_host = Some(l.host);
            r.cpu_load_engine = Some(l.engine);
        }
        Some(r)
    }
}

/// The name of a pattern as a bench subcommand.
pub fn bench_name(pattern: Pattern, rate: bool) -> &'static str {
    match pattern {
        Pattern::PingPong => "pingpong",
        Pattern::Exchange => "exchange",
        Pattern::Stream { .. } if rate => "rate",
        Pattern::Stream { .. } => "stream",
    }
}
