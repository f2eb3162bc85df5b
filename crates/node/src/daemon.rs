//! The engine daemon: hosts submit pipelines over a link session and connect to their
//! `host-in` / `host-out` channels by name.
//!
//! On a session, the host opens a channel named `control` and sends JSON requests, one per
//! message, each answered by one JSON reply:
//!
//! | request                                 | reply                                               |
//! |-----------------------------------------|-----------------------------------------------------|
//! | `{"op":"submit","text":"...","name":S}` | `{"ok":true,"id":N,"host_in":[..],"host_out":[..]}` |
//! | `{"op":"status","id":N}`                | `{"ok":true,"state":"running","stats":{..}}`        |
//! | `{"op":"stop","id":N,"force":B}`        | `{"ok":true,"id":N}`                                |
//! | `{"op":"wait","id":N}`                  | as status, once the pipeline has finished (\*)      |
//! | `{"op":"list"}`                         | `{"ok":true,"pipelines":[{"id":N,"state":".."}]}`   |
//!
//! The replies are typed ([`Submitted`], [`Status`], [`Stopped`], [`Pipelines`], each in a
//! [`Reply`]), shared by the daemon and whatever reads what its [`Client`] returns.
//!
//! (\*) A `wait` whose client leaves (its session ends) gives up and frees its thread; one
//! that only closes its side of the channel still gets the reply.
//!
//! `name` is optional: a pipeline submitted with a name is found by it wherever an id `N`
//! goes, in requests (as a string) and in channel names (see [`crate::names`]). One running
//! pipeline holds a name at a time; submitting another with it is refused until it finishes.
//!
//! A pipeline belongs to the session that submitted it and is stopped once that session has
//! ended, unless it was submitted with `"detach":true` (and, optionally, `"lifetime_s":S`);
//! every pipeline is held to the daemon's budgets of time and bytes (see [`keep`]). A
//! running pipeline's status says who keeps it (`"keep":{"by":"submitter"|"detached"|
//! "orphaned","stops_in_s":S}`).
//!
//! Errors are `{"ok":false,"error":"..."}` (a bad pipeline's error names line and column).
//! A submitted pipeline comes from outside: its tasks open files only through the daemon's
//! [`Files`] ([`Files::Denied`] unless the daemon was made [`with_files`](Daemon::with_files)),
//! so a path it may not use is refused at submit, naming the task, the line and the path.
//! Data flows on channels the host opens named `in/N/NAME` (its messages go to
//! `host-in name=NAME` of pipeline N; closing it ends the stream) and `out/N/NAME` (the
//! buffers reaching `host-out name=NAME`, then end of stream). A caller opens `call/N/NAME`
//! to call pipeline N as a service: each request, sent whole, goes to `host-in name=NAME
//! whole=true` and the next buffer of `host-out name=NAME whole=true` comes back whole on the
//! same channel, one call at a time across all callers (see `service.rs` and the `call`
//! task). A host that goes away ends the branches it was connected to; the daemon and its
//! other pipelines go on.
//!
//! Everything a host can ask for is bounded ([`DaemonLimits`], and the link server's
//! [`offhost_link::Limits`]): a pipeline over its budget, past the running-pipeline limit or
//! the daemon's total free-list bytes is refused with an error naming the limit and its flag;
//! a session or channel for which no thread can be started is refused the same way.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use offhost_link::{Channel, ChannelOptions, LinkError, LinkOptions, Server, Session, Threads};
use serde::{Deserialize, Serialize};

use crate::names::{check_name, Names, PipelineRef};
use crate::refusal::Refusal;
use crate::DaemonLimits;
use offhost_engine::Files;
use offhost_engine::Registry;
use offhost_engine::{EngineConfig, Pipeline, RunError, Running, Stats};
use offhost_link::Wait;

pub mod keep;
pub mod modules;
mod reply;
pub mod watched;
pub use keep::{Keep, KeptBy};
pub use reply::{
    sorted_json, BadReply, Listed, PipelineState, Pipelines, Reply, ShapeOf, Status, Stopped,
    Submitted,
};

/// Messages a network channel into `host-in` passes on, when they are there at once, before
/// it wakes the task (it wakes it sooner when no more is there). Eight rather than four: the
/// channel's thread is the busiest thread of an engine-to-engine queue, and in eight
/// alternating pairs of `bench engines` it used 1.5% less CPU per byte, the queue 3% less in
/// all (docs/notes/engines.md, stop 34).
const HOST_IN_WAKE_EVERY: usize = 8;

/// The host ports a service named `port` answers calls with: `host-in` and `host-out` of
/// that name, both `whole=true`; what is missing otherwise. Both are looked at before either
/// is taken, so a refused caller takes nothing.
fn take_service_ports(
    run: &mut Running,
    port: &str,
) -> Result<(offhost_engine::HostInput, offhost_engine::HostOutput), Refusal> {
    let missing = || Refusal::NoService(port.to_string());
    if run.peek_host_input(port) != Some(true) || run.peek_host_output(port) != Some(true) {
        return Err(missing());
    }
    match (run.host_input(port), run.host_output(port)) {
        (Some(i), Some(o)) => Ok((i, o)),
        _ => Err(missing()),
    }
}

