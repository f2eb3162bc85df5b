//! The task interface: what a filter implements and what it may do while it runs.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::buffer::{BufMut, Buffer};
use crate::pool::Pool;
use crate::queue::Get;
use crate::sched::{Shared, TaskSlot};

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

/// What a running task may do: take from inputs, put to outputs, allocate from the pools of
/// its outputs.
pub struct Context<'a> {
    pub(crate) shared: &'a Arc<Shared>,
    pub(crate) slot: &'a TaskSlot,
    pub(crate) id: usize,
    pub(crate) budget: usize,
    pub(crate) yielded: bool,
    pub(crate) bufs_in: u64,
    pub(crate) bytes_in: u64,
    pub(crate) bufs_out: u64,
    pub(crate) bytes_out: u64,
    /// Puts and bytes per output (the first [`OUT_COUNTS`]), added to the queues after the turn.
    pub(crate) out_counts: [(u64, u64); OUT_COUNTS],
    /// The reader this turn's only put so far is for, not woken yet (see [`Handoff`]).
    pub(crate) handoff: Handoff,
}

/// Who wakes the reader of a put. A task that puts one buffer and then ends its turn hands
/// the reader to its own worker, which runs it next: no other worker is woken for it (on a
/// busy machine, waking one for a single buffer cost a wake-up and a switch on both sides,
/// and the woken worker often found the task already taken). A task that puts a second
/// buffer in one turn is a stream: from then on every reader is woken at once, so it runs
/// beside the writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handoff {
    /// Nothing put this turn.
    None,
    /// One put, for this task; woken when the turn ends.
    Pending(usize),
    /// Several puts: readers are woken as their buffers are put.
    Streaming,
}

/// Outputs whose put counters a [`Context`] batches per turn; further ones count directly.
pub(crate) const OUT_COUNTS: usize = 4;

impl<'a> Context<'a> {
    /// The task's name (its command word in the pipeline).
    pub fn name(&self) -> &str {
        &self.slot.name
    }

    /// Number of input queues.
    pub fn inputs(&self) -> usize {
        self.slot.inputs.len()
    }

    /// Number of output queues.
    pub fn outputs(&self) -> usize {
        self.slot.outputs.len()
    }

    fn spend(&mut self) -> bool {
        if self.budget == 0 {
            self.yielded = true;
            false
        } else {
            self.budget -= 1;
            true
        }
    }

    /// Takes the next buffer from input `i`.
    ///
    /// # Panics
    /// If `i` is not an input index.
    pub fn get(&mut self, i: usize) -> Get {
        if !self.spend() {
            return Get::Empty;
        }
        let g = self.slot.inputs[i].get();
        if let Get::Buf(b) = &g {
            self.bufs_in += 1;
            self.bytes_in += b.len() as u64;
        }
        g
    }

    /// Puts a buffer on output `o`. Never blocks. If the output's reader has finished the
    /// buffer is dropped (back to its pool) and `false` is returned.
    ///
    /// # Panics
    /// If `o` is not an output index.
    pub fn put(&mut self, o: usize, buf: Buffer) -> bool {
        let q = &self.slot.outputs[o];
        let len = buf.len() as u64;
        if q.put(buf) {
            self.bufs_out += 1;
            self.bytes_out += len;
            match self.out_counts.get_mut(o) {
                Some(c) => {
                    c.0 += 1;
                    c.1 += len;
                }
                None => q.add_counts(1, len),
            }
            match self.handoff {
                Handoff::None => self.handoff = Handoff::Pending(q.reader),
                Handoff::Pending(r) => {
                    self.shared.wake(r);
                    self.shared.wake(q.reader);
                    self.handoff = Handoff::Streaming;
                }
                Handoff::Streaming => self.shared.wake(q.reader),
            }
            true
        } else {
            false
        }
    }

    /// Takes a buffer from the pool of output `o`. `None` when the pool is empty (the task
    /// is woken when one comes back) or this turn's batch is used up.
    ///
    /// # Panics
    /// If output `o` has no pool (the engine gives one to every output of a task registered
    /// as allocating).
    pub fn alloc(&mut self, o: usize) -> Option<BufMut> {
        if !self.spend() {
            return None;
        }
        let pool = self.slot.pools[o]
            .as_ref()
            .expect("output has a pool: the task is registered as allocating");
        let (shared, id) = (self.shared, self.id);
        pool.alloc_or_wait(|| shared.waker(id))
    }

    /// The pool of output `o`, if it has one.
    pub fn pool(&self, o: usize) -> Option<&Pool> {
        self.slot.pools.get(o).and_then(|p| p.as_ref())
    }

    /// Whether output `o` still has a reader.
    pub fn output_open(&self, o: usize) -> bool {
        !self.slot.outputs[o].is_abandoned()
    }

    /// Whether the pipeline is stopping: sources should end their stream.
    pub fn stopping(&self) -> bool {
        self.shared.stopping()
    }

    /// What wakes this task (for those that wait on something other than their queues and
    /// pools).
    pub(crate) fn waker(&self) -> crate::sched::Waker {
        self.shared.waker(self.id)
    }

    /// Whether this turn's batch is used up.
    pub fn batch_used(&self) -> bool {
        self.budget == 0
    }
}
