//! The task interface: what a filter implements and what it may do while it runs.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use crate::context::Context;

/// What a task's turn ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// It did work and has more to do (for example its batch ran out): run it again soon.
    Progress,
    /// It cannot go on until an input gets a buffer or a pool gets one back. The engine
    /// wakes it then; a task never sleeps anywhere else.
    Blocked,
    /// It has finished (usually: its inputs reached end of stream and it flushed its state).
    Done,
}

/// Scheduling class. Workers always take a runnable task of a higher class first; within a
/// class tasks run in turn, each until it blocks or uses its batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Tasks that serve devices and hosts and must respond first.
    Interrupt = 0,
    /// Ordinary processing.
    Normal = 1,
    /// Work that runs only when nothing else is runnable.
    Background = 2,
}

impl FromStr for Priority {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "interrupt" => Ok(Priority::Interrupt),
            "normal" => Ok(Priority::Normal),
            "background" => Ok(Priority::Background),
            _ => Err("expected interrupt, normal or background".into()),
        }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Priority::Interrupt => "interrupt",
            Priority::Normal => "normal",
            Priority::Background => "background",
        })
    }
}

/// Why a task failed. The engine records it, stops the sources and lets the rest of the
/// graph drain and finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskError {
    /// An I/O operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, e.g. "open in.wav".
        what: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The data the task received is not what it expects.
    #[error("bad input: {0}")]
    BadInput(String),
    /// Any other failure, described.
    #[error("{0}")]
    Failed(String),
}

impl TaskError {
    /// An I/O error with a description of what was being done.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> TaskError {
        TaskError::Io {
            what: what.into(),
            source,
        }
    }
}

/// A filter: reads buffers from its input queues, writes buffers to its output queues.
///
/// The engine calls [`Task::run`] on a worker thread whenever the task may have work: a
/// buffer arrived on an input, a buffer came back to a pool it waits on, an input reached
/// end of stream, or the pipeline is stopping. A turn should do as much as it can without
/// waiting and then return; the engine limits each turn to a batch of `get`s and `alloc`s
/// (after which they report `Empty`/`None`) so no task starves the others.
pub trait Task: Send {
    /// Does one turn of work.
    fn run(&mut self, cx: &mut Context<'_>) -> Result<Status, TaskError>;

    /// Called exactly once when the task ends for any reason (it returned `Done`, the
    /// pipeline stopped, all its outputs lost their readers, or a task failed). Flush and
    /// close files here.
    fn finish(&mut self) -> Result<(), TaskError> {
        Ok(())
    }

    /// A short result to show in the final statistics (a checksum, a count...).
    fn report(&self) -> Option<String> {
        None
    }
}
