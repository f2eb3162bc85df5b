//! One pipeline over several engines (`offhost submit --engine NAME=URL ...`; `@NAME`
//! placements, see [`crate::placement`]).
//!
//! The parts are submitted sinks first (each part names the pipeline ids of the parts it
//! sends to); a part that is refused stops the parts already running. Then every part is
//! waited for on a session of its own. The job's error is the first engine whose session
//! broke (it died, or was stopped), or else the first part that failed, naming the engine
//! and what failed there: an engine that dies makes the parts it linked to fail too, and
//! those may be heard of first, naming only their own broken links. The other parts end
//! by themselves as their links to it break, and those still running after
//! [`GRACE`] are told to stop; those still running [`AFTER_FAILURE`] later are ended by
//! force, so that no engine keeps a part of a failed job. A part that serves calls from
//! other parts (see [`Plan::serving`]) is told to stop once every other part has finished.

use std::collections::HashMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use offhost_link::LinkOptions;

use super::daemon::{bridge, connect, BridgeError};
use super::{bindings, join, Bridge, JobError};
use crate::daemon::{Client, DaemonError, PipelineState, Status, Submitted};
use crate::placement::{self, Plan};
use offhost_engine::Registry;

/// What `--json` prints for a placed job: its parts.
#[derive(serde::Serialize)]
pub(crate) struct PartsJson<'a> {
    engines: Vec<PartJson<'a>>,
}

/// One part of [`PartsJson`]: where it ran, and its final state (`null`s when not waited for).
#[derive(serde::Serialize)]
struct PartJson<'a> {
    engine: &'a str,
    part: &'a str,
    url: &'a str,
    id: u64,
    state: Option<PipelineState>,
    error: Option<&'a str>,
    stats: Option<&'a offhost_engine::Stats>,
}

impl<'a> PartJson<'a> {
    pub(crate) fn of(p: &'a PartOutcome) -> Self {
        let s = p.state.as_ref();
        PartJson {
            engine: &p.engine,
            part: &p.part,
            url: &p.url,
            id: p.id,
            state: s.map(|s| s.state),
            error: s.and_then(|s| s.error.as_deref()),
            stats: s.and_then(|s| s.stats.as_ref()),
        }
    }
}

impl PartOutcome {
    /// `engine PART (URL): pipeline ID STATE`, as `offhost submit` says it on standard error.
    pub fn line(&self) -> String {
        let state = self.state.as_ref().map_or("unknown", |s| s.state.as_str());
        format!(
            "engine {} ({}): pipeline {} {state}",
            self.part, self.url, self.id
        )
    }
}

impl PlacedOutcome {
    /// The parts as JSON, one object per part (`null`s for a part not waited for), keys
    /// sorted: what `offhost submit --json` prints.
    pub fn json(&self) -> String {
        let engines: Vec<PartJson<'_>> = self.parts.iter().map(PartJson::of).collect();
        crate::daemon::sorted_json(&PartsJson { engines }, true)
    }

    /// What `offhost submit` prints for the job, (standard output, standard error): the
    /// parts' states (on standard error) and their statistics as one table, each row naming
    /// its part; or the JSON, one object per part.
    pub fn printed(&self, json: bool) -> (String, String) {
        if json {
            return (format!("{}\n", self.json()), String::new());
        }
        let states = self.parts.iter().map(|p| p.line() + "\n").collect();
        (self.table(), states)
    }

    /// The parts' statistics as one table, each row naming its part.
    pub fn table(&self) -> String {
        let rows: Vec<(String, offhost_engine::Stats)> = self
            .parts
            .iter()
            .filter_map(|p| {
                let stats = p.state.as_ref()?.stats.clone()?;
                Some((p.part.clone(), stats))
            })
            .collect();
        super::table::render_engines(&rows, self.file_lines)
    }
}

