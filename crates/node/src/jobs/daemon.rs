//! A pipeline file submitted to one engine daemon (`offhost submit --engine URL`), its host
//! channels bridged to files over the daemon's data channels.

use offhost_link::{Channel, LinkOptions};

use super::{bindings, join, pump_in, pump_out, Bindings, Bridge, JobError};
use crate::daemon::{Client, Status, Submitted};

/// What to submit where.
#[derive(Debug, Clone)]
pub struct DaemonJob<'a> {
    /// The daemon's URL.
    pub url: &'a str,
    /// Certificates for a `tls:` URL.
    pub options: &'a LinkOptions,
    /// The file's name, for messages.
    pub path: &'a str,
    /// Its text.
    pub text: &'a str,
    /// `--out NAME=PATH` bindings.
    pub outs: &'a [String],
    /// `--in NAME=PATH` bindings.
    pub ins: &'a [String],
    /// The name to submit it under (`--name`), if any.
    pub name: Option<&'a str>,
    /// Modules sent before the pipeline, (NAME, bytes): its `wasm module=NAME` tasks find
    /// them ([`Client::send_module`]).
    pub modules: &'a [(String, Vec<u8>)],
}

/// Connects to the daemon at `url`.
pub fn connect(url: &str, options: &LinkOptions) -> Result<Client, JobError> {
    Client::connect_with(url, options).map_err(|source| JobError::Connect {
        url: url.to_owned(),
        source,
    })
}

/// Submits the job; `started` hears of its pipeline id. With `detach` that is all (`None`):
/// it is submitted detached, and runs on after this client has gone. Otherwise the host
/// channels are bridged, and the daemon's final state of the pipeline (`state`, `stats`, and
/// `error` if it failed) is returned once it has finished; the pipeline belongs to this
/// client, and is stopped when it goes.
pub fn run(
    job: &DaemonJob<'_>,
    detach: Option<super::Detach>,
    started: impl FnOnce(u64),
) -> Result<Option<Status>, JobError> {
    let engine = |source| JobError::Engine {
        engine: job.url.to_owned(),
        source,
    };
    let client = connect(job.url, job.options)?;
    for (name, bytes) in job.modules {
        client.send_module(name, bytes).map_err(|e| match e {
            crate::daemon::DaemonError::Refused(m) => {
                JobError::Failed(format!("{}: module {name}: {m}", job.path))
            }
            e => engine(e),
        })?;
    }
    let sub = match detach {
        Some(d) => client.submit_detached(job.text, job.name, d.lifetime),
        None => client.submit_as(job.text, job.name),
    };
    let sub = sub.map_err(|e| match e {
        crate::daemon::DaemonError::Refused(m) => JobError::Failed(format!("{}: {m}", job.path)),
        e => engine(e),
    })?;
    started(sub.id);
    if detach.is_some() {
        return Ok(None);
    }
    let b = bindings(job.outs, job.ins, &sub.host_out, &sub.host_in)?;
    let bridges = bridge(&client, &sub, &b, None).map_err(|e| match e {
        BridgeError::Job(j) => j,
        BridgeError::Daemon(d) => engine(d),
    })?;
    join(bridges)?;
    client.wait(sub.id).map(Some).map_err(engine)
}

/// Why bridging failed.
pub(crate) enum BridgeError {
    /// A file.
    Job(JobError),
    /// The daemon refused a channel.
    Daemon(crate::daemon::DaemonError),
}

impl From<JobError> for BridgeError {
    fn from(e: JobError) -> Self {
        BridgeError::Job(e)
    }
}

impl From<crate::daemon::DaemonError> for BridgeError {
    fn from(e: crate::daemon::DaemonError) -> Self {
        BridgeError::Daemon(e)
    }
}

/// Opens the data channels of `b` on pipeline `sub` and bridges them to their files.
pub(crate) fn bridge(
    client: &Client,
    sub: &Submitted,
    b: &Bindings,
    streams: Option<&super::Streams>,
) -> Result<Vec<Bridge>, BridgeError> {
    let mut bridges = Vec::new();
    for (n, p) in &b.outputs {
        let w = super::streams::create_out(streams, n, p)?;
        let ch: Channel = client.open_output(sub.id, n)?;
        bridges.push(pump_out(p.clone(), w, move || {
            ch.recv()
                .map_err(|e| JobError::Failed(format!("host-out {}: {e}", ch.name())))
        }));
    }
    for (n, p) in &b.inputs {
        if let Some(fed) = super::streams::take_routed(streams, n) {
            fed(sub.id);
            continue;
        }
        let r = super::streams::open_in(streams, n, p)?;
        let ch = std::sync::Arc::new(client.open_input(sub.id, n)?);
        let c = std::sync::Arc::clone(&ch);
        pump_in(
            p.clone(),
            r,
            move |buf| ch.send(buf).is_ok(),
            move || {
                let _ = c.close();
            },
        );
    }
    Ok(bridges)
}

/// What `offhost submit --status | --stop | --list` asks one engine.
#[derive(Debug, Clone)]
pub enum Query {
    /// A pipeline's state and statistics.
    Status(crate::names::PipelineRef),
    /// Stop a pipeline's sources, or with `force` end it by force.
    Stop {
        /// The pipeline.
        id: crate::names::PipelineRef,
        /// End every task now.
        force: bool,
    },
    /// The engine's pipelines.
    List,
}

/// `v` as `offhost submit` prints it: as a table (`text`), or as JSON (keys sorted, `"ok":
/// true`) with `json`.
fn print<T: serde::Serialize>(v: &T, json: bool, text: fn(&T) -> String) -> String {
    match json {
        true => format!(
            "{}\n",
            crate::daemon::sorted_json(&crate::daemon::Reply::Ok(v), true)
        ),
        false => text(v),
    }
}

/// A pipeline's status as `offhost submit` prints it (see [`query`]).
pub fn status_text(s: &Status, json: bool) -> String {
    print(s, json, super::table::render_status)
}

/// Asks the daemon at `url` `q`; returns what to print, (standard output, standard error):
/// the reply as a table, or as JSON (keys sorted, `"ok": true`) with `json`.
pub fn query(
    url: &str,
    options: &LinkOptions,
    q: &Query,
    json: bool,
) -> Result<(String, String), JobError> {
    let client = connect(url, options)?;
    let failed = |source| JobError::Engine {
        engine: url.to_owned(),
        source,
    };
    Ok(match q {
        Query::Status(id) => {
            let s = client.status(id.clone()).map_err(failed)?;
            (status_text(&s, json), String::new())
        }
        Query::Stop { id, force: true } => {
            client.abort(id.clone()).map_err(failed)?;
            (String::new(), format!("pipeline {id}: ending by force\n"))
        }
        Query::Stop { id, force: false } => {
            client.stop(id.clone()).map_err(failed)?;
            (String::new(), format!("pipeline {id}: stopping\n"))
        }
        Query::List => {
            let l = client.list().map_err(failed)?;
            (print(&l, json, super::table::render_list), String::new())
        }
    })
}
