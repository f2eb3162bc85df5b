//! What a task sees of the running pipeline during its turn: its inputs, outputs and their
//! pools, and the run queues that wake its readers.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::board::{Meter, Picture, ShowError, Shown};
use crate::buffer::{BufMut, Buffer};
use crate::pool::Pool;
use crate::queue::{Get, Queue};
use crate::runq::{RunQueues, Waker};
use crate::timer::Alarm;

/// What a running task may do: take from inputs, put to outputs, allocate from the pools of
/// its outputs.
pub struct Context<'a> {
    pub(crate) queues: &'a Arc<RunQueues>,
    pub(crate) name: &'a str,
    pub(crate) inputs: &'a [Arc<Queue>],
    pub(crate) outputs: &'a [Arc<Queue>],
    pub(crate) pools: &'a [Option<Pool>],
    pub(crate) alarm: &'a Mutex<Alarm>,
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
        self.name
    }

    /// Number of input queues.
    pub fn inputs(&self) -> usize {
        self.inputs.len()
    }

    /// Number of output queues.
    pub fn outputs(&self) -> usize {
        self.outputs.len()
    }

    /// Whether anybody watches the pipeline (a live view): a task shows pictures and meters
    /// only then, so that nobody pays for what nobody sees.
    pub fn watched(&self) -> bool {
        self.queues.board.watched()
    }

    /// Shows `picture` as this task's `name` to those who watch, in place of the one shown
    /// under that name before. Costs a lock on the pipeline's board: call it a few times a
    /// second at most, not per buffer.
    pub fn show_picture(&self, name: &str, picture: Picture) -> Result<(), ShowError> {
        (self.queues.board).show(self.id, name, Shown::Picture(Arc::new(picture)))
    }

    /// Shows a set of meters as this task's `name` (see [`show_picture`](Self::show_picture)).
    pub fn show_meters(&self, name: &str, meters: Vec<Meter>) -> Result<(), ShowError> {
        self.queues.board.show(self.id, name, Shown::Meters(meters))
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
        let g = self.inputs[i].get();
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
        let q = &self.outputs[o];
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
                    self.queues.wake(r);
                    self.queues.wake(q.reader);
                    self.handoff = Handoff::Streaming;
                }
                Handoff::Streaming => self.queues.wake(q.reader),
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
        let pool = self.pools[o]
            .as_ref()
            .expect("output has a pool: the task is registered as allocating");
        let (queues, id) = (self.queues, self.id);
        pool.alloc_or_wait(|| queues.waker(id))
    }

    /// The pool of output `o`, if it has one.
    pub fn pool(&self, o: usize) -> Option<&Pool> {
        self.pools.get(o).and_then(|p| p.as_ref())
    }

    /// Whether output `o` still has a reader.
    pub fn output_open(&self, o: usize) -> bool {
        !self.outputs[o].is_abandoned()
    }

    /// Whether the pipeline is stopping: sources should end their stream.
    pub fn stopping(&self) -> bool {
        self.queues.stopping()
    }

    /// Asks to be run again at `when` (or a little after), as if a buffer had come: for a
    /// task that must act at a time rather than on a buffer, since no task sleeps on a
    /// worker. One time is kept per task: asking for a later one while an earlier one is
    /// still to come keeps the earlier (the task, run then, asks again if it still waits),
    /// and the task may be run before its time for other reasons.
    pub fn wake_at(&self, when: Instant) {
        let waker = self.waker();
        self.alarm
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .ring_at(when, &waker);
    }

    /// What wakes this task (for those that wait on something other than their queues and
    /// pools).
    pub(crate) fn waker(&self) -> Waker {
        self.queues.waker(self.id)
    }

    /// Whether this turn's batch is used up.
    pub fn batch_used(&self) -> bool {
        self.budget == 0
    }
}