/// The engine daemon's default address: a Unix socket of this user's (owner-only, peers of
/// other uids refused), in `$XDG_RUNTIME_DIR` or `/tmp`.
pub fn default_url() -> String {
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(
            || std::path::PathBuf::from("/tmp"),
            std::path::PathBuf::from,
        );
    let uid = offhost_access::peer::own_uid();
    format!(
        "unix:{}",
        dir.join(format!("offhost-engine-{uid}.sock")).display()
    )
}

/// Errors of the daemon's client side.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DaemonError {
    /// The link failed.
    #[error("link: {0}")]
    Link(#[from] LinkError),
    /// The daemon refused the request.
    #[error("{0}")]
    Refused(String),
    /// A reply was not what the protocol says.
    #[error("bad reply from engine: {0}")]
    Protocol(String),
}

/// A request on a daemon's `control` channel: a JSON object tagged by `op` (the module's table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
pub enum Request {
    /// Check and start the pipeline in `text`. It belongs to the session that submitted it
    /// and is stopped once that session has ended, unless `detach` (see [`keep`]).
    Submit {
        /// Pipeline text (`.ion`).
        text: String,
        /// A name to find it by besides its id ([`crate::names::check_name`] says which).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Keep it running after the submitting session ends.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        detach: bool,
        /// A detached pipeline's lifetime in seconds, after which it is stopped (at most, and
        /// by default, the daemon's `pipeline_time`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lifetime_s: Option<f64>,
    },
    /// State and statistics of pipeline `id`.
    Status {
        /// Pipeline id or name.
        id: PipelineRef,
    },
    /// As `status`, once pipeline `id` has finished.
    Wait {
        /// Pipeline id or name.
        id: PipelineRef,
    },
    /// Stop pipeline `id`'s sources; with `force`, end it by force ([`Running::abort`]).
    Stop {
        /// Pipeline id or name.
        id: PipelineRef,
        /// End every task now, for a pipeline that a stop does not end.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        force: bool,
    },
    /// Ids and states of every pipeline. (A struct variant, so that unknown fields are
    /// refused here too.)
    List {},
    /// The tasks, queues and free lists of pipeline `id` and how they join (a live view's
    /// graph).
    Shape {
        /// Pipeline id or name.
        id: PipelineRef,
    },
}

enum State {
    Running(Running),
    Finished(Option<Stats>, Option<String>),
}

/// How often a `wait` looks whether its host is still there, while it waits for its pipeline
/// to finish (which it hears of at once).
const WAIT_POLL: Duration = Duration::from_millis(20);

/// How often a thread sending a pipeline's output to a host looks whether the host is still
/// there, while the pipeline sends nothing.
const GONE_CHECK: Duration = Duration::from_millis(100);

/// Finished pipelines whose results the daemon keeps for `status` and `wait`.
pub const KEEP_FINISHED: usize = 256;

/// Serves pipelines to hosts.
pub struct Daemon {
    registry: Registry,
    config: EngineConfig,
    files: Files,
    limits: DaemonLimits,
    next: AtomicU64,
    pipelines: Mutex<BTreeMap<u64, Arc<Mutex<State>>>>,
    /// The names pipelines were submitted with (locked after `pipelines`, never before).
    names: Names,
    /// Pipelines serving calls (`call/ID/NAME` channels).
    services: crate::calls::serve::Services,
    /// The free lists of settled pipelines that something still holds.
    lingering: Lingering,
    /// Who keeps each running pipeline (locked alone, or inside a pipeline's lock).
    keeps: keep::Keeps,
    /// Sessions served so far (their numbers).
    sessions: AtomicU64,
    /// Each pipeline's shape and board, for a live view.
    seen: watched::Seen,
    /// The modules each session sent beside its pipelines.
    modules: modules::Modules,
}

/// The free lists of settled pipelines that something still holds (a channel thread
/// sending their outputs to a host that does not read): they count against
/// `--max-total-pool-bytes` until let go. Its lock is held only inside its methods, which
/// take no other.
#[derive(Default)]
struct Lingering(Mutex<Vec<offhost_engine::PoolsHeld>>);

impl Lingering {
    /// The bytes still held, now; forgets the free lists let go since.
    fn bytes(&self) -> u64 {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        held.retain(|h| h.bytes() > 0);
        held.iter().map(offhost_engine::PoolsHeld::bytes).sum()
    }

    /// Counts what a settled pipeline's free lists still hold (nothing, mostly).
    fn keep(&self, h: offhost_engine::PoolsHeld) {
        if h.bytes() > 0 {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(h);
        }
    }
}

impl Daemon {
    /// A daemon that builds pipelines from `registry` and runs them with `config`, within the
    /// default [`DaemonLimits`]; the pipelines get no file access.
    pub fn new(registry: Registry, config: EngineConfig) -> Arc<Daemon> {
        Self::with_files_and_limits(registry, config, Files::Denied, DaemonLimits::default())
    }

    /// As [`Daemon::new`], with pipelines that open files through `files` (e.g.
    /// [`Files::beneath`] a directory).
    pub fn with_files(registry: Registry, config: EngineConfig, files: Files) -> Arc<Daemon> {
        Self::with_files_and_limits(registry, config, files, DaemonLimits::default())
    }

