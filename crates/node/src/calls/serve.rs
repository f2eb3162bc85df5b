//! A pipeline as a service that several callers share: the daemon's side of `call` (see
//! [`crate::calls::client`]).
//!
//! A caller opens channel `call/ID/NAME` and sends each request whole (parts after a `MORE`
//! or `LAST` byte). The daemon joins the request, hands it to `host-in name=NAME whole=true`
//! of pipeline `ID`, takes the next buffer of `host-out name=NAME whole=true` as the answer,
//! and sends it back whole on the same channel. The first caller's channel takes both host
//! ports from the pipeline; later callers share them. One call at a time crosses the
//! pipeline (the ports are held from a request's hand-over to its answer), so a pipeline that
//! answers each request with one buffer, in order, answers each caller its own. Calls take
//! their turns in the order their requests came; a caller that goes (or ends its stream: a
//! caller ends it after its last answer, so ending it before abandons the call) while its
//! call waits for its turn leaves the line, and the thread that served it ends. A buffer
//! waiting at its `host-out` before a request goes in, or once an answer is taken, answers
//! nobody: the service is then stopped (its `host-in` fails with [`OUT_OF_STEP`]) before an
//! answer reaches the wrong caller. One that comes later than that is taken as the next
//! request's answer: the daemon cannot tell it from one.
//!
//! The thread that serves a call runs the service's tasks itself while it waits for the
//! answer (a [`Helper`](offhost_engine::Helper)), so that a null call wakes no worker: on the
//! serving side it costs the link and the tasks' turns, no switch between threads.
//!
//! Nothing a caller sends ends the service: a request that is not whole, or larger than a
//! buffer of the serving `host-in`'s free list, refuses that caller's channel with what was
//! wrong, and a caller that leaves mid-call leaves the others served. The service ends with
//! its pipeline (`offhost submit --stop ID` stops its `host-in`); callers then are refused.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use offhost_link::{Channel, LinkError};

use crate::calls::wire::{spin_for, Joiner};
use crate::refusal::Refusal;
use offhost_engine::call::{ServiceError, OUT_OF_STEP};
use offhost_engine::Stopper;
use offhost_engine::{HostError, HostInput, HostOutput};
use offhost_link::Wait;

/// One pipeline's service: its host ports, shared by its callers (a daemon's `call/ID/NAME`
/// channels; a pipeline's own calls use `own_call.rs` instead). Dropping the last
/// handle ends the service's `host-in`.
pub(crate) struct Service {
    ports: Mutex<(HostInput, HostOutput)>,
    /// The largest request: a buffer of the `host-in`'s free list.
    limit: usize,
    /// Calls waiting for their turn.
    line: Mutex<Line>,
    turn: Condvar,
}

/// The services of a daemon's pipelines, by pipeline id and channel name, each with what
/// says when its pipeline has ended (so that its ports, and the message buffers its
/// `host-in` keeps, are let go).
#[derive(Default)]
pub(crate) struct Services {
    map: Mutex<ServiceMap>,
}

/// Each service by pipeline id and name, with its pipeline's [`Stopper`].
type ServiceMap = HashMap<(u64, String), (Arc<Service>, Stopper)>;

impl Services {
    /// The service of pipeline `id` named `name`: the one its first caller started, or a
    /// new one with the ports `take` takes from the pipeline; the reason to refuse the caller
    /// otherwise. `running` says whether the pipeline still runs (an ended one's service is
    /// dropped).
    pub(crate) fn get_or_take(
        &self,
        id: u64,
        name: &str,
        running: bool,
        take: impl FnOnce() -> Result<(HostInput, HostOutput, Stopper), Refusal>,
    ) -> Result<Arc<Service>, Refusal> {
        let key = (id, name.to_string());
        let mut map = self.swept();
        if !running {
            map.remove(&key);
            return Err(Refusal::Ended);
        }
        if let Some((s, _)) = map.get(&key) {
            return Ok(Arc::clone(s));
        }
        let (input, output, pipeline) = take()?;
        let s = Arc::new(Service::new(input, output));
        map.insert(key, (Arc::clone(&s), pipeline));
        Ok(s)
    }

