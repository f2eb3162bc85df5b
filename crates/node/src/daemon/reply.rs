//! The daemon's replies on its `control` channel, as types shared by the daemon, its
//! [`Client`](super::Client) and everything that reads what a client gets (the commands,
//! the bindings, the benches).
//!
//! On the wire a reply is one JSON object: `"ok": true` and the fields of its body
//! ([`Submitted`], [`Status`], [`Stopped`], [`Pipelines`]), or `"ok": false` and `"error"`
//! ([`Reply`]). [`Reply::to_wire`] writes it with its keys in order, as the daemon always
//! has; [`Reply::from_wire`] reads it.

use offhost_engine::Stats;
use serde::{Deserialize, Serialize, Serializer};

/// What a pipeline is doing, as a reply names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum PipelineState {
    /// Its tasks run.
    Running,
    /// Every task has finished, none failed.
    Finished,
    /// A task failed (or the pipeline could not end cleanly); the status says why.
    Failed,
    /// The session with the engine running it ended before its state came (a placed
    /// job's part; a daemon never replies this).
    Lost,
}

impl PipelineState {
    /// The name a reply gives it: `running`, `finished`, `failed` or `lost`.
    pub fn as_str(self) -> &'static str {
        match self {
            PipelineState::Running => "running",
            PipelineState::Finished => "finished",
            PipelineState::Failed => "failed",
            PipelineState::Lost => "lost",
        }
    }
}

impl std::fmt::Display for PipelineState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for PipelineState {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for PipelineState {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A pipeline accepted by a daemon: the reply to `submit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Submitted {
    /// Its id on the daemon.
    pub id: u64,
    /// Its `host-in` channel names.
    pub host_in: Vec<String>,
    /// Its `host-out` channel names.
    pub host_out: Vec<String>,
    /// The name it was submitted with, if any (`null` on the wire when none).
    #[serde(default)]
    pub name: Option<String>,
}

/// State, statistics and error of a pipeline: the reply to `status` and `wait`.
///
/// On the wire `name` and `stats` are `null` when absent; `error` is left out while the
/// pipeline runs and is `null` once it has finished without one.
#[derive(Debug, Clone, Deserialize)]
pub struct Status {
    /// Its id on the daemon.
    pub id: u64,
    /// The name it was submitted with, if any.
    #[serde(default)]
    pub name: Option<String>,
    /// What it is doing.
    pub state: PipelineState,
    /// Its statistics, now or at its end (none when it ended without any).
    #[serde(default)]
    pub stats: Option<Stats>,
    /// Why it failed, once it has.
    #[serde(default)]
    pub error: Option<String>,
    /// Who keeps it running and when the daemon stops it; only while it runs.
    #[serde(default)]
    pub keep: Option<super::Keep>,
}

impl Status {
    /// Whether it has ended (any state but [`PipelineState::Running`]).
    pub fn is_done(&self) -> bool {
        self.state != PipelineState::Running
    }
}

impl Serialize for Status {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        /// The fields as the daemon has always written them.
        #[derive(Serialize)]
        struct Wire<'a> {
            #[serde(skip_serializing_if = "Option::is_none")]
            error: Option<Option<&'a str>>,
            id: u64,
            name: &'a Option<String>,
            state: PipelineState,
            stats: &'a Option<Stats>,
            #[serde(skip_serializing_if = "Option::is_none")]
            keep: &'a Option<super::Keep>,
        }
        Wire {
            error: self.is_done().then_some(self.error.as_deref()),
            id: self.id,
            keep: &self.keep,
            name: &self.name,
            state: self.state,
            stats: &self.stats,
        }
        .serialize(s)
    }
}

impl std::fmt::Display for Status {
    /// Its JSON, as on the wire (less `ok`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&sorted_json(self, false))
    }
}

/// The reply to `stop`: the pipeline whose sources were stopped (or that was ended by
/// force).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stopped {
    /// Its id on the daemon.
    pub id: u64,
}

/// The reply to `shape`: a pipeline's tasks, queues and free lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShapeOf {
    /// Its id on the daemon.
    pub id: u64,
    /// Its shape.
    pub shape: offhost_engine::Shape,
}

/// One pipeline of a [`Pipelines`] list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Listed {
    /// Its id on the daemon.
    pub id: u64,
    /// Who keeps it running and when the daemon stops it; only while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<super::Keep>,
    /// The name it was submitted with, if any (`null` on the wire when none).
    #[serde(default)]
    pub name: Option<String>,
    /// What it is doing.
    pub state: PipelineState,
}

/// The reply to `list`: the pipelines the daemon runs or remembers, by id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pipelines {
    /// The pipelines.
    pub pipelines: Vec<Listed>,
}

impl std::fmt::Display for Pipelines {
    /// Its JSON, as on the wire (less `ok`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&sorted_json(self, false))
    }
}

/// A reply as it goes on the wire: `{"ok":true,...}` with the body's fields, or
/// `{"ok":false,"error":"..."}`.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply<T> {
    /// The request was done; its answer.
    Ok(T),
    /// The request was refused; why.
    Refused(String),
}

impl<T, E: std::fmt::Display> From<Result<T, E>> for Reply<T> {
    /// The answer, or a refusal whose `error` is the error's text.
    fn from(r: Result<T, E>) -> Self {
        match r {
            Ok(t) => Reply::Ok(t),
            Err(e) => Reply::Refused(e.to_string()),
        }
    }
}

impl<T: Serialize> Serialize for Reply<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Done<'a, T> {
            ok: bool,
            #[serde(flatten)]
            body: &'a T,
        }
        #[derive(Serialize)]
        struct Refused<'a> {
            error: &'a str,
            ok: bool,
        }
        match self {
            Reply::Ok(body) => Done { ok: true, body }.serialize(s),
            Reply::Refused(error) => Refused { error, ok: false }.serialize(s),
        }
    }
}

/// Why a reply could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadReply(#[from] serde_json::Error);

impl<T: Serialize> Reply<T> {
    /// The reply's JSON, its keys (and those of everything in it) in order, as the daemon
    /// has always written it.
    pub fn to_wire(&self) -> String {
        sorted_json(self, false)
    }
}

impl<T: serde::de::DeserializeOwned> Reply<T> {
    /// Reads a reply's JSON: a refusal when `ok` is not `true` (its `error`, or "refused"),
    /// else the body.
    pub fn from_wire(msg: &[u8]) -> Result<Reply<T>, BadReply> {
        #[derive(Deserialize)]
        struct Head {
            #[serde(default)]
            ok: bool,
            #[serde(default)]
            error: Option<String>,
        }
        let head: Head = serde_json::from_slice(msg)?;
        if !head.ok {
            return Ok(Reply::Refused(
                head.error.unwrap_or_else(|| "refused".into()),
            ));
        }
        Ok(Reply::Ok(serde_json::from_slice(msg)?))
    }
}

/// `t` as JSON (indented with `pretty`) with the keys of every object in order: through
/// a [`serde_json::Value`], whose objects keep their keys sorted, so that what the daemon and
/// the commands write stays byte for byte what they wrote when they built such values.
pub fn sorted_json<T: Serialize + ?Sized>(t: &T, pretty: bool) -> String {
    let v = serde_json::to_value(t).unwrap_or(serde_json::Value::Null);
    if pretty {
        serde_json::to_string_pretty(&v).unwrap_or_default()
    } else {
        v.to_string()
    }
}
