//! Pipelines on the embedded engine or an engine daemon, behind one handle.
//!
//! Host channels are taken (embedded) or opened (daemon) on first use. [`Pipeline::wait`]
//! first ends the streams of the `host-in` channels never used and discards the `host-out`
//! channels never read (as `offhost run` does), so a pipeline with host channels still
//! finishes; attach the channels you want beforehand ([`Pipeline::attach`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use offhost_engine::{Buffer, EngineConfig, HostInput, HostOutput, Registry, RunError, Running};
use offhost_link::{Channel, LinkError};
use offhost_node::daemon::{Client, PipelineState};
use serde_json::Value;

use crate::error::Error;
use crate::Status;

/// Where pipelines run: this process, or an engine daemon.
pub struct Engine {
    place: Place,
}

enum Place {
    Embedded {
        /// Its tasks, and the hooks added with [`Engine::add_put_hook`] and
        /// [`Engine::add_get_hook`].
        registry: Mutex<Registry>,
        config: EngineConfig,
        /// Modules added with [`Engine::add_module`], for its pipelines.
        modules: Mutex<offhost_engine::Blobs>,
    },
    Daemon {
        url: String,
        client: Arc<Mutex<Client>>,
    },
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("url", &self.url()).finish()
    }
}

/// The most worker threads an embedded engine's pipeline may have: the pipeline budget's.
pub const MAX_WORKERS: usize = offhost_engine::DEFAULT_WORKERS;

/// Checks a number of worker threads asked for: 1 to [`MAX_WORKERS`].
pub fn check_workers(workers: usize) -> Result<usize, Error> {
    if (1..=MAX_WORKERS).contains(&workers) {
        Ok(workers)
    } else {
        Err(Error::Invalid(format!(
            "workers={workers}: must be between 1 and {MAX_WORKERS} (the pipeline budget's worker threads)"
        )))
    }
}

/// The embedded engine's tasks.
fn registry() -> offhost_engine::Registry {
    #[allow(unused_mut)]
    let mut r = offhost_pet::tasks::registry();
    #[cfg(feature = "wasm")]
    offhost_wasm::register(&mut r);
    r
}

impl Engine {
    /// The embedded engine: pipelines run on worker threads of this process, with the
    /// engine's built-in tasks, the PET tasks and (feature `wasm`) the `wasm` task. `workers`
    /// defaults to the engine's choice;
    /// more than the pipeline budget's (64) makes each submission an error.
    pub fn embedded(workers: Option<usize>) -> Engine {
        let mut config = EngineConfig::default();
        if let Some(w) = workers {
            config.workers = w.max(1);
        }
        Engine {
            place: Place::Embedded {
                registry: Mutex::new(registry()),
                config,
                modules: Mutex::default(),
            },
        }
    }

    /// Connects to an engine daemon at `url` (`unix:`, `shm:`, `mem:`, `tls:` with
    /// certificates from [`connect_with`](Self::connect_with), `tcp:`).
    pub fn connect(url: &str) -> Result<Engine, Error> {
        Self::connect_with(url, &offhost_link::LinkOptions::new())
    }

    /// Connects to an engine daemon at `url` with `options` (the certificate directory for
    /// `tls:` URLs).
    pub fn connect_with(url: &str, options: &offhost_link::LinkOptions) -> Result<Engine, Error> {
        let client = Client::connect_with(url, options)?;
        Ok(Engine {
            place: Place::Daemon {
                url: url.to_owned(),
                client: Arc::new(Mutex::new(client)),
            },
        })
    }

    /// `embedded`, or the daemon's URL.
    pub fn url(&self) -> &str {
        match &self.place {
            Place::Embedded { .. } => "embedded",
            Place::Daemon { url, .. } => url,
        }
    }

    /// Adds WebAssembly module `bytes` as `name`: the pipelines this engine handle submits
    /// from now on run it as `wasm module=NAME` (before a file of that name). On a daemon
    /// it is sent on this handle's session and kept for it (see
    /// `offhost_node::daemon::modules`), within the daemon's `max_module_bytes`.
    pub fn add_module(&self, name: &str, bytes: &[u8]) -> Result<(), Error> {
        match &self.place {
            Place::Embedded { modules, .. } => {
                lock(modules).insert(name, bytes.into());
                Ok(())
            }
            Place::Daemon { client, .. } => Ok(lock(client).send_module(name, bytes)?),
        }
    }

