//! The `call` task: a client/server call from a task, with each buffer of its input as a
//! request and the service's answer as one buffer of its output.
//!
//! Who owns what:
//! - here, in the core: `call name=NAME`, a call to a service of its own pipeline, made by
//!   the task itself with no thread of its own, and what every call shares: its `timeout=`
//!   ([`timeout`], [`no_answer_within`]), how an answer is put out ([`put_copy`]) and the
//!   rule that a service answers each request with one buffer ([`OUT_OF_STEP`]);
//! - in `offhost-node` (`calls`): `call url=URL pipeline=ID name=NAME`, a call to a pipeline
//!   on another engine over a link, the daemon side that serves a pipeline to such callers,
//!   and the planner that points a placed call at the engine that runs its service. The node
//!   registers its `call` over this one ([`own_call`] serves its calls without `url=`).
//!
//! At start the engine hands the pipeline's `host-in name=NAME whole=true` and `host-out
//! name=NAME whole=true` to the calls of that name (`ports::hand_to_calls`) instead of to a host.
//! A call takes a request from its input, hands it to the service's `host-in` (which the
//! task wakes), and ends its turn; the service's `host-out` wakes it when it hands over a
//! buffer, and that buffer is the answer. So a call costs a few task switches, and the
//! workers that run the service run the calls too.
//!
//! Several calls of one name share the service, one call at a time, in turn: a call that
//! finds the service held by another waits in line and is woken when its turn comes. A
//! buffer waiting at `host-out` before a request goes in, or beside an answer, answers
//! nobody: the service's `host-in` then fails with [`OUT_OF_STEP`], and so does the call.
//! `timeout=` is kept with an `Alarm`. The service's `host-in` keeps serving when the
//! pipeline is stopped, and ends when its last call has ended.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use crate::buffer::Buffer;
use crate::own_service::OwnService;
pub use crate::own_service::{ServiceError, OUT_OF_STEP};
use crate::queue::Get;
use crate::registry::{ArgError, Args, Build, Registry, TaskInfo};
use crate::runq::Waker;
use crate::task::{Context, Priority, Status, Task, TaskError};
use crate::timer::Alarm;

/// The longest `timeout=` a call may be given, in seconds (a day).
pub const MAX_TIMEOUT_S: f64 = 86_400.0;

/// Registers `call name=NAME` (a call to this pipeline's own service).
pub(crate) fn register(r: &mut Registry) {
    r.register(
        TaskInfo::new(
            "call",
            "calls the service of this pipeline with each buffer of its input and puts out its answer: its host-in and host-out NAME, both whole=true",
        )
        .required("name", "the name of its host-in and host-out, both whole=true")
        .arg(
            "timeout",
            "",
            "seconds a call may wait for its answer before the pipeline fails (default: as long as the service takes)",
        )
        .inputs(1, 1)
        .outputs(1, 1)
        .allocates(4, 65536)
        .priority(Priority::Interrupt),
        own_call,
    );
}

/// Makes a `call name=NAME [timeout=S]` to the service of the task's own pipeline: the
/// engine hands it the pipeline's `host-in` and `host-out` of that name at start.
pub fn own_call(args: &Args, b: &mut Build<'_>) -> Result<Box<dyn Task>, ArgError> {
    let timeout = timeout(args)?;
    let name = args.required("name")?.to_string();
    let (tx, rx) = crossbeam_channel::bounded(1);
    b.host.calls.push((name.clone(), b.task_id, tx));
    Ok(Box::new(OwnCall::new(&name, rx, timeout)))
}

/// A call's `timeout=SECONDS`, if given: above 0 and at most [`MAX_TIMEOUT_S`].
pub fn timeout(args: &Args) -> Result<Option<Duration>, ArgError> {
    match args.get("timeout") {
        Some(t) if !t.is_empty() => t
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s > 0.0 && *s <= MAX_TIMEOUT_S)
            .map(|s| Some(Duration::from_secs_f64(s)))
            .ok_or_else(|| {
                ArgError::new(
                    "timeout",
                    format!(
                        "timeout={t}: not a number of seconds above 0 and at most {MAX_TIMEOUT_S}"
                    ),
                )
            }),
        _ => Ok(None),
    }
}

/// Why a call failed whose answer did not come within `timeout=t`.
pub fn no_answer_within(t: Duration) -> String {
    format!("no answer within timeout={}", t.as_secs_f64())
}

/// Copies `answer` into a buffer of output 0 and puts it out; `false` if no buffer is free
/// (the task is woken when one is). An answer longer than a buffer is cut to it: callers
/// check it against the buffers' size first.
pub fn put_copy(cx: &mut Context<'_>, answer: &[u8]) -> bool {
    let Some(mut b) = cx.alloc(0) else {
        return false;
    };
    let n = answer.len().min(b.remaining());
    b.unfilled()[..n].copy_from_slice(&answer[..n]);
    b.commit(n);
    cx.put(0, b.freeze());
    true
}

