//! Who keeps a daemon's pipeline running, and for how long.
//!
//! A pipeline belongs to the session that submitted it: when that session ends (its host
//! exited, was killed, or went silent past its peer deadline) the pipeline is *orphaned*, and
//! after [`DaemonLimits::orphan_grace`] the daemon stops it. One submitted *detached* outlives
//! its session, for the lifetime it was given (at most [`DaemonLimits::pipeline_time`]). Every
//! pipeline is held to its budgets of time and of bytes entering it
//! ([`DaemonLimits::pipeline_time`], [`DaemonLimits::pipeline_bytes`]): past one it is ended by
//! force, failing with an error that names the limit.
//!
//! A pipeline told to stop that has not ended [`AFTER_STOP`] later is ended by force, so a
//! task that waits for something that never comes cannot keep it. The daemon's warden thread
//! looks at every running pipeline each [`WARDEN_TICK`].
//!
//! The table's lock is a leaf: nothing else is locked while it is held.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use offhost_units::{Limit, OverLimit};
use serde::{Deserialize, Serialize};

use crate::DaemonLimits;

/// How often the warden looks at the running pipelines.
pub const WARDEN_TICK: Duration = Duration::from_millis(100);
/// How long a pipeline the daemon told to stop may take to end before it is ended by force.
pub const AFTER_STOP: Duration = Duration::from_secs(10);

/// A session of the daemon, by number.
pub(crate) type SessionId = u64;

/// Who keeps a running pipeline alive (the `keep` of its status).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum KeptBy {
    /// The session that submitted it: it stops once that session has ended.
    Submitter,
    /// Nobody: it was submitted detached, and runs until it ends, is stopped, or its
    /// lifetime passes.
    Detached,
    /// Its submitter has gone: it is stopped once the grace period passes.
    Orphaned,
}

impl KeptBy {
    /// `submitter`, `detached` or `orphaned`.
    pub fn as_str(self) -> &'static str {
        match self {
            KeptBy::Submitter => "submitter",
            KeptBy::Detached => "detached",
            KeptBy::Orphaned => "orphaned",
        }
    }
}

/// Who keeps a running pipeline alive, and when the daemon stops it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Keep {
    /// Who keeps it.
    pub by: KeptBy,
    /// Seconds until the daemon stops it (its lifetime, an orphan's grace, or its time
    /// budget, whichever comes first); `None`: not before it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stops_in_s: Option<f64>,
}

#[derive(Debug, Clone, Copy)]
enum Hold {
    Session(SessionId),
    Detached,
    Orphaned(Instant),
}

#[derive(Debug)]
struct Watch {
    hold: Hold,
    started: Instant,
    /// When a detached pipeline's lifetime ends.
    lifetime_ends: Option<Instant>,
    /// When the daemon told it to stop.
    stopped: Option<Instant>,
    /// The daemon ended it by force.
    forced: bool,
    /// Why the daemon stopped it, for the force that may follow.
    why: String,
}

/// What the warden does to a pipeline now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Stop its sources, so that it ends in order.
    Stop,
    /// End it by force, failing with this.
    Abort(String),
}

/// The daemon's table of who keeps each running pipeline.
#[derive(Debug, Default)]
pub(crate) struct Keeps(Mutex<HashMap<u64, Watch>>);

impl Keeps {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Watch>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Pipeline `id`, just started, held by session `by` (`None`: detached, for `lifetime`).
    pub(crate) fn add(&self, id: u64, by: Option<SessionId>, lifetime: Option<Duration>) {
        let now = Instant::now();
        self.table().insert(
            id,
            Watch {
                hold: by.map_or(Hold::Detached, Hold::Session),
                started: now,
                lifetime_ends: lifetime.and_then(|l| now.checked_add(l)),
                stopped: None,
                forced: false,
                why: String::new(),
            },
        );
    }

    /// Session `sid` has ended: the pipelines it held are orphans from now.
    pub(crate) fn session_ended(&self, sid: SessionId) {
        let now = Instant::now();
        for w in self.table().values_mut() {
            if matches!(w.hold, Hold::Session(s) if s == sid) {
                w.hold = Hold::Orphaned(now);
            }
        }
    }

    /// Forgets pipelines that are not running any more.
    pub(crate) fn retain(&self, running: impl Fn(u64) -> bool) {
        self.table().retain(|id, _| running(*id));
    }

    /// Who keeps pipeline `id`, and when the daemon stops it; `None` if it is not watched.
    pub(crate) fn keep_of(&self, id: u64, limits: &DaemonLimits) -> Option<Keep> {
        let now = Instant::now();
        let t = self.table();
        let w = t.get(&id)?;
        let by = match w.hold {
            Hold::Session(_) => KeptBy::Submitter,
            Hold::Detached => KeptBy::Detached,
            Hold::Orphaned(_) => KeptBy::Orphaned,
        };
        let ends = [
            w.lifetime_ends,
            match w.hold {
                Hold::Orphaned(t) => t.checked_add(limits.orphan_grace),
                _ => None,
            },
            limits.pipeline_time.and_then(|d| w.started.checked_add(d)),
        ]
        .into_iter()
        .flatten()
        .min();
        Some(Keep {
            by,
            stops_in_s: ends.map(|e| e.saturating_duration_since(now).as_secs_f64()),
        })
    }

