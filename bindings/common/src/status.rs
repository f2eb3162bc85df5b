//! A pipeline's status as the bindings give it: the daemon's [`Status`](DaemonStatus)
//! (`state`, `stats`, `error`), with the pipeline's `id` there (none on the embedded engine).

use offhost_engine::Stats;
use offhost_node::daemon::{sorted_json, PipelineState, Status as DaemonStatus};
use serde::{Serialize, Serializer};
use serde_json::Value;

/// State, statistics and error of a pipeline, on the embedded engine or a daemon.
///
/// As JSON: `{"error", "id", "state", "stats"}` (`null`s where absent), and `"name"` for a
/// daemon's pipeline (`null` when it was submitted without one).
#[derive(Debug, Clone)]
pub struct Status {
    /// Its id on the daemon; none on the embedded engine.
    pub id: Option<u64>,
    /// The name it was submitted under on the daemon, if any.
    pub name: Option<String>,
    /// What it is doing.
    pub state: PipelineState,
    /// Its statistics, now or at its end (none when it ended without any).
    pub stats: Option<Stats>,
    /// Why it failed, once it has.
    pub error: Option<String>,
    /// On a daemon, while it runs: who keeps it running (its submitter, or nobody when it
    /// was submitted detached) and when the engine stops it.
    pub keep: Option<offhost_node::daemon::Keep>,
}

impl Status {
    /// As JSON (keys in order), for the bindings to hand on.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

impl From<DaemonStatus> for Status {
    fn from(s: DaemonStatus) -> Self {
        Status {
            id: Some(s.id),
            name: s.name,
            state: s.state,
            stats: s.stats,
            error: s.error,
            keep: s.keep,
        }
    }
}

impl Serialize for Status {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        /// The fields as the bindings have always given them.
        #[derive(Serialize)]
        struct Json<'a> {
            error: Option<&'a str>,
            id: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            keep: Option<&'a offhost_node::daemon::Keep>,
            #[serde(skip_serializing_if = "Option::is_none")]
            name: Option<Option<&'a str>>,
            state: PipelineState,
            stats: Option<&'a Stats>,
        }
        Json {
            error: self.error.as_deref(),
            id: self.id,
            keep: self.keep.as_ref(),
            name: self.id.map(|_| self.name.as_deref()),
            state: self.state,
            stats: self.stats.as_ref(),
        }
        .serialize(s)
    }
}

impl std::fmt::Display for Status {
    /// Its JSON, keys in order.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&sorted_json(self, false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_what_the_bindings_gave_before() {
        let local = Status {
            id: None,
            name: None,
            state: PipelineState::Failed,
            stats: None,
            error: Some("no".into()),
            keep: None,
        };
        // Built before as json!({"id": null, "state", "stats", "error"}).
        assert_eq!(
            local.to_string(),
            r#"{"error":"no","id":null,"state":"failed","stats":null}"#
        );
        // A daemon's status less `ok`, with `error` always there.
        let remote = Status::from(DaemonStatus {
            id: 4,
            name: None,
            state: PipelineState::Running,
            stats: None,
            error: None,
            keep: None,
        });
        assert_eq!(
            remote.to_string(),
            r#"{"error":null,"id":4,"name":null,"state":"running","stats":null}"#
        );
        assert_eq!(remote.to_json()["name"], Value::Null);
    }
}
