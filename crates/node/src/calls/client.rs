//! `call`: a client/server call from a task to a pipeline on another engine (`[ION]`'s
//! calls between tasks on different nodes).
//!
//! The server is a pipeline on the other engine that reads its requests from `host-in
//! name=NAME whole=true` and writes one answer per request, in order, to `host-out
//! name=NAME whole=true`; its daemon serves it to any number of callers, one call at a time
//! (see `service.rs`). `call url=URL pipeline=ID name=NAME <requests >answers` sends each
//! buffer of its input whole on channel `call/ID/NAME`, waits for the answer on the same
//! channel, and puts the answer out as one buffer of its output's free list: one call at a
//! time, as a call is. A pipeline graph has no cycles, so a task cannot send to another
//! engine and hear back on its own queue; `call` holds both directions of one call instead.
//!
//! Like `engine-out` it opens a link session of its own with the engine's certificates, and
//! a pipeline from outside reaches `tls:` URLs only (see [`Links`]).
//!
//! Without `url=` and `pipeline=`, `call name=NAME` calls the service of its own pipeline:
//! the pipeline's `host-in name=NAME whole=true` and `host-out name=NAME whole=true`, which
//! the engine hands to its calls at start instead of to a host. Such a call is a task with no
//! thread (see `own_call.rs`). So a file that holds a service and its callers runs the
//! same in one process, on one daemon, or placed over several engines, where the planner
//! writes the service's engine and pipeline into a call on another engine
//! (`crate::placement`).
//!
//! Everything the server sends is checked: an answer larger than a buffer of the output's
//! free list, a part that does not start with `MORE` or `LAST`, an answer nobody asked for
//! (after the last call), and a service that ends or refuses before it answered fail the
//! pipeline with an error naming the engine and the call; so does a call whose answer does
//! not come within `timeout=SECONDS`, when given. Memory stays bounded: one request is on the
//! link at a time (the others wait in their free list's buffers), and one answer, no larger
//! than an output buffer, waits for the task.

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, SendTimeoutError, Sender};
use offhost_link::{Channel, ChannelOptions, LinkError, Session};

use crate::calls::wire::{spin_for, Joiner, SPIN_WAIT};
use crate::link_task::{in_parts, send, Links, RemoteError, Shared, Target, CANCEL_CHECK};
use offhost_engine::call::{put_copy, timeout};
use offhost_engine::Buffer;
use offhost_engine::Get;
use offhost_engine::{ArgError, Args, Build, Registry, TaskInfo};
use offhost_engine::{Context, Priority, Status, Task, TaskError};
use offhost_link::Wait;

/// Registers `call`, reaching engines as `links` allows.
pub(crate) fn register(r: &mut Registry, links: Arc<Links>) {
    r.register(
        TaskInfo::new(
            "call",
            "calls a pipeline with each buffer of its input and puts out its answer: its host-in and host-out NAME, both whole=true, of pipeline ID at URL, or without url= and pipeline= of this pipeline",
        )
        .optional(
            "url",
            "the other engine's URL (tls:HOST:PORT); without url= and pipeline=, the service of this pipeline",
        )
        .optional(
            "pipeline",
            "the serving pipeline's id on that engine, or the name it was submitted with",
        )
        .required("name", "the name of its host-in and host-out, both whole=true")
        .arg("engine", "", "the other engine's name, for errors")
        .arg(
            "timeout",
            "",
            "seconds a call may wait for its answer before the pipeline fails (default: as long as the server takes)",
        )
        .inputs(1, 1)
        .outputs(1, 1)
        .allocates(4, 65536)
        .priority(Priority::Interrupt),
        move |args: &Args, b: &mut Build<'_>| factory(&links, args, b),
    );
}