/// The task: one call at a time to its pipeline's service.
struct OwnCall {
    /// `service NAME of this pipeline`, for errors.
    whom: String,
    /// Where the engine sends the service at start.
    handed: Receiver<Arc<OwnService>>,
    /// The service and this task's waker, from its first turn until it is done (out of the
    /// task during a turn, so that the turn clones neither).
    service: Option<(Arc<OwnService>, Waker)>,
    timeout: Option<Duration>,
    /// A request waiting for its turn.
    request: Option<Buffer>,
    /// A call is in flight, to be answered by this time if any.
    in_flight: Option<Option<Instant>>,
    /// An answer waiting for an output buffer.
    answer: Option<Buffer>,
    alarm: Alarm,
    /// Requests taken so far.
    calls: u64,
}

impl OwnCall {
    /// A call of the service named `name`, which the engine sends on `handed` at start.
    fn new(name: &str, handed: Receiver<Arc<OwnService>>, timeout: Option<Duration>) -> OwnCall {
        OwnCall {
            whom: format!("service {name} of this pipeline"),
            handed,
            service: None,
            timeout,
            request: None,
            in_flight: None,
            answer: None,
            alarm: Alarm::default(),
            calls: 0,
        }
    }

    fn failed(&self, why: impl std::fmt::Display) -> TaskError {
        TaskError::Failed(format!("{}: call {}: {why}", self.whom, self.calls))
    }

    /// The service and this task's waker: kept ones, or on the first turn the service the
    /// engine handed over.
    fn take_service(&mut self, cx: &Context<'_>) -> Result<(Arc<OwnService>, Waker), TaskError> {
        if let Some(s) = self.service.take() {
            return Ok(s);
        }
        let s = self.handed.try_recv().map_err(|_| {
            TaskError::Failed(format!("{}: the engine did not hand it over", self.whom))
        })?;
        Ok((s, cx.waker()))
    }

    /// Copies a waiting answer into a buffer of the output; `false` if none is free.
    fn put_answer(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(a) = self.answer.take() else {
            return true;
        };
        // Checked against the output buffers' size when it came.
        if put_copy(cx, &a) {
            return true;
        }
        self.answer = Some(a);
        false
    }
}

impl Task for OwnCall {
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError> {
        let (service, me) = self.take_service(cx)?;
        let r = self.turn(cx, &service, &me);
        // Once done, the call no longer keeps the service (its last call has ended); until
        // then, and after a failure (for `Drop` to leave the line), it does.
        if !matches!(r, Ok(Status::Done)) {
            self.service = Some((service, me));
        }
        r
    }
}

impl OwnCall {
    /// One turn: puts out an answer that came, takes the answer in flight, and hands the
    /// next request to the service.
    fn turn(
        &mut self,
        cx: &mut Context<'_>,
        service: &OwnService,
        me: &Waker,
    ) -> Result<Status, TaskError> {
        loop {
            if !self.put_answer(cx) {
                return Ok(Status::Blocked);
            }
            if let Some(deadline) = self.in_flight {
                match service.answer().map_err(|e| self.failed(e))? {
                    Some(a) => {
                        let limit = cx.pool(0).map_or(0, |p| p.config().size);
                        if a.len() > limit {
                            return Err(self.failed(format!(
                                "an answer of {} bytes does not fit a buffer of the output's free list ({limit} bytes)",
                                a.len()
                            )));
                        }
                        self.answer = Some(a);
                        self.in_flight = None;
                        self.alarm.clear();
                        continue;
                    }
                    None => {
                        if let (Some(d), Some(t)) = (deadline, self.timeout) {
                            if Instant::now() >= d {
                                return Err(self.failed(no_answer_within(t)));
                            }
                            self.alarm.ring_at(d, me);
                        }
                        return Ok(Status::Blocked);
                    }
                }
            }
            let request = match self.request.take() {
                Some(r) => r,
                None => match cx.get(0) {
                    Get::Buf(b) => {
                        self.calls += 1;
                        b
                    }
                    Get::Empty => return Ok(Status::Blocked),
                    Get::Closed => return Ok(Status::Done),
                },
            };
            if request.len() > service.limit {
                return Err(self.failed(format!(
                    "a request of {} bytes does not fit a buffer of the serving host-in's free list ({} bytes)",
                    request.len(),
                    service.limit
                )));
            }
            if !service.begin(me, &request).map_err(|e| self.failed(e))? {
                self.request = Some(request);
                return Ok(Status::Blocked);
            }
            let now = Instant::now();
            self.in_flight = Some(self.timeout.and_then(|t| now.checked_add(t)));
        }
    }
}

impl Drop for OwnCall {
    fn drop(&mut self) {
        if let Some((s, me)) = &self.service {
            s.leave(me);
        }
    }
}
