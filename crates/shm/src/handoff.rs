//! A slot that threads hand one boxed value through, with a single atomic swap to take it and
//! a plain store to put it: cheaper than a lock for a value that is put by its holder and taken
//! by whoever needs it next (the link layer parks a session's reading half in one between
//! receives).

use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

/// A slot holding at most one boxed `T`. Any thread may [`take`](Self::take) it; the holder of
/// a value [`put`](Self::put)s it back.
pub struct Handoff<T> {
    ptr: AtomicPtr<T>,
    /// The slot owns a `T` (for drop check and the auto traits, which are set below).
    _owns: PhantomData<Box<T>>,
}

// SAFETY: the slot moves a `T` from the thread that puts it to the thread that takes it, and
// never lends it out: exactly `Mutex<Option<Box<T>>>`'s requirement, `T: Send`.
unsafe impl<T: Send> Send for Handoff<T> {}
// SAFETY: as above; `&Handoff` only allows the atomic take and put, never a shared `&T`.
unsafe impl<T: Send> Sync for Handoff<T> {}

impl<T> Default for Handoff<T> {
    fn default() -> Self {
        Handoff {
            ptr: AtomicPtr::new(ptr::null_mut()),
            _owns: PhantomData,
        }
    }
}

impl<T> Handoff<T> {
    /// An empty slot.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the value, if the slot holds one (one atomic swap).
    #[inline]
    pub fn take(&self) -> Option<Box<T>> {
        // Ordering: Acquire pairs with the Release store in `put`, so the boxed value's contents
        // written before `put` are visible to the taker.
        let p = self.ptr.swap(ptr::null_mut(), Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-null pointer in the slot came from `Box::into_raw` in `put` (the
        // release store pairs with the acquire swap above, so the value is fully visible), and
        // the swap removed it from the slot: this is its only owner.
        Some(unsafe { Box::from_raw(p) })
    }

    /// Puts `v` into the slot, which its caller knows to be empty (it took the value the slot
    /// last held): a plain release store. Were the slot full after all, the value it held would
    /// be leaked, never freed twice; debug builds assert that it is empty.
    #[inline]
    pub fn put(&self, v: Box<T>) {
        debug_assert!(
            self.ptr.load(Ordering::Relaxed).is_null(),
            "put into a full handoff slot"
        );
        // Ordering: Release pairs with the Acquire swap in `take`, publishing the box's contents
        // before its pointer.
        self.ptr.store(Box::into_raw(v), Ordering::Release);
    }
}

impl<T> Drop for Handoff<T> {
    fn drop(&mut self) {
        drop(self.take());
    }
}

impl<T> std::fmt::Debug for Handoff<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let full = !self.ptr.load(Ordering::Relaxed).is_null();
        f.debug_struct("Handoff").field("full", &full).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_value_is_taken_once_and_dropped_with_the_slot() {
        let h = Handoff::new();
        assert!(h.take().is_none());
        let counted = Arc::new(());
        h.put(Box::new(counted.clone()));
        let v = h.take().expect("put");
        assert!(h.take().is_none(), "taken twice");
        h.put(v);
        assert_eq!(Arc::strong_count(&counted), 2);
        drop(h);
        assert_eq!(
            Arc::strong_count(&counted),
            1,
            "the slot's value was not dropped"
        );
    }

    #[test]
    fn threads_racing_to_take_get_the_value_exactly_once() {
        let h = Arc::new(Handoff::new());
        for round in 0..200u32 {
            h.put(Box::new(round));
            let takers: Vec<_> = (0..4)
                .map(|_| {
                    let h = h.clone();
                    std::thread::spawn(move || h.take().map(|b| *b))
                })
                .collect();
            let got: Vec<u32> = takers
                .into_iter()
                .filter_map(|t| t.join().unwrap())
                .collect();
            assert_eq!(got, [round]);
        }
    }
}