fn factory(links: &Links, args: &Args, b: &mut Build<'_>) -> Result<Box<dyn Task>, ArgError> {
    let given = |a: &str| args.get(a).is_some_and(|v| !v.is_empty());
    let timeout = timeout(args)?;
    let target = match (given("url"), given("pipeline")) {
        (true, true) => {
            let (target, pipeline, name) = Target::parse(links, args)?;
            let channel = format!("call/{pipeline}/{name}");
            Target { channel, ..target }
        }
        (false, false) => {
            if given("engine") {
                return Err(ArgError::new(
                    "engine",
                    "engine= names another engine, which url= and pipeline= reach",
                ));
            }
            return offhost_engine::call::own_call(args, b);
        }
        (url, _) => {
            return Err(ArgError::new(
                if url { "pipeline" } else { "url" },
                "url= and pipeline= go together: both to call a pipeline on another engine, neither to call this pipeline's own service",
            ))
        }
    };
    // One call at a time: one request is in flight, and one answer waits for the task.
    let (tx, rx) = crossbeam_channel::bounded(1);
    let (answer_tx, answers) = crossbeam_channel::bounded(1);
    Ok(Box::new(Call {
        whom: format!("engine {}", target.engine),
        target: Some(target),
        timeout,
        shared: Shared::register(b),
        link: Arc::new(OnceLock::new()),
        tx: Some(tx),
        start: Some((rx, answer_tx)),
        answers,
        answer: None,
        in_flight: false,
    }))
}

/// A call to another engine's pipeline, with a thread that holds its link.
///
/// The task sends each request on the link itself when it fits one message and the credit
/// allows it (nothing else is in flight, so it nearly always does), and tells the thread,
/// which waits for the answer; otherwise the thread sends it, waiting for credit. The thread
/// hands the answer to the task and runs the pipeline's tasks until the task has sent the next
/// request and nothing else is runnable (a [`Helper`](offhost_engine::Helper)): a null call
/// then wakes no other thread on the caller's side.
struct Call {
    /// Taken by the client thread when it starts.
    target: Option<Target>,
    /// Whom the calls reach, for errors: `engine NAME`.
    whom: String,
    /// How long a call may wait for its answer.
    timeout: Option<Duration>,
    shared: Arc<Shared>,
    /// The channel, once the client thread has opened it.
    link: Arc<OnceLock<Arc<Channel>>>,
    /// Calls to the client thread; dropped at the end of the input.
    tx: Option<Sender<Request>>,
    /// What the client thread takes when the task first runs.
    start: Option<(Receiver<Request>, Sender<Vec<u8>>)>,
    answers: Receiver<Vec<u8>>,
    /// An answer waiting for an output buffer.
    answer: Option<Vec<u8>>,
    /// A request went whose answer the task has not taken yet.
    in_flight: bool,
}

/// A call, from the task to its client thread.
enum Request {
    /// Send this request, waiting for credit, then wait for its answer.
    Send(Buffer),
    /// The task sent the request itself: wait for its answer.
    Sent,
}

/// What the client thread needs.
struct Client {
    target: Target,
    /// The largest answer the output's buffers hold.
    limit: usize,
    /// How long a call may wait for its answer.
    timeout: Option<Duration>,
    requests: Receiver<Request>,
    answers: Sender<Vec<u8>>,
    shared: Arc<Shared>,
    /// Where the channel goes for the task, once open.
    link: Arc<OnceLock<Arc<Channel>>>,
}