    /// As [`Daemon::new`], within `limits`.
    pub fn with_limits(
        registry: Registry,
        config: EngineConfig,
        limits: DaemonLimits,
    ) -> Arc<Daemon> {
        Self::with_files_and_limits(registry, config, Files::Denied, limits)
    }

    /// A daemon whose pipelines open files through `files` and are held to `limits`.
    pub fn with_files_and_limits(
        registry: Registry,
        config: EngineConfig,
        files: Files,
        limits: DaemonLimits,
    ) -> Arc<Daemon> {
        // The built-in `status` hook hands its reader heap buffers outside any free list, as
        // fast as it reads: a pipeline from a peer could pass them on to a queue nobody drains
        // and grow it without bound. A daemon's pipelines do without it.
        let mut registry = registry;
        registry.remove_get_hook("status");
        let d = Arc::new(Daemon {
            registry,
            config,
            files,
            limits,
            next: AtomicU64::new(1),
            pipelines: Mutex::new(BTreeMap::new()),
            services: Default::default(),
            names: Names::default(),
            lingering: Lingering::default(),
            keeps: keep::Keeps::default(),
            sessions: AtomicU64::new(1),
            seen: watched::Seen::default(),
            modules: modules::Modules::default(),
        });
        // The warden ends with the daemon (it holds it only while it looks). A daemon
        // whose warden cannot start still serves; its pipelines then run until they end.
        let w = Arc::downgrade(&d);
        let started = std::thread::Builder::new()
            .name("offhost-daemon-warden".into())
            .spawn(move || loop {
                std::thread::sleep(keep::WARDEN_TICK);
                match w.upgrade() {
                    Some(d) => d.watch(),
                    None => return,
                }
            });
        if let Err(e) = started {
            tracing::warn!("the daemon's warden did not start ({e}): orphans and budgets of time and bytes are not watched");
        }
        d
    }

