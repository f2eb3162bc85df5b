//! Loom models of a ring's stamp protocol (`ring.rs`): one producer, one consumer, the ring's
//! real [`Producer`] and [`Consumer`] over memory whose words are loom's
//! (`RUSTFLAGS="--cfg loom" cargo test -p offhost-shm --release --lib loom`).
//!
//! The stamps and the head and tail indices are loom atomics, so loom tries their orderings
//! (and the stale values a load may read) between the two threads. Each 16-byte unit of the
//! ring also has a loom cell that the ends mark as they write and read it ([`Mem`]'s hooks):
//! loom fails a model where the consumer reads a unit the producer writes, or the producer
//! rewrites one the consumer reads, without the one happening before the other. Every payload
//! writes, into the stamp word of each unit it covers, what the consumer would take for the
//! stamp of a record there in the next lap, as payload bytes may: the producer's clearing of
//! the next stamp is what keeps them from passing for one. The consumer checks that it gets
//! every record whole and in order.

use std::sync::atomic::Ordering;

use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;

use crate::ring::{Consumer, Mem, Producer, HEADER, KIND_INLINE};

/// Largest ring of the models, in 16-byte units.
const UNITS: usize = 8;

/// A ring's memory in a model.
struct Ring {
    cap: u64,
    stamps: Vec<AtomicU64>,
    head: AtomicU64,
    tail: AtomicU64,
    /// Headers and payloads; reached only through raw pointers, by one loom thread at a time.
    bytes: std::cell::UnsafeCell<[u128; UNITS]>,
    /// What loom knows of each unit's accesses.
    units: Vec<UnsafeCell<()>>,
}

// SAFETY: `bytes` is read and written through raw pointers by the model's two threads, which
// loom runs one at a time; whether those accesses are ordered is what `units` checks. The other
// fields are loom's own synchronised types.
unsafe impl Sync for Ring {}
// SAFETY: as above; the ring owns its bytes.
unsafe impl Send for Ring {}

#[derive(Clone)]
struct ModelMem(Arc<Ring>);

impl ModelMem {
    fn new(cap: u64) -> ModelMem {
        assert!(cap.is_power_of_two() && (32..=16 * UNITS as u64).contains(&cap));
        let n = (cap / 16) as usize;
        ModelMem(Arc::new(Ring {
            cap,
            stamps: (0..n).map(|_| AtomicU64::new(0)).collect(),
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            bytes: std::cell::UnsafeCell::new([0; UNITS]),
            units: (0..n).map(|_| UnsafeCell::new(())).collect(),
        }))
    }

    /// The units that `len` bytes at position `at` touch.
    fn units(&self, at: u64, len: u64) -> impl Iterator<Item = &UnsafeCell<()>> {
        let first = at / 16;
        let end = (at + len).div_ceil(16);
        (first..end).map(move |u| &self.0.units[(u % (self.0.cap / 16)) as usize])
    }
}

impl Mem for ModelMem {
    type Word = AtomicU64;

    unsafe fn stamp(&self, pos: u64) -> &AtomicU64 {
        &self.0.stamps[(pos / 16) as usize]
    }

    fn head(&self) -> &AtomicU64 {
        &self.0.head
    }

    fn tail(&self) -> &AtomicU64 {
        &self.0.tail
    }

    fn data(&self) -> *mut u8 {
        self.0.bytes.get().cast::<u8>()
    }

    fn writing_header(&self, at: u64) {
        for u in self.units(at, HEADER as u64) {
            u.with_mut(|_| ());
        }
    }

    fn writing_payload(&self, at: u64, len: u64) {
        for u in self.units(at, len) {
            u.with_mut(|_| ());
        }
        // Payload bytes over a unit's first word: the stamp of a record there one lap on.
        let cap = self.0.cap;
        for unit in (at / 16)..(at + len).div_ceil(16) {
            let next_lap = unit * 16 + cap;
            self.0.stamps[(unit % (cap / 16)) as usize].store(next_lap + 1, Ordering::Relaxed);
        }
    }

    fn reading(&self, at: u64, len: u64) {
        for u in self.units(at, len) {
            u.with(|_| ());
        }
    }
}

/// Byte `j` of record `i`'s payload.
fn byte(i: usize, j: usize) -> u8 {
    (i * 37 + j * 5 + 1) as u8
}

/// Sends records of `lens` payload bytes, publishing after the records each `batches` entry
/// counts, through a ring of `cap` bytes, and checks that the consumer gets them whole and in
/// order. The producer waits for room by polling `has_room` when `poll_room`, else by retrying
/// `reserve`; the consumer publishes its head when it runs dry.
fn run(cap: u64, lens: &'static [usize], batches: &'static [usize], poll_room: bool) {
    assert_eq!(batches.iter().sum::<usize>(), lens.len());
    loom::model(move || {
        let mem = ModelMem::new(cap);
        // SAFETY: `mem` keeps the ring's words and bytes alive while either end lives; one
        // producer and one consumer.
        let (mut p, mut c) = unsafe {
            (
                Producer::with_mem(mem.clone(), cap),
                Consumer::with_mem(mem, cap),
            )
        };
        let producer = loom::thread::spawn(move || {
            let mut i = 0;
            for &n in batches {
                for _ in 0..n {
                    let len = lens[i];
                    if poll_room {
                        while !p.has_room(len).unwrap() {
                            loom::thread::yield_now();
                        }
                    }
                    let slot = loop {
                        match p.reserve(len, KIND_INLINE).unwrap() {
                            Some(slot) => break slot,
                            None => {
                                assert!(!poll_room, "has_room said there was room");
                                loom::thread::yield_now();
                            }
                        }
                    };
                    for (j, b) in slot.iter_mut().enumerate() {
                        *b = byte(i, j);
                    }
                    i += 1;
                }
                assert!(p.publish());
            }
        });
        for (i, &len) in lens.iter().enumerate() {
            let rec = loop {
                match c.peek().unwrap() {
                    Some(rec) => break rec,
                    None => {
                        c.publish();
                        loom::thread::yield_now();
                    }
                }
            };
            assert_eq!((rec.kind, rec.len), (KIND_INLINE, len), "record {i}");
            // SAFETY: the record is unconsumed, in the live ring.
            let got = unsafe { rec.payload() };
            assert!(
                got.iter().enumerate().all(|(j, &b)| b == byte(i, j)),
                "record {i} is not whole: {got:?}"
            );
            c.consume(&rec);
        }
        c.publish();
        producer.join().unwrap();
        assert!(c.peek().unwrap().is_none(), "nothing more was sent");
    });
}

/// Three records of different sizes in a ring of 64 bytes: the first two published as one
/// batch (the second stamped before its payload is written), the third after a pad record
/// over the ring's end, once the consumer has made room.
#[test]
fn loom_ring_records_of_different_sizes_arrive_whole_and_in_order() {
    run(64, &[8, 0, 16], &[2, 1], false);
}

/// The producer waits for room (polling `has_room`, as a sender does) while the consumer
/// frees it: the first two records (the largest a ring of 64 bytes takes) fill the ring, and
/// the next two start the next lap over the first one, the second of them over its payload,
/// whose bytes would pass for its stamp had the producer not cleared them.
#[test]
fn loom_ring_producer_waits_for_the_room_the_consumer_frees() {
    run(64, &[16, 16, 0, 0], &[1, 1, 1, 1], true);
}