impl Client {
    fn run(&self) -> Result<(), RemoteError> {
        let t = &self.target;
        let session = Session::connect_with(&t.url, &t.options)?;
        let ch = session
            .open(&t.channel, ChannelOptions::default())
            .map_err(|source| RemoteError::Open {
                channel: t.channel.clone(),
                source,
            })?;
        let ch = Arc::new(ch);
        let _ = self.link.set(Arc::clone(&ch));
        let part = (ch.options().max_message as usize).saturating_sub(1).max(1);
        let cancel = &self.shared.cancel;
        // Each message of each answer is received into this one buffer.
        let mut msg = Vec::new();
        let mut calls = 0u64;
        while let Some(r) = self.next_request()? {
            calls += 1;
            if let Request::Send(b) = r {
                in_parts(&b, part, |p| send(&ch, p, cancel))?;
            }
            let in_call = |source| RemoteError::Call {
                call: calls,
                source: Box::new(source),
            };
            let answer = self
                .answer(&ch, &mut msg)
                .map_err(in_call)?
                .ok_or_else(|| in_call(RemoteError::NoAnswer))?;
            self.hand_over(answer)?;
        }
        ch.close()?;
        // The service ends the channel once it has read the end of the calls.
        if self.answer(&ch, &mut msg)?.is_some() {
            return Err(RemoteError::Unasked(calls));
        }
        session.close();
        Ok(())
    }