    /// One look of the warden at every running pipeline: stops orphans and pipelines past
    /// their lifetime, ends by force those past a budget (see [`keep`]).
    fn watch(&self) {
        let entries: Vec<(u64, Arc<Mutex<State>>)> = self
            .pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(id, e)| (*id, Arc::clone(e)))
            .collect();
        let mut running = std::collections::HashSet::new();
        for (id, e) in entries {
            let st = e.lock().unwrap_or_else(|e| e.into_inner());
            let State::Running(run) = &*st else { continue };
            if run.is_finished() {
                continue;
            }
            running.insert(id);
            let bytes = match self.limits.pipeline_bytes {
                Some(_) => run.source_bytes(),
                None => 0,
            };
            match self.keeps.due(id, bytes, &self.limits) {
                Some(keep::Action::Stop) => run.stop(),
                Some(keep::Action::Abort(why)) => {
                    tracing::info!("pipeline {id}: ended by force: {why}");
                    run.abort(&why);
                }
                None => {}
            }
        }
        self.keeps.retain(|id| running.contains(&id));
    }

    /// Accepts sessions for ever, a thread per session and per channel under the server's
    /// thread budget ([`Server::threads`]). A failing session is logged, one that finds no
    /// thread is refused; the daemon goes on.
    pub fn serve(self: &Arc<Self>, server: &Server) {
        let d = Arc::clone(self);
        server.serve_each("offhost-daemon-session", move |s, t| {
            Arc::clone(&d).serve_session(s, None, t)
        })
    }

    /// Serves one session, whose first channel `first` (if given) the caller already
    /// accepted (to see whether it is the daemon's or a peer engine's): a thread per channel
    /// under `threads` (a channel that finds none is refused), until the session ends.
    /// The pipelines the session submits (not detached) are orphaned when it ends.
    pub fn serve_session(
        self: Arc<Self>,
        session: Session,
        first: Option<Channel>,
        threads: &Threads,
    ) {
        // Ordering: a unique number is all that is asked of it.
        let sid = self.sessions.fetch_add(1, Ordering::Relaxed);
        if let Some(ch) = first {
            self.spawn_channel(ch, threads, sid);
        }
        loop {
            match session.accept() {
                Ok(ch) => self.spawn_channel(ch, threads, sid),
                Err(e) => {
                    tracing::info!("session ended: {e}");
                    self.keeps.session_ended(sid);
                    self.modules.session_ended(sid);
                    return;
                }
            }
        }
    }

    /// Serves channel `ch` of session `sid` on a thread of `threads`; refused when none is
    /// left.
    fn spawn_channel(self: &Arc<Self>, ch: Channel, threads: &Threads, sid: keep::SessionId) {
        let d = Arc::clone(self);
        let ch = Arc::new(ch);
        let c = Arc::clone(&ch);
        let spawned = threads.spawn("offhost-daemon-channel", move || {
            if let Err(e) = d.channel(&c, sid) {
                tracing::info!("channel {:?}: {e}", c.name());
            }
        });
        if let Err(e) = spawned {
            let _ = ch.refuse(&e.for_peer());
        }
    }

    /// The host's end of `host-in name=NAME` of running pipeline `id` (once per name, as
    /// [`Running::host_input`]).
    pub fn host_input(&self, id: u64, name: &str) -> Option<offhost_engine::HostInput> {
        let entry = self.entry(id).ok()?;
        let mut st = entry.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *st {
            State::Running(run) => run.host_input(name),
            State::Finished(..) => None,
        }
    }

    /// Answers one message of a `control` channel (a JSON request, see the module's table)
    /// with its JSON reply, as the channel does. A pipeline submitted this way belongs to no
    /// session: it runs as a detached one.
    pub fn answer(&self, msg: &[u8]) -> String {
        self.answer_while(msg, &|| false)
    }

    /// As [`answer`](Self::answer), for a client that `gone` says whether it has left: a
    /// `wait` gives up once it has (nobody would read the reply), and its thread is free.
    pub fn answer_while(&self, msg: &[u8], gone: &dyn Fn() -> bool) -> String {
        self.answer_for(msg, gone, None)
    }

    /// As [`answer_while`](Self::answer_while), for session `sid`, which owns what it submits.
    fn answer_for(
        &self,
        msg: &[u8],
        gone: &dyn Fn() -> bool,
        sid: Option<keep::SessionId>,
    ) -> String {
        match serde_json::from_slice::<Request>(msg) {
            Ok(r) => self.request(r, gone, sid),
            Err(e) => Reply::<()>::Refused(Refusal::BadRequest(e).to_string()).to_wire(),
        }
    }

    /// The id of the pipeline `r` names.
    fn resolve(&self, r: &PipelineRef) -> Result<u64, Refusal> {
        match r {
            PipelineRef::Id(id) => Ok(*id),
            PipelineRef::Name(n) => {
                check_name(n)?;
                self.names
                    .get(n)
                    .ok_or_else(|| Refusal::NoPipelineNamed(n.clone()))
            }
        }
    }

    /// `f`'s reply for the pipeline `r` names, or the error that it names none.
    fn with_id<T: Serialize>(
        &self,
        r: &PipelineRef,
        f: impl FnOnce(u64) -> Result<T, Refusal>,
    ) -> String {
        Reply::from(self.resolve(r).and_then(f)).to_wire()
    }

    fn entry(&self, id: u64) -> Result<Arc<Mutex<State>>, Refusal> {
        self.pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned()
            .ok_or(Refusal::NoPipeline(id))
    }

    fn channel(&self, ch: &Channel, sid: keep::SessionId) -> Result<(), LinkError> {
        let name = ch.name().to_string();
        if name == "control" {
            while let Some(msg) = ch.recv()? {
                let reply = self.answer_for(&msg, &|| ch.peer_is_gone(), Some(sid));
                ch.send(reply.as_bytes())?;
            }
            return ch.close();
        }
        if let Some(module) = name.strip_prefix("module/") {
            return self
                .modules
                .receive(ch, sid, module, self.limits.module_bytes);
        }
        let parts: Vec<&str> = name.splitn(3, '/').collect();
        let (dir, id, port) = match parts.as_slice() {
            [d @ ("in" | "out" | "call"), r, port] => (
                *d,
                PipelineRef::parse(r)
                    .ok()
                    .and_then(|r| self.resolve(&r).ok()),
                *port,
            ),
            _ => (name.as_str(), None, ""),
        };
        // A channel this daemon cannot serve is refused, so that its sender's calls fail
        // (an engine-out waiting for credit would otherwise wait for ever).
        let Some(entry) = id.and_then(|id| self.entry(id).ok()) else {
            tracing::info!(
                "channel {name:?}: not control, in/ID/NAME, out/ID/NAME or call/ID/NAME of a pipeline"
            );
            return ch.refuse(&format!(
                "{name}: no such pipeline here (channels are control, in/ID/NAME, out/ID/NAME, call/ID/NAME; ID a pipeline's id or name)"
            ));
        };
        if dir == "call" {
            let service =
                {
                    let mut st = entry.lock().unwrap_or_else(|e| e.into_inner());
                    let running = matches!(&*st, State::Running(run) if !run.is_finished());
                    self.services
                        .get_or_take(id.unwrap_or_default(), port, running, || match &mut *st {
                            State::Running(run) => {
                                take_service_ports(run, port).map(|(i, o)| (i, o, run.stopper()))
                            }
                            _ => Err(Refusal::Ended),
                        })
                };
            return match service {
                Ok(s) => crate::calls::serve::serve(ch, &s),
                Err(why) => ch.refuse(&format!("{name}: {why}")),
            };
        }
        let mut st = entry.lock().unwrap_or_else(|e| e.into_inner());
        let State::Running(run) = &mut *st else {
            return ch.refuse(&format!("{name}: the pipeline has ended"));
        };
        if dir == "in" {
            let Some(mut input) = run.host_input(port) else {
                return ch.refuse(&format!("{name}: no open host-in {port} in the pipeline"));
            };
            drop(st);
            // Messages passed on since host-in was last woken: it is woken once for those
            // that were there at once (up to HOST_IN_WAKE_EVERY), not for each.
            let mut quiet = 0;
            // Each message lands where host-in's pool keeps its data, so that host-in takes
            // the buffer into the pool instead of copying it.
            let front = input.front();
            loop {
                // Into a buffer host-in is done with: no new memory per message.
                let mut m = input.spare();
                let got = match ch.recv_into_at(&mut m, front, Wait::Never) {
                    Err(LinkError::WouldBlock) => {
                        // Nothing more at once: host-in hears of the rest before we wait.
                        if quiet > 0 {
                            input.wake();
                            quiet = 0;
                        }
                        ch.recv_into_at(&mut m, front, Wait::Forever)
                    }
                    got => got,
                };
                match got.map(|got| got.then_some(m)) {
                    Ok(Some(m)) => {
                        if input.send_quiet_at(m, front).is_err() {
                            return ch.refuse(&format!(
                                "{name}: the pipeline's host-in {port} no longer reads"
                            ));
                        }
                        quiet += 1;
                        if quiet == HOST_IN_WAKE_EVERY {
                            input.wake();
                            quiet = 0;
                        }
                    }
                    // The sender closed the channel: the stream is complete.
                    Ok(None) => return Ok(()),
                    // The link broke: the stream is cut, and the pipeline must not take
                    // what it got for all of it.
                    Err(e) => {
                        input.fail(format!("the link bringing it broke: {e}"));
                        return Err(e);
                    }
                }
            }
        } else {
            let Some(output) = run.host_output(port) else {
                return ch.refuse(&format!("{name}: no open host-out {port} in the pipeline"));
            };
            drop(st);
            let max = ch.options().max_message.max(2) as usize;
            // While the pipeline sends nothing, the thread looks whether its host is still
            // there: one that has gone lets go of the output (its branch ends) and the thread.
            let next = || loop {
                match output.recv_timeout(GONE_CHECK) {
                    Ok(b) => return Ok(b),
                    Err(_) if ch.peer_is_gone() => return Err(LinkError::PeerGone),
                    Err(_) => {}
                }
            };
            while let Some(buf) = next()? {
                // On error the output drops: the branch ends.
                if output.whole() {
                    crate::link_task::in_parts(&buf, max - 1, |p| ch.send_parts(p, Duration::MAX))?;
                } else {
                    for part in buf.chunks(max) {
                        ch.send(part)?;
                    }
                }
            }
            ch.close()
        }
    }

    /// The state of pipeline `id`; with `wait`, once it has finished, or an error once
    /// `wait` says the client has gone.
    fn state_of(&self, id: u64, wait: Option<&dyn Fn() -> bool>) -> Result<Status, Refusal> {
        let entry = self.entry(id)?;
        loop {
            let mut st = entry.lock().unwrap_or_else(|e| e.into_inner());
            if let State::Running(run) = &*st {
                if !run.is_finished() {
                    if let Some(gone) = wait {
                        // Wait without the lock so data channels can attach meanwhile, and
                        // answer as soon as the pipeline has finished.
                        let finished = run.watch_finish();
                        drop(st);
                        if gone() {
                            return Err(Refusal::ClientGone);
                        }
                        finished.wait_timeout(WAIT_POLL);
                        continue;
                    }
                    return Ok(Status {
                        id,
                        name: self.names.name_of(id),
                        state: PipelineState::Running,
                        stats: Some(run.stats()),
                        error: None,
                        keep: self.keeps.keep_of(id, &self.limits),
                    });
                }
                self.lingering.keep(settle(&mut st));
            }
            let State::Finished(stats, err) = &*st else {
                unreachable!("finished above")
            };
            return Ok(Status {
                id,
                name: self.names.name_of(id),
                state: match err {
                    Some(_) => PipelineState::Failed,
                    None => PipelineState::Finished,
                },
                stats: stats.clone(),
                error: err.clone(),
                keep: None,
            });
        }
    }

    /// Answers request `r`: its reply's JSON.
    fn request(&self, r: Request, gone: &dyn Fn() -> bool, sid: Option<keep::SessionId>) -> String {
        match r {
            Request::Submit {
                text,
                name,
                detach,
                lifetime_s,
            } => {
                let by = sid.filter(|_| !detach);
                Reply::from(
                    self.lifetime(detach, lifetime_s)
                        .and_then(|l| self.submit(text, name, by, l)),
                )
                .to_wire()
            }
            Request::Status { id } => self.with_id(&id, |id| self.state_of(id, None)),
            Request::Shape { id } => self.with_id(&id, |id| {
                let shape = self.seen.shape(id).ok_or(Refusal::NoPipeline(id))?;
                Ok(ShapeOf {
                    id,
                    shape: (*shape).clone(),
                })
            }),
            Request::Wait { id } => self.with_id(&id, |id| self.state_of(id, Some(gone))),
            Request::Stop { id, force } => self.with_id(&id, |id| {
                let e = self.entry(id)?;
                if let State::Running(run) = &*e.lock().unwrap_or_else(|e| e.into_inner()) {
                    if force {
                        run.abort("stopped with force");
                    } else {
                        run.stop();
                    }
                }
                Ok(Stopped { id })
            }),
            Request::List {} => {
                let ids: Vec<u64> = self
                    .pipelines
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .keys()
                    .copied()
                    .collect();
                // A pipeline forgotten meanwhile (by a submit beyond KEEP_FINISHED) is left out.
                let pipelines = ids
                    .into_iter()
                    .filter_map(|id| self.state_of(id, None).ok())
                    .map(|s| Listed {
                        id: s.id,
                        name: s.name,
                        state: s.state,
                        keep: s.keep,
                    })
                    .collect();
                Reply::Ok(Pipelines { pipelines }).to_wire()
            }
        }
    }

    /// The lifetime of a pipeline submitted with `detach` and `lifetime_s`: `None` for one
    /// that is not detached; else the one asked for, or the daemon's time budget.
    fn lifetime(&self, detach: bool, lifetime_s: Option<f64>) -> Result<Option<Duration>, Refusal> {
        let max = self.limits.pipeline_time;
        let Some(s) = lifetime_s else {
            return Ok(if detach { max } else { None });
        };
        if !detach {
            return Err(Refusal::BadLifetime(
                s,
                "a lifetime is for a detached pipeline",
            ));
        }
        let l = Duration::try_from_secs_f64(s)
            .ok()
            .filter(|l| !l.is_zero())
            .ok_or(Refusal::BadLifetime(
                s,
                "not a number of seconds above zero",
            ))?;
        match max {
            Some(limit) if l > limit => Err(Refusal::LifetimeTooLong { asked_s: s, limit }),
            _ => Ok(Some(l)),
        }
    }

    /// Checks and starts pipeline `text`, named `name` if given, held by session `by` (or
    /// detached, for `lifetime`).
    fn submit(
        &self,
        text: String,
        name: Option<String>,
        by: Option<keep::SessionId>,
        lifetime: Option<Duration>,
    ) -> Result<Submitted, Refusal> {
        if let Some(n) = name.as_deref() {
            check_name(n)?;
        }
        let limits = &self.limits;
        if text.len() > limits.text_bytes {
            return Err(Refusal::TextTooLarge {
                bytes: text.len(),
                limit: limits.text_bytes,
            });
        }
        let blobs = self.modules.of(by);
        let built = Pipeline::parse(&text).and_then(|p| {
            p.build_with_blobs(&self.registry, &self.files, &limits.pipeline, &blobs)
        })?;
        let (ins, outs) = (built.host_inputs(), built.host_outputs());
        // Checked and started under the table's lock: concurrent submits see each other.
        let mut table = self.pipelines.lock().unwrap_or_else(|e| e.into_inner());
        // Services of ended pipelines let go of their ports (and the buffers there),
        // before what ended pipelines still hold is counted.
        self.services.sweep();
        let (running, bytes) = make_room(
            &table,
            &self.lingering,
            built.pool_bytes(),
            limits.pool_bytes,
        );
        if let Some((n, old)) = name.as_deref().and_then(|n| Some((n, self.names.get(n)?))) {
            let holds = table.get(&old).is_some_and(|e| {
                matches!(&*e.lock().unwrap_or_else(|e| e.into_inner()),
                                 State::Running(r) if !r.is_finished())
            });
            if holds {
                return Err(Refusal::NameTaken {
                    name: n.to_string(),
                    by: old,
                });
            }
        }
        if running >= limits.pipelines {
            return Err(Refusal::OverPipelines { running });
        }
        let total = bytes.saturating_add(built.pool_bytes());
        if total > limits.pool_bytes {
            return Err(Refusal::OverPoolBytes {
                asked: built.pool_bytes(),
                total,
                held: self.lingering.bytes(),
                limit: limits.pool_bytes,
            });
        }
        let run = built.try_start(&self.config)?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        // Forget the oldest finished pipelines beyond KEEP_FINISHED.
        let finished: Vec<u64> = table
            .iter()
            .filter(|(_, e)| {
                matches!(
                    *e.lock().unwrap_or_else(|e| e.into_inner()),
                    State::Finished(..)
                )
            })
            .map(|(id, _)| *id)
            .collect();
        for old in finished
            .iter()
            .take(finished.len().saturating_sub(KEEP_FINISHED))
        {
            table.remove(old);
        }
        self.seen.add(id, &run);
        table.insert(id, Arc::new(Mutex::new(State::Running(run))));
        self.seen.retain(|id| table.contains_key(&id), &finished);
        self.keeps.add(id, by, lifetime);
        if let Some(n) = &name {
            self.names.set(n, id);
        }
        self.names.retain(|id| table.contains_key(&id));
        Ok(Submitted {
            id,
            host_in: ins,
            host_out: outs,
            name,
        })
    }
}