    /// Adds a put hook that a queue of this engine's pipelines may name as `[put=NAME]`:
    /// `hook` is called with the queue's name each time a buffer lands on it while it was
    /// empty, on the engine's worker thread (keep it short). The embedded engine only: a
    /// daemon cannot run this process's code.
    pub fn add_put_hook(
        &self,
        name: &str,
        hook: impl Fn(&str) + Send + Sync + 'static,
    ) -> Result<(), Error> {
        let hook = Arc::new(hook);
        self.registry_for_hooks(name)?
            .register_put_hook(name, "added by the host", move |site| {
                let (hook, queue) = (Arc::clone(&hook), site.queue().to_owned());
                Arc::new(move || hook(&queue))
            });
        Ok(())
    }

    /// Adds a get hook that a queue of this engine's pipelines may name as `[get=NAME]`:
    /// `hook` is called with the queue's name before a dequeue from the empty queue, and the
    /// bytes it returns are dequeued as a buffer (`None`: nothing; a queue no task writes
    /// then ends). The embedded engine only, as [`add_put_hook`](Self::add_put_hook).
    pub fn add_get_hook(
        &self,
        name: &str,
        hook: impl Fn(&str) -> Option<Vec<u8>> + Send + Sync + 'static,
    ) -> Result<(), Error> {
        let hook = Arc::new(hook);
        self.registry_for_hooks(name)?
            .register_get_hook(name, "added by the host", move |site| {
                let (hook, queue) = (Arc::clone(&hook), site.queue().to_owned());
                Arc::new(move || hook(&queue).map(Buffer::from_vec))
            });
        Ok(())
    }