    /// The next call, `None` at the end of the input.
    fn next_request(&self) -> Result<Option<Request>, RemoteError> {
        let now = spin_for(|| match self.requests.try_recv() {
            Ok(b) => Some(Some(b)),
            Err(crossbeam_channel::TryRecvError::Disconnected) => Some(None),
            Err(crossbeam_channel::TryRecvError::Empty) => None,
        });
        if let Some(r) = now {
            return Ok(r);
        }
        loop {
            match self.requests.recv_timeout(CANCEL_CHECK) {
                Ok(b) => return Ok(Some(b)),
                Err(RecvTimeoutError::Disconnected) => return Ok(None),
                Err(RecvTimeoutError::Timeout) if self.cancelled() => {
                    return Err(RemoteError::PipelineEnded)
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// Joins the parts of the next answer, received into `msg`; `None` if the server ended
    /// its answers.
    fn answer(&self, resp: &Channel, msg: &mut Vec<u8>) -> Result<Option<Vec<u8>>, RemoteError> {
        let mut answer = Joiner::answer(self.limit);
        let deadline = self.deadline();
        loop {
            match resp.recv_into(msg, CANCEL_CHECK) {
                Ok(true) => {}
                Ok(false) if !answer.started() => return Ok(None),
                Ok(false) => return Err(RemoteError::AnswerCut),
                Err(LinkError::Timeout) => {
                    self.may_wait(deadline)?;
                    continue;
                }
                Err(e) => return Err(e.into()),
            }
            if let Some(whole) = answer.push(msg)? {
                return Ok(Some(whole));
            }
        }
    }

    /// Gives `answer` to the task (the one before it was taken: the task sends a request
    /// once it has its answer), and runs the pipeline's tasks until it sends the next.
    fn hand_over(&self, mut answer: Vec<u8>) -> Result<(), RemoteError> {
        loop {
            match self.answers.send_timeout(answer, CANCEL_CHECK) {
                Ok(()) => break,
                Err(SendTimeoutError::Timeout(a)) if !self.cancelled() => answer = a,
                Err(_) => return Err(RemoteError::PipelineEnded),
            }
        }
        let waker = self.shared.waker.get();
        // Counted before the wake, so that the wake leaves the task to this thread.
        let helper = waker.and_then(|w| w.helper());
        if let Some(w) = waker {
            w.wake();
        }
        if let Some(h) = helper {
            // Once the next request went, what it set going (the source refilling, say)
            // runs here too, up to a spin's worth of time, instead of waking a worker for it.
            let mut sent = None;
            h.run_until(&mut || {
                self.cancelled()
                    || (!self.requests.is_empty()
                        && sent.get_or_insert_with(Instant::now).elapsed() >= SPIN_WAIT)
            });
        }
        Ok(())
    }

    fn cancelled(&self) -> bool {
        // Ordering: Acquire pairs with the Release store in `Call::drop`.
        self.shared.cancel.load(Ordering::Acquire)
    }

    /// When a call starting now must have its answer (`timeout=`), if ever.
    fn deadline(&self) -> Option<Instant> {
        self.timeout.and_then(|t| Instant::now().checked_add(t))
    }

    /// Whether a call may wait on for its answer: not once the pipeline has ended, nor past
    /// its `deadline`; the error says which.
    fn may_wait(&self, deadline: Option<Instant>) -> Result<(), RemoteError> {
        if self.cancelled() {
            return Err(RemoteError::PipelineEnded);
        }
        match (deadline, self.timeout) {
            (Some(d), Some(t)) if Instant::now() >= d => Err(RemoteError::Timeout(t)),
            _ => Ok(()),
        }
    }
}

impl Call {
    fn failed(&self, why: &dyn std::fmt::Display) -> TaskError {
        TaskError::Failed(format!("{}: {why}", self.whom))
    }

    /// Starts the client thread, for answers up to the size of the output's buffers.
    fn start(&mut self, cx: &mut Context<'_>) -> Result<(), TaskError> {
        let (Some((requests, answers)), Some(target)) = (self.start.take(), self.target.take())
        else {
            return Ok(());
        };
        let limit = cx.pool(0).map_or(0, |p| p.config().size);
        let client = Client {
            target,
            limit,
            timeout: self.timeout,
            requests,
            answers,
            shared: Arc::clone(&self.shared),
            link: Arc::clone(&self.link),
        };
        std::thread::Builder::new()
            .name("offhost-call".into())
            .spawn(move || {
                let r = client.run();
                client.shared.finish(r);
            })
            .map(drop)
            .map_err(|e| TaskError::Failed(format!("no thread for the link: {e}")))
    }

    /// Sends request `b`: on the link now if it fits one message and the credit, by the
    /// client thread otherwise; `false` if the thread has ended (its end says why).
    fn call(&mut self, b: Buffer) -> bool {
        let Some(tx) = &self.tx else {
            return false;
        };
        let request = match self.link.get() {
            Some(ch) if (b.len() as u64) < ch.options().max_message => {
                match ch.send_parts(&[&[offhost_engine::LAST], &b], Wait::Never) {
                    Ok(()) => Request::Sent,
                    // Out of credit, or the link broke: the thread sends it, or finds why.
                    Err(_) => Request::Send(b),
                }
            }
            _ => Request::Send(b),
        };
        self.in_flight = true;
        // The channel holds one call: the one before was answered.
        tx.send(request).is_ok()
    }

    /// Puts out the answers that came; `false` if one waits for an output buffer.
    fn put_answers(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            let a = match self.answer.take() {
                Some(a) => a,
                None => match self.answers.try_recv() {
                    Ok(a) => {
                        self.in_flight = false;
                        a
                    }
                    Err(_) => return true,
                },
            };
            // The client thread checked the answer against the output buffers' size.
            if !put_copy(cx, &a) {
                self.answer = Some(a);
                return false;
            }
        }
    }
}

impl Task for Call {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        self.start(cx)?;
        // The answers that came go out before a failure after them is reported.
        let all_out = self.put_answers(cx);
        if let Some(Err(why)) = self.shared.end() {
            return Err(self.failed(&why));
        }
        if !all_out {
            return Ok(Status::Blocked);
        }
        if self.tx.is_some() {
            // One call at a time: the next request once this one's answer came.
            if self.in_flight {
                return Ok(Status::Blocked);
            }
            match cx.get(0) {
                Get::Buf(b) => {
                    if self.call(b) {
                        return Ok(Status::Blocked);
                    }
                    // The thread ended: its end says why.
                }
                Get::Empty => return Ok(Status::Blocked),
                Get::Closed => {}
            }
            self.tx = None;
        }
        match self.shared.end() {
            None => Ok(Status::Blocked),
            Some(Ok(())) => {
                // The last answers came before the thread's end.
                if self.put_answers(cx) {
                    Ok(Status::Done)
                } else {
                    Ok(Status::Blocked)
                }
            }
            Some(Err(why)) => Err(self.failed(&why)),
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        // Ordering: Release pairs with the client thread's Acquire loads.
        self.shared.cancel.store(true, Ordering::Release);
    }
}