/// Turns a pipeline that has finished into its result (statistics and error), letting go of
/// its free lists and of the host outputs nobody took. Returns a handle on the memory of
/// its free lists, which something may still hold (see [`offhost_engine::PoolsHeld`]).
fn settle(st: &mut State) -> offhost_engine::PoolsHeld {
    let State::Running(run) = std::mem::replace(st, State::Finished(None, None)) else {
        return offhost_engine::PoolsHeld::none();
    };
    let held = run.pools_held();
    *st = match run.wait() {
        Ok(s) => State::Finished(Some(s), None),
        Err(RunError::TaskFailed {
            task,
            line,
            message,
            stats,
        }) => State::Finished(
            Some(*stats),
            Some(format!("task '{task}' (line {line}) failed: {message}")),
        ),
        Err(e) => State::Finished(None, Some(e.to_string())),
    };
    held
}

/// The pipelines of `table` that still run, and the free-list bytes that those, the
/// finished ones nobody has asked about yet (a finished pipeline keeps its free lists, and
/// its untaken outputs, until its status is asked) and the settled ones still held
/// (`lingering`, see [`offhost_engine::PoolsHeld`]) hold. Finished pipelines are settled, oldest
/// first, while `need` more bytes would take the total past `limit`, and while there are
/// more than [`KEEP_FINISHED`] of them: so a client that submits and never asks, or never
/// reads, cannot make the daemon hold more than its limit.
fn make_room(
    table: &BTreeMap<u64, Arc<Mutex<State>>>,
    lingering: &Lingering,
    need: u64,
    limit: u64,
) -> (usize, u64) {
    fn lock(e: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
        e.lock().unwrap_or_else(|e| e.into_inner())
    }
    let mut bytes = lingering.bytes();
    let mut running = 0usize;
    let mut unsettled = Vec::new();
    for e in table.values() {
        if let State::Running(r) = &*lock(e) {
            let held = r.pool_bytes();
            bytes = bytes.saturating_add(held);
            match r.is_finished() {
                true => unsettled.push((Arc::clone(e), held)),
                false => running += 1,
            }
        }
    }
    let beyond = unsettled.len().saturating_sub(KEEP_FINISHED);
    for (i, (e, held)) in unsettled.iter().enumerate() {
        if i >= beyond && bytes.saturating_add(need) <= limit {
            break;
        }
        // The entry's lock goes with the statement, before the list's is taken.
        let left = settle(&mut lock(e));
        bytes = bytes.saturating_sub(*held).saturating_add(left.bytes());
        lingering.keep(left);
    }
    (running, bytes)
}