    fn registry_for_hooks(&self, name: &str) -> Result<std::sync::MutexGuard<'_, Registry>, Error> {
        let ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !ok {
            return Err(Error::Invalid(format!(
                "hook name '{name}': use letters, digits, '_', '-' and '.' (it is written as queue[put={name}])"
            )));
        }
        match &self.place {
            Place::Embedded { registry, .. } => Ok(lock(registry)),
            Place::Daemon { .. } => Err(Error::Invalid(
                "hooks run in this process: add them to the embedded engine (a daemon cannot call this process's code)".into(),
            )),
        }
    }

    /// Checks and starts pipeline `text`.
    pub fn submit(&self, text: &str) -> Result<Pipeline, Error> {
        self.submit_as(text, None)
    }

    /// Checks and starts pipeline `text` on a daemon under `name`, which then finds it as its
    /// id would (`call ... pipeline=NAME` on another engine, `offhost submit --stop NAME`);
    /// refused while a running pipeline holds the name. The embedded engine takes no name:
    /// its pipelines are this process's own.
    pub fn submit_as(&self, text: &str, name: Option<&str>) -> Result<Pipeline, Error> {
        self.submit_on(text, name, None)
    }

    /// As [`submit_as`](Self::submit_as), detached: the daemon keeps the pipeline running
    /// after this engine handle (its session) has gone, until it ends, is stopped, or
    /// `lifetime` passes (`None`: the daemon's time budget for a pipeline). Without it, a
    /// daemon stops a pipeline once the session that submitted it has ended. The embedded
    /// engine's pipelines are this process's own: detaching one is an error.
    pub fn submit_detached(
        &self,
        text: &str,
        name: Option<&str>,
        lifetime: Option<std::time::Duration>,
    ) -> Result<Pipeline, Error> {
        self.submit_on(text, name, Some(lifetime))
    }

    /// Submits `text` under `name`, detached for a lifetime when `detach` is given.
    fn submit_on(
        &self,
        text: &str,
        name: Option<&str>,
        detach: Option<Option<std::time::Duration>>,
    ) -> Result<Pipeline, Error> {
        match &self.place {
            Place::Embedded { .. } if detach.is_some() => Err(Error::Invalid(
                "detach is for an engine daemon (Engine(url)); the embedded engine's pipelines are this process's own".into(),
            )),
            Place::Embedded { .. } if name.is_some() => Err(Error::Invalid(
                "a pipeline name is for an engine daemon (Engine(url)); the embedded engine's pipelines are this process's own".into(),
            )),
            Place::Embedded {
                registry,
                config,
                modules,
            } => {
                let blobs = lock(modules).clone();
                let registry = lock(registry).clone();
                let built = offhost_engine::Pipeline::parse(text)?.build_with_blobs(
                    &registry,
                    &offhost_engine::Files::Ambient,
                    &offhost_engine::Budget::default(),
                    &blobs,
                )?;
                let (inputs, outputs) = (built.host_inputs(), built.host_outputs());
                // More workers than the budget allows is an error, not the panic of `start`.
                let running = built.try_start(config)?;
                Ok(Pipeline {
                    id: None,
                    inputs,
                    outputs,
                    run: Run::Local(Local {
                        state: RwLock::new(State::Running(Box::new(running))),
                        ins: Mutex::new(HashMap::new()),
                        outs: Mutex::new(HashMap::new()),
                    }),
                })
            }
            Place::Daemon { client, .. } => {
                let sub = match detach {
                    Some(lifetime) => lock(client).submit_detached(text, name, lifetime)?,
                    None => lock(client).submit_as(text, name)?,
                };
                Ok(Pipeline {
                    id: Some(sub.id),
                    inputs: sub.host_in,
                    outputs: sub.host_out,
                    run: Run::Remote(Remote {
                        client: Arc::clone(client),
                        ins: Mutex::new(HashMap::new()),
                        outs: Mutex::new(HashMap::new()),
                    }),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_workers_than_the_budget_is_an_error_not_a_panic() {
        let e = Engine::embedded(Some(100))
            .submit("random bytes=1k >a\nnull <a\n")
            .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Pipeline);
        assert!(
            e.to_string()
                .contains("over the limit max_workers of 64 worker threads"),
            "{e}"
        );
        assert_eq!(
            e.over_limit(),
            Some(
                offhost_units::OverLimit::new(offhost_units::Limit::MaxWorkers, 64u8).asked(100u8)
            )
        );
        let p = Engine::embedded(Some(usize::MAX)).submit("random bytes=1k >a\nnull <a\n");
        assert!(p.is_err());
        let p = Engine::embedded(Some(2))
            .submit("random bytes=1k >a\nnull <a\n")
            .unwrap();
        let st = p.wait(Some(Duration::from_secs(20))).unwrap().unwrap();
        assert_eq!(
            st.state,
            offhost_node::daemon::PipelineState::Finished,
            "{st:?}"
        );
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A buffer that reached a `host-out` channel.
#[derive(Debug)]
pub enum Output {
    /// A buffer of the embedded engine's pool (returns to it when dropped).
    Buffer(Buffer),
    /// A message from a daemon.
    Bytes(Vec<u8>),
}

impl std::ops::Deref for Output {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Output::Buffer(b) => b,
            Output::Bytes(v) => v,
        }
    }
}

/// Which way a host channel carries data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// `host-in`: the host sends.
    In,
    /// `host-out`: the host receives.
    Out,
}

/// A host channel's state on this side: in use, or closed (input) / discarded (output).
enum Port<T> {
    Open(Arc<T>),
    Closed,
}

/// A started pipeline.
pub struct Pipeline {
    id: Option<u64>,
    inputs: Vec<String>,
    outputs: Vec<String>,
    run: Run,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("id", &self.id)
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .finish()
    }
}

enum Run {
    Local(Local),
    Remote(Remote),
}

struct Local {
    state: RwLock<State>,
    ins: Mutex<HashMap<String, Port<HostInput>>>,
    outs: Mutex<HashMap<String, Port<HostOutput>>>,
}

enum State {
    Running(Box<Running>),
    /// The final status (`state`, `stats`, `error`).
    Done(Status),
}

struct Remote {
    client: Arc<Mutex<Client>>,
    ins: Mutex<HashMap<String, Port<Channel>>>,
    outs: Mutex<HashMap<String, Port<Channel>>>,
}

/// Longest wait under the state lock of an embedded pipeline.
const LOCAL_SLICE: Duration = Duration::from_millis(50);

/// Polling interval of a daemon's status while waiting.
const REMOTE_POLL: Duration = Duration::from_millis(20);

impl Pipeline {
    /// Its id on the daemon (`None` on the embedded engine).
    pub fn id(&self) -> Option<u64> {
        self.id
    }

    /// Names of its `host-in` channels.
    pub fn inputs(&self) -> &[String] {
        &self.inputs
    }

    /// Names of its `host-out` channels.
    pub fn outputs(&self) -> &[String] {
        &self.outputs
    }

    fn check_name(&self, dir: Dir, name: &str) -> Result<(), Error> {
        let (names, d) = match dir {
            Dir::In => (&self.inputs, "in"),
            Dir::Out => (&self.outputs, "out"),
        };
        if names.iter().any(|n| n == name) {
            return Ok(());
        }
        Err(Error::NoChannel {
            dir: d,
            name: name.to_owned(),
            have: if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            },
        })
    }

    /// Takes (embedded) or opens (daemon) a host channel now, so that [`wait`](Self::wait)
    /// leaves it alone.
    pub fn attach(&self, dir: Dir, name: &str) -> Result<(), Error> {
        self.check_name(dir, name)?;
        match (&self.run, dir) {
            (Run::Local(l), Dir::In) => l.input(name).map(drop),
            (Run::Local(l), Dir::Out) => l.output(name).map(drop),
            (Run::Remote(r), Dir::In) => r.input(self.remote_id(), name).map(drop),
            (Run::Remote(r), Dir::Out) => r.output(self.remote_id(), name).map(drop),
        }
    }

    /// Sends one message to `host-in name=NAME`; waits while the pipeline is behind.
    pub fn send(&self, name: &str, data: Vec<u8>) -> Result<(), Error> {
        self.check_name(Dir::In, name)?;
        match &self.run {
            Run::Local(l) => l
                .input(name)?
                .send(data)
                .map_err(|_| Error::NotRead(name.to_owned())),
            Run::Remote(r) => {
                let ch = r.input(self.remote_id(), name)?;
                let max = ch.options().max_message.max(1) as usize;
                for part in data.chunks(max) {
                    ch.send(part)?;
                }
                Ok(())
            }
        }
    }

    /// Ends the stream of `host-in name=NAME` (the task finishes once it has passed on what
    /// was sent). Closing twice is harmless.
    pub fn close_input(&self, name: &str) -> Result<(), Error> {
        self.check_name(Dir::In, name)?;
        match &self.run {
            Run::Local(l) => {
                if !matches!(lock(&l.ins).get(name), Some(Port::Closed)) {
                    // Take it if nobody did, so that dropping it ends the stream.
                    let _ = l.input(name);
                }
                lock(&l.ins).insert(name.to_owned(), Port::Closed);
                Ok(())
            }
            Run::Remote(r) => {
                if matches!(lock(&r.ins).get(name), Some(Port::Closed)) {
                    return Ok(());
                }
                let ch = r.input(self.remote_id(), name)?;
                lock(&r.ins).insert(name.to_owned(), Port::Closed);
                ch.close()?;
                Ok(())
            }
        }
    }

    /// The next buffer of `host-out name=NAME`, waiting at most `timeout` (`None`: for ever);
    /// `Ok(None)` at the end of the stream, [`Error::Timeout`] if nothing came in time.
    pub fn recv(&self, name: &str, timeout: Option<Duration>) -> Result<Option<Output>, Error> {
        self.check_name(Dir::Out, name)?;
        match &self.run {
            Run::Local(l) => {
                let Some(out) = l.output(name)? else {
                    return Ok(None);
                };
                match timeout {
                    None => Ok(out.recv().map(Output::Buffer)),
                    Some(t) => match out.recv_timeout(t) {
                        Ok(b) => Ok(b.map(Output::Buffer)),
                        Err(_) => Err(Error::Timeout),
                    },
                }
            }
            Run::Remote(r) => {
                let Some(ch) = r.output(self.remote_id(), name)? else {
                    return Ok(None);
                };
                let m = match timeout {
                    None => ch.recv(),
                    Some(t) => ch.recv_wait(t),
                };
                match m {
                    Ok(m) => Ok(m.map(Output::Bytes)),
                    Err(LinkError::Timeout) => Err(Error::Timeout),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// Stops the pipeline's sources; end of stream flows through it and it finishes.
    pub fn stop(&self) -> Result<(), Error> {
        match &self.run {
            Run::Local(l) => {
                if let State::Running(r) = &*l.state.read().unwrap_or_else(|e| e.into_inner()) {
                    r.stop();
                }
                Ok(())
            }
            Run::Remote(r) => Ok(lock(&r.client).stop(self.remote_id())?),
        }
    }

    fn remote_id(&self) -> u64 {
        self.id.unwrap_or(0)
    }

    /// `{"id", "state": "running" | "finished" | "failed", "stats", "error"}`, as the daemon
    /// reports it.
    pub fn status(&self) -> Result<Status, Error> {
        match &self.run {
            Run::Local(l) => Ok(l.status()),
            Run::Remote(r) => Ok(lock(&r.client).status(self.remote_id())?.into()),
        }
    }

    /// Waits at most `timeout` (`None`: for ever) for the pipeline to finish; its final
    /// status, or `None` if it is still running. A failed pipeline is a status whose
    /// `state` is `failed` (see [`Pipeline::result`]). Host channels never used are closed
    /// first (see the module docs).
    pub fn wait(&self, timeout: Option<Duration>) -> Result<Option<Status>, Error> {
        // A timeout past what an `Instant` holds waits for ever.
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
        match &self.run {
            Run::Local(l) => {
                l.close_untaken(&self.inputs, &self.outputs);
                loop {
                    {
                        let st = l.state.read().unwrap_or_else(|e| e.into_inner());
                        match &*st {
                            State::Done(v) => return Ok(Some(v.clone())),
                            State::Running(r) => {
                                // In slices, so that nobody waits long for the lock.
                                let slice = left().unwrap_or(LOCAL_SLICE).min(LOCAL_SLICE);
                                if !r.wait_timeout(slice) && left().is_some_and(|t| t.is_zero()) {
                                    return Ok(None);
                                }
                            }
                        }
                    }
                    if l.finished() {
                        return Ok(Some(l.status()));
                    }
                }
            }
            Run::Remote(r) => {
                for n in &self.inputs {
                    if !lock(&r.ins).contains_key(n) {
                        self.close_input(n)?;
                    }
                }
                loop {
                    let v = self.status()?;
                    if v.state != PipelineState::Running {
                        return Ok(Some(v));
                    }
                    match left() {
                        Some(t) if t.is_zero() => return Ok(None),
                        Some(t) => std::thread::sleep(t.min(REMOTE_POLL)),
                        None => std::thread::sleep(REMOTE_POLL),
                    }
                }
            }
        }
    }

    /// The statistics of a final status, or the failure it reports.
    pub fn result(status: &Status) -> Result<Value, Error> {
        if status.state == PipelineState::Failed {
            return Err(Error::TaskFailed(
                status.error.as_deref().unwrap_or("failed").to_owned(),
            ));
        }
        Ok(serde_json::to_value(&status.stats).unwrap_or(Value::Null))
    }
}

impl Local {
    fn input(&self, name: &str) -> Result<Arc<HostInput>, Error> {
        let mut ins = lock(&self.ins);
        match ins.get(name) {
            Some(Port::Open(p)) => return Ok(Arc::clone(p)),
            Some(Port::Closed) => return Err(Error::InputClosed(name.to_owned())),
            None => {}
        }
        let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
        let State::Running(r) = &mut *st else {
            return Err(Error::NotRead(name.to_owned()));
        };
        let p = Arc::new(
            r.host_input(name)
                .ok_or_else(|| Error::NotRead(name.to_owned()))?,
        );
        ins.insert(name.to_owned(), Port::Open(Arc::clone(&p)));
        Ok(p)
    }

    /// The output port, or `None` once it was discarded.
    fn output(&self, name: &str) -> Result<Option<Arc<HostOutput>>, Error> {
        let mut outs = lock(&self.outs);
        match outs.get(name) {
            Some(Port::Open(p)) => return Ok(Some(Arc::clone(p))),
            Some(Port::Closed) => return Ok(None),
            None => {}
        }
        let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
        let State::Running(r) = &mut *st else {
            return Ok(None);
        };
        let Some(p) = r.host_output(name) else {
            return Ok(None);
        };
        let p = Arc::new(p);
        outs.insert(name.to_owned(), Port::Open(Arc::clone(&p)));
        Ok(Some(p))
    }

    fn close_untaken(&self, inputs: &[String], outputs: &[String]) {
        let mut ins = lock(&self.ins);
        let mut outs = lock(&self.outs);
        let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
        let State::Running(r) = &mut *st else {
            return;
        };
        for n in inputs {
            if !ins.contains_key(n) {
                drop(r.host_input(n));
                ins.insert(n.clone(), Port::Closed);
            }
        }
        for n in outputs {
            if !outs.contains_key(n) {
                drop(r.host_output(n));
                outs.insert(n.clone(), Port::Closed);
            }
        }
    }

    /// Whether it has finished; if so, collects the final result once.
    fn finished(&self) -> bool {
        {
            let st = self.state.read().unwrap_or_else(|e| e.into_inner());
            match &*st {
                State::Done(_) => return true,
                State::Running(r) if !r.is_finished() => return false,
                State::Running(_) => {}
            }
        }
        let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
        if let State::Running(_) = &*st {
            let ended = |stats, error| Status {
                id: None,
                name: None,
                state: PipelineState::Failed,
                stats,
                error: Some(error),
                keep: None,
            };
            let State::Running(r) =
                std::mem::replace(&mut *st, State::Done(ended(None, String::new())))
            else {
                unreachable!("matched above")
            };
            *st = State::Done(match r.wait() {
                Ok(s) => Status {
                    state: PipelineState::Finished,
                    error: None,
                    ..ended(Some(s), String::new())
                },
                Err(RunError::TaskFailed {
                    task,
                    line,
                    message,
                    stats,
                }) => ended(
                    Some(*stats),
                    format!("task '{task}' (line {line}) failed: {message}"),
                ),
                Err(e) => ended(None, e.to_string()),
            });
        }
        true
    }

    fn status(&self) -> Status {
        if !self.finished() {
            if let State::Running(r) = &*self.state.read().unwrap_or_else(|e| e.into_inner()) {
                return Status {
                    id: None,
                    name: None,
                    state: PipelineState::Running,
                    stats: Some(r.stats()),
                    error: None,
                    keep: None,
                };
            }
        }
        match &*self.state.read().unwrap_or_else(|e| e.into_inner()) {
            State::Done(v) => v.clone(),
            State::Running(_) => unreachable!("finished above"),
        }
    }
}

impl Remote {
    fn input(&self, id: u64, name: &str) -> Result<Arc<Channel>, Error> {
        self.port(&self.ins, name, |c, n| c.open_input(id, n))?
            .ok_or_else(|| Error::InputClosed(name.to_owned()))
    }

    fn output(&self, id: u64, name: &str) -> Result<Option<Arc<Channel>>, Error> {
        self.port(&self.outs, name, |c, n| c.open_output(id, n))
    }

    /// The channel of a host port, opening it on first use; `None` once closed.
    fn port(
        &self,
        ports: &Mutex<HashMap<String, Port<Channel>>>,
        name: &str,
        open: impl FnOnce(&Client, &str) -> Result<Channel, offhost_node::daemon::DaemonError>,
    ) -> Result<Option<Arc<Channel>>, Error> {
        let mut p = lock(ports);
        match p.get(name) {
            Some(Port::Open(c)) => return Ok(Some(Arc::clone(c))),
            Some(Port::Closed) => return Ok(None),
            None => {}
        }
        let ch = Arc::new(open(&lock(&self.client), name)?);
        p.insert(name.to_owned(), Port::Open(Arc::clone(&ch)));
        Ok(Some(ch))
    }
}
