//! Pools (the paper's free lists): a fixed number of preallocated buffers of one size.
//!
//! Buffers circulate in a closed loop: a producer takes one with [`Pool::alloc`], the last
//! consumer drops it, and the storage goes back to the free list. Nothing is allocated or
//! freed while a pipeline runs (apart from a small reference-count cell per buffer), so
//! memory stays flat, and a producer that runs ahead of its consumers waits for a buffer
//! to come back instead of growing a queue.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use serde::{Deserialize, Serialize};

use crate::buffer::{BufMut, Filled, Home, Storage};
use crate::runq::Waker;

/// Bytes one free list allocates (`count` buffers of head- and tailroom plus data), or
/// `None` past `u64`.
pub fn pool_bytes(p: &PoolConfig) -> Option<u64> {
    let per = (p.headroom as u64)
        .checked_add(p.size as u64)?
        .checked_add(p.tailroom as u64)?;
    per.checked_mul(p.count as u64)
}

/// Bytes kept free in front of the data of every pooled buffer unless configured otherwise.
pub const DEFAULT_HEADROOM: usize = 64;
/// Bytes kept free behind the data area of every pooled buffer unless configured otherwise.
pub const DEFAULT_TAILROOM: usize = 64;

/// The shape of a pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolConfig {
    /// Name, as written in the pipeline.
    pub name: String,
    /// Number of buffers.
    pub count: usize,
    /// Size of each buffer's data area in bytes.
    pub size: usize,
    /// Bytes free in front of the data area.
    pub headroom: usize,
    /// Bytes free behind the data area.
    pub tailroom: usize,
}

impl PoolConfig {
    /// A pool of `count` buffers of `size` bytes with the default head- and tailroom.
    pub fn new(name: impl Into<String>, count: usize, size: usize) -> PoolConfig {
        PoolConfig {
            name: name.into(),
            count,
            size,
            headroom: DEFAULT_HEADROOM,
            tailroom: DEFAULT_TAILROOM,
        }
    }
}

/// Storage kept for reuse, handed out last in, first out: a pool's free list, and
/// `host-in`'s spare message buffers. A queue cycled through every buffer, so that each was
/// written again only after all the others had been (16 buffers of 64 KiB are more than a
/// core's L2 cache), and every copy into one missed the cache; from a stack, a stream keeps
/// reusing the few buffers in flight (docs/notes/engines.md). Storage known to be cold goes
/// to the bottom ([`push_bottom`](Self::push_bottom)), and a pool may trade what comes back
/// to it for that ([`Pool::trade_with`]).
pub(crate) struct StorageStack<T = Vec<u8>> {
    stack: Mutex<VecDeque<T>>,
    /// The most kept; more are dropped.
    max: usize,
    /// The stack's length, for readers that do not take the lock.
    len: AtomicUsize,
}

