//! Queues: unbounded FIFOs of buffers between tasks.
//!
//! Putting never blocks (the paper's "infinite" queues); the bound on memory comes from the
//! pools, not from the queues. Each queue has one reader and one or more writers; it closes
//! (end of stream) when its last writer finishes, and is *abandoned* when its reader finishes
//! early, after which puts drop the buffer at once so it goes back to its pool.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_queue::SegQueue;
use serde::{Deserialize, Serialize};

use crate::buffer::Buffer;

/// Called after a buffer was placed on an empty queue (the paper's "kick").
pub type PutHook = Arc<dyn Fn() + Send + Sync>;
/// Called before a dequeue from an empty queue; what it returns is dequeued instead (the
/// seed's "status queue").
pub type GetHook = Arc<dyn Fn() -> Option<Buffer> + Send + Sync>;

/// Result of taking a buffer from a task's input.
#[derive(Debug)]
pub enum Get {
    /// The next buffer.
    Buf(Buffer),
    /// Nothing now (or this turn's batch is used up); the task is woken when there is more.
    Empty,
    /// All writers have finished and the queue is drained: end of stream.
    Closed,
}

pub(crate) struct Queue {
    pub(crate) name: String,
    items: SegQueue<Buffer>,
    depth: AtomicI64,
    max_depth: AtomicI64,
    puts: AtomicU64,
    bytes: AtomicU64,
    writers_open: AtomicUsize,
    closed: AtomicBool,
    abandoned: AtomicBool,
    pub(crate) reader: usize,
    pub(crate) writers: Vec<usize>,
    put_hook: Option<PutHook>,
    get_hook: Option<GetHook>,
}

/// A snapshot of a queue's counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueStats {
    /// Queue name.
    pub name: String,
    /// Buffers waiting now.
    pub depth: u64,
    /// Most buffers ever waiting at once.
    pub max_depth: u64,
    /// Buffers put so far.
    pub puts: u64,
    /// Bytes put so far.
    pub bytes: u64,
    /// Whether end of stream was reached (all writers finished).
    pub closed: bool,
}

impl Queue {
    pub(crate) fn new(
        name: String,
        reader: usize,
        writers: Vec<usize>,
        put_hook: Option<PutHook>,
        get_hook: Option<GetHook>,
    ) -> Queue {
        Queue {
            name,
            items: SegQueue::new(),
            depth: AtomicI64::new(0),
            max_depth: AtomicI64::new(0),
            puts: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            writers_open: AtomicUsize::new(writers.len()),
            // A queue no task writes (fed by its get hook) ends when the hook returns nothing.
            closed: AtomicBool::new(writers.is_empty()),
            abandoned: AtomicBool::new(false),
            reader,
            writers,
            put_hook,
            get_hook,
        }
    }

    /// Adds to the put counters (the writer batches them per turn).
    pub(crate) fn add_counts(&self, puts: u64, bytes: u64) {
        self.puts.fetch_add(puts, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Places a buffer on the queue; returns false if the reader has gone (buffer dropped).
    /// The caller counts it with [`Queue::add_counts`].
    pub(crate) fn put(&self, buf: Buffer) -> bool {
        // Ordering: Acquire pairs with the Release store in `abandon`; stronger than needed (the
        // flag only refuses puts, the queue itself synchronises the buffers).
        if self.abandoned.load(Ordering::Acquire) {
            return false;
        }
        self.items.push(buf);
        // Depth is a statistic only (wake-ups do not depend on it); the reader decrements
        // after popping, so it may read one low for a moment.
        let prev = self.depth.fetch_add(1, Ordering::Relaxed);
        if prev + 1 > self.max_depth.load(Ordering::Relaxed) {
            self.max_depth.fetch_max(prev + 1, Ordering::Relaxed);
        }
        if prev <= 0 {
            if let Some(h) = &self.put_hook {
                h();
            }
        }
        true
    }

    pub(crate) fn get(&self) -> Get {
        if let Some(b) = self.items.pop() {
            self.depth.fetch_sub(1, Ordering::Relaxed);
            return Get::Buf(b);
        }
        if let Some(h) = &self.get_hook {
            if let Some(b) = h() {
                return Get::Buf(b);
            }
        }
        // Ordering: Acquire pairs with the Release store in `close_writer`: every put before the
        // close is visible to the pop below.
        if self.closed.load(Ordering::Acquire) {
            match self.items.pop() {
                Some(b) => {
                    self.depth.fetch_sub(1, Ordering::Relaxed);
                    Get::Buf(b)
                }
                None => Get::Closed,
            }
        } else {
            Get::Empty
        }
    }

    /// One writer finished; returns true when that closed the queue.
    pub(crate) fn close_writer(&self) -> bool {
        // Ordering: AcqRel on the writer count: the last writer's decrement acquires the others'
        // puts (their Release halves), and the Release store of `closed` then publishes them to the
        // reader's Acquire load in `pop`.
        if self.writers_open.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.closed.store(true, Ordering::Release);
            true
        } else {
            false
        }
    }

    /// The reader finished: drop what is queued and refuse further puts.
    pub(crate) fn abandon(&self) {
        // Ordering: Release pairs with the Acquire loads in `put` and `is_abandoned`.
        self.abandoned.store(true, Ordering::Release);
        while self.items.pop().is_some() {
            self.depth.fetch_sub(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn is_abandoned(&self) -> bool {
        // Ordering: Acquire pairs with the Release store in `abandon`.
        self.abandoned.load(Ordering::Acquire)
    }

    pub(crate) fn stats(&self) -> QueueStats {
        QueueStats {
            name: self.name.clone(),
            depth: self.depth.load(Ordering::Relaxed).max(0) as u64,
            max_depth: self.max_depth.load(Ordering::Relaxed).max(0) as u64,
            puts: self.puts.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            closed: self.closed.load(Ordering::Relaxed),
        }
    }
}

impl fmt::Debug for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue").field("name", &self.name).finish()
    }
}