    /// What to do to pipeline `id` now, `source_bytes` having entered it: nothing, stop it,
    /// or end it by force. A stop is asked for once; the force follows [`AFTER_STOP`] later.
    pub(crate) fn due(&self, id: u64, source_bytes: u64, limits: &DaemonLimits) -> Option<Action> {
        let now = Instant::now();
        let mut t = self.table();
        let w = t.get_mut(&id)?;
        if w.forced {
            return None;
        }
        if let Some(stopped) = w.stopped {
            return (now.saturating_duration_since(stopped) >= AFTER_STOP).then(|| {
                w.forced = true;
                Action::Abort(format!(
                    "{}, and it did not end within {} s of being stopped",
                    w.why,
                    AFTER_STOP.as_secs()
                ))
            });
        }
        if let Some(max) = limits.pipeline_bytes {
            if source_bytes > max {
                w.forced = true;
                let o = OverLimit::new(Limit::MaxPipelineBytes, max).asked(source_bytes);
                return Some(Action::Abort(format!(
                    "{source_bytes} bytes entered it from its sources, {o} {}",
                    o.for_peer()
                )));
            }
        }
        if let Some(max) = limits.pipeline_time {
            if now.saturating_duration_since(w.started) >= max {
                w.forced = true;
                let o = OverLimit::new(Limit::MaxPipelineTime, max.as_millis());
                return Some(Action::Abort(format!(
                    "it ran for {:.1} s, {o} {}",
                    max.as_secs_f64(),
                    o.for_peer()
                )));
            }
        }
        let why = match w.hold {
            Hold::Orphaned(t) if now.saturating_duration_since(t) >= limits.orphan_grace => {
                format!(
                    "its submitter left {:.1} s ago (a pipeline that should outlive its submitter is submitted detached)",
                    now.saturating_duration_since(t).as_secs_f64()
                )
            }
            _ if w.lifetime_ends.is_some_and(|e| now >= e) => {
                "its lifetime as a detached pipeline has passed".to_string()
            }
            _ => return None,
        };
        tracing::info!("pipeline {id}: stopped, as {why}");
        w.stopped = Some(now);
        w.why = why;
        Some(Action::Stop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> DaemonLimits {
        DaemonLimits {
            orphan_grace: Duration::ZERO,
            pipeline_time: Some(Duration::from_secs(3600)),
            pipeline_bytes: Some(1000),
            ..DaemonLimits::default()
        }
    }

    #[test]
    fn an_orphan_is_stopped_once_then_ended_by_force_only_after_the_grace() {
        let k = Keeps::default();
        k.add(1, Some(7), None);
        k.add(2, Some(8), None);
        assert_eq!(k.due(1, 0, &limits()), None);
        assert_eq!(k.keep_of(1, &limits()).unwrap().by, KeptBy::Submitter);
        k.session_ended(7);
        assert_eq!(k.keep_of(1, &limits()).unwrap().by, KeptBy::Orphaned);
        assert_eq!(k.due(1, 0, &limits()), Some(Action::Stop));
        // Told once; the force waits for AFTER_STOP.
        assert_eq!(k.due(1, 0, &limits()), None);
        // The other session's pipeline is untouched.
        assert_eq!(k.due(2, 0, &limits()), None);
        assert_eq!(k.keep_of(2, &limits()).unwrap().by, KeptBy::Submitter);
    }

    #[test]
    fn budgets_end_a_pipeline_by_force_naming_the_limit() {
        let k = Keeps::default();
        k.add(1, None, None);
        assert_eq!(k.due(1, 1000, &limits()), None);
        let Some(Action::Abort(why)) = k.due(1, 1001, &limits()) else {
            panic!("not ended by force")
        };
        assert!(why.contains("max_pipeline_bytes"), "{why}");
        assert_eq!(k.due(1, 5000, &limits()), None, "asked twice");
        k.add(2, None, None);
        let l = DaemonLimits {
            pipeline_time: Some(Duration::ZERO),
            ..limits()
        };
        let Some(Action::Abort(why)) = k.due(2, 0, &l) else {
            panic!("not ended by force")
        };
        assert!(why.contains("max_pipeline_time"), "{why}");
    }

    #[test]
    fn a_detached_pipeline_is_stopped_when_its_lifetime_passes() {
        let k = Keeps::default();
        k.add(1, None, Some(Duration::from_secs(3600)));
        assert_eq!(k.keep_of(1, &limits()).unwrap().by, KeptBy::Detached);
        let left = k.keep_of(1, &limits()).unwrap().stops_in_s.unwrap();
        assert!(left > 3590.0 && left <= 3600.0, "{left}");
        assert_eq!(k.due(1, 0, &limits()), None);
        k.add(2, None, Some(Duration::ZERO));
        assert_eq!(k.due(2, 0, &limits()), Some(Action::Stop));
        k.retain(|id| id == 1);
        assert!(k.keep_of(2, &limits()).is_none());
    }
}
