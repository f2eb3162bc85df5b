//! Sends taken in one batch (a host's submissions, taken together by its engine or by its own
//! in-host queue): the first goes at once, the small ones after it wait corked in their
//! session and go together when the batch ends, in one write (and over TLS one record)
//! instead of one each.

use super::Stream;
use crate::Cork;

/// Sends up to this size after a batch's first are corked; larger ones are written from their
/// own bytes, where a copy into the connection would cost more than the write it saves.
pub const CORK_MAX: usize = 16 << 10;

/// One batch of sends (see the module's docs). Dropping it, or [`release`](Self::release),
/// writes what it holds back. Hold it only while taking submissions, never across a wait.
#[derive(Debug, Default)]
pub struct SendBatch {
    corks: Vec<Cork>,
    sends: usize,
}

impl SendBatch {
    /// An empty batch.
    pub fn new() -> SendBatch {
        SendBatch::default()
    }

    /// Call before sending `len` bytes on `stream` in this batch. A large message first lets
    /// what waits go (a session keeps its order either way); urgent streams are never held.
    pub fn before_send(&mut self, stream: &Stream, len: usize) {
        if len > CORK_MAX {
            self.corks.clear();
        } else if self.sends > 0 {
            stream.cork(&mut self.corks);
        }
        self.sends += 1;
    }

    /// Lets what waits go now: before anything that may wait (opening a stream).
    pub fn release(&mut self) {
        self.corks.clear();
    }
}