impl<T> StorageStack<T> {
    /// An empty stack keeping at most `max`.
    pub(crate) fn new(max: usize) -> StorageStack<T> {
        StorageStack {
            stack: Mutex::new(VecDeque::with_capacity(max)),
            max,
            len: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<T>> {
        self.stack.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts storage on top, or drops it when `max` are kept already.
    pub(crate) fn push(&self, bytes: T) {
        self.put(bytes, VecDeque::push_back);
    }

    /// Puts storage at the bottom, to be handed out after all the others (or drops it when
    /// `max` are kept already).
    pub(crate) fn push_bottom(&self, bytes: T) {
        self.put(bytes, VecDeque::push_front);
    }

    /// Puts storage in with `at`, unless `max` are kept already.
    fn put(&self, bytes: T, at: fn(&mut VecDeque<T>, T)) {
        let mut st = self.lock();
        if st.len() < self.max {
            at(&mut st, bytes);
            self.len.store(st.len(), Ordering::Relaxed);
        }
    }

    /// Puts `hot` on top in exchange for the storage at the bottom, when `fits` takes that
    /// one; gives `hot` back when it does not or the stack is empty.
    pub(crate) fn trade_bottom(&self, hot: T, fits: impl FnOnce(&T) -> bool) -> Result<T, T> {
        let mut st = self.lock();
        match st.front() {
            Some(cold) if fits(cold) => {
                let cold = st.pop_front().expect("looked at above");
                st.push_back(hot);
                Ok(cold)
            }
            _ => Err(hot),
        }
    }

    /// Takes the storage on top, and how many are left.
    pub(crate) fn pop(&self) -> Option<(T, usize)> {
        let mut st = self.lock();
        let b = st.pop_back()?;
        self.len.store(st.len(), Ordering::Relaxed);
        Some((b, st.len()))
    }

    /// How many are kept.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
}

pub(crate) struct PoolShared {
    pub(crate) name: String,
    /// Holds every buffer of the pool when all are free, and only the pool's own storage
    /// (or storage traded for it, one for one) comes back, so nothing pushed is ever
    /// dropped. Each with what it is known to hold.
    free: StorageStack<(Vec<u8>, Option<Filled>)>,
    /// Where storage coming back trades places with the coldest of a stack of the same
    /// layout (see [`Pool::trade_with`]).
    trade: OnceLock<Arc<StorageStack>>,
    has_waiters: AtomicBool,
    waiters: Mutex<Vec<Waker>>,
    min_free: AtomicUsize,
    allocs: AtomicU64,
    empty_hits: AtomicU64,
    waiter_wakeups: AtomicU64,
}

impl Home for PoolShared {
    fn take_back(self: Arc<Self>, bytes: Vec<u8>, filled: Option<Filled>) {
        self.release(bytes, filled);
    }

    fn name(&self) -> &str {
        &self.name
    }
}

thread_local! {
    /// The pools whose waiters this thread holds back the wake-up of, inside
    /// [`release_together`] (`None` outside).
    static HELD: RefCell<Option<Vec<Arc<PoolShared>>>> = const { RefCell::new(None) };
}

/// Runs `f`, holding back the wake-ups of the tasks waiting for the buffers it frees until it
/// returns; then each pool's waiters are woken once.
///
/// A thread that frees several buffers at once (`engine-out` after sending a batch) so wakes
/// a waiting producer once. Freed one by one, each buffer would wake it, and on a busy CPU
/// the woken task often runs at once, takes the one buffer, and sleeps again before the next
/// is freed: a wake-up and two context switches per buffer. Nested calls join the outermost.
pub fn release_together<R>(f: impl FnOnce() -> R) -> R {
    /// Wakes what was held, also if `f` panics.
    struct Release;
    impl Drop for Release {
        fn drop(&mut self) {
            for pool in HELD.with(|h| h.borrow_mut().take()).unwrap_or_default() {
                pool.wake_waiters();
            }
        }
    }
    let outermost = HELD.with(|h| {
        let mut h = h.borrow_mut();
        let outermost = h.is_none();
        h.get_or_insert_with(Vec::new);
        outermost
    });
    // Not `then_some(Release)`: that would make (and drop, waking everything) a `Release`
    // in a nested call too.
    let _release = if outermost { Some(Release) } else { None };
    f()
}

impl PoolShared {
    /// Puts storage back on the free list and wakes the tasks waiting for it (or, inside
    /// [`release_together`], leaves that to its end).
    pub(crate) fn release(self: Arc<Self>, bytes: Vec<u8>, filled: Option<Filled>) {
        let back = match self.trade.get() {
            Some(stack) => {
                let len = bytes.len();
                match stack.trade_bottom(bytes, |cold| cold.capacity() >= len) {
                    Ok(mut cold) => {
                        // A spare a message was copied out of holds only that message.
                        cold.resize(len, 0);
                        (cold, None)
                    }
                    Err(bytes) => (bytes, filled),
                }
            }
            None => (bytes, filled),
        };
        self.free.push(back);
        let held = HELD.with(|h| match h.borrow_mut().as_mut() {
            Some(pools) => {
                if !pools.iter().any(|p| Arc::ptr_eq(p, &self)) {
                    pools.push(Arc::clone(&self));
                }
                true
            }
            None => false,
        });
        if !held {
            self.wake_waiters();
        }
    }

    /// Wakes the tasks waiting for a buffer, if any (after buffers were pushed).
    fn wake_waiters(&self) {
        // Ordering: SeqCst fence, paired with the fence in `alloc_or_wait`: either the waiter sees
        // the buffers pushed before this on its second look, or we see its `has_waiters` flag here
        // (a store-then-load on each side, which needs the fences' total order).
        fence(Ordering::SeqCst);
        if self.has_waiters.load(Ordering::Relaxed) {
            let waiters = {
                let mut w = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
                self.has_waiters.store(false, Ordering::Relaxed);
                std::mem::take(&mut *w)
            };
            if !waiters.is_empty() {
                self.waiter_wakeups.fetch_add(1, Ordering::Relaxed);
            }
            for w in waiters {
                w.wake();
            }
        }
    }
}

/// A named pool of preallocated buffers. Cloning gives another handle to the same pool.
#[derive(Clone)]
pub struct Pool {
    shared: Arc<PoolShared>,
    config: Arc<PoolConfig>,
}

/// The memory of an ended pipeline's free lists, for as long as something still holds it.
///
/// A pool's storage (its free list and every buffer out of it) is let go with its last
/// buffer, not when its pipeline ends: a buffer that a daemon's channel thread is still
/// sending to a host that does not read keeps its whole pool. This does not keep it.
#[derive(Default)]
pub struct PoolsHeld {
    pools: Vec<(Weak<PoolShared>, u64)>,
}

impl PoolsHeld {
    /// Holds nothing (what a pipeline that was already settled leaves).
    pub fn none() -> PoolsHeld {
        PoolsHeld::default()
    }

    pub(crate) fn new(pools: Vec<(Weak<PoolShared>, u64)>) -> PoolsHeld {
        PoolsHeld { pools }
    }

    /// The bytes of the pools that something still holds, now.
    pub fn bytes(&self) -> u64 {
        self.pools
            .iter()
            .filter(|(p, _)| p.strong_count() > 0)
            .map(|(_, b)| *b)
            .fold(0, u64::saturating_add)
    }
}

impl fmt::Debug for PoolsHeld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolsHeld")
            .field("pools", &self.pools.len())
            .field("bytes", &self.bytes())
            .finish()
    }
}

/// A snapshot of a pool's counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolStats {
    /// Pool name.
    pub name: String,
    /// Number of buffers.
    pub count: usize,
    /// Size of each buffer's data area.
    pub size: usize,
    /// Buffers on the free list now.
    pub free: usize,
    /// Fewest buffers ever on the free list.
    pub min_free: usize,
    /// Buffers handed out so far.
    pub allocs: u64,
    /// Times a task found the pool empty and had to wait.
    pub empty: u64,
    /// Times tasks waiting for a buffer were woken (one per release, or per
    /// [`release_together`], that found waiters).
    #[serde(default)]
    pub waiter_wakeups: u64,
}