/// A host's connection to an engine daemon.
pub struct Client {
    session: Session,
    control: Channel,
}

impl Client {
    /// Connects to the daemon at `url` (`unix:PATH`, `tcp:HOST:PORT`, ...).
    pub fn connect(url: &str) -> Result<Client, DaemonError> {
        Self::connect_with(url, &LinkOptions::default())
    }

    /// Connects to the daemon at `url` with `options` (a `tls:` URL's certificates).
    pub fn connect_with(url: &str, options: &LinkOptions) -> Result<Client, DaemonError> {
        let session = Session::connect_with(url, options)?;
        let control = session.open("control", ChannelOptions::default())?;
        Ok(Client { session, control })
    }

    /// Sends `req` and reads its reply: the body, or the daemon's refusal.
    fn call<T: serde::de::DeserializeOwned>(&self, req: &Request) -> Result<T, DaemonError> {
        let req = serde_json::to_vec(req).map_err(|e| DaemonError::Protocol(e.to_string()))?;
        self.control.send(&req)?;
        let msg = self
            .control
            .recv()?
            .ok_or_else(|| DaemonError::Protocol("control channel closed".into()))?;
        match Reply::from_wire(&msg).map_err(|e| DaemonError::Protocol(e.to_string()))? {
            Reply::Ok(t) => Ok(t),
            Reply::Refused(e) => Err(DaemonError::Refused(e)),
        }
    }

