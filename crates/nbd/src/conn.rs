//! The transmission phase of one connection.
//!
//! A few workers per connection take turns at the socket (leader/followers): the one holding
//! the input lock parses the next request from the buffered socket, releases the lock, and
//! serves the request while another worker reads the next. Requests on exports whose backend
//! never blocks are served by the worker itself, and replies are left in the output buffer
//! while more complete requests are buffered, so one `write` carries a burst of replies (the
//! worker that finds no complete request left, or is about to block on the socket, flushes).
//! Requests on backends that may block (modelled latency, waiting for data) and reads and
//! writes of at least [`BIG_REQUEST`] bytes run on the connection's helper threads
//! (`helpers.rs`, one per such request in flight, kept while they have work) and reply when
//! done, so replies leave out of order and later requests overtake slow ones. At most
//! [`MAX_IN_FLIGHT`] such requests, holding at most [`ConnLimits::max_in_flight`] payload bytes
//! together, run at once per connection: past that the reader stops reading the socket until
//! replies have gone out (a larger request runs alone). `NBD_CMD_DISC` waits for all of them.
//! A connection that sends no request for [`ConnLimits::idle_timeout`] ends (`End::Idle`).

use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::export::Export;
use crate::helpers::Helpers;
pub use crate::limits::ConnLimits;
use crate::proto::*;
use crate::request::{Ctx, Out, Outcome};
use crate::trace::Tracer;

/// Blocking requests running at once per connection.
pub const MAX_IN_FLIGHT: usize = 64;

/// Payload buffers kept for reuse per connection.
const POOL_BUFFERS: usize = 16;

/// Largest buffer kept in the pool.
const POOL_MAX_BUFFER: usize = 4 << 20;

/// Requests of at least this many bytes run on their own thread even on a non-blocking
/// export.
pub const BIG_REQUEST: u32 = 256 * 1024;