/// A pool whose buffers cannot exist: head- and tailroom plus data past `usize`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("free list '{name}': buffers of {headroom} + {size} + {tailroom} bytes overflow the address space")]
pub struct PoolSizeError {
    /// Pool name.
    pub name: String,
    /// Headroom.
    pub headroom: usize,
    /// Data size.
    pub size: usize,
    /// Tailroom.
    pub tailroom: usize,
}

impl Pool {
    /// Allocates `config.count` buffers now; none are allocated later.
    ///
    /// # Panics
    ///
    /// When the buffer size overflows (see [`Pool::try_new`]); pipelines check their pools
    /// against their [`Budget`](crate::Budget) first.
    pub fn new(config: PoolConfig) -> Pool {
        Pool::try_new(config).unwrap_or_else(|e| panic!("{e}"))
    }

    /// As [`Pool::new`], the size overflow an error.
    pub fn try_new(config: PoolConfig) -> Result<Pool, PoolSizeError> {
        let count = config.count.max(1);
        let total = config
            .headroom
            .checked_add(config.size)
            .and_then(|t| t.checked_add(config.tailroom))
            .ok_or_else(|| PoolSizeError {
                name: config.name.clone(),
                headroom: config.headroom,
                size: config.size,
                tailroom: config.tailroom,
            })?;
        let free = StorageStack::new(count);
        for _ in 0..config.count {
            free.push((vec![0u8; total], None));
        }
        Ok(Pool {
            shared: Arc::new(PoolShared {
                name: config.name.clone(),
                free,
                trade: OnceLock::new(),
                has_waiters: AtomicBool::new(false),
                waiters: Mutex::new(Vec::new()),
                min_free: AtomicUsize::new(config.count),
                allocs: AtomicU64::new(0),
                empty_hits: AtomicU64::new(0),
                waiter_wakeups: AtomicU64::new(0),
            }),
            config: Arc::new(config),
        })
    }