    /// Lets go of the services of pipelines that have ended (each holds its pipeline's host
    /// ports and the message buffers they keep).
    pub(crate) fn sweep(&self) {
        drop(self.swept());
    }

    /// The map, locked, without the services of ended pipelines.
    fn swept(&self) -> std::sync::MutexGuard<'_, ServiceMap> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, (_, pipeline)| !pipeline.is_finished());
        map
    }

    /// How many services are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Serves the calls of one caller on `ch` (`call/ID/NAME`) with `service` until the caller
/// closes the channel.
pub(crate) fn serve(ch: &Channel, service: &Service) -> Result<(), LinkError> {
    let max = ch.options().max_message.max(2) as usize;
    let mut msg = Vec::new();
    loop {
        let mut request = Joiner::request(service.limit);
        let whole = loop {
            if !ch.recv_into(&mut msg, Wait::Forever)? {
                // The caller is done (a request cut short is dropped).
                return ch.close();
            }
            match request.push(&msg) {
                Ok(Some(r)) => break r,
                Ok(None) => {}
                Err(e) => return ch.refuse(&format!("{}: {e}", ch.name())),
            }
        };
        // While it waits for its turn, a caller sends nothing: a message then is one too
        // many, and the end of its stream means it has gone.
        let mut left = || match ch.recv_into(&mut msg, Wait::Never) {
            Err(LinkError::WouldBlock) => None,
            Ok(false) => Some(Left::Gone),
            Ok(true) => Some(Left::Wrong(
                "a request before the answer to the one before (one call at a time)".into(),
            )),
            Err(e) => Some(Left::Wrong(e.to_string())),
        };
        let answer = match service.call(whole, &mut left) {
            Ok(a) => a,
            Err(Left::Gone) => return ch.close(),
            Err(Left::Wrong(why)) => return ch.refuse(&format!("{}: {why}", ch.name())),
        };
        crate::link_task::in_parts(&answer, max - 1, |p| ch.send_parts(p, Duration::MAX))?;
    }
}

/// Why a call did not get its answer.
pub(crate) enum Left {
    /// Its caller went while it waited for its turn.
    Gone,
    /// What went wrong.
    Wrong(String),
}

impl Service {
    /// A service answering with `output` what it is asked on `input`.
    pub(crate) fn new(input: HostInput, output: HostOutput) -> Service {
        Service {
            limit: input.buffer_size(),
            ports: Mutex::new((input, output)),
            line: Mutex::new(Line::default()),
            turn: Condvar::new(),
        }
    }

    /// Hands `request` (a `LAST` byte and the request, as [`Joiner::request`] joins it) to
    /// the pipeline and takes its answer. Calls take turns in the order they come; while one
    /// waits for its turn it asks `left` every [`WAIT_CHECK`] whether its caller has gone
    /// (and then leaves the line). Once its request is in, it waits for the answer however
    /// long it takes, so that the service stays in step (the service ends, or is ended by
    /// force, to end the wait). A buffer that waits at `host-out` before the request goes,
    /// or beside its answer, answers nobody: the pipeline's `host-in` then fails with
    /// [`OUT_OF_STEP`], as this call does if it has no answer yet.
    pub(crate) fn call(
        &self,
        request: Vec<u8>,
        left: &mut dyn FnMut() -> Option<Left>,
    ) -> Result<Vec<u8>, Left> {
        let _turn = self.wait_turn(left)?;
        let mut ports = self.ports.lock().unwrap_or_else(|e| e.into_inner());
        let (input, output) = &mut *ports;
        out_of_step(input, output).map_err(|e| Left::Wrong(e.to_string()))?;
        let no_longer = |e| Left::Wrong(format!("the service no longer reads: {e}"));
        // This thread runs the service's tasks until the answer is out (see `Helper`), unless
        // the request must wait for room: then a worker takes it.
        let helper = input.helper();
        match input.try_send_back(request) {
            Ok(()) => {
                if let Some(h) = helper {
                    h.run_until(&mut || output.waiting() > 0);
                }
            }
            Err((HostError::GaveUp, request)) => {
                drop(helper);
                input.send(request).map_err(no_longer)?;
            }
            Err((e, _)) => return Err(no_longer(e)),
        }
        let answer = match spin_for(|| output.try_recv()) {
            Some(r) => r,
            None => output.recv(),
        };
        let Some(answer) = answer else {
            return Err(Left::Wrong("the service ended without answering".into()));
        };
        // This call's answer came first; the next caller is refused.
        let _ = out_of_step(input, output);
        Ok(answer.to_vec())
    }

