//! A service of a pipeline's own, which its `call name=NAME` tasks share (see [`crate::call`]):
//! the pipeline's `host-in` and `host-out NAME`, both `whole=true`, taken from the host and
//! handed to the calls at start, one call at a time, in turn.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use crate::buffer::Buffer;
use crate::host::{HostError, HostInput, HostOutput, LAST};
use crate::runq::Waker;

/// Why a service whose `host-out` put out more buffers than it was given requests stops
/// taking calls.
pub const OUT_OF_STEP: &str = "the service answered a call with more than one buffer, \
     so its answers are out of step with its callers; it takes no more calls (a service puts \
     out exactly one buffer per request)";

/// Why a call to the pipeline's own service failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServiceError {
    /// The service answered a request with more than one buffer ([`OUT_OF_STEP`]).
    #[error("{}", OUT_OF_STEP)]
    OutOfStep,
    /// The service had not taken the request before this one.
    #[error("the service has not read the requests before this one (a service takes each request before it answers it)")]
    Unread,
    /// The service's `host-in` has ended.
    #[error("the service no longer reads")]
    NoLongerReads,
    /// The service's `host-out` ended before it answered.
    #[error("the service ended without answering")]
    Ended,
}

/// A service of a pipeline, shared by the calls of that pipeline that name it.
pub(crate) struct OwnService {
    /// The largest request: a buffer of the `host-in`'s free list.
    pub(crate) limit: usize,
    state: Mutex<Turns>,
}

/// The service's ports, and whose turn it is.
struct Turns {
    input: HostInput,
    output: HostOutput,
    /// The call whose request the service has and whose answer it owes.
    holder: Option<Waker>,
    /// The call woken for its turn, which no other call takes meanwhile.
    next: Option<Waker>,
    /// Calls waiting for their turn, in order.
    line: VecDeque<Waker>,
}

impl OwnService {
    pub(crate) fn new(input: HostInput, output: HostOutput) -> OwnService {
        OwnService {
            limit: input.buffer_size(),
            state: Mutex::new(Turns {
                input,
                output,
                holder: None,
                next: None,
                line: VecDeque::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Turns> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands `request` to the service for call `me`: `Ok(true)` once it is the service's,
    /// `Ok(false)` if another call has its turn (`me` is woken when its own comes).
    pub(crate) fn begin(&self, me: &Waker, request: &[u8]) -> Result<bool, ServiceError> {
        let mut t = self.lock();
        let others_turn = t.holder.is_some() || t.next.as_ref().is_some_and(|n| !n.same_task(me));
        if others_turn {
            if !t.line.iter().any(|w| w.same_task(me)) {
                t.line.push_back(me.clone());
            }
            return Ok(false);
        }
        t.next = None;
        out_of_step(&mut t)?;
        let mut m = t.input.spare();
        m.reserve(request.len() + 1);
        m.push(LAST);
        m.extend_from_slice(request);
        // Before the request goes: its answer may come at once.
        t.output.wake_on_buffers(Some(me.clone()));
        if let Err(e) = t.input.try_send(m) {
            t.output.wake_on_buffers(None);
            self.pass_on(&mut t);
            return Err(match e {
                HostError::GaveUp => ServiceError::Unread,
                _ => ServiceError::NoLongerReads,
            });
        }
        t.holder = Some(me.clone());
        Ok(true)
    }

    /// The answer to the call that holds the service, if it has come; the service then
    /// goes to the next call in line.
    pub(crate) fn answer(&self) -> Result<Option<Buffer>, ServiceError> {
        let mut t = self.lock();
        let r = match t.output.try_recv() {
            None => return Ok(None),
            Some(Some(b)) => out_of_step(&mut t).map(|()| Some(b)),
            Some(None) => Err(ServiceError::Ended),
        };
        t.holder = None;
        t.output.wake_on_buffers(None);
        self.pass_on(&mut t);
        r
    }

    /// Wakes the next call in line for its turn.
    fn pass_on(&self, t: &mut Turns) {
        t.next = t.line.pop_front();
        if let Some(w) = &t.next {
            w.wake();
        }
    }

    /// Call `me` ends: it leaves the line, and gives up its turn if it has it. If nobody
    /// has the turn then (this call had it, or failed as it began), the next in line gets it,
    /// so that no call waits for a turn nobody will pass on.
    pub(crate) fn leave(&self, me: &Waker) {
        let mut t = self.lock();
        t.line.retain(|w| !w.same_task(me));
        let mine = |w: &Option<Waker>| w.as_ref().is_some_and(|w| w.same_task(me));
        if mine(&t.holder) {
            t.holder = None;
            t.output.wake_on_buffers(None);
        }
        if mine(&t.next) {
            t.next = None;
        }
        if t.holder.is_none() && t.next.is_none() {
            self.pass_on(&mut t);
        }
    }
}

/// Fails the service's `host-in` with [`OUT_OF_STEP`] if a buffer waits at its `host-out`
/// that no call asked for.
fn out_of_step(t: &mut Turns) -> Result<(), ServiceError> {
    if t.output.waiting() == 0 {
        return Ok(());
    }
    t.input.fail(OUT_OF_STEP);
    Err(ServiceError::OutOfStep)
}