    /// The bytes this pool allocates, as the budget counts them.
    pub(crate) fn bytes(&self) -> u64 {
        pool_bytes(&self.config).unwrap_or(u64::MAX)
    }

    /// A handle on this pool's memory that does not keep it: see [`PoolsHeld`].
    pub(crate) fn held(&self) -> (Weak<PoolShared>, u64) {
        (Arc::downgrade(&self.shared), self.bytes())
    }

    /// The pool's shape.
    pub fn config(&self) -> &PoolConfig {
        &self.config
    }

    /// Name of the pool.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Size of each buffer's data area in bytes.
    pub fn buffer_size(&self) -> usize {
        self.config.size
    }

    /// Buffers on the free list now.
    pub fn free(&self) -> usize {
        self.shared.free.len()
    }

    /// Takes a buffer from the free list, or `None` if all are in use.
    pub fn alloc(&self) -> Option<BufMut> {
        match self.shared.free.pop() {
            Some(((bytes, filled), left)) => Some(self.wrap(bytes, filled, left)),
            None => {
                self.shared.empty_hits.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Like [`Pool::alloc`], but when the pool is empty registers `waker` to be woken when a
    /// buffer comes back. No wake-up is lost: the free list is checked again after
    /// registering.
    pub(crate) fn alloc_or_wait(&self, waker: impl FnOnce() -> Waker) -> Option<BufMut> {
        if let Some(((b, filled), left)) = self.shared.free.pop() {
            return Some(self.wrap(b, filled, left));
        }
        self.shared.empty_hits.fetch_add(1, Ordering::Relaxed);
        {
            let mut w = self
                .shared
                .waiters
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let waker = waker();
            // A task woken for another reason may find the pool still empty: register once.
            if !w.iter().any(|x| x.same_task(&waker)) {
                w.push(waker);
            }
            self.shared.has_waiters.store(true, Ordering::Relaxed);
        }
        // Ordering: SeqCst fence, paired with the fence in `wake_waiters` (see there): our Relaxed
        // store of `has_waiters` above is ordered before our second look at the free list.
        fence(Ordering::SeqCst);
        self.shared
            .free
            .pop()
            .map(|((b, filled), left)| self.wrap(b, filled, left))
    }

    /// From now on, storage that comes back to the pool goes on top of `stack` instead, in
    /// exchange for the storage at its bottom, when that has room for a buffer's storage.
    /// The stack must hold only storage the pool may keep: `host-in` keeps as spares only
    /// storage with at most a quarter more room than a buffer's, as it takes into the pool.
    ///
    /// For `host-in`, whose host receives messages into storage from `stack` that then
    /// enters the pool whole: the storage the pool's buffers give in exchange goes to the
    /// bottom, and the storage a task just finished with, still in the CPU's cache, is the
    /// next to be written. Without the trade it came back to the host only after another
    /// round through the pool, and each message's copy went to memory twice as far back.
    /// The first stack set stays.
    pub(crate) fn trade_with(&self, stack: &Arc<StorageStack>) {
        // Cloned only the first time: `host-in` calls this for every message it takes in.
        self.shared.trade.get_or_init(|| Arc::clone(stack));
    }

    /// A buffer around `bytes` (known to hold `filled`), taken from the free list with `left`
    /// still on it.
    fn wrap(&self, bytes: Vec<u8>, filled: Option<Filled>, left: usize) -> BufMut {
        self.shared.allocs.fetch_add(1, Ordering::Relaxed);
        self.shared.min_free.fetch_min(left, Ordering::Relaxed);
        let st = Arc::new(Storage {
            bytes,
            data_end: self.config.headroom + self.config.size,
            pool: Some(self.shared.clone()),
            filled,
        });
        BufMut::new(st, self.config.headroom)
    }

    /// A snapshot of the pool's counters.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            name: self.config.name.clone(),
            count: self.config.count,
            size: self.config.size,
            free: self.free(),
            min_free: self.shared.min_free.load(Ordering::Relaxed),
            allocs: self.shared.allocs.load(Ordering::Relaxed),
            empty: self.shared.empty_hits.load(Ordering::Relaxed),
            waiter_wakeups: self.shared.waiter_wakeups.load(Ordering::Relaxed),
        }
    }
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.config.name)
            .field("count", &self.config.count)
            .field("size", &self.config.size)
            .field("free", &self.free())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_freed_together_wake_their_waiter_once() {
        let waiter = || crate::runq::Waker::detached(7);
        // Freed one by one: each free wakes the waiting task, which (running at once, as on
        // a busy CPU) takes the one buffer and waits again.
        let pool = Pool::new(PoolConfig::new("p", 4, 16));
        let mut held: Vec<BufMut> = (0..4).map(|_| pool.alloc().unwrap()).collect();
        let mut taken = Vec::new();
        assert!(pool.alloc_or_wait(waiter).is_none(), "the pool is empty");
        while let Some(b) = held.pop() {
            drop(b);
            taken.push(pool.alloc_or_wait(waiter).expect("the buffer just freed"));
            assert!(pool.alloc_or_wait(waiter).is_none());
        }
        assert_eq!(pool.stats().waiter_wakeups, 4);
        // Freed together: one wake-up, and the task finds all four.
        drop(held);
        let pool = Pool::new(PoolConfig::new("p", 4, 16));
        let mut held: Vec<BufMut> = (0..4).map(|_| pool.alloc().unwrap()).collect();
        assert!(pool.alloc_or_wait(waiter).is_none());
        release_together(|| held.clear());
        assert_eq!(pool.stats().waiter_wakeups, 1);
        assert_eq!(pool.free(), 4);
        // Nested calls join the outermost; outside them every free wakes again.
        let mut held: Vec<BufMut> = (0..4).map(|_| pool.alloc().unwrap()).collect();
        assert!(pool.alloc_or_wait(waiter).is_none());
        release_together(|| {
            held.pop();
            release_together(|| held.pop());
            assert_eq!(
                pool.stats().waiter_wakeups,
                1,
                "held until the outermost ends"
            );
        });
        assert_eq!(pool.stats().waiter_wakeups, 2);
        assert!(pool.alloc_or_wait(waiter).is_some());
        drop(taken);
    }

