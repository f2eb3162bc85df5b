//! Pipelines as those who watch them see them: a [`Look`] at one (its shape, statistics,
//! state and board), from whatever runs them ([`Watched`]: a daemon's table, or [`One`], the
//! one pipeline `offhost run` runs).

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::board::Board;
use crate::engine::{Running, Stats};
use crate::shape::Shape;

/// Where a pipeline is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Its tasks run.
    Running,
    /// Every task has finished, none failed.
    Finished,
    /// A task failed, or it was ended by force.
    Failed,
}

/// A pipeline at one moment.
#[derive(Debug, Clone)]
pub struct Look {
    /// Its id where it runs.
    pub id: u64,
    /// The name it was given, if any (a daemon's `submit --name`, the file `run` runs).
    pub name: Option<String>,
    /// Where it is in its life.
    pub phase: Phase,
    /// Why it failed, once it has.
    pub error: Option<String>,
    /// Its tasks, queues and free lists.
    pub shape: Arc<Shape>,
    /// Its statistics now, or at its end.
    pub stats: Stats,
    /// What its tasks show.
    pub board: Arc<Board>,
}

impl Look {
    /// A look at `run` now, as pipeline `id` called `name`: its counters
    /// ([`Running::counters`], nothing the workers take is touched).
    pub fn at(id: u64, name: Option<String>, run: &Running) -> Look {
        Look::with(id, name, run, run.counters())
    }

    /// A look at `run` with `stats` taken just before.
    pub fn with(id: u64, name: Option<String>, run: &Running, stats: Stats) -> Look {
        Look {
            id,
            name,
            phase: Phase::Running,
            error: None,
            shape: Arc::clone(run.shape()),
            board: Arc::clone(run.board()),
            stats,
        }
    }
}

/// Whatever runs pipelines, as a live view reads it. Each call takes a moment's lock at most:
/// a view calls it about once a second, never on a task's path.
pub trait Watched: Send + Sync {
    /// The ids of the pipelines it runs or remembers, in order.
    fn ids(&self) -> Vec<u64>;
    /// A look at pipeline `id`, if it is known.
    fn look(&self, id: u64) -> Option<Look>;
}

/// The one pipeline a command runs (`offhost run`): its runner sets a fresh look while it
/// runs ([`One::set`], about ten times a second, from the counters it reads for its progress
/// line anyway) and the last one when it ends.
#[derive(Debug, Default)]
pub struct One {
    look: Mutex<Option<Look>>,
}

impl One {
    /// Sets the look to hand out.
    pub fn set(&self, look: Look) {
        *self.look.lock().unwrap_or_else(|e| e.into_inner()) = Some(look);
    }
}

impl Watched for One {
    fn ids(&self) -> Vec<u64> {
        let l = self.look.lock().unwrap_or_else(|e| e.into_inner());
        l.iter().map(|l| l.id).collect()
    }

    fn look(&self, id: u64) -> Option<Look> {
        let l = self.look.lock().unwrap_or_else(|e| e.into_inner());
        l.as_ref().filter(|l| l.id == id).cloned()
    }
}