    /// Submits pipeline text; the daemon checks and starts it.
    pub fn submit(&self, text: &str) -> Result<Submitted, DaemonError> {
        self.submit_as(text, None)
    }

    /// Submits pipeline text under `name` (if given), which then finds it wherever its id
    /// would (see [`crate::names`]); refused while a running pipeline holds the name.
    pub fn submit_as(&self, text: &str, name: Option<&str>) -> Result<Submitted, DaemonError> {
        self.call(&Request::Submit {
            text: text.to_owned(),
            name: name.map(str::to_owned),
            detach: false,
            lifetime_s: None,
        })
    }

    /// Submits pipeline text under `name` (if given), detached: it runs on after this
    /// client has gone, until it ends, is stopped, or `lifetime` passes (`None`: the
    /// daemon's time budget for a pipeline).
    pub fn submit_detached(
        &self,
        text: &str,
        name: Option<&str>,
        lifetime: Option<Duration>,
    ) -> Result<Submitted, DaemonError> {
        self.call(&Request::Submit {
            text: text.to_owned(),
            name: name.map(str::to_owned),
            detach: true,
            lifetime_s: lifetime.map(|l| l.as_secs_f64()),
        })
    }

    /// State (`running`, `finished`, `failed`), statistics and error of pipeline `id` (an
    /// id, or a name it was submitted with).
    pub fn status(&self, id: impl Into<PipelineRef>) -> Result<Status, DaemonError> {
        self.call(&Request::Status { id: id.into() })
    }

    /// Waits for pipeline `id` to finish; the reply is as [`Client::status`].
    pub fn wait(&self, id: impl Into<PipelineRef>) -> Result<Status, DaemonError> {
        self.call(&Request::Wait { id: id.into() })
    }

    /// Stops pipeline `id`'s sources.
    pub fn stop(&self, id: impl Into<PipelineRef>) -> Result<(), DaemonError> {
        self.stop_with(id.into(), false)
    }

