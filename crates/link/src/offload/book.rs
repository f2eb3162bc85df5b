//! A host's account of its outstanding submissions, open handles and budgets.

use std::collections::HashMap;

use offhost_proto::offload::{Op, QueueLimits};

use super::QueueError;

/// One outstanding submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) tag: u64,
    pub(crate) op: Op,
    pub(crate) handle: u32,
    pub(crate) bytes: u64,
}

struct Slot {
    generation: u32,
    entry: Option<Entry>,
}

/// Outstanding submissions in a slab (an id is `generation << 32 | index`, so a stale or
/// forged id is recognised), the bytes of outstanding sends, and the handles.
pub(crate) struct Book {
    slots: Vec<Slot>,
    free: Vec<u32>,
    outstanding: usize,
    bytes: u64,
    pub(crate) limits: QueueLimits,
    /// Open handles: true while usable, false once a close was submitted.
    handles: HashMap<u32, bool>,
    next_handle: u32,
}

impl Book {
    pub(crate) fn new(limits: QueueLimits) -> Book {
        Book {
            slots: Vec::new(),
            free: Vec::new(),
            outstanding: 0,
            bytes: 0,
            limits,
            handles: HashMap::new(),
            next_handle: 1,
        }
    }

    pub(crate) fn outstanding(&self) -> usize {
        self.outstanding
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Checks that `handle` is usable.
    pub(crate) fn usable(&self, handle: u32) -> Result<(), QueueError> {
        match self.handles.get(&handle) {
            Some(true) => Ok(()),
            _ => Err(QueueError::BadChannel(handle)),
        }
    }

    /// Checks that a send of `len` bytes on `handle` fits the budgets.
    pub(crate) fn check_send(&self, handle: u32, len: usize) -> Result<(), QueueError> {
        self.usable(handle)?;
        if len > self.limits.max_message as usize {
            return Err(QueueError::TooLarge {
                len,
                max: self.limits.max_message as usize,
            });
        }
        if self.bytes + len as u64 > self.limits.max_bytes && self.bytes > 0 {
            return Err(QueueError::Full("bytes in flight"));
        }
        Ok(())
    }

    /// A new handle, within the channel budget.
    pub(crate) fn new_handle(&mut self) -> Result<u32, QueueError> {
        if self.handles.len() >= self.limits.max_channels as usize {
            return Err(QueueError::Full("channels"));
        }
        let h = self.next_handle;
        self.next_handle = self.next_handle.checked_add(1).unwrap_or(1);
        self.handles.insert(h, true);
        Ok(h)
    }

    /// No more submissions on `handle` (a close was submitted).
    pub(crate) fn closing(&mut self, handle: u32) {
        if let Some(u) = self.handles.get_mut(&handle) {
            *u = false;
        }
    }

    /// Forgets `handle` (its open failed or its close completed).
    pub(crate) fn forget(&mut self, handle: u32) {
        self.handles.remove(&handle);
    }

    /// Records a submission; its id.
    pub(crate) fn insert(&mut self, e: Entry) -> Result<u64, QueueError> {
        if self.outstanding >= self.limits.max_outstanding as usize {
            return Err(QueueError::Full("outstanding submissions"));
        }
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                let i = u32::try_from(self.slots.len())
                    .map_err(|_| QueueError::Full("outstanding submissions"))?;
                self.slots.push(Slot {
                    generation: 0,
                    entry: None,
                });
                i
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.generation = slot.generation.wrapping_add(1);
        slot.entry = Some(e);
        self.outstanding += 1;
        self.bytes += e.bytes;
        Ok(u64::from(slot.generation) << 32 | u64::from(index))
    }

    /// Takes the submission `id` of `op` off the book; `None` if there is no such one.
    pub(crate) fn take(&mut self, id: u64, op: Op) -> Option<Entry> {
        let index = (id & 0xffff_ffff) as usize;
        let generation = (id >> 32) as u32;
        let slot = self.slots.get_mut(index)?;
        if slot.generation != generation || slot.entry.map(|e| e.op) != Some(op) {
            return None;
        }
        let e = slot.entry.take()?;
        self.free.push(index as u32);
        self.outstanding -= 1;
        self.bytes -= e.bytes;
        if e.op == Op::Close {
            self.forget(e.handle);
        }
        Some(e)
    }

    /// Takes every outstanding submission off the book, oldest slots first.
    pub(crate) fn drain(&mut self) -> Vec<(u64, Entry)> {
        let mut out = Vec::new();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if let Some(e) = slot.entry.take() {
                out.push((u64::from(slot.generation) << 32 | i as u64, e));
                self.free.push(i as u32);
            }
        }
        self.outstanding = 0;
        self.bytes = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> QueueLimits {
        QueueLimits {
            max_outstanding: 2,
            max_channels: 1,
            max_bytes: 10,
            max_message: 8,
            inline_max: 8,
        }
    }

    #[test]
    fn budgets_and_stale_ids() {
        let mut b = Book::new(limits());
        let h = b.new_handle().unwrap();
        assert!(matches!(b.new_handle(), Err(QueueError::Full("channels"))));
        assert!(matches!(
            b.check_send(h, 9),
            Err(QueueError::TooLarge { .. })
        ));
        let e = Entry {
            tag: 1,
            op: Op::Send,
            handle: h,
            bytes: 8,
        };
        let id = b.insert(e).unwrap();
        assert!(matches!(b.check_send(h, 3), Err(QueueError::Full(_))));
        let id2 = b
            .insert(Entry {
                bytes: 0,
                op: Op::Recv,
                ..e
            })
            .unwrap();
        assert!(matches!(b.insert(e), Err(QueueError::Full(_))));
        assert_eq!(b.take(id, Op::Recv), None, "wrong op");
        assert_eq!(b.take(id, Op::Send), Some(e));
        assert_eq!(b.take(id, Op::Send), None, "twice");
        let id3 = b.insert(e).unwrap();
        assert_ne!(id3, id, "a reused slot has a new generation");
        assert_eq!(b.take(id, Op::Send), None, "stale id");
        assert_eq!(b.drain().len(), 2);
        assert_eq!((b.outstanding(), b.bytes()), (0, 0));
        let _ = id2;
        assert!(matches!(
            b.check_send(99, 1),
            Err(QueueError::BadChannel(99))
        ));
    }
}