/// How long the other parts get after the first failure to end by themselves (their links
/// to the failed part break, and they fail naming it) before they are told to stop.
pub const GRACE: Duration = Duration::from_millis(500);
/// How long the job then waits for the parts it told to stop, before it ends them by force.
pub const AFTER_FAILURE: Duration = Duration::from_secs(10);

/// `NAME=URL` engines of `--engine` flags, or `None` when `list` is one plain URL.
pub fn named(list: &[String]) -> Result<Option<Vec<(String, String)>>, JobError> {
    let is_named = |s: &str| {
        s.split_once('=').is_some_and(|(n, u)| {
            !n.is_empty()
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
                && u.contains(':')
        })
    };
    if list.len() == 1 && !is_named(&list[0]) {
        return Ok(None);
    }
    let mut v: Vec<(String, String)> = Vec::new();
    for s in list {
        let Some((n, u)) = s.split_once('=').filter(|_| is_named(s)) else {
            return Err(JobError::Binding(format!(
                "--engine {s}: with several engines each is NAME=URL (e.g. recon=tls:host:7460)"
            )));
        };
        if v.iter().any(|(m, _)| m == n) {
            return Err(JobError::Binding(format!(
                "--engine {s}: engine {n} is named twice"
            )));
        }
        v.push((n.to_owned(), u.to_owned()));
    }
    Ok(Some(v))
}

/// What to run where.
#[derive(Debug, Clone)]
pub struct PlacedJob<'a> {
    /// `(NAME, URL)` of each engine; the first takes unplaced tasks.
    pub engines: &'a [(String, String)],
    /// Certificates for `tls:` URLs.
    pub options: &'a LinkOptions,
    /// The file's name, for messages.
    pub path: &'a str,
    /// Its text.
    pub text: &'a str,
    /// `--out NAME=PATH` bindings.
    pub outs: &'a [String],
    /// `--in NAME=PATH` bindings.
    pub ins: &'a [String],
    /// Modules sent to every engine before its part, (NAME, bytes).
    pub modules: &'a [(String, Vec<u8>)],
    /// Host channels served by the caller's own readers and writers.
    pub streams: Option<&'a super::Streams>,
}

/// One part, once submitted.
#[derive(Debug, Clone)]
pub struct PartOutcome {
    /// The part's name: the engine's, or `ENGINE+2`, `ENGINE+3`, ... for the later stages of
    /// an engine that runs several (see [`crate::placement::Plan::order`]).
    pub part: String,
    /// The engine's name.
    pub engine: String,
    /// Its URL.
    pub url: String,
    /// The part's pipeline id there.
    pub id: u64,
    /// Its final state as the daemon gives it (`state`, `stats`, `error`), or `state: lost`
    /// with the `error` that ended the session; none when it was not waited for.
    pub state: Option<Status>,
}

/// How the job went.
#[derive(Debug, Clone)]
pub struct PlacedOutcome {
    /// The parts, in the order they were submitted.
    pub parts: Vec<PartOutcome>,
    /// The first failure, naming the engine and what failed there.
    pub failure: Option<String>,
    /// The file's last task line (later lines in a part's statistics are the split's own).
    pub file_lines: usize,
}

struct Part {
    /// The part's name in the plan (the engine's, or `ENGINE+N` for a later stage).
    part: String,
    engine: String,
    url: String,
    client: Client,
    sub: Submitted,
}

fn stop_all(parts: &[Part]) {
    for p in parts {
        let _ = p.client.stop(p.sub.id);
    }
}