    /// Ends pipeline `id` by force: every task fails with "ended by force" (see
    /// [`Running::abort`]), for a pipeline that [`stop`](Self::stop) does not end.
    pub fn abort(&self, id: impl Into<PipelineRef>) -> Result<(), DaemonError> {
        self.stop_with(id.into(), true)
    }

    fn stop_with(&self, id: PipelineRef, force: bool) -> Result<(), DaemonError> {
        self.call::<Stopped>(&Request::Stop { id, force })
            .map(|_| ())
    }

    /// The tasks, queues and free lists of pipeline `id` and how they join.
    pub fn shape(&self, id: impl Into<PipelineRef>) -> Result<offhost_engine::Shape, DaemonError> {
        self.call::<ShapeOf>(&Request::Shape { id: id.into() })
            .map(|s| s.shape)
    }

    /// Sends module `bytes` as `name` (a channel `module/NAME`, see [`modules`]): the
    /// pipelines this client submits after it find it as `wasm module=NAME`.
    pub fn send_module(&self, name: &str, bytes: &[u8]) -> Result<(), DaemonError> {
        let ch = self
            .session
            .open(&format!("module/{name}"), ChannelOptions::default())?;
        let head = serde_json::to_vec(&modules::Header {
            bytes: bytes.len() as u64,
        })
        .map_err(|e| DaemonError::Protocol(e.to_string()))?;
        ch.send(&head)?;
        for chunk in bytes.chunks(256 << 10) {
            ch.send(chunk)?;
        }
        let msg = ch
            .recv()?
            .ok_or_else(|| DaemonError::Protocol(format!("module/{name}: closed unanswered")))?;
        match Reply::<modules::ModuleStored>::from_wire(&msg)
            .map_err(|e| DaemonError::Protocol(e.to_string()))?
        {
            Reply::Ok(_) => Ok(()),
            Reply::Refused(e) => Err(DaemonError::Refused(e)),
        }
    }

    /// Ids, names and states of the daemon's pipelines.
    pub fn list(&self) -> Result<Pipelines, DaemonError> {
        self.call(&Request::List {})
    }

    /// A channel carrying messages into `host-in name=NAME` of pipeline `id` (an id, or a
    /// name it was submitted with).
    pub fn open_input(
        &self,
        id: impl Into<PipelineRef>,
        name: &str,
    ) -> Result<Channel, DaemonError> {
        let id = id.into();
        Ok(self
            .session
            .open(&format!("in/{id}/{name}"), ChannelOptions::default())?)
    }

    /// A channel carrying the buffers of `host-out name=NAME` of pipeline `id`.
    pub fn open_output(
        &self,
        id: impl Into<PipelineRef>,
        name: &str,
    ) -> Result<Channel, DaemonError> {
        let id = id.into();
        Ok(self
            .session
            .open(&format!("out/{id}/{name}"), ChannelOptions::default())?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_tagged_by_op() {
        for (text, want) in [
            (
                r#"{"op":"submit","text":"t"}"#,
                Request::Submit {
                    text: "t".into(),
                    name: None,
                    detach: false,
                    lifetime_s: None,
                },
            ),
            (
                r#"{"op":"submit","text":"t","name":"svc"}"#,
                Request::Submit {
                    text: "t".into(),
                    name: Some("svc".into()),
                    detach: false,
                    lifetime_s: None,
                },
            ),
            (
                r#"{"op":"submit","text":"t","detach":true,"lifetime_s":60.0}"#,
                Request::Submit {
                    text: "t".into(),
                    name: None,
                    detach: true,
                    lifetime_s: Some(60.0),
                },
            ),
            (
                r#"{"op":"status","id":3}"#,
                Request::Status { id: 3.into() },
            ),
            (r#"{"op":"wait","id":3}"#, Request::Wait { id: 3.into() }),
            (
                r#"{"op":"stop","id":3}"#,
                Request::Stop {
                    id: 3.into(),
                    force: false,
                },
            ),
            (
                r#"{"op":"stop","id":"svc","force":true}"#,
                Request::Stop {
                    id: "svc".into(),
                    force: true,
                },
            ),
            (r#"{"op":"list"}"#, Request::List {}),
        ] {
            let r: Request = serde_json::from_str(text).unwrap();
            assert_eq!(r, want);
            assert_eq!(serde_json::to_string(&r).unwrap(), text);
        }
    }

    #[test]
    fn bad_requests_say_what_is_wrong() {
        let d = Daemon::new(Registry::default(), EngineConfig::default());
        for (text, want) in [
            (r#"{"op":"reboot"}"#, "unknown variant `reboot`"),
            (r#"{"op":"status"}"#, "missing field `id`"),
            (r#"{"op":"status","id":true}"#, "did not match any variant"),
            (r#"{"op":"status","id":-1}"#, "did not match any variant"),
            (r#"{"op":"list","id":1,"extra":2}"#, "unknown field"),
            (r#"{"id":1}"#, "missing field `op`"),
            ("not json", "bad request"),
        ] {
            let Ok(Reply::<()>::Refused(e)) =
                Reply::from_wire(d.answer(text.as_bytes()).as_bytes())
            else {
                panic!("{text}: not refused");
            };
            assert!(
                e.starts_with("bad request: ") && e.contains(want),
                "{text}: {e}"
            );
        }
    }
}