    #[test]
    fn the_storage_freed_last_is_handed_out_first() {
        let pool = Pool::new(PoolConfig::new("p", 4, 16));
        let mut held: Vec<BufMut> = (0..4).map(|_| pool.alloc().unwrap()).collect();
        let addr = |b: &mut BufMut| b.unfilled().as_ptr() as usize;
        let second = addr(&mut held[1]);
        let third = addr(&mut held[2]);
        drop(held.remove(2));
        drop(held.remove(1));
        assert_eq!(pool.free(), 2);
        // A queue would hand out the third buffer's storage (freed first) next.
        let mut again = pool.alloc().unwrap();
        assert_eq!(addr(&mut again), second, "the storage freed last");
        let mut then = pool.alloc().unwrap();
        assert_eq!(addr(&mut then), third);
        assert_eq!(pool.stats().min_free, 0);
    }

    #[test]
    fn with_a_trade_storage_coming_back_goes_on_top_of_the_stack_for_the_coldest() {
        let pool = Pool::new(PoolConfig::new("p", 2, 16));
        let total = DEFAULT_HEADROOM + 16 + DEFAULT_TAILROOM;
        let stack = Arc::new(StorageStack::new(4));
        pool.trade_with(&stack);
        let base = |v: &Vec<u8>| v.as_ptr() as usize;
        let (cold, warm) = (vec![1u8; total], vec![2u8; total]);
        let (cold_at, warm_at) = (base(&cold), base(&warm));
        stack.push_bottom(warm);
        stack.push_bottom(cold);
        let mut b = pool.alloc().unwrap();
        let freed = b.unfilled().as_ptr() as usize - DEFAULT_HEADROOM;
        drop(b);
        // The storage freed goes on top of the stack, the coldest into the pool.
        assert_eq!(pool.free(), 2);
        assert_eq!(stack.len(), 2);
        let (top, _) = stack.pop().unwrap();
        assert_eq!(base(&top), freed, "the storage freed last, first");
        let (next, _) = stack.pop().unwrap();
        assert_eq!(base(&next), warm_at);
        let mut again = pool.alloc().unwrap();
        assert_eq!(
            again.unfilled().as_ptr() as usize - DEFAULT_HEADROOM,
            cold_at,
            "the pool took the stack's bottom"
        );
        // A spare holding a short message is taken at the storage's length.
        let mut short = Vec::with_capacity(total);
        short.extend_from_slice(b"short");
        let short_at = base(&short);
        stack.push_bottom(short);
        drop(again);
        let mut b = pool.alloc().unwrap();
        assert_eq!(b.unfilled().as_ptr() as usize - DEFAULT_HEADROOM, short_at);
        assert_eq!(b.remaining(), 16, "the whole buffer");
        let _ = stack.pop();
        // Storage without room for a buffer's stays at the bottom: the pool keeps its own.
        let mut again = b;
        stack.push_bottom(vec![0u8; total - 1]);
        let mine = again.unfilled().as_ptr() as usize;
        drop(again);
        assert_eq!(stack.len(), 1);
        assert_eq!(pool.alloc().unwrap().unfilled().as_ptr() as usize, mine);
        // An empty stack trades nothing either.
        let _ = stack.pop();
        let mut b = pool.alloc().unwrap();
        let mine = b.unfilled().as_ptr() as usize;
        drop(b);
        assert!(stack.pop().is_none());
        assert_eq!(pool.alloc().unwrap().unfilled().as_ptr() as usize, mine);
    }