/// Submits the parts of `job` (placed by the tasks of `registry`); `started` hears of each
/// (engine, URL, pipeline id). With `detach` the parts are submitted detached and the job
/// ends there (`Ok` with the parts and no states); otherwise host channels are bridged and
/// every part waited for, and each part belongs to this client (its engine stops it when
/// the client has gone).
pub fn run(
    job: &PlacedJob<'_>,
    registry: &Registry,
    detach: Option<super::Detach>,
    mut started: impl FnMut(&str, &str, u64),
) -> Result<PlacedOutcome, JobError> {
    let path = job.path;
    let spec = offhost_engine::lang::parse(job.text).map_err(|source| JobError::Pipeline {
        path: path.into(),
        source,
    })?;
    let names: Vec<String> = job.engines.iter().map(|(n, _)| n.clone()).collect();
    let url_of: HashMap<&str, &str> = job
        .engines
        .iter()
        .map(|(n, u)| (n.as_str(), u.as_str()))
        .collect();
    let placed = |source| JobError::Placement {
        path: path.into(),
        source,
    };
    let plan = placement::plan(&spec, &names, registry).map_err(placed)?;
    let mut targets: HashMap<String, (String, u64)> = HashMap::new();
    let mut parts: Vec<Part> = Vec::new();
    for part in plan.order() {
        let e = plan.engine_of(part);
        let url = url_of[e];
        let text = plan.text(part, &targets).map_err(placed)?;
        let submit = |c: &Client| {
            for (name, bytes) in job.modules {
                c.send_module(name, bytes)?;
            }
            match detach {
                Some(d) => c.submit_detached(&text, None, d.lifetime),
                None => c.submit(&text),
            }
        };
        let submitted = connect(url, job.options).and_then(|c| match submit(&c) {
            Ok(sub) => Ok((c, sub)),
            Err(err) => Err(JobError::Failed(format!(
                "{path}: engine {e} ({url}) refused its part: {err}"
            ))),
        });
        match submitted {
            Ok((client, sub)) => {
                started(e, url, sub.id);
                targets.insert(part.clone(), (url.to_owned(), sub.id));
                parts.push(Part {
                    part: part.clone(),
                    engine: e.to_owned(),
                    url: url.to_owned(),
                    client,
                    sub,
                });
            }
            Err(err) => {
                stop_all(&parts);
                return Err(err);
            }
        }
    }
    let outcome = |parts: &[Part], states: &mut HashMap<String, Status>, failure| PlacedOutcome {
        parts: parts
            .iter()
            .map(|p| PartOutcome {
                part: p.part.clone(),
                engine: p.engine.clone(),
                url: p.url.clone(),
                id: p.sub.id,
                state: states.remove(&p.part),
            })
            .collect(),
        failure,
        file_lines: plan.file_lines(),
    };
    if detach.is_some() {
        return Ok(outcome(&parts, &mut HashMap::new(), None));
    }
    let bridges = match bridge_all(&parts, &plan, job) {
        Ok(b) => b,
        Err(e) => {
            stop_all(&parts);
            return Err(e);
        }
    };
    let (states, failure) = wait_all(&parts, &plan, job.options);
    if failure.is_none() {
        join(bridges)?;
    }
    let mut states = states;
    Ok(outcome(
        &parts,
        &mut states,
        failure.map(|f| format!("{path}: {f}")),
    ))
}