/// Discards `n` bytes of a request payload the server will not use.
fn drain<R: Read>(r: &mut R, n: u64) -> io::Result<()> {
    let got = io::copy(&mut r.take(n), &mut io::sink())?;
    if got < n {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// Reads a write's `len` payload bytes into `payload`, which grows with the bytes as they
/// arrive: a client that announces 32 MiB and sends one byte makes the server hold at most
/// [`FIRST_RESERVE`] (or the buffer it already had), not 32 MiB of zeroes (64 such clients
/// held 2.28 GB). Past that the buffer doubles as the bytes come, so a large write holds
/// at most twice the bytes it sent, never the length it announced.
///
/// Each step is one `read_exact` into the buffer, so once the input's buffer is drained the
/// rest comes from the socket straight into the payload in a few large reads. The buffer is
/// sized with `resize`, which keeps an earlier request's bytes where it can (all of them are
/// overwritten before use) rather than zeroing the buffer for every request.
fn read_payload<R: Read>(r: &mut R, payload: &mut Vec<u8>, len: usize) -> io::Result<()> {
    let mut have = 0;
    let mut want = len.min(FIRST_RESERVE.max(payload.capacity()));
    // Bounded: `want` doubles up to `len`, or the input ends.
    loop {
        payload.resize(want, 0);
        r.read_exact(&mut payload[have..want])?;
        if want == len {
            return Ok(());
        }
        have = want;
        want = len.min(want.saturating_mul(2));
    }
}

/// Nanoseconds since `t`, 0 without a start: the clock is read only when tracing.
fn elapsed_ns(t: Option<Instant>) -> u64 {
    t.map_or(0, |t| t.elapsed().as_nanos() as u64)
}

/// The most a write's payload buffer is given before its bytes arrive.
const FIRST_RESERVE: usize = 1 << 20;

/// Counts the requests running on their own threads, and their payload bytes; a reply that
/// could not be written kills the connection (every wait here ends).
struct Gate {
    /// Requests and payload bytes in flight.
    n: Mutex<(usize, u64)>,
    cv: Condvar,
    max_bytes: u64,
    dead: AtomicBool,
}

impl Gate {
    fn new(max_bytes: u64) -> Gate {
        Gate {
            n: Mutex::new((0, 0)),
            cv: Condvar::new(),
            max_bytes,
            dead: AtomicBool::new(false),
        }
    }

    fn has_room(&self, n: (usize, u64), cost: u64) -> bool {
        n.0 < MAX_IN_FLIGHT && (n.1 == 0 || n.1.saturating_add(cost) <= self.max_bytes)
    }

    /// Whether a request of `cost` bytes would wait now.
    fn would_wait(&self, cost: u64) -> bool {
        !self.has_room(*self.n.lock().unwrap_or_else(|e| e.into_inner()), cost)
    }

    /// Waits for room for a request of `cost` payload bytes; false once the connection died.
    fn enter(&self, cost: u64) -> bool {
        let mut n = self.n.lock().unwrap_or_else(|e| e.into_inner());
        while !self.has_room(*n, cost) && !self.is_dead() {
            n = self
                .cv
                .wait_timeout(n, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        if self.is_dead() {
            return false;
        }
        n.0 += 1;
        n.1 += cost;
        true
    }

    fn leave(&self, cost: u64) {
        let mut n = self.n.lock().unwrap_or_else(|e| e.into_inner());
        n.0 -= 1;
        n.1 -= cost;
        drop(n);
        self.cv.notify_all();
    }

    fn idle(&self) -> bool {
        self.n.lock().unwrap_or_else(|e| e.into_inner()).0 == 0
    }

    fn kill(&self) {
        // Ordering: Release pairs with the Acquire load in `is_dead`.
        self.dead.store(true, Ordering::Release);
        self.cv.notify_all();
    }

    fn is_dead(&self) -> bool {
        // Ordering: Acquire pairs with the Release store in `kill`.
        self.dead.load(Ordering::Acquire)
    }
}

/// A reader that remembers when its last `read` returned data: a request's arrival is when
/// its bytes reached the server, even if they wait in the buffer behind earlier requests.
struct Timed<R> {
    inner: R,
    last: Option<Instant>,
}

impl<R: Read> Read for Timed<R> {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(b)?;
        self.last = Some(Instant::now());
        Ok(n)
    }
}

/// The reading side, held by one worker at a time (leader/followers).
struct Input<R> {
    rd: BufReader<Timed<R>>,
    done: Option<io::Result<End>>,
}

/// How the transmission phase ended.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// The client sent `NBD_CMD_DISC`.
    Disconnect,
    /// The client closed the socket.
    Closed,
    /// The client broke the protocol (bad magic); the server dropped the connection.
    Violation(String),
    /// The client sent no request for the idle timeout; the server dropped the connection.
    Idle,
}

/// Serves requests until the client disconnects with `threads` workers taking turns at the
/// socket (leader/followers): one reads a request while others execute and reply. Replies are
/// flushed by whoever finds no complete request left in the input buffer, so a burst of
/// requests still leaves in one `write`.
pub fn serve_transmission_threads<R: Read + Send, W: Write + Send>(
    reader: R,
    writer: W,
    export: &Export,
    structured: bool,
    tracer: Option<&Tracer>,
    conn: u32,
    threads: usize,
) -> io::Result<End> {
    serve_transmission_limited(
        reader,
        writer,
        export,
        structured,
        tracer,
        conn,
        threads,
        &ConnLimits::default(),
    )
}

/// As [`serve_transmission_threads`], within `limits` (payload bytes in flight, idle timeout).
/// The idle timeout is measured in the reader's timeouts: a read that fails with `WouldBlock`
/// or `TimedOut` while no request is pending counts as idle time (give the socket a read
/// timeout no longer than the idle timeout); one in the middle of a request ends the
/// connection.
#[allow(clippy::too_many_arguments)]
pub fn serve_transmission_limited<R: Read + Send, W: Write + Send>(
    reader: R,
    writer: W,
    export: &Export,
    structured: bool,
    tracer: Option<&Tracer>,
    conn: u32,
    threads: usize,
    limits: &ConnLimits,
) -> io::Result<End> {
    let input = Mutex::new(Input {
        rd: BufReader::with_capacity(
            256 * 1024,
            Timed {
                inner: reader,
                last: None,
            },
        ),
        done: None,
    });
    let out = Out {
        w: Mutex::new(BufWriter::with_capacity(256 * 1024, writer)),
    };
    let ctx = Ctx {
        export,
        structured,
        out: &out,
        tracer,
        conn,
    };
    let gate = Gate::new(limits.max_in_flight);
    let pool: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
    // Whether the input buffer held another complete request when a worker last took one:
    // if so, a later worker will flush and this one need not.
    let more = AtomicBool::new(false);
    let helpers = Helpers::new(format!("nbd-io-{conn}"), crate::helpers::IDLE);
    let shared = Shared {
        ctx: &ctx,
        input: &input,
        gate: &gate,
        pool: &pool,
        more: &more,
        helpers: &helpers,
        blocking: export.backend.may_block(),
        idle_timeout: limits.idle_timeout,
    };
    std::thread::scope(|scope| {
        for _ in 1..threads.max(1) {
            let sh = &shared;
            if std::thread::Builder::new()
                .spawn_scoped(scope, move || {
                    sh.worker(scope);
                    sh.helpers.close();
                })
                .is_err()
            {
                tracing::warn!("conn {conn}: cannot start a worker thread; continuing with fewer");
            }
        }
        shared.worker(scope);
        shared.helpers.close();
    });
    // Every thread has finished: send what is left.
    out.w.lock().unwrap_or_else(|e| e.into_inner()).flush()?;
    let done = input.into_inner().unwrap_or_else(|e| e.into_inner()).done;
    done.unwrap_or(Ok(End::Closed))
}

/// What the workers of one connection share.
struct Shared<'a, R, W: Write> {
    ctx: &'a Ctx<'a, W>,
    input: &'a Mutex<Input<R>>,
    gate: &'a Gate,
    pool: &'a Mutex<Vec<Vec<u8>>>,
    more: &'a AtomicBool,
    helpers: &'a Helpers<Taken>,
    blocking: bool,
    idle_timeout: Option<Duration>,
}

/// A request taken from the socket, with its payload.
struct Taken {
    req: Request,
    payload: Vec<u8>,
    problem: Option<Outcome>,
    arrival: Instant,
    data_ns: u64,
    /// Runs on a helper thread, holding `cost` payload bytes of the gate.
    threaded: Option<u64>,
}

impl<'a, R: Read + Send, W: Write + Send> Shared<'a, R, W> {
    fn flush(&self) -> io::Result<()> {
        self.ctx
            .out
            .w
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .flush()
    }

    /// Takes the next request (under the input lock). `None`: the connection is over.
    fn take(&self, spare: &mut Vec<u8>) -> Option<Taken> {
        let mut inp = self.input.lock().unwrap_or_else(|e| e.into_inner());
        if inp.done.is_some() {
            return None;
        }
        if self.gate.is_dead() {
            inp.done = Some(Ok(End::Closed));
            return None;
        }
        match self.take_locked(&mut inp, spare) {
            Ok(Ok(t)) => Some(t),
            Ok(Err(end)) => {
                inp.done = Some(Ok(end));
                None
            }
            Err(e) => {
                inp.done = Some(Err(e));
                None
            }
        }
    }

    fn take_locked(
        &self,
        inp: &mut Input<R>,
        spare: &mut Vec<u8>,
    ) -> io::Result<Result<Taken, End>> {
        let rd = &mut inp.rd;
        if rd.buffer().len() < REQUEST_LEN {
            // Ordering: Release pairs with the Acquire load in request.rs `reply` after a reply is
            // written. About to block on the socket: send every reply still buffered. (The writer's
            // lock also orders the two: the load happens under it, and `flush` below takes it.)
            self.more.store(false, Ordering::Release);
            self.flush()?;
        }
        if rd.buffer().is_empty() {
            // Waiting for the next request: a read timeout here is idle time.
            let since = Instant::now();
            loop {
                match rd.fill_buf() {
                    Ok([]) => return Ok(Err(End::Closed)),
                    Ok(_) => break,
                    Err(e) if crate::limits::timed_out(&e) => {
                        if self.gate.is_dead() {
                            return Ok(Err(End::Closed));
                        }
                        if self
                            .idle_timeout
                            .is_some_and(|t| since.elapsed() >= t && self.gate.idle())
                        {
                            return Ok(Err(End::Idle));
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let mut h = [0u8; REQUEST_LEN];
        match rd.read_exact(&mut h) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(Err(End::Closed)),
            Err(e) => return Err(e),
        }
        let arrival = rd.get_ref().last.unwrap_or_else(Instant::now);
        let req = match parse_request(&h) {
            Ok(r) => r,
            Err(e) => return Ok(Err(End::Violation(e.to_string()))),
        };
        if req.command == Command::Disc {
            return Ok(Err(End::Disconnect));
        }
        let problem = self.ctx.check(&req);
        // Slow backends and large transfers get their own thread; their payloads count
        // against the connection's budget, taken before the payload is allocated or read.
        let threaded =
            (problem.is_none() && (self.blocking || req.length >= BIG_REQUEST)).then(|| match req
                .command
            {
                Command::Read | Command::Write => u64::from(req.length),
                _ => 0,
            });
        if let Some(cost) = threaded {
            if self.gate.would_wait(cost) {
                // Replies must leave while this waits: they are what frees the budget.
                // Ordering: Release pairs with the Acquire load in request.rs `reply`.
                self.more.store(false, Ordering::Release);
                self.flush()?;
            }
            if !self.gate.enter(cost) {
                return Ok(Err(End::Closed));
            }
        }
        let mut data_ns = 0;
        let mut payload = std::mem::take(spare);
        if payload.capacity() < req.length as usize {
            // Large buffers circulate through a small pool instead of being allocated (and
            // faulted in) for every request.
            if let Some(b) = self.pool.lock().unwrap_or_else(|e| e.into_inner()).pop() {
                *spare = std::mem::replace(&mut payload, b);
            }
        }
        if req.command == Command::Write {
            if rd.buffer().len() < req.length as usize {
                // Ordering: Release pairs with the Acquire load in request.rs `reply`.
                self.more.store(false, Ordering::Release);
                self.flush()?;
            }
            let t0 = self.ctx.tracer.is_some().then(Instant::now);
            let read = if problem.is_some() {
                drain(rd, u64::from(req.length))
            } else {
                read_payload(rd, &mut payload, req.length as usize)
            };
            if let Err(e) = read {
                if let Some(cost) = threaded {
                    self.gate.leave(cost);
                }
                return Err(e);
            }
            data_ns = elapsed_ns(t0);
        }
        // Ordering: Release pairs with the Acquire load in request.rs `reply`.
        self.more
            .store(rd.buffer().len() >= REQUEST_LEN, Ordering::Release);
        Ok(Ok(Taken {
            req,
            payload,
            problem,
            arrival,
            data_ns,
            threaded,
        }))
    }

    /// Runs a request on a helper thread and replies; its payload buffer goes back to the
    /// pool and its bytes leave the gate.
    fn run_helped(&self, t: Taken) {
        let Taken {
            req,
            mut payload,
            arrival,
            data_ns,
            threaded,
            ..
        } = t;
        let (ctx, gate) = (self.ctx, self.gate);
        let start = ctx.tracer.is_some().then(Instant::now);
        let outcome = ctx.execute(&req, &mut payload);
        let service = elapsed_ns(start);
        if let Err(e) = ctx.reply(&req, &outcome, None, arrival, data_ns, service) {
            // The client stopped reading (or left): the connection is over.
            tracing::debug!("conn {}: reply failed: {e}", ctx.conn);
            gate.kill();
        }
        let buf = match outcome {
            Outcome::Data(b) => b,
            _ => payload,
        };
        let max = ctx.export.max_payload as usize;
        let mut p = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if p.len() < POOL_BUFFERS && buf.capacity() <= max.min(POOL_MAX_BUFFER) {
            p.push(buf);
        }
        drop(p);
        gate.leave(threaded.unwrap_or(0));
    }

    fn fail(&self, e: io::Error) {
        self.gate.kill();
        let mut inp = self.input.lock().unwrap_or_else(|e| e.into_inner());
        if inp.done.is_none() {
            inp.done = Some(Err(e));
        }
    }

    /// One worker: take a request, serve it, repeat until the connection is over.
    fn worker<'s>(&'s self, scope: &'s std::thread::Scope<'s, '_>)
    where
        'a: 's,
    {
        let mut spare: Vec<u8> = Vec::new();
        while let Some(t) = self.take(&mut spare) {
            let Taken {
                req,
                mut payload,
                problem,
                arrival,
                data_ns,
                threaded,
            } = t;
            if let Some(fail) = problem {
                spare = payload;
                if let Err(e) = self
                    .ctx
                    .reply(&req, &fail, Some(self.more), arrival, data_ns, 0)
                {
                    self.fail(e);
                    return;
                }
                continue;
            }
            // Slow backends and large transfers go to helper threads, so later requests
            // overtake them and large copies overlap (the gate was entered in `take`).
            if let Some(cost) = threaded {
                let job = Taken {
                    req,
                    payload,
                    problem: None,
                    arrival,
                    data_ns,
                    threaded,
                };
                if let Err((job, e)) = self.helpers.run(scope, job, |t| self.run_helped(t)) {
                    // Out of threads: refuse this request, keep the connection.
                    self.gate.leave(cost);
                    let fail =
                        Outcome::Fail(Errno::Io, format!("server cannot start a thread: {e}"));
                    if let Err(e) = self.ctx.reply(&job.req, &fail, None, arrival, data_ns, 0) {
                        self.fail(e);
                        return;
                    }
                }
                continue;
            }
            let t = self.ctx.tracer.is_some().then(Instant::now);
            let outcome = self.ctx.execute(&req, &mut payload);
            let service = elapsed_ns(t);
            if let Err(e) =
                self.ctx
                    .reply(&req, &outcome, Some(self.more), arrival, data_ns, service)
            {
                self.fail(e);
                return;
            }
            spare = match outcome {
                Outcome::Data(buf) => buf,
                _ => payload,
            };
            // Keep at most a 1 MiB buffer around between requests.
            if spare.capacity() > 1 << 20 {
                spare = Vec::new();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out at most 7000 bytes a call, as a socket might.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
            let n = b.len().min(self.0.len()).min(7000);
            b[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_payload_grows_as_it_arrives_and_a_short_one_is_an_error() {
        let data: Vec<u8> = (0..(3 << 20) + 5).map(|i| (i % 251) as u8).collect();
        let mut payload = Vec::new();
        read_payload(&mut Trickle(&data), &mut payload, data.len()).unwrap();
        assert_eq!(payload, data);
        assert!(payload.capacity() < 2 * data.len());
        let e = read_payload(&mut Trickle(&data[..100]), &mut payload, 200).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let e = read_payload(&mut Trickle(&data[..5 << 19]), &mut payload, 3 << 20).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }
}