    /// Takes a place in line and waits for it to come first; `left`'s answer if the caller
    /// goes meanwhile.
    fn wait_turn(&self, left: &mut dyn FnMut() -> Option<Left>) -> Result<Turn<'_>, Left> {
        let mut line = self.lock_line();
        let me = line.next;
        line.next += 1;
        line.waiting.push_back(me);
        while line.waiting.front() != Some(&me) {
            line = self
                .turn
                .wait_timeout(line, WAIT_CHECK)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            if line.waiting.front() == Some(&me) {
                break;
            }
            drop(line);
            let gone = left();
            line = self.lock_line();
            if let Some(why) = gone {
                line.waiting.retain(|t| *t != me);
                return Err(why);
            }
        }
        Ok(Turn { service: self })
    }

    fn lock_line(&self) -> std::sync::MutexGuard<'_, Line> {
        self.line.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The calls waiting for a service, by ticket, the first one's turn now.
#[derive(Default)]
struct Line {
    next: u64,
    waiting: VecDeque<u64>,
}

/// A call's turn: the next call's comes when it is dropped.
struct Turn<'a> {
    service: &'a Service,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.service.lock_line().waiting.pop_front();
        self.service.turn.notify_all();
    }
}

/// How often a call waiting for its turn asks whether its caller has gone.
const WAIT_CHECK: Duration = Duration::from_millis(50);

/// Fails the service's `host-in` with [`OUT_OF_STEP`] if a buffer waits at its `host-out`
/// that no call asked for.
fn out_of_step(input: &mut HostInput, output: &HostOutput) -> Result<(), ServiceError> {
    if output.waiting() == 0 {
        return Ok(());
    }
    input.fail(OUT_OF_STEP);
    Err(ServiceError::OutOfStep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use offhost_engine::{EngineConfig, Pipeline, Registry};

    #[test]
    fn an_ended_pipelines_service_is_let_go() {
        let services = Services::default();
        let mut run = Pipeline::parse(
            "host-in name=svc whole=true >a:a(2,64)\nhost-out name=svc whole=true <a\n",
        )
        .unwrap()
        .start(&Registry::with_builtins(), &EngineConfig::default())
        .unwrap();
        let taken = (
            run.host_input("svc").unwrap(),
            run.host_output("svc").unwrap(),
            run.stopper(),
        );
        let s = services
            .get_or_take(1, "svc", true, move || Ok(taken))
            .unwrap();
        assert!(matches!(
            s.call(vec![offhost_engine::LAST, 7, 8], &mut || None),
            Ok(a) if a == [7, 8]
        ));
        // A second caller shares it; nothing more is taken.
        services
            .get_or_take(1, "svc", true, || Err(Refusal::Ended))
            .unwrap();
        services.sweep();
        assert_eq!(services.len(), 1, "a running pipeline's service stays");
        run.stop();
        assert!(run.wait_timeout(std::time::Duration::from_secs(20)));
        services.sweep();
        assert_eq!(services.len(), 0);
        drop(s);
    }
}