/// Waits for every part; returns their final states and the job's failure: the first engine
/// lost, or else the first part that failed.
fn wait_all(
    parts: &[Part],
    plan: &Plan,
    options: &LinkOptions,
) -> (HashMap<String, Status>, Option<String>) {
    let (tx, rx) = mpsc::channel::<(usize, Result<Status, DaemonError>)>();
    for (i, p) in parts.iter().enumerate() {
        let (tx, url, id) = (tx.clone(), p.url.clone(), p.sub.id);
        let options = options.clone();
        std::thread::spawn(move || {
            let r = Client::connect_with(&url, &options).and_then(|c| c.wait(id));
            let _ = tx.send((i, r));
        });
    }
    drop(tx);
    let mut states: HashMap<String, Status> = HashMap::new();
    let mut failure: Option<String> = None;
    let mut lost: Option<String> = None;
    // After a failure: when to tell the others to stop, and when to give up on them.
    let (mut stop_at, mut give_up): (Option<Instant>, Option<Instant>) = (None, None);
    let serves = |p: &Part| plan.serving().contains_key(&p.part);
    let mut services_stopped = false;
    while states.len() < parts.len() {
        // Services run until stopped: once their callers (every other part) are done.
        if !services_stopped
            && parts
                .iter()
                .all(|p| serves(p) || states.contains_key(&p.part))
        {
            services_stopped = true;
            for p in parts.iter().filter(|p| serves(p)) {
                let _ = p.client.stop(p.sub.id);
            }
        }
        let next = match stop_at.or(give_up) {
            Some(d) => rx.recv_timeout(d.saturating_duration_since(Instant::now())),
            None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        let (i, r) = match next {
            Ok(x) => x,
            Err(mpsc::RecvTimeoutError::Timeout) if stop_at.is_some() => {
                stop_all(parts);
                stop_at = None;
                continue;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                // A part that a stop did not end (it waits for something that never
                // comes): ended by force, and not waited for.
                for p in parts.iter().filter(|p| !states.contains_key(&p.part)) {
                    let _ = p.client.abort(p.sub.id);
                }
                break;
            }
            Err(_) => break,
        };
        let (engine, url) = (&parts[i].engine, &parts[i].url);
        let v = r.unwrap_or_else(|e| {
            let e = format!(
                "engine {engine} ({url}) is gone ({e}) while running {}",
                plan.tasks_on(&parts[i].part)
            );
            if lost.is_none() {
                lost = Some(e.clone());
            }
            Status {
                id: parts[i].sub.id,
                name: None,
                state: PipelineState::Lost,
                stats: None,
                error: Some(e),
                keep: None,
            }
        });
        if failure.is_none() {
            if let Some(e) = v.error.as_deref() {
                failure = Some(if e.contains(&format!("engine {engine}")) {
                    e.to_owned()
                } else {
                    format!("engine {engine} ({url}): {e}")
                });
                stop_at = Some(Instant::now() + GRACE);
                give_up = Some(Instant::now() + GRACE + AFTER_FAILURE);
            }
        }
        states.insert(parts[i].part.clone(), v);
    }
    (states, lost.or(failure))
}

/// Bridges the user's host channels of every part (not the ones between engines) to files.
fn bridge_all(parts: &[Part], plan: &Plan, job: &PlacedJob<'_>) -> Result<Vec<Bridge>, JobError> {
    let generated: Vec<&str> = plan
        .cross_queues()
        .iter()
        .map(|c| c.channel.as_str())
        .collect();
    let mut owner: HashMap<String, usize> = HashMap::new();
    let (mut all_out, mut all_in) = (Vec::new(), Vec::new());
    for (i, p) in parts.iter().enumerate() {
        // A service's host ports are its callers'.
        let served = plan.serving().get(&p.part);
        let users = |n: &&String| !served.is_some_and(|s| s.contains(n));
        let ins = p
            .sub
            .host_in
            .iter()
            .filter(|n| !generated.contains(&n.as_str()))
            .filter(users);
        let outs = p.sub.host_out.iter().filter(users);
        for n in outs.clone().chain(ins.clone()) {
            if owner.insert(n.clone(), i).is_some() {
                return Err(JobError::Binding(format!(
                    "host channel {n} is on two engines: give the channels distinct names"
                )));
            }
        }
        all_out.extend(outs.cloned());
        all_in.extend(ins.cloned());
    }
    let b = bindings(job.outs, job.ins, &all_out, &all_in)?;
    let mut bridges = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        let mine = super::Bindings {
            outputs: b
                .outputs
                .iter()
                .filter(|(n, _)| owner[n] == i)
                .cloned()
                .collect(),
            inputs: b
                .inputs
                .iter()
                .filter(|(n, _)| owner[n] == i)
                .cloned()
                .collect(),
        };
        bridges.extend(
            bridge(&p.client, &p.sub, &mine, job.streams).map_err(|e| match e {
                BridgeError::Job(j) => j,
                BridgeError::Daemon(source) => JobError::Engine {
                    engine: format!("{} ({})", p.engine, p.url),
                    source,
                },
            })?,
        );
    }
    Ok(bridges)
}