    #[test]
    fn a_full_stack_takes_nothing_more_at_its_bottom_and_a_trade_keeps_its_count() {
        let stack: StorageStack<u32> = StorageStack::new(2);
        stack.push(1);
        stack.push_bottom(0);
        stack.push_bottom(9);
        assert_eq!(stack.len(), 2);
        assert_eq!(stack.trade_bottom(2, |&c| c == 0), Ok(0));
        assert_eq!(
            stack.trade_bottom(3, |&c| c == 0),
            Err(3),
            "1 is at the bottom"
        );
        assert_eq!(stack.len(), 2);
        assert_eq!(stack.pop(), Some((2, 1)));
        assert_eq!(stack.pop(), Some((1, 0)));
    }

    #[test]
    fn buffers_return_when_last_reference_drops() {
        let pool = Pool::new(PoolConfig::new("p", 2, 16));
        let mut a = pool.alloc().unwrap();
        a.extend_from_slice(b"hello").unwrap();
        let a = a.freeze();
        let dup = a.clone();
        let _b = pool.alloc().unwrap();
        assert!(pool.alloc().is_none());
        drop(a);
        assert_eq!(pool.free(), 0, "a duplicate still holds the storage");
        assert_eq!(&dup[..], b"hello");
        drop(dup);
        assert_eq!(pool.free(), 1);
        assert_eq!(pool.stats().min_free, 0);
    }

    #[test]
    fn header_is_prepended_in_place() {
        let pool = Pool::new(PoolConfig::new("p", 1, 32));
        let mut b = pool.alloc().unwrap();
        b.extend_from_slice(b"payload").unwrap();
        let before = b.headroom();
        b.prepend(b"HDR:").unwrap();
        assert_eq!(b.as_slice(), b"HDR:payload");
        assert_eq!(b.headroom(), before - 4);
        let err = b.prepend(&[0u8; 1000]).unwrap_err();
        assert!(matches!(err, crate::BufferError::NoHeadroom { .. }));
        // Tailroom lets a trailer go past the data area.
        let room = b.remaining();
        b.extend_from_slice(&vec![1u8; room + 8]).unwrap();
        let frozen = b.freeze();
        let view = frozen.slice(4..11);
        assert_eq!(&view[..], b"payload");
        assert_eq!(view.ref_count(), 2);
    }

    #[test]
    fn unique_buffer_becomes_writable_again() {
        let pool = Pool::new(PoolConfig::new("p", 1, 8));
        let b = pool.alloc().unwrap().freeze();
        let c = b.clone();
        let b = b.try_into_mut().unwrap_err();
        drop(c);
        let mut m = b.try_into_mut().unwrap();
        m.extend_from_slice(b"x").unwrap();
        assert_eq!(m.as_slice(), b"x");
    }

    #[test]
    fn memory_stays_flat_over_many_cycles() {
        let pool = Pool::new(PoolConfig::new("p", 4, 64));
        for i in 0..100_000u32 {
            let mut b = pool.alloc().expect("a buffer is always back");
            b.extend_from_slice(&i.to_le_bytes()).unwrap();
            let f = b.freeze();
            let g = f.clone();
            drop(f);
            drop(g);
        }
        assert_eq!(pool.free(), 4);
        assert_eq!(pool.stats().allocs, 100_000);
    }
}
